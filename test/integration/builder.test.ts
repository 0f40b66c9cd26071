/**
 * The builder end to end over HTTP: a real bridge, the official `openai` client, the canvas and
 * sandbox tools called through MCP (in process, and over Streamable HTTP through a flaky proxy in
 * front of the bridge's own `/mcp`), and a fake OpenAI upstream (the only faked part) that scripts
 * the Supervisor, the Architect and the answer model. Covered: a plan listed out of order, a
 * diamond (parallel middle steps), a step that fails twice and then passes, a cycle and a step's
 * result used by a step that does not depend on it (sent back once, then reported), `$${HOME}` and
 * the system's own templates in a file, `../` and symlink
 * escapes, an EDIT that deletes (asks first), undo, pause and resume (persisted), QUERY with the
 * state as context, CONFIGURE with a diff, EXPORT, deploy, the keyword fallback and UNKNOWN; and
 * through a router whose classifier says "answer": deploy, undo and questions about the systems
 * still reach the builder (code decides them before the classifier).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { BridgeEvent } from "../../src/wire/events.js";
import { serveFake, type FakeHttpServer } from "../../testkit/fakes/fake-http.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";

const KEY = "k-builder";

function systemText(req: RecordedRequest): string {
  const ms: Array<{ role: string; content: unknown }> = req.body?.messages ?? [];
  return ms
    .filter((m) => m.role === "system")
    .map((m) => (typeof m.content === "string" ? m.content : ""))
    .join("\n");
}
const isSupervisor = (r: RecordedRequest) => systemText(r).includes("sent to a builder");
const isArchitect = (r: RecordedRequest) => systemText(r).includes("You are the Architect");
const supervised = (r: RecordedRequest) => r.lastUser.split("Message:\n").pop() ?? "";

type Step = {
  id: string;
  name?: string;
  action: string;
  params: Record<string, unknown>;
  dependsOn?: string[];
  retryCount?: number;
  retryDelayMs?: number;
};
const plan = (system: string, steps: Step[], summary = "test plan") =>
  JSON.stringify({ metadata: { system, name: system, description: `${system} made by a test`, summary }, steps });
const node = (id: string, type: string, extra: Record<string, unknown> = {}, dependsOn: string[] = []): Step => ({
  id: `n-${id}`,
  action: "CREATE_NODE",
  params: { id, type, label: id, ...extra },
  dependsOn,
});
const edge = (from: string, to: string, dependsOn: string[]): Step => ({
  id: `e-${from}-${to}`,
  action: "CONNECT_NODES",
  params: { from: `\${steps.n-${from}.output}`, to: `\${steps.n-${to}.output}` },
  dependsOn,
});

/** A flaky network in front of the bridge's /mcp: fails or slows chosen tool calls. */
interface Proxy {
  server: FakeHttpServer;
  url: string;
  target: string;
  /** tool name → how many calls still fail with 503. */
  failures: Map<string, number>;
  delayMs: number;
  calls: string[];
}

async function startProxy(): Promise<Proxy> {
  const p: Proxy = {
    server: undefined as unknown as FakeHttpServer,
    url: "",
    target: "",
    failures: new Map(),
    delayMs: 0,
    calls: [],
  };
  p.server = await serveFake(async (call, res) => {
    const tool = call.body?.method === "tools/call" ? String(call.body.params?.name) : undefined;
    if (tool) {
      p.calls.push(tool);
      const left = p.failures.get(tool) ?? 0;
      if (left > 0) {
        p.failures.set(tool, left - 1);
        res.writeHead(503, { "content-type": "text/plain" });
        res.end("busy");
        return;
      }
      if (p.delayMs) await new Promise((r) => setTimeout(r, p.delayMs));
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.headers))
      if (typeof v === "string" && !["host", "content-length", "connection"].includes(k)) headers[k] = v;
    const up = await fetch(`${p.target}/mcp`, {
      method: call.method,
      headers,
      body: call.method === "POST" ? call.raw : undefined,
    });
    const out = Buffer.from(await up.arrayBuffer());
    res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
    res.end(out);
  });
  p.url = `http://127.0.0.1:${p.server.port}/mcp`;
  return p;
}

