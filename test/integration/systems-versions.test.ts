/**
 * Versions end to end (src/workflows/systems/versions.ts, builder/rollback.ts, the HTTP routes of
 * versions-routes.ts, `/run id@n` and the builder's version words): a real bridge with a router and
 * a builder, the official `openai` client for the chats, and a webhook fake on 127.0.0.1 that can
 * hold its answer (the only other fake is the model upstream, which no step here calls). A canvas
 * written into the bridge's systems.db (as another MCP host on the same file would) is deployed by
 * chat as version 1; a run of version 1 is held at its webhook while the canvas changes (the canvas
 * then says it has changes that are not deployed) and version 2 is deployed; the held run finishes
 * on version 1. Then: `version` on run rows, `{version: 1}` and `/run relay@1` run the old plan, an
 * unknown version is a 404, the diff (HTTP and chat), a rollback by chat (after yes) and by HTTP,
 * each a new version with the canvas restored, a system of the config file refused, an undo whose
 * deploy is refused (the reply and the canvas say the changes are not deployed); the same
 * through `clawbridge systems versions|run id@n|rollback` (bin/clawbridge.js: build dist/ first).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import type { Canvas } from "../../src/wire/canvas.js";
import type { RunRow, SystemRow, SystemVersionDetail, SystemVersionRow, VersionDiffRow } from "../../src/wire/runs.js";
import { CanvasStore } from "../../src/workflows/builder/canvas-store.js";
import { SqliteSql } from "../../src/core/db/sql.js";
import { openSystemsDb, systemsDbPath } from "../../src/workflows/systems/db.js";
import { serveFake, type FakeHttpServer } from "../../testkit/fakes/fake-http.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";
import { stringify } from "yaml";

const KEY = "k-versions";
const BIN = path.resolve("bin/clawbridge.js");
const execFileP = promisify(execFile);

describe("system versions", () => {
  let up: FakeOpenAI;
  let hook: FakeHttpServer;
  let b: TestBridge;
  let dataDir: string;
  let config: Record<string, unknown>;
  /** Paths the webhook fake was called on, in order. */
  const calls: string[] = [];
  /** Answers of /v1hook held while `hold` is set. */
  let hold = false;
  /** `system.version` events, as "<system> <n> <by> <note>". */
  const versionEvents: string[] = [];
  const held: Array<() => void> = [];

  const api = async (p: string, init: { method?: string; body?: unknown } = {}) => {
    const res = await fetch(`${b.url}${p}`, {
      method: init.method ?? "GET",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: res.status, json: (await res.json()) as any };
  };
  const chat = (key: string, model: string) => new Chat(b.baseURL, key, model, KEY);
  const url = (which: string) => `http://127.0.0.1:${hook.port}/${which}`;
  /** The canvas changed from outside the chat (another MCP host on the same systems.db). */
  const editCanvas = async (fn: (c: Canvas) => Canvas, commit?: string) => {
    const db = openSystemsDb(systemsDbPath(dataDir));
    try {
      const store = new CanvasStore(new SqliteSql(db));
      await store.mutate("relay", fn);
      if (commit) await store.commitVersion("relay", commit);
    } finally {
      db.close();
    }
  };
  const setUrl = (c: Canvas, which: string): Canvas => ({
    ...c,
    nodes: c.nodes.map((n) => (n.id === "call" ? { ...n, properties: { ...n.properties, url: url(which) } } : n)),
  });

  before(async () => {
    up = await startFakeOpenAI(() => ({
      kind: "text",
      chunks: [JSON.stringify({ action: "answer", confidence: 0.95 })],
    }));
    hook = await serveFake((call, res: ServerResponse) => {
      calls.push(call.url.pathname);
      const answer = () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ran: call.url.pathname.slice(1), topic: call.body?.inputs?.topic }));
      };
      if (hold && call.url.pathname === "/v1hook") held.push(answer);
      else answer();
    });
    dataDir = tempDir("cb-versions-");
    // The canvas, as another MCP host would leave it in the bridge's database: an input and a webhook step.
    const db = openSystemsDb(systemsDbPath(dataDir));
    const store = new CanvasStore(new SqliteSql(db));
    await store.create({ system: "relay", name: "Relay", description: "Sends the topic on" });
    await store.mutate("relay", (c) => ({
      ...c,
      nodes: [
        { id: "topic", type: "input", label: "topic", properties: {}, position: { x: 0, y: 0 } },
        {
          id: "call",
          type: "webhook",
          label: "call",
          properties: { url: url("v1hook") },
          position: { x: 200, y: 0 },
        },
      ],
    }));
    await store.commitVersion("relay", "made by the test");
    db.close();
    config = {
      dataDir,
      server: { apiKeys: [KEY] },
      systems: [{ id: "cfg", description: "From the config", run: { kind: "model", model: "ans", prompt: "x" } }],
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        builder: { type: "builder", supervisor: "ans", architect: "ans", answer: "ans", allowHosts: ["127.0.0.1"] },
        router: { type: "router", classifier: "ans", answer: "ans", builder: "builder" },
      },
      models: [
        { id: "ans", backend: "up" },
        { id: "builder", backend: "builder" },
        { id: "router", backend: "router" },
      ],
    };
    b = await startTestBridge(config);
    b.bus.on((e) => {
      if (e.type === "system.version") versionEvents.push(`${e.system} ${e.version} ${e.by} ${e.note}`);
    });
  });
  after(async () => {
    for (const release of held.splice(0)) release();
    await b?.close();
    await hook?.close();
    await up?.close();
    cleanup(dataDir);
  });

  test("deploy v1; a run of v1 held while v2 is deployed finishes on v1; runs record their version; @1 runs the old plan", async () => {
    const c = chat("conv-build", "builder");
    assert.match((await c.say("deploy relay")).text, /^Deploy \*\*Relay\*\*\?/);
    assert.match((await c.say("yes")).text, /^Deployed \*\*relay\*\* as version 1\./);
    assert.deepEqual(versionEvents, ["relay 1 builder deployed from canvas version 1"]);
    const sys = (await api("/v1/systems/relay")).json as SystemRow;
    assert.equal(sys.version, 1);
    const cfg = (await api("/v1/systems/cfg")).json as SystemRow;
    assert.equal(cfg.version, 1, "a system of the config file has a version too");
    let canvas = (await api("/v1/canvases/relay")).json;
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [1, false]);

    // A run of version 1, held at its webhook.
    hold = true;
    const started = await api("/v1/systems/relay/runs", { method: "POST", body: { inputs: { topic: "held" } } });
    assert.equal(started.status, 202);
    const runA = started.json as RunRow;
    assert.equal(runA.version, 1);
    assert.ok(await eventually(() => held.length === 1), "the run of version 1 reached its webhook");

    // The canvas changes outside the chat: it says so, and which version runs.
    await editCanvas((c) => setUrl(c, "v2hook"));
    canvas = (await api("/v1/canvases/relay")).json;
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [1, true]);
    const list = (await api("/v1/canvases")).json.data.find((x: { id: string }) => x.id === "relay");
    assert.deepEqual([list.deployed_version, list.changed_since_deploy], [1, true]);

    assert.match((await c.say("deploy relay")).text, /^Deploy/);
    assert.match((await c.say("yes")).text, /^Deployed \*\*relay\*\* as version 2\./);
    assert.equal(((await api("/v1/systems/relay")).json as SystemRow).version, 2);
    canvas = (await api("/v1/canvases/relay")).json;
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [2, false]);

    // The held run goes on, on version 1.
    hold = false;
    held.shift()!();
    const doneA = await eventually(async () => (await api(`/v1/runs/${runA.id}`)).json.status === "completed");
    assert.ok(doneA, "the held run completed");
    const endA = (await api(`/v1/runs/${runA.id}`)).json as RunRow;
    assert.equal(endA.version, 1);
    assert.deepEqual(endA.output, { ran: "v1hook", topic: "held" });

    // A new run is version 2's; {version: 1} runs version 1's plan.
    const r2 = (await api("/v1/systems/relay/runs", { method: "POST", body: { inputs: { topic: "b" }, wait: true } }))
      .json as RunRow;
    assert.deepEqual([r2.version, r2.output], [2, { ran: "v2hook", topic: "b" }]);
    const r1 = (
      await api("/v1/systems/relay/runs", { method: "POST", body: { inputs: { topic: "c" }, wait: true, version: 1 } })
    ).json as RunRow;
    assert.deepEqual([r1.version, r1.output], [1, { ran: "v1hook", topic: "c" }]);
    const rows = (await api("/v1/runs?system=relay")).json.data as RunRow[];
    assert.deepEqual(
      rows.map((r) => r.version),
      [1, 2, 1],
      "every run row carries its version",
    );

    // In chat: /run relay@1 (a webhook has side effects: asked first, then run on version 1).
    const r = chat("conv-run", "router");
    const asked = await r.say("/run relay@1 topic=d");
    assert.match(asked.text, /yes/i);
    const before = calls.length;
    const ran = await r.say("yes");
    assert.match(ran.text, /v1hook/);
    assert.deepEqual(calls.slice(before), ["/v1hook"]);
    const chatRun = ((await api("/v1/runs?system=relay&limit=1")).json.data as RunRow[])[0]!;
    assert.deepEqual([chatRun.origin, chatRun.version], ["chat", 1]);
    assert.match((await r.say("/run relay@7 topic=e")).text, /`relay` has no version 7 \(its versions: 1 to 2\)/);
  });

  test("an unknown or malformed version is refused, and nothing runs", async () => {
    const before = calls.length;
    const missing = await api("/v1/systems/relay/runs", {
      method: "POST",
      body: { inputs: { topic: "x" }, version: 9 },
    });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, "version_not_found");
    assert.equal(missing.json.error.param, "version");
    assert.match(missing.json.error.message, /no version 9/);
    const bad = await api("/v1/systems/relay/runs", { method: "POST", body: { inputs: { topic: "x" }, version: "2" } });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "version");
    assert.equal((await api("/v1/systems/relay/versions/9")).status, 404);
    assert.equal((await api("/v1/systems/nope/versions")).status, 404);
    assert.equal(calls.length, before, "nothing ran");
  });

  test("the versions, one version and the diff (HTTP and chat)", async () => {
    const list = (await api("/v1/systems/relay/versions")).json.data as SystemVersionRow[];
    assert.deepEqual(
      list.map((v) => [v.number, v.by]),
      [
        [1, "builder"],
        [2, "builder"],
      ],
    );
    assert.match(list[0]!.note, /canvas version/);
    assert.match(list[0]!.hash, /^[0-9a-f]{64}$/);
    const one = (await api("/v1/systems/relay/versions/1")).json as SystemVersionDetail;
    assert.equal((one.definition.run as { steps: Array<{ with: { url: string } }> }).steps[0]!.with.url, url("v1hook"));
    assert.equal(one.settings.name, "Relay");
    assert.equal((one.canvas as Canvas).system, "relay");
    const diff = (await api("/v1/systems/relay/versions/diff?from=1&to=2")).json as VersionDiffRow;
    assert.deepEqual(diff.changes, [
      { key: "run.steps[call].with.url", change: "changed", from: url("v1hook"), to: url("v2hook") },
    ]);
    assert.equal((await api("/v1/systems/relay/versions/diff?from=1&to=x")).status, 400);
    const said = await chat("conv-diff", "router").say("what changed between version 1 and 2 of relay?");
    assert.match(said.text, /from version 1 to version 2/);
    assert.ok(said.text.includes(`\`run.steps[call].with.url\`: "${url("v1hook")}" → "${url("v2hook")}"`), said.text);
  });

  test("roll back by chat (after yes) and by HTTP: a new version each, the canvas restored; a config system is refused", async () => {
    const c = chat("conv-rollback", "router");
    const asked = await c.say("roll back relay to version 1");
    assert.match(asked.text, /^Roll \*\*relay\*\* back to version 1\? It runs version 2 now/);
    assert.match(asked.text, /recorded as a new version \(3\)/);
    assert.equal(((await api("/v1/systems/relay")).json as SystemRow).version, 2, "nothing before yes");
    assert.match((await c.say("yes")).text, /^Rolled \*\*relay\*\* back to version 1: it now runs as version 3/);
    const v3 = (await api("/v1/systems/relay/versions/3")).json as SystemVersionDetail;
    assert.deepEqual([v3.by, v3.note], ["rollback", "rollback to 1"]);
    const canvas = (await api("/v1/canvases/relay")).json;
    assert.equal(canvas.nodes.find((n: { id: string }) => n.id === "call").properties.url, url("v1hook"));
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [3, false]);
    const run = (await api("/v1/systems/relay/runs", { method: "POST", body: { inputs: { topic: "r" }, wait: true } }))
      .json as RunRow;
    assert.deepEqual([run.version, run.output], [3, { ran: "v1hook", topic: "r" }]);

    const back = await api("/v1/systems/relay/rollback", { method: "POST", body: { version: 2 } });
    assert.equal(back.status, 200);
    assert.deepEqual([back.json.number, back.json.note, back.json.rolled_back_to], [4, "rollback to 2", 2]);
    const again = await api("/v1/systems/relay/rollback", { method: "POST", body: { version: 2 } });
    assert.equal(again.status, 409);
    assert.match(again.json.error.message, /already as version 2 was/);
    assert.equal((await api("/v1/systems/relay/rollback", { method: "POST", body: { version: 99 } })).status, 404);

    const cfg = await api("/v1/systems/cfg/rollback", { method: "POST", body: { version: 1 } });
    assert.equal(cfg.status, 409);
    assert.match(cfg.json.error.message, /declared in the config file, which the bridge does not rewrite/);
    const said = await chat("conv-cfg", "router").say("roll back cfg to version 1");
    assert.match(said.text, /declared in the config file/);
    assert.equal(((await api("/v1/systems/relay/versions")).json.data as unknown[]).length, 4, "no version was lost");
  });

  test("an undo whose deploy is refused leaves the deployed version running, and the reply and the canvas say so", async () => {
    // Two canvas versions: one the policy refuses (a private address), then a good one.
    await editCanvas(
      (c) => ({
        ...c,
        nodes: c.nodes.map((n) => (n.id === "call" ? { ...n, properties: { url: "http://10.1.2.3/x" } } : n)),
      }),
      "bad",
    );
    await editCanvas((c) => setUrl(c, "v2hook"), "good");
    let canvas = (await api("/v1/canvases/relay")).json;
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [4, false]);
    const undo = await chat("conv-undo", "builder").say("undo relay");
    assert.match(undo.text, /^Undone: \*\*relay\*\* is back at canvas version \d+/);
    assert.match(
      undo.text,
      /The canvas has changes that are not deployed \(deployed: version 4\), because: .*10\.1\.2\.3.*\. Fix that and say \*\*deploy\*\* to make them live\./,
    );
    canvas = (await api("/v1/canvases/relay")).json;
    assert.deepEqual([canvas.deployedVersion, canvas.changedSinceDeploy], [4, true]);
    assert.equal(((await api("/v1/systems/relay")).json as SystemRow).version, 4, "the deployed system did not change");
  });

  test("the command line: systems versions [--diff], run id@n, rollback", async () => {
    const configFile = path.join(dataDir, "clawbridge.yaml");
    writeFileSync(configFile, stringify(config));
    const cli = async (...args: string[]) => {
      try {
        const r = await execFileP(process.execPath, [BIN, ...args, "--config", configFile, "--url", b.url], {
          env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
          timeout: 60_000,
        });
        return { code: 0, stdout: r.stdout, stderr: r.stderr };
      } catch (err: any) {
        return { code: err.code as number, stdout: String(err.stdout), stderr: String(err.stderr) };
      }
    };
    const list = await cli("systems", "versions", "relay");
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^v1 .* builder \(deployed from canvas version \d+\)/m);
    assert.match(list.stdout, /^v4 .* rollback \(rollback to 2\)/m);
    const diff = await cli("systems", "versions", "relay", "--diff", "1..2");
    assert.equal(diff.stdout.trim(), `- run.steps[call].with.url: "${url("v1hook")}" → "${url("v2hook")}"`);
    const ran = await cli("systems", "run", "relay@1", "topic=cli");
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stdout, /relay v1 +completed/);
    const cfg = await cli("systems", "rollback", "cfg", "1");
    assert.equal(cfg.code, 2);
    assert.match(cfg.stderr, /declared in the config file/);
  });
});
