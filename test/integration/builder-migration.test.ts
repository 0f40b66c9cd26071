/**
 * Data kept across the upgrade: the bridge started on a systems.db written by release 0.1.0
 * (test/fixtures/systems-db/release-0.1.0.db, made by that release's stores with make.ts beside it)
 * moves its `builds` into runs (origin `builder`) in one transaction and drops the table. The old
 * builds are listed by GET /v1/runs with their steps; the paused one resumes through
 * /v1/runs/:id/resume from its first unfinished step, with the variables it had; /v1/builds/:id
 * still answers (an alias); the old runs, canvases with their versions and conversation states are
 * as they were. And a build going when the bridge stops is `interrupted`, then resumed after the
 * restart from its first unfinished step (the run manager and builder room reopened on the same
 * file, the tools in process).
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import pino from "pino";
import { EventBus } from "../../src/ops/events/bus.js";
import { BuildRunner } from "../../src/workflows/builder/build-runner.js";
import { openBuilderRoom } from "../../src/workflows/builder/service.js";
import type { BuildStep } from "../../src/workflows/builder/types.js";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunManager } from "../../src/workflows/systems/runner.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/systems-db/release-0.1.0.db", import.meta.url));
const KEY = "sk-migrate";

interface RunRow {
  id: string;
  origin: string;
  status: string;
  system: string;
  steps: Array<{ id: string; status: string; output?: unknown }>;
}

describe("a systems.db of release 0.1.0", () => {
  let up: FakeOpenAI;
  let b: TestBridge;
  let dataDir: string;
  const api = async (p: string, init: RequestInit = {}) =>
    fetch(`${b.url}${p}`, { ...init, headers: { authorization: `Bearer ${KEY}`, ...(init.headers ?? {}) } });

  before(async () => {
    up = await startFakeOpenAI();
    dataDir = tempDir("cb-migrate-");
    mkdirSync(dataDir, { recursive: true });
    copyFileSync(FIXTURE, path.join(dataDir, "systems.db"));
    b = await startTestBridge({
      dataDir,
      server: { apiKeys: [KEY] },
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        builder: { type: "builder", supervisor: "m", architect: "m", answer: "m", retryDelayScale: 0.05 },
      },
      models: [
        { id: "m", backend: "up" },
        { id: "builder", backend: "builder" },
      ],
    });
  });
  after(async () => {
    await b?.close();
    await up?.close();
    cleanup(dataDir);
  });

  test("builds become runs with their steps; the paused one resumes; runs, canvases and conversation states are kept", async () => {
    const list = (await (await api("/v1/runs?limit=100")).json()) as { data: RunRow[] };
    const byId = new Map(list.data.map((r) => [r.id, r]));
    // The old runs, as they were.
    assert.equal(byId.get("run-done")?.status, "completed");
    assert.deepEqual(
      byId.get("run-done")?.steps.map((s) => `${s.id}:${s.status}`),
      ["hello:completed", "shout:completed"],
    );
    assert.equal(byId.get("run-cut")?.status, "interrupted");
    assert.deepEqual(
      byId.get("run-cut")?.steps.map((s) => `${s.id}:${s.status}`),
      ["fetch:completed", "summarize:pending"],
    );
    // The builds, as runs of origin builder with their steps.
    const done = byId.get("build-done");
    assert.equal(done?.origin, "builder");
    assert.equal(done?.status, "completed");
    assert.deepEqual(
      done?.steps.map((s) => `${s.id}:${s.status}:${String(s.output)}`),
      ["s1:completed:in", "s2:completed:hello", "s3:completed:e1"],
    );
    const paused = byId.get("build-paused");
    assert.equal(paused?.origin, "builder");
    assert.equal(paused?.status, "paused");
    assert.deepEqual(
      paused?.steps.map((s) => `${s.id}:${s.status}`),
      ["fetch:completed", "sum:pending", "wire:pending"],
    );
    // Its plan in today's template language: 0.1.0's `${fetchNode}` is `${steps.fetch.output}`; other templates as they were.
    const { plan } = (await (await api("/v1/builds/build-paused")).json()) as {
      plan: { steps: Array<Record<string, unknown>> };
    };
    assert.ok(
      plan.steps.every((s) => !("output" in s)),
      "0.1.0's output names are gone",
    );
    assert.deepEqual(plan.steps.find((s) => s.id === "wire")?.params, {
      from: "${steps.fetch.output}",
      to: "${steps.sum.output}",
    });
    assert.deepEqual(plan.steps.find((s) => s.id === "fetch")?.params, {
      type: "webhook",
      label: "Fetch",
      id: "fetch",
      properties: { url: "$${inputs.url}" },
    });
    // The alias reads a build as before: its variables come from its steps.
    const alias = (await (await api("/v1/builds/build-done")).json()) as { vars: Record<string, string> };
    assert.deepEqual(alias.vars, { s1: "in", s2: "hello", s3: "e1" });

    // The aliases answer as before: a build that is not running is not paused, a completed one not resumed.
    const notRunning = await api("/v1/builds/build-done/pause", { method: "POST" });
    assert.equal(notRunning.status, 409);
    assert.equal(((await notRunning.json()) as { error: { code: string } }).error.code, "build_not_running");
    assert.equal(await (await api("/v1/builds/build-done/resume", { method: "POST" })).status, 409);
    assert.equal(await (await api("/v1/builds/nope")).status, 404);

    // Resumed like any run: only its unfinished steps run, with the variables it had.
    const res = await api("/v1/runs/build-paused/resume", { method: "POST" });
    assert.equal(res.status, 200);
    let ended: RunRow | undefined;
    await eventually(async () => {
      ended = (await (await api("/v1/runs/build-paused")).json()) as RunRow;
      return ended.status === "completed" || ended.status === "failed";
    });
    assert.equal(ended?.status, "completed", JSON.stringify(ended));
    const build = (await (await api("/v1/builds/build-paused")).json()) as {
      status: string;
      vars: Record<string, string>;
    };
    assert.equal(build.status, "completed");
    assert.equal(build.vars.fetch, "fetch");
    assert.equal(build.vars.sum, "sum");
    const canvas = (await (await api("/v1/canvases/summarizer")).json()) as {
      nodes: Array<{ id: string }>;
      edges: Array<{ from: string; to: string }>;
      versions: Array<{ version: number }>;
    };
    assert.deepEqual(canvas.nodes.map((n) => n.id).sort(), ["fetch", "sum"]);
    assert.deepEqual(
      canvas.edges.map((e) => `${e.from}>${e.to}`),
      ["fetch>sum"],
    );
    assert.deepEqual(
      canvas.versions.map((v) => v.version),
      [0, 1, 2],
    );

    // The other canvas and its versions are as they were.
    const greeter = (await (await api("/v1/canvases/greeter")).json()) as {
      nodes: Array<{ id: string }>;
      versions: Array<{ version: number; reason: string }>;
    };
    assert.deepEqual(greeter.nodes.map((n) => n.id).sort(), ["hello", "in", "out"]);
    assert.deepEqual(
      greeter.versions.map((v) => v.version),
      [0, 1, 2],
    );

    // The builds table is gone; the conversation states are kept (moved into conversation_state,
    // test/integration/systems-db-conversations.test.ts).
    const db = new Database(path.join(dataDir, "systems.db"), { readonly: true });
    try {
      assert.equal(db.prepare("SELECT name FROM sqlite_master WHERE name = 'builds'").get(), undefined);
      assert.deepEqual(
        (
          db.prepare("SELECT conversation FROM conversation_state ORDER BY conversation").all() as Array<{
            conversation: string;
          }>
        ).map((r) => r.conversation),
        ["conv-builder", "conv-confirm", "conv-gather", "conv-paused"], // conv-paused: the resumed build's
      );
    } finally {
      db.close();
    }
  });
});

describe("a build across a restart", () => {
  /** The bridge's parts over one systems.db: the run manager and the builder room with its in-process tools. */
  async function open(file: string, dataDir: string) {
    const db = openSystemsDb(file);
    const sql = sqliteSqlOf(db);
    const { library } = await loadSystems({ configSystems: [], models: new Map() });
    const manager = new RunManager({
      store: new RunStore(sql),
      library,
      bus: new EventBus(),
      // Builds call no model.
      callModel: async function* () {},
      dataDir,
      log: pino({ level: "silent" }),
    });
    const room = openBuilderRoom({ sql, db, dataDir });
    const runner = new BuildRunner({
      canvases: room.canvases,
      manager,
      connect: () => room.connectInternal(),
      maxParallel: 1,
      retryDelayScale: 0.01,
      ended: async () => {},
    });
    return { db, manager, room, runner };
  }
  const node = (id: string, dependsOn: string[] = []): BuildStep => ({
    id: `n-${id}`,
    name: id,
    action: "CREATE_NODE",
    params: { type: "agent", label: id, id },
    dependsOn,
    retryCount: 0,
    retryDelayMs: 10,
  });

  test("a build going when the bridge stops is interrupted; after the restart it resumes from its first unfinished step", async () => {
    const dataDir = tempDir("cb-restart-");
    const file = path.join(dataDir, "systems.db");
    try {
      const first = await open(file, dataDir);
      await first.room.canvases.create({ system: "chain" });
      const plan = {
        metadata: { system: "chain", name: "Chain", description: "", summary: "" },
        steps: [node("a"), node("b", ["n-a"]), node("c", ["n-b"])],
      };
      // The bridge stops right after the first step.
      const b = await first.runner.begin({ conversation: "conv-r", intent: "EDIT", plan }, (hooks) =>
        hooks.addHandler("stepAfter", (step) => {
          if (step === "n-a") void first.manager.close();
        }),
      );
      const stopped = await first.manager.wait(b.id);
      assert.equal(stopped.status, "interrupted");
      assert.deepEqual(
        stopped.steps.map((st) => `${st.id}:${st.status}`),
        ["n-a:completed", "n-b:pending", "n-c:pending"],
      );
      first.db.close();

      const second = await open(file, dataDir);
      assert.deepEqual(await second.manager.recover(), []);
      assert.equal((await second.room.builds.get(b.id))?.status, "interrupted");
      const made: string[] = [];
      await second.runner.resume(b.id, (hooks) => hooks.addHandler("stepBefore", (step) => made.push(step)));
      const done = await second.manager.wait(b.id);
      assert.equal(done.status, "completed");
      assert.deepEqual(made, ["n-b", "n-c"]);
      assert.deepEqual((await second.room.builds.get(b.id))?.vars, { "n-a": "a", "n-b": "b", "n-c": "c" });
      assert.deepEqual((await second.room.canvases.get("chain"))?.nodes.map((n) => n.id).sort(), ["a", "b", "c"]);
      second.db.close();
    } finally {
      cleanup(dataDir);
    }
  });
});
