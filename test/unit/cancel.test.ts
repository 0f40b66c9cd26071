/**
 * Cancellation (src/core/util/cancel.ts): the turn's cheap cancel handle. Listeners run once, in order;
 * a removed listener never runs; the standard AbortSignal is made on demand and follows it; it
 * follows a signal; and undici accepts it as a request's `signal` (a real request to a local
 * server is stopped by it).
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { EventEmitter } from "node:events";
import { after, before, describe, test } from "node:test";
import { Pool } from "undici";
import { Cancellation, onAbort } from "../../src/core/util/cancel.js";

describe("Cancellation", () => {
  test("listeners run once, in order; a removed one never runs", () => {
    const c = new Cancellation();
    const calls: string[] = [];
    c.onAbort(() => calls.push("a"));
    const removeB = c.onAbort(() => calls.push("b"));
    c.onAbort(() => calls.push("c"));
    removeB();
    c.abort();
    c.abort();
    assert.deepEqual(calls, ["a", "c"]);
    assert.equal(c.aborted, true);
    assert.equal((c.reason as DOMException).name, "AbortError");
  });

  test("a listener added after the abort runs at once", () => {
    const c = new Cancellation();
    c.abort("why");
    let ran = 0;
    c.onAbort(() => ran++);
    assert.equal(ran, 1);
  });

  test("the AbortSignal is made on demand and follows it, before or after the abort", () => {
    const early = new Cancellation();
    const s1 = early.signal;
    assert.equal(early.signal, s1, "one signal per cancellation");
    assert.equal(s1.aborted, false);
    early.abort("gone");
    assert.equal(s1.aborted, true);
    assert.equal(s1.reason, "gone");

    const late = new Cancellation();
    late.abort("later");
    assert.equal(late.signal.aborted, true);
    assert.equal(late.signal.reason, "later");
  });

  test("follow(signal) aborts with the signal, and stops following when disposed", () => {
    const ctl = new AbortController();
    const { cancel, dispose } = Cancellation.follow(ctl.signal);
    ctl.abort("client gone");
    assert.equal(cancel.aborted, true);
    assert.equal(cancel.reason, "client gone");

    const ctl2 = new AbortController();
    const second = Cancellation.follow(ctl2.signal);
    second.dispose();
    ctl2.abort();
    assert.equal(second.cancel.aborted, false, "disposed: no longer follows");
    dispose();

    assert.equal(
      Cancellation.follow(AbortSignal.abort()).cancel.aborted,
      true,
      "an aborted signal gives an aborted cancellation",
    );
  });

  test("onAbort() works alike for a signal and a Cancellation", () => {
    for (const make of [() => new AbortController(), () => new Cancellation()]) {
      const x = make();
      const target = x instanceof AbortController ? x.signal : x;
      let ran = 0;
      const remove = onAbort(target, () => ran++);
      remove();
      onAbort(target, () => ran++);
      x.abort();
      assert.equal(ran, 1, x.constructor.name);
    }
  });
});

describe("Cancellation as undici's request signal", () => {
  let server: Server;
  let origin: string;
  let pool: Pool;
  before(async () => {
    // Answers the headers, then never ends the body.
    server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("start");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    pool = new Pool(origin);
  });
  after(async () => {
    await pool.destroy();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test("aborting it stops a request in the middle of its body", async () => {
    const c = new Cancellation();
    const res = await pool.request({ path: "/", method: "GET", signal: c as unknown as EventEmitter });
    assert.equal(res.statusCode, 200);
    const reading = res.body.text();
    c.abort();
    await assert.rejects(reading, (err: Error) => err.name === "AbortError" || /abort/i.test(err.message));
  });

  test("a request given an aborted one is not sent", async () => {
    const c = new Cancellation();
    c.abort();
    await assert.rejects(
      pool.request({ path: "/", method: "GET", signal: c as unknown as EventEmitter }),
      (err: Error) => err.name === "AbortError" || /abort/i.test(err.message),
    );
  });
});