describe("builder", () => {
  let up: FakeOpenAI;
  let proxy: Proxy;
  let b: TestBridge;
  let events: BridgeEvent[];
  const supRules: Array<[RegExp, string | "down"]> = [];
  const archRules: Array<[string, string[]]> = [];
  const archCalls = new Map<string, number>();

  const script = (req: RecordedRequest): Reply => {
    if (isSupervisor(req)) {
      const msg = supervised(req);
      // The most specific rule that matches (the longest pattern).
      const rule = supRules.filter(([re]) => re.test(msg)).sort((x, y) => y[0].source.length - x[0].source.length)[0];
      if (rule?.[1] === "down") return { kind: "error", status: 500, message: "supervisor down" };
      return {
        kind: "text",
        chunks: ["```json\n", JSON.stringify({ intent: rule?.[1] ?? "UNKNOWN", confidence: 0.9 }), "\n```"],
      };
    }
    if (systemText(req).includes("You classify ONE chat message for a router")) {
      // A classifier that says "build" for a build or an edit and "answer", sure of itself, for all else.
      const build = /build a system|add a shouter/.test(req.lastUser.split("Message:\n").pop() ?? "");
      return { kind: "text", chunks: [JSON.stringify({ action: build ? "build" : "answer", confidence: 0.95 })] };
    }
    if (req.lastUser.startsWith("FAIL-NOW")) return { kind: "error", status: 400, message: "refused" };
    if (isArchitect(req)) {
      // The person's words: after "Request:" (an EDIT's prompt also holds the canvas), before any repair note.
      const request = (req.lastUser.split("Request:\n")[1] ?? "").split("\n")[0]!;
      const rule = archRules.filter(([k]) => request.includes(k)).sort((x, y) => y[0].length - x[0].length)[0];
      if (!rule) return { kind: "text", chunks: ["no plan scripted"] };
      const n = archCalls.get(rule[0]) ?? 0;
      archCalls.set(rule[0], n + 1);
      return { kind: "text", chunks: [rule[1][Math.min(n, rule[1].length - 1)]!] };
    }
    return { kind: "text", chunks: ["ANSWER: ", req.lastUser.slice(0, 4000)] };
  };

  const chat = (key: string, model = "builder") => new Chat(b.baseURL, key, model, KEY);
  const api = async (p: string, init: RequestInit = {}) =>
    fetch(`${b.url}${p}`, { ...init, headers: { authorization: `Bearer ${KEY}`, ...(init.headers ?? {}) } });
  const canvas = async (id: string) =>
    (await (await api(`/v1/canvases/${id}`)).json()) as {
      status: string;
      version: number;
      nodes: Array<{ id: string; type: string; properties: Record<string, unknown> }>;
      edges: Array<{ from: string; to: string }>;
      settings: Record<string, unknown>;
    };
  const of = <T extends BridgeEvent["type"]>(type: T, system?: string) =>
    events.filter(
      (e): e is Extract<BridgeEvent, { type: T }> =>
        e.type === type && (!system || (e as { system?: string }).system === system),
    );

  before(async () => {
    up = await startFakeOpenAI(script);
    proxy = await startProxy();
    const dataDir = tempDir("cb-builder-");
    b = await startTestBridge(
      {
        dataDir,
        server: { apiKeys: [KEY] },
        backends: {
          up: { type: "openai", baseUrl: up.url, apiKey: "x" },
          builder: {
            type: "builder",
            supervisor: "sup",
            architect: "arch",
            answer: "ans",
            retryDelayScale: 0.05,
            allowHosts: ["127.0.0.1"],
          },
          router: { type: "router", classifier: "cls", answer: "ans", builder: "builder" },
          "builder-net": {
            type: "builder",
            supervisor: "sup",
            architect: "arch",
            answer: "ans",
            retryDelayScale: 0.05,
            mcp: { url: proxy.url, headers: { authorization: `Bearer ${KEY}` } },
          },
        },
        models: [
          { id: "sup", backend: "up" },
          { id: "arch", backend: "up" },
          { id: "ans", backend: "up" },
          { id: "builder", backend: "builder" },
          { id: "builder-net", backend: "builder-net" },
          { id: "cls", backend: "up" },
          { id: "router", backend: "router" },
        ],
      },
      {},
    );
    proxy.target = b.url;
    events = [];
    b.bus.on((e) => events.push(e));
  });
  after(async () => {
    await b?.close();
    await up?.close();
    await proxy?.server.close();
    cleanup(b.dataDir);
  });

  test("a plan listed out of order is built in dependency order; the canvas compiles; steps stream; states are kept", async () => {
    supRules.push([/research a topic and write a post/, "BUILD"]);
    archRules.push([
      "research a topic and write a post",
      [
        plan("blog-writer", [
          edge("topic", "research", ["n-topic", "n-research"]),
          edge("writer", "out", ["n-writer", "n-out"]),
          edge("research", "writer", ["n-research", "n-writer"]),
          node("writer", "agent", { properties: { model: "ans", prompt: "Write a post from {{research}}" } }),
          node("out", "output"),
          node("research", "agent", { properties: { model: "ans", prompt: "Research {{topic}}" } }),
          node("topic", "input", { properties: { description: "The topic" } }),
        ]),
      ],
    ]);
    const c = chat("conv-build");
    const res = await c.say("build a system that can research a topic and write a post about it");
    assert.match(res.text, /Building \*\*blog-writer\*\* \(`blog-writer`, build `build_/);
    assert.match(res.text, /✓ `e-topic-research`/);
    assert.match(res.text, /Done: \*\*blog-writer\*\* has 4 nodes and 3 connections \(canvas version 1\)/);
    assert.match(res.text, /`blog-writer` is a draft — say \*\*deploy\*\* .* run it with `\/run blog-writer topic=…`/);
    const cv = await canvas("blog-writer");
    assert.deepEqual(cv.nodes.map((n) => n.id).sort(), ["out", "research", "topic", "writer"]);
    assert.deepEqual(cv.edges.map((e) => `${e.from}>${e.to}`).sort(), [
      "research>writer",
      "topic>research",
      "writer>out",
    ]);
    assert.equal(cv.status, "draft");
    // Every edge was created after both of its nodes.
    const started = of("step.started", "blog-writer").map((e) => e.step);
    const completed = of("step.completed", "blog-writer").map((e) => e.step);
    for (const e of ["e-topic-research", "e-research-writer", "e-writer-out"]) {
      const [, from, to] = e.split("-");
      assert.ok(
        started.indexOf(e) > completed.indexOf(`n-${from}`) && started.indexOf(e) > completed.indexOf(`n-${to}`),
        `${e} started after its nodes`,
      );
    }
    assert.equal(of("run.completed", "blog-writer").at(-1)?.origin, "builder");
    assert.equal(of("node.created", "blog-writer").length, 4);
    assert.equal(of("edge.created", "blog-writer").length, 3);
    const states = events
      .filter((e) => e.type === "state" && e.conversation === c.key)
      .map((e) => (e as { state: string }).state);
    assert.deepEqual(states.slice(0, 4), ["routing", "planning", "executing", "completed"]);
    // The build record is kept.
    const buildId = /build `(build_[A-Za-z0-9]+)`/.exec(res.text)![1]!;
    const rec = (await (await api(`/v1/builds/${buildId}`)).json()) as {
      status: string;
      steps: Record<string, { status: string }>;
    };
    assert.equal(rec.status, "completed");
    assert.equal(Object.values(rec.steps).filter((s) => s.status === "completed").length, 7);
  });

  test("a diamond: the two middle steps start together, the last after both", async () => {
    supRules.push([/diamond/, "BUILD"]);
    archRules.push([
      "diamond",
      [
        plan("diamond", [
          node("a", "input"),
          node("b", "agent", { properties: { model: "ans" } }, ["n-a"]),
          node("c", "agent", { properties: { model: "ans" } }, ["n-a"]),
          node("d", "agent", { properties: { model: "ans" } }, ["n-b", "n-c"]),
        ]),
      ],
    ]);
    const res = await chat("conv-diamond").say("build a diamond system");
    assert.match(res.text, /Done: \*\*diamond\*\*/);
    const seq = events
      .filter((e) => (e.type === "step.started" || e.type === "step.completed") && e.system === "diamond")
      .map((e) => `${e.type === "step.started" ? "start" : "done"}:${(e as { step: string }).step}`);
    const at = (x: string) => seq.indexOf(x);
    assert.ok(
      at("start:n-b") < at("done:n-c") && at("start:n-c") < at("done:n-b"),
      `b and c overlap: ${seq.join(" ")}`,
    );
    assert.ok(at("start:n-d") > at("done:n-b") && at("start:n-d") > at("done:n-c"), "d after both");
  });

  test("a step whose tool call fails twice (the network, 503) passes on its third attempt; a refusal fails at once and stops its dependants", async () => {
    supRules.push([/flaky/, "BUILD"]);
    archRules.push([
      "flaky",
      [
        plan("flaky", [
          node("x", "input"),
          node("y", "agent", { properties: { model: "ans" } }),
          edge("x", "y", ["n-x", "n-y"]),
        ]),
      ],
    ]);
    proxy.failures.set("canvas_connect_nodes", 2);
    const res = await chat("conv-flaky", "builder-net").say("build a flaky system");
    assert.match(res.text, /↻ `e-x-y` attempt 2/);
    assert.match(res.text, /↻ `e-x-y` attempt 3/);
    assert.match(res.text, /Done: \*\*flaky\*\*/);
    assert.equal(of("step.retry", "flaky").length, 2);
    assert.equal(proxy.calls.filter((t) => t === "canvas_connect_nodes").length, 3);
    assert.deepEqual(
      (await canvas("flaky")).edges.map((e) => `${e.from}>${e.to}`),
      ["x>y"],
    );

    // A symlink in the sandbox that leads out: the tool refuses, once, and what needed it is not run.
    const outside = tempDir("cb-outside-");
    const sandbox = path.join(b.dataDir, "sandboxes", "flaky");
    mkdirSync(sandbox, { recursive: true });
    symlinkSync(outside, path.join(sandbox, "link"));
    supRules.push([/write the notes/, "EDIT"]);
    archRules.push([
      "write the notes",
      [
        JSON.stringify({
          metadata: { system: "flaky", summary: "notes" },
          steps: [
            {
              id: "f1",
              name: "notes",
              action: "CREATE_FILE",
              params: { path: "link/evil.txt", content: "pwned" },
            },
            {
              id: "f2",
              name: "readme",
              action: "CREATE_FILE",
              params: { path: "README.md", content: "see ${steps.f1.output}" },
              dependsOn: ["f1"],
            },
            { id: "f3", name: "other", action: "CREATE_FILE", params: { path: "other.md", content: "independent" } },
          ],
        }),
      ],
    ]);
    const calls = proxy.calls.length;
    const res2 = await chat("conv-flaky", "builder-net").say("write the notes for flaky");
    assert.match(res2.text, /✗ `f1` notes failed: .*(outside|escape|leads out)/i);
    assert.match(res2.text, /`f2` .*not run: f1 failed/);
    assert.match(res2.text, /✓ `f3`/);
    assert.match(res2.text, /The build stopped: step `f1` \(notes\) failed/);
    assert.equal(
      proxy.calls.slice(calls).filter((t) => t === "sandbox_create_file").length,
      2,
      "the refused call is not retried; f2 never called",
    );
    assert.equal(existsSync(path.join(outside, "evil.txt")), false);
    cleanup(outside);
  });

  test("a cycle is sent back once with the errors, then reported; nothing is built", async () => {
    supRules.push([/loopy/, "BUILD"]);
    const cyc = plan("loopy", [
      { id: "s1", action: "CREATE_NODE", params: { type: "input", label: "a" }, dependsOn: ["s2"] },
      { id: "s2", action: "CREATE_NODE", params: { type: "input", label: "b" }, dependsOn: ["s1"] },
    ]);
    archRules.push(["loopy", [cyc, cyc]]);
    const res = await chat("conv-cycle").say("build a loopy system");
    assert.equal(archCalls.get("loopy"), 2);
    // What to do next first, in plain words; the steps after it.
    assert.match(
      res.text,
      /^I could not make a plan that works, so nothing was changed\. The steps I planned wait on each other in a circle, so none could start\. Try describing the flow again in order/,
    );
    assert.match(res.text, /\n\nDetails:\n- .*cycle: s1 → s2 → s1/);
    assert.equal((await api("/v1/canvases/loopy")).status, 404);
    const second = up.requests
      .filter(isArchitect)
      .filter((r) => r.lastUser.includes("loopy"))
      .at(-1)!;
    assert.match(second.lastUser, /cycle/i, "the errors went back to the Architect");
  });

  test("building Research & Blog twice: the second reply asks, nothing is doubled; 'new' makes one with its own id and says so", async () => {
    supRules.push([/research and blog/, "BUILD"]);
    const rb = JSON.stringify({
      metadata: { system: "research-blog", name: "Research & Blog", summary: "research, then blog" },
      steps: [node("topic", "input", { properties: { type: "string", required: true } })],
    });
    archRules.push(["research and blog", [rb]]);
    const c = chat("conv-twice");
    const first = await c.say("build Research & Blog: research and blog about a topic");
    assert.match(first.text, /Building \*\*Research & Blog\*\* \(`research-blog`, build /);
    assert.match(first.text, /run it with `\/run research-blog topic=…`/);
    const ids = async () =>
      ((await (await api("/v1/canvases")).json()) as { data: Array<{ id: string }> }).data
        .map((x) => x.id)
        .filter((x) => x.startsWith("research-blog"))
        .sort();
    const second = await c.say("build Research & Blog: research and blog about a topic");
    assert.match(
      second.text,
      /^There is a system named \*\*Research & Blog\*\* already: `research-blog` \(draft, 1 node\)\. Change it/,
    );
    assert.deepEqual(await ids(), ["research-blog"], "no silent duplicate");
    const beside = await c.say("new");
    assert.match(beside.text, /^A new system, `research-blog-2`; `research-blog` stays as it was\./);
    assert.deepEqual(await ids(), ["research-blog", "research-blog-2"]);
  });

  test("a step's result used without depending on it is sent back; the repaired plan builds; $${HOME} is written as ${HOME}, other templates as written; a ../ path never leaves the sandbox", async () => {
    supRules.push([/scripted files/, "BUILD"]);
    const cap = {
      id: "cap",
      action: "REGISTER_CAPABILITY",
      params: { kind: "skill", name: "Research", description: "How to research", content: "Use ${steps.w.output}" },
    };
    const script = {
      id: "w",
      action: "CREATE_FILE",
      params: { path: "run.sh", content: "echo $${HOME} ${USER} and ${inputs.topic}" },
    };
    const bad = plan("files", [script, cap]);
    const good = plan("files", [script, { ...cap, dependsOn: ["w"] }]);
    archRules.push(["scripted files", [bad, good]]);
    const res = await chat("conv-files").say("build a system with scripted files");
    assert.equal(archCalls.get("scripted files"), 2);
    assert.match(res.text, /Done/);
    const sandbox = path.join(b.dataDir, "sandboxes", "files");
    assert.equal(readFileSync(path.join(sandbox, "run.sh"), "utf8"), "echo ${HOME} ${USER} and ${inputs.topic}");
    const sentBack = up.requests.filter(isArchitect).filter((r) => r.lastUser.includes("scripted files"));
    assert.match(
      sentBack.at(-1)!.lastUser,
      /step "cap": \$\{steps\.w\.output\}: this step does not depend on step "w"/,
    );
    const skill = readFileSync(path.join(sandbox, ".claude/skills/research/SKILL.md"), "utf8");
    assert.match(skill, /^---\nname: Research\ndescription: How to research\n---/);
    assert.match(skill, /Use run\.sh/);

    supRules.push([/escape the box/, "BUILD"]);
    const esc = plan("escape", [
      { id: "w", action: "CREATE_FILE", params: { path: "../../escape.txt", content: "x" } },
    ]);
    archRules.push(["escape the box", [esc, esc]]);
    const res2 = await chat("conv-escape").say("build a system to escape the box");
    assert.match(
      res2.text,
      /^I could not make a plan that works, so nothing was changed\. Try describing the system again/,
    );
    assert.match(res2.text, /\.\./);
    assert.equal(existsSync(path.join(b.dataDir, "escape.txt")), false);
    assert.equal(existsSync(path.join(b.dataDir, "sandboxes", "escape.txt")), false);
  });

  test("an EDIT that deletes shows the plan and waits for yes; undo goes back one version", async () => {
    supRules.push([/drop the research step/, "EDIT"]);
    archRules.push([
      "drop the research step",
      [
        JSON.stringify({
          metadata: { system: "blog-writer", summary: "drop research" },
          steps: [
            { id: "del", name: "remove research", action: "DELETE_NODE", params: { node: "research" } },
            {
              id: "wire",
              name: "wire",
              action: "CONNECT_NODES",
              params: { from: "topic", to: "writer" },
              dependsOn: ["del"],
            },
          ],
        }),
      ],
    ]);
    const c = chat("conv-build");
    const before = await canvas("blog-writer");
    const ask = await c.say("drop the research step from blog-writer");
    assert.match(ask.text, /deletes 1 node/);
    assert.match(ask.text, /1\. DELETE_NODE remove research \(`research`\)/);
    assert.match(ask.text, /Go ahead\? \(yes \/ no\)/);
    assert.equal((await canvas("blog-writer")).nodes.length, before.nodes.length, "nothing changed before yes");
    const done = await c.say("yes");
    assert.match(done.text, /Changing \*\*blog-writer\*\*/);
    const after1 = await canvas("blog-writer");
    assert.deepEqual(after1.nodes.map((n) => n.id).sort(), ["out", "topic", "writer"]);
    assert.deepEqual(after1.edges.map((e) => `${e.from}>${e.to}`).sort(), ["topic>writer", "writer>out"]);
    assert.equal(after1.version, before.version + 1);
    const undo = await c.say("undo");
    assert.match(undo.text, /Undone: \*\*blog-writer\*\* is back at canvas version 1/);
    const back = await canvas("blog-writer");
    assert.deepEqual(back.nodes.map((n) => n.id).sort(), before.nodes.map((n) => n.id).sort());
    assert.deepEqual(back.edges, before.edges);
  });

  test("pause between steps is persisted; resume goes on from the first unfinished step", async () => {
    supRules.push([/slow chain/, "BUILD"]);
    archRules.push([
      "slow chain",
      [
        plan("chain", [
          node("c1", "input"),
          node("c2", "agent", { properties: { model: "ans" } }, ["n-c1"]),
          node("c3", "agent", { properties: { model: "ans" } }, ["n-c2"]),
          node("c4", "output", {}, ["n-c3"]),
        ]),
      ],
    ]);
    proxy.delayMs = 300;
    const off = b.bus.on((e) => {
      if (e.type === "step.completed" && e.system === "chain" && e.step === "n-c1")
        void api(`/v1/runs/${e.runId}/pause`, { method: "POST" });
    });
    const c = chat("conv-chain", "builder-net");
    const res = await c.say("build a slow chain");
    off();
    proxy.delayMs = 0;
    assert.match(res.text, /Paused with [12] steps? to go\. Say \*\*resume\*\*/);
    const buildId = /build `(build_[A-Za-z0-9]+)`/.exec(res.text)![1]!;
    const rec = (await (await api(`/v1/builds/${buildId}`)).json()) as {
      status: string;
      steps: Record<string, { status: string }>;
    };
    assert.equal(rec.status, "paused");
    assert.equal(rec.steps["n-c4"]!.status, "pending");
    assert.equal(of("run.paused", "chain").at(-1)?.origin, "builder");
    // A build is a run: listed by /v1/runs with its origin and steps.
    const runs = (await (await api("/v1/runs?system=chain")).json()) as {
      data: Array<{ id: string; origin: string; status: string; steps: Array<{ id: string; status: string }> }>;
    };
    const run = runs.data.find((r) => r.id === buildId);
    assert.equal(run?.origin, "builder");
    assert.equal(run?.status, "paused");
    assert.deepEqual(
      run?.steps.map((st) => st.id),
      ["n-c1", "n-c2", "n-c3", "n-c4"],
    );
    assert.equal(run?.steps[0]?.status, "completed");
    const calls = proxy.calls.filter((t) => t === "canvas_create_node").length;
    const res2 = await c.say("resume");
    assert.match(res2.text, /Resuming build/);
    assert.match(res2.text, /Done: \*\*chain\*\*/);
    const done = (await (await api(`/v1/builds/${buildId}`)).json()) as { status: string };
    assert.equal(done.status, "completed");
    // Steps completed before the pause were not made again.
    assert.ok(proxy.calls.filter((t) => t === "canvas_create_node").length - calls <= 3);
    assert.deepEqual((await canvas("chain")).nodes.map((n) => n.id).sort(), ["c1", "c2", "c3", "c4"]);
  });

  test("QUERY answers with the state as context; EXPORT writes a bundle; UNKNOWN is handed to the answer model; without the Supervisor, keywords decide", async () => {
    supRules.push(
      [/what nodes/, "QUERY"],
      [/export blog-writer/, "EXPORT"],
      [/tell me a joke/, "UNKNOWN"],
      [/make a system that counts/, "down"],
    );
    const c = chat("conv-query");
    const q = await c.say("what nodes does blog-writer have?");
    assert.match(q.text, /^ANSWER: State:/);
    assert.match(q.text, /"system": "blog-writer"/);
    assert.match(q.text, /Question: what nodes does blog-writer have\?/);
    const ex = await c.say("export blog-writer");
    const file = /`([^`]+\.tar\.gz)`/.exec(ex.text)?.[1];
    assert.ok(file && existsSync(file), ex.text);
    const joke = await c.say("tell me a joke");
    assert.match(joke.text, /^ANSWER: .*tell me a joke/s);
    archRules.push(["counts words", [plan("counter", [node("text", "input")])]]);
    const kw = await c.say("make a system that counts words");
    assert.match(kw.text, /Building \*\*counter\*\*/, "BUILD by keywords");
  });

  test("CONFIGURE shows the diff and applies after yes; deploy asks, then the system is offered", async () => {
    supRules.push([/default topic/, "CONFIGURE"], [/^deploy/, "CONFIGURE"]);
    const c = chat("conv-build");
    const diff = await c.say("set the default topic of blog-writer to cats");
    assert.match(diff.text, /```diff/);
    assert.match(diff.text, /\+\s+default: cats/);
    assert.match(diff.text, /Apply them\? \(yes \/ no\)/);
    const applied = await c.say("yes");
    assert.match(applied.text, /Applied to \*\*blog-writer\*\*/);
    assert.deepEqual((await canvas("blog-writer")).settings.defaults, { topic: "cats" });

    const ask = await c.say("deploy");
    assert.match(ask.text, /Deploy \*\*blog-writer\*\*\? .*\(yes \/ no\)/);
    assert.equal((await api("/v1/systems/blog-writer")).status, 404, "not before yes");
    const ok = await c.say("yes");
    assert.match(ok.text, /Deployed \*\*blog-writer\*\*/);
    const sys = (await (await api("/v1/systems/blog-writer")).json()) as {
      kind: string;
      inputs: { properties: Record<string, { default?: unknown }> };
    };
    assert.equal(sys.kind, "plan");
    assert.equal(sys.inputs.properties.topic?.default, "cats");
    assert.equal((await canvas("blog-writer")).status, "deployed");
    assert.ok(
      readFileSync(path.join(b.dataDir, "systems", "blog-writer.yaml"), "utf8").startsWith(
        "# Written by the clawbridge builder",
      ),
    );
    assert.ok(await eventually(() => of("state").length > 0));
  });
  test("through the router, with a classifier that says answer: deploy (after yes) and undo reach the builder, questions are answered from the canvas and the runs", async () => {
    supRules.push([/relays a note/, "BUILD"], [/add a shouter/, "EDIT"], [/note-relay do|runs failed/, "down"]);
    archRules.push(
      [
        "relays a note",
        [
          plan("note-relay", [
            node("note", "input"),
            node("loud", "agent", { properties: { model: "ans", prompt: "FAIL-NOW {{note}}" } }, ["n-note"]),
            edge("note", "loud", ["n-note", "n-loud"]),
          ]),
        ],
      ],
      ["add a shouter", [plan("note-relay", [node("shouter", "output")])]],
    );
    const c = chat("conv-routed", "router");
    assert.match((await c.say("build a system that relays a note")).text, /Done: \*\*note-relay\*\*/);
    assert.match((await c.say("deploy")).text, /Deploy \*\*note-relay\*\*\? .*\(yes \/ no\)/);
    assert.match((await c.say("yes")).text, /Deployed \*\*note-relay\*\*/);
    assert.equal((await canvas("note-relay")).status, "deployed");
    assert.match((await c.say("add a shouter to note-relay")).text, /version 2/);
    assert.match((await c.say("undo")).text, /Undone: \*\*note-relay\*\* is back at canvas version 1/);

    const started = (await (
      await api("/v1/systems/note-relay/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ inputs: { note: "hi" } }),
      })
    ).json()) as { id: string };
    assert.ok(
      await eventually(
        async () => ((await (await api(`/v1/runs/${started.id}`)).json()) as { status: string }).status === "failed",
      ),
    );

    const asked = up.requests.length;
    const what = await c.say("what does note-relay do?");
    assert.match(what.text, /^ANSWER: State:/);
    const answerReq = up.requests.slice(asked).find((r) => r.lastUser.startsWith("State:"));
    assert.ok(answerReq, "the answer model was asked with the state");
    assert.match(answerReq.lastUser, /"id": "loud"/, "the system's nodes are in the answer's request");
    const failed = await c.say("which runs failed?");
    assert.match(failed.text, new RegExp(`"id": "${started.id}"[\\s\\S]*"status": "failed"`));
    const ruled = events.filter(
      (e) => e.type === "decision" && e.conversation.includes("conv-routed") && e.source === "rule",
    );
    assert.ok(ruled.length >= 3, "deploy, undo and the questions were decided by code");
  });
});
