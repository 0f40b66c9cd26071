/**
 * Inbound hooks end to end (src/workflows/triggers/hooks.ts, src/request/http/hooks-route.ts): a
 * real bridge that requires an API key, systems with `hook`, requests signed as a sender would
 * (HMAC-SHA256 of "<timestamp>.<raw body>" with the secret the bridge made in
 * <dataDir>/hooks/<id>.secret). A good signature runs (202, origin and trigger `hook`, no bearer
 * key); a missing or wrong signature, an old timestamp, a replay, an invalid body and a system
 * without a hook are refused with their OpenAI-shaped errors, published as `hook.refused`, and
 * nothing runs (the run list says so); the rate per system answers 429 with Retry-After; the secret
 * is 0600 and never in the API's answers or the events.
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { execFile } from "node:child_process";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { stringify } from "yaml";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { BridgeEvent } from "../../src/wire/events.js";
import type { RunRow, SystemRow } from "../../src/wire/runs.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const NODE = process.execPath;
const KEY = "sk-test-hooks";
const BIN = path.resolve("bin/clawbridge.js");
const execFileP = promisify(execFile);

const echo = (id: string, hook: unknown) => ({
  id,
  sideEffects: false,
  inputs: { type: "object", required: ["topic"], properties: { topic: { type: "string" }, n: { type: "integer" } } },
  ...(hook === undefined ? {} : { hook }),
  run: { kind: "command", argv: [NODE, "-e", "console.log('got ' + process.argv[1])", "${inputs.topic}"] },
});

describe("inbound hooks", () => {
  let dir: string;
  let bridge: TestBridge;
  const events: BridgeEvent[] = [];

  before(async () => {
    dir = tempDir("cb-hooks-");
    const config = {
      dataDir: dir,
      server: { apiKeys: [KEY] },
      backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
      models: [{ id: "m", backend: "up" }],
      systems: [echo("ingest", true), echo("limited", { perMinute: 2 }), echo("plain", undefined), echo("cli", true)],
    };
    writeFileSync(path.join(dir, "clawbridge.yaml"), stringify(config));
    bridge = await startTestBridge(config);
    bridge.bus.on((e) => events.push(e));
  });
  after(async () => {
    await bridge?.close();
    cleanup(dir);
  });

  const secretOf = (id: string) => readFileSync(path.join(dir, "hooks", `${id}.secret`), "utf8").trim();
  const sign = (secret: string, ts: number | string, body: string) =>
    `sha256=${createHmac("sha256", secret).update(`${ts}.${body}`).digest("hex")}`;
  const now = () => Math.floor(Date.now() / 1000);

  async function post(id: string, body: string, headers: Record<string, string>) {
    const res = await fetch(`${bridge.baseURL}/hooks/${id}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
    return { status: res.status, headers: res.headers, json: (await res.json()) as any };
  }
  const signed = (id: string, body: string, ts = now()) =>
    post(id, body, { "x-clawbridge-timestamp": String(ts), "x-clawbridge-signature": sign(secretOf(id), ts, body) });
  const runsOf = async (system: string) => {
    const res = await fetch(`${bridge.baseURL}/runs?system=${system}`, { headers: { authorization: `Bearer ${KEY}` } });
    return ((await res.json()) as { data: RunRow[] }).data;
  };

  test("each system with a hook gets its own secret, 0600, never shown by the API", async () => {
    assert.equal(statSync(path.join(dir, "hooks", "ingest.secret")).mode & 0o777, 0o600);
    assert.equal(statSync(path.join(dir, "hooks")).mode & 0o777, 0o700);
    assert.notEqual(secretOf("ingest"), secretOf("limited"));
    const res = await fetch(`${bridge.baseURL}/systems/ingest`, { headers: { authorization: `Bearer ${KEY}` } });
    const text = await res.text();
    const row = JSON.parse(text) as SystemRow;
    assert.deepEqual(row.hook, { path: "/v1/hooks/ingest", per_minute: 60 });
    assert.ok(!text.includes(secretOf("ingest")), "the secret is not in the answer");
    const plain = (await (
      await fetch(`${bridge.baseURL}/systems/plain`, { headers: { authorization: `Bearer ${KEY}` } })
    ).json()) as SystemRow;
    assert.equal(plain.hook, null);
  });

  test("a good signature runs the system with the body as inputs, without a bearer key", async () => {
    const body = JSON.stringify({ topic: "tides", n: 2 });
    const res = await signed("ingest", body);
    assert.equal(res.status, 202, JSON.stringify(res.json));
    const run = res.json as RunRow;
    assert.equal(run.object, "run");
    assert.equal(run.origin, "hook");
    assert.equal(run.trigger, "hook");
    assert.deepEqual(run.inputs, { topic: "tides", n: 2 });
    assert.ok(
      await eventually(async () => (await runsOf("ingest")).some((r) => r.status === "completed"), 10_000),
      "the run completed",
    );
    const [done] = await runsOf("ingest");
    assert.match(String(done!.output), /got tides/);
    const fired = events.find((e) => e.type === "trigger.fired");
    assert.deepEqual(fired && { ...fired, at: 0 }, {
      type: "trigger.fired",
      system: "ingest",
      trigger: "hook",
      runId: run.id,
      at: 0,
    });
    // The other routes still want the key.
    assert.equal((await fetch(`${bridge.baseURL}/runs`)).status, 401);
  });

  test("wrong, missing or old signatures, replays and bad bodies are refused, and nothing runs", async () => {
    const before = (await runsOf("ingest")).length;
    const refusedBefore = events.filter((e) => e.type === "hook.refused").length;
    const body = JSON.stringify({ topic: "bees" });
    const ts = now();
    const cases: Array<[string, Promise<{ status: number; json: any; headers: Headers }>, number, string, string?]> = [
      ["no headers", post("ingest", body, {}), 401, "missing_timestamp"],
      ["no signature", post("ingest", body, { "x-clawbridge-timestamp": String(ts) }), 401, "missing_signature"],
      [
        "another secret",
        post("ingest", body, {
          "x-clawbridge-timestamp": String(ts),
          "x-clawbridge-signature": sign("guess", ts, body),
        }),
        401,
        "invalid_signature",
      ],
      [
        "the body changed after signing",
        post("ingest", JSON.stringify({ topic: "wasps" }), {
          "x-clawbridge-timestamp": String(ts),
          "x-clawbridge-signature": sign(secretOf("ingest"), ts, body),
        }),
        401,
        "invalid_signature",
      ],
      ["six minutes old", signed("ingest", body, ts - 360), 401, "stale_timestamp"],
      ["from the future", signed("ingest", body, ts + 360), 401, "stale_timestamp"],
      ["a missing input", signed("ingest", JSON.stringify({ n: 1 }), ts), 400, "invalid_inputs", "topic"],
      ["a wrong type", signed("ingest", JSON.stringify({ topic: "x", n: "many" }), ts), 400, "invalid_inputs", "n"],
      ["not JSON", signed("ingest", "topic=bees", ts), 400, "invalid_body"],
      ["an array", signed("ingest", "[1]", ts), 400, "invalid_body"],
      [
        "a system without a hook",
        post("plain", body, { "x-clawbridge-timestamp": String(ts), "x-clawbridge-signature": sign("x", ts, body) }),
        404,
        "hook_not_found",
      ],
      ["no such system", post("nope", body, {}), 404, "hook_not_found"],
    ];
    for (const [what, p, status, code, param] of cases) {
      const res = await p;
      assert.equal(res.status, status, `${what}: ${JSON.stringify(res.json)}`);
      assert.equal(res.json.error.code, code, what);
      assert.ok(res.json.error.message.length > 20, `${what}: a message that says what to fix`);
      if (param) assert.equal(res.json.error.param, param, what);
    }
    // A replay: the same signed request twice (the first one runs).
    const once = JSON.stringify({ topic: "replayed" });
    const t2 = now();
    const headers = {
      "x-clawbridge-timestamp": String(t2),
      "x-clawbridge-signature": sign(secretOf("ingest"), t2, once),
    };
    assert.equal((await post("ingest", once, headers)).status, 202);
    const replay = await post("ingest", once, headers);
    assert.equal(replay.status, 409);
    assert.equal(replay.json.error.code, "replayed_request");

    const after = await runsOf("ingest");
    assert.equal(after.length, before + 1, "only the first of the replayed pair ran");
    assert.deepEqual(after[0]!.inputs, { topic: "replayed" });
    const refused = events.filter((e) => e.type === "hook.refused").slice(refusedBefore);
    assert.equal(refused.length, cases.length + 1);
    assert.ok(!JSON.stringify(events).includes(secretOf("ingest")), "the secret is in no event");
  });

  test("each hook has its own rate: past it, 429 with Retry-After, and nothing runs", async () => {
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof post>> | undefined;
    for (let i = 0; i < 3; i++) {
      last = await signed("limited", JSON.stringify({ topic: `t${i}` }));
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [202, 202, 429]);
    assert.equal(last!.json.error.code, "rate_limited");
    assert.equal(last!.json.error.type, "rate_limit_error");
    const retry = Number(last!.headers.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    assert.equal((await runsOf("limited")).length, 2);
    // Another system's rate is its own.
    assert.equal((await signed("ingest", JSON.stringify({ topic: "still fine" }))).status, 202);
  });

  test("`clawbridge systems hook` shows the URL, the secret and a curl example that works; --rotate replaces the secret", async () => {
    const cli = (...args: string[]) =>
      execFileP(
        NODE,
        [BIN, "systems", "hook", "cli", "--url", bridge.url, "--config", path.join(dir, "clawbridge.yaml"), ...args],
        {
          env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
          timeout: 60_000,
        },
      );
    const shown = (await cli()).stdout;
    assert.match(shown, new RegExp(`POST ${bridge.url}/v1/hooks/cli`));
    assert.ok(shown.includes(`secret: ${secretOf("cli")}`));
    // The example, as printed, with a body of its own.
    const script = shown
      .split("\n")
      .filter((l) => /^(BODY|TS|SIG)=|^curl /.test(l))
      .map((l) => (l.startsWith("BODY=") ? `BODY='{"topic":"from curl"}'` : l))
      .join("\n");
    const sent = await execFileP("/bin/sh", ["-c", `${script} -s -w ' %{http_code}'`], { timeout: 30_000 }).catch(
      (e: { code: unknown; stdout: string; stderr: string }) => {
        throw new Error(`the example failed (${String(e.code)}): ${e.stdout} ${e.stderr}`);
      },
    );
    assert.match(sent.stdout, / 202$/, sent.stdout);
    assert.deepEqual((await runsOf("cli"))[0]!.inputs, { topic: "from curl" });

    const old = secretOf("cli");
    const rotated = (await cli("--rotate")).stdout;
    assert.notEqual(secretOf("cli"), old);
    assert.match(rotated, /\(new\)/);
    const body = JSON.stringify({ topic: "old secret" });
    const ts = now();
    const res = await post("cli", body, {
      "x-clawbridge-timestamp": String(ts),
      "x-clawbridge-signature": sign(old, ts, body),
    });
    assert.equal(res.status, 401, "the old secret no longer signs");
  });
});
