/**
 * Runs are claimed, not owned (issue 36): two bridge PROCESSES (`bin/clawbridge.js serve`, each in
 * its own process group) on one real PostgreSQL with the same system, `store.leaseSeconds: 3`. The
 * system's first step is a webhook to a fake the test runs (it counts the calls), its second a
 * webhook the fake holds open until the test lets it go. A run started on A is killed with A
 * (SIGKILL, its whole group) once step 1 completed and step 2 started; B, which left A's run alone
 * while A lived (its lease renewed), claims it after the lease lapsed and finishes it from its first
 * unfinished step: the first webhook was called exactly once. And an instance stopped cleanly
 * (SIGTERM) lets its run go: the other claims it at its next sweep, long before the lease would lapse.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { stringify } from "yaml";
import type { RunRow } from "../../src/wire/runs.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { cleanup, eventually, tempDir } from "../helpers/bridge.js";
import { serveBridge } from "../helpers/process-groups.js";

/** The fake the steps call: `/notify` answers at once, `/hold` only once `release()` was called. */
interface Fake {
  url: string;
  calls: { notify: number; hold: number };
  release(): void;
  close(): Promise<void>;
}

async function startFake(): Promise<Fake> {
  const calls = { notify: 0, hold: 0 };
  let released = false;
  const held: http.ServerResponse[] = [];
  const answer = (res: http.ServerResponse, body: unknown) =>
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/notify") {
        calls.notify++;
        return answer(res, { notified: true });
      }
      if (req.url === "/hold") {
        calls.hold++;
        if (released) return answer(res, { held: calls.hold });
        held.push(res);
        return;
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    release() {
      released = true;
      for (const res of held.splice(0)) answer(res, { held: calls.hold });
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

interface Instance {
  name: string;
  proc: ChildProcess;
  url: string;
  dir: string;
}

const procs: ChildProcess[] = [];
const dirs: string[] = [];

function killGroup(p: ChildProcess): void {
  try {
    process.kill(-p.pid!, "SIGKILL");
  } catch {
    /* gone */
  }
}

async function serve(name: string, dbUrl: string, fake: Fake, leaseSeconds = 3): Promise<Instance> {
  const dir = tempDir(`cb-pgruns-${name}-`);
  dirs.push(dir);
  const configFile = path.join(dir, "clawbridge.yaml");
  writeFileSync(
    configFile,
    stringify({
      dataDir: path.join(dir, "data"),
      server: { port: 0 },
      store: { kind: "postgres", url: dbUrl, leaseSeconds, instanceId: `instance-${name}` },
      backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
      models: [{ id: "m", backend: "up" }],
      systems: [
        {
          id: "relay",
          run: {
            kind: "plan",
            steps: [
              { id: "notify", uses: "webhook", with: { url: `${fake.url}/notify` }, retry: 0 },
              {
                id: "hold",
                uses: "webhook",
                with: { url: `${fake.url}/hold`, timeoutSeconds: 60 },
                dependsOn: ["notify"],
                retry: 0,
              },
            ],
          },
        },
      ],
    }),
  );
  const { proc, url } = await serveBridge(configFile, dir);
  procs.push(proc);
  return { name, proc, url, dir };
}

async function getRun(i: Instance, id: string): Promise<RunRow> {
  const res = await fetch(`${i.url}/v1/runs/${id}`);
  assert.equal(res.status, 200, `${i.name}: GET /v1/runs/${id}`);
  return (await res.json()) as RunRow;
}

const stepsOf = (r: RunRow) => Object.fromEntries(r.steps.map((s) => [s.id, s]));

/** A run of `relay` started on `i`, once its first step completed and its second is held by the fake. */
async function startHeld(i: Instance, f: Fake): Promise<string> {
  const res = await fetch(`${i.url}/v1/systems/relay/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ inputs: {} }),
  });
  assert.equal(res.status, 202, await res.clone().text());
  const { id } = (await res.json()) as RunRow;
  assert.ok(
    await eventually(async () => {
      const s = stepsOf(await getRun(i, id));
      return s.notify?.status === "completed" && s.hold?.status === "running" && f.calls.hold === 1;
    }, 20_000),
    `step 1 completed and step 2 started on ${i.name}`,
  );
  return id;
}

describe("runs on PostgreSQL: claimed with a lease, taken over when their instance dies", () => {
  let pg: TestPostgres;
  const fakes: Fake[] = [];
  const fake = async () => {
    const f = await startFake();
    fakes.push(f);
    return f;
  };

  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    for (const p of procs) killGroup(p);
    await Promise.all(
      procs.map((p) =>
        p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once("exit", r)) : undefined,
      ),
    );
    for (const f of fakes) {
      f.release();
      await f.close();
    }
    await pg?.stop();
    for (const d of dirs) cleanup(d);
  });

  test("a run of an instance killed mid-run is finished by the other from its first unfinished step; the completed webhook is not called again", async () => {
    const dbUrl = await pg.database();
    const f = await fake();
    const a = await serve("A", dbUrl, f);
    const b = await serve("B", dbUrl, f);
    const id = await startHeld(a, f);

    // While A lives its lease is renewed: B (sweeping every second) leaves the run alone past a lease.
    await new Promise((r) => setTimeout(r, 4_000));
    const seenByB = await getRun(b, id);
    assert.equal(seenByB.status, "running", "B never marks A's live run interrupted");
    assert.deepEqual([f.calls.notify, f.calls.hold], [1, 1], "B did not take A's live run");

    // A dies with its whole process group; from now on the fake answers the held call at once.
    killGroup(a.proc);
    await new Promise((r) => a.proc.once("exit", r));
    f.release();

    assert.ok(
      await eventually(async () => (await getRun(b, id)).status === "completed", 20_000),
      "B finished the run after A's lease lapsed",
    );
    const done = await getRun(b, id);
    const steps = stepsOf(done);
    assert.equal(steps.notify!.status, "completed");
    assert.equal(steps.notify!.attempts, 1, "step 1 was not attempted again");
    assert.equal(steps.hold!.status, "completed");
    assert.deepEqual(steps.hold!.output, { held: 2 }, "step 2 ran again on B, its first unfinished step");
    assert.equal(f.calls.notify, 1, "the webhook that completed before the kill was called exactly once");
    assert.equal(f.calls.hold, 2, "the step in flight at the kill was called again by B");
  });

  test("an instance stopped cleanly lets its run go: the other claims it at its next sweep, not after the lease", async () => {
    const dbUrl = await pg.database();
    const f = await fake();
    // A lease of 15 s: the other instance sweeps every 5 s; a run not let go would lapse 10 to 15 s after C stopped.
    const c = await serve("C", dbUrl, f, 15);
    const d = await serve("D", dbUrl, f, 15);
    const id = await startHeld(c, f);
    c.proc.kill("SIGTERM");
    await new Promise((r) => c.proc.once("exit", r));
    f.release();
    const stopped = Date.now();
    assert.ok(
      await eventually(async () => (await getRun(d, id)).status === "completed", 20_000),
      "D finished the run C let go",
    );
    assert.ok(
      Date.now() - stopped < 9_000,
      `claimed at D's next sweep (${Date.now() - stopped} ms), not after the lease`,
    );
    const steps = stepsOf(await getRun(d, id));
    assert.equal(steps.notify!.attempts, 1, "step 1 was not attempted again");
    assert.equal(f.calls.notify, 1);
    assert.equal(f.calls.hold, 2, "the step stopped at the shutdown ran again on D");
  });
});
