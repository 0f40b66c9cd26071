/**
 * The builder engine (src/workflows/builder/builder.ts) through its entry point, `dispatch`, with a
 * scripted model caller (test/helpers/scripted-model.ts) playing the Supervisor, the Architect and
 * the answer model: no HTTP, no bridge. The canvas and sandbox tools are the real ones, reached in
 * process over MCP's linked transport (a thin wrapper records each call and can hold or fail one);
 * canvases, builds and the conversation live in an in-memory SQLite store; deploy writes the system
 * file and reloads a real systems library. What is checked is what a person sees (the replies),
 * what each model was asked (and that none was asked where no call should be made), and the canvas
 * that results: every intent — BUILD, EDIT (and one that deletes, asked first), QUERY, EXPORT (and
 * the bundle imported back), CONFIGURE (by words and by the model), deploy and undeploy, undo,
 * pause / resume / status, UNKNOWN — the Architect's reply as plain JSON, fenced JSON or JSON after
 * a sentence, a plan sent back once with its errors, and the Supervisor's keyword fallback.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import pino from "pino";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import type { DispatchInput, TurnInput } from "../../src/backends/contract/backend.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { BuilderEngine } from "../../src/workflows/builder/builder.js";
import type { SystemsHost } from "../../src/workflows/builder/deploy.js";
import { writeExport } from "../../src/workflows/builder/export-file.js";
import type { ToolCaller, ToolOutcome } from "../../src/workflows/builder/mcp-client.js";
import { builderOptionsSchema } from "../../src/workflows/builder/options.js";
import { openBuilderRoom, type BuilderRoom } from "../../src/workflows/builder/service.js";
import { ConversationMachine } from "../../src/workflows/conversation/machine.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunError, RunManager } from "../../src/workflows/systems/runner.js";
import { sandboxDir, systemsDir } from "../../src/workflows/systems/paths.js";
import { fallbackMatch } from "../../src/workflows/router/keyword-fallback.js";
import { ScriptedModel, type ScriptedReply } from "../helpers/scripted-model.js";

const SUP = "sup";
const ARCH = "arch";
const ANS = "ans";
const log = pino({ level: "silent" });

type Step = {
  id: string;
  name?: string;
  action: string;
  params: Record<string, unknown>;
  dependsOn?: string[];
};
const plan = (system: string, steps: Step[]) =>
  JSON.stringify({
    metadata: { system, name: system, description: `${system} made by a test`, summary: "test plan" },
    steps,
  });
const node = (id: string, type: string, properties: Record<string, unknown> = {}, dependsOn: string[] = []): Step => ({
  id: `n-${id}`,
  action: "CREATE_NODE",
  params: { id, type, label: id, properties },
  dependsOn,
});
const edge = (from: string, to: string): Step => ({
  id: `e-${from}-${to}`,
  action: "CONNECT_NODES",
  params: { from: `\${steps.n-${from}.output}`, to: `\${steps.n-${to}.output}` },
  dependsOn: [`n-${from}`, `n-${to}`],
});
/** topic → research → writer → out, listed out of order (edges first). */
const BLOG = plan("blog-writer", [
  edge("topic", "research"),
  edge("writer", "out"),
  edge("research", "writer"),
  node("writer", "agent", { model: "writer", prompt: "Write a post from {{research}}" }),
  node("out", "output"),
  node("research", "agent", { model: "writer", prompt: "Research {{topic}}" }),
  node("topic", "input", { type: "string", required: true, description: "The topic" }),
]);

type Reply = { kind: "answer"; text: string } | { kind: "handover"; model: string };
/** A tool call held or failed by a test: an outcome replaces the call, a promise delays it. */
type Intercept = (name: string, args: Record<string, unknown>) => ToolOutcome | Promise<void> | undefined;

interface World {
  engine: BuilderEngine;
  /** Runs the builds (and any run): pause, resume, cancel. */
  manager: RunManager;
  room: BuilderRoom;
  host: SystemsHost;
  model: ScriptedModel;
  dataDir: string;
  events: BridgeEvent[];
  /** Tool calls made by the Builder: `name` or `name:id` for a node. */
  tools: string[];
  intercept?: Intercept;
  /** What the Supervisor answers for a message matching `re` (an intent, or a raw reply). */
  intent(re: RegExp, intent: string | ScriptedReply): void;
  say(text: string, opts?: { conv?: string; notFromPerson?: DispatchInput["notFromPerson"] }): Promise<Reply>;
  /** Build blog-writer in this conversation (two model calls). */
  blog(conv?: string): Promise<string>;
  close(): Promise<void>;
}

const worlds: World[] = [];
after(async () => {
  for (const w of worlds.splice(0)) await w.close();
});

async function world(options: Record<string, unknown> = { answer: ANS }): Promise<World> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "cb-builder-engine-"));
  const db = openSystemsDb(":memory:");
  const sql = sqliteSqlOf(db);
  const bus = new EventBus();
  const events: BridgeEvent[] = [];
  bus.on((e) => events.push(e));
  const room = openBuilderRoom({ sql, db, dataDir, bus });
  // The systems library as the bridge keeps it: the config's systems and <dataDir>/systems, loaded again after a deploy.
  const models = new Map([
    ["writer", { router: false }],
    ["fast", { router: false }],
  ]);
  const load = (candidates?: Array<{ where: string; value: unknown }>) =>
    loadSystems({
      configSystems: [
        { id: "config-only", description: "From the config", run: { kind: "model", model: "writer", prompt: "x" } },
      ],
      dir: systemsDir(dataDir),
      models,
      candidates,
    });
  const { library } = await load();
  const host: SystemsHost = {
    library,
    check: async (candidates) => (await load(candidates)).problems,
    async reload(made) {
      const next = await load();
      if (next.problems.length) return next.problems;
      library.replace(next.library);
      await manager.versions.sync(library, made);
      return [];
    },
  };
  const model = new ScriptedModel();
  const intents: Array<[RegExp, string | ScriptedReply]> = [];
  model.on(SUP, (call) => {
    const message = call.prompt.split("Message:\n").pop() ?? "";
    const found = intents.find(([re]) => re.test(message))?.[1] ?? "UNKNOWN";
    return typeof found === "string" && /^[A-Z]+$/.test(found)
      ? JSON.stringify({ intent: found, confidence: 0.9 })
      : found;
  });
  model.on(ANS, (call) => `ANSWER: ${call.prompt}`);
  const tools: string[] = [];
  const manager = new RunManager({
    store: new RunStore(sql),
    library,
    bus,
    callModel: model.caller,
    dataDir,
    log,
  });
  const w: World = {
    engine: undefined as unknown as BuilderEngine,
    manager,
    room,
    host,
    model,
    dataDir,
    events,
    tools,
    intent: (re, intent) => intents.unshift([re, intent]),
    async say(text, opts = {}) {
      const input: DispatchInput = {
        turn: { session: { key: opts.conv ?? "conv", turn: 0 }, cancel: new Cancellation() } as unknown as TurnInput,
        userText: text,
        recent: [],
        messageKey: `m-${text}`,
        ...(opts.notFromPerson ? { notFromPerson: opts.notFromPerson } : {}),
      };
      const d = await w.engine.dispatch(input);
      if (d.kind === "handover") return d;
      let out = "";
      for await (const ev of d.events) if (ev.type === "text") out += ev.text;
      return { kind: "answer", text: out };
    },
    async blog(conv = "conv") {
      w.intent(/research a topic/, "BUILD");
      model.queue(ARCH, BLOG);
      return textOf(await w.say("build a system that can research a topic and write a post about it", { conv }));
    },
    async close() {
      await w.manager.close();
      db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  w.engine = new BuilderEngine(
    "builder",
    builderOptionsSchema.parse({ supervisor: SUP, architect: ARCH, retryDelayScale: 0, ...options }),
    {
      canvases: room.canvases,
      builds: room.builds,
      conversations: new ConversationMachine(sql, 60 * 60_000, bus),
      async connect(): Promise<ToolCaller> {
        const inner = await room.connectInternal();
        return {
          async call(name, args) {
            tools.push(typeof args.id === "string" ? `${name}:${args.id}` : name);
            const held = w.intercept?.(name, args);
            if (held && "ok" in held) return held;
            await held;
            return inner.call(name, args);
          },
          close: () => inner.close(),
        };
      },
      bus,
      callModel: model.caller,
      host,
      runs: new RunStore(sql),
      manager,
      dataDir,
      models: [
        { id: "writer", kind: "openai" },
        { id: "fast", kind: "openai" },
      ],
      exportBundle: (system) => writeExport(room, system),
      log,
    },
  );
  worlds.push(w);
  return w;
}

const textOf = (r: Reply): string => {
  assert.equal(r.kind, "answer", `expected the builder to answer, got a hand-over: ${JSON.stringify(r)}`);
  return (r as { text: string }).text;
};
const nodesOf = async (w: World, system: string) =>
  ((await w.room.canvases.get(system))?.nodes.map((n) => n.id) ?? []).sort();
const edgesOf = async (w: World, system: string) =>
  ((await w.room.canvases.get(system))?.edges.map((e) => `${e.from}>${e.to}`) ?? []).sort();

describe("builder engine", () => {
  test("BUILD: a plan listed out of order is built in dependency order through the tools; the Architect was asked for a new system", async () => {
    const w = await world();
    const text = await w.blog();
    assert.match(text, /^Building \*\*blog-writer\*\* \(`blog-writer`, build `build_[A-Za-z0-9]+`\): test plan\n\n/);
    assert.match(text, /- ✓ `e-topic-research` → `/);
    // The end names the id and how to use it: a draft is deployed first.
    assert.match(
      text,
      /Done: \*\*blog-writer\*\* has 4 nodes and 3 connections \(canvas version 1\)\. `blog-writer` is a draft — say \*\*deploy\*\* to make it available from any chat, then run it with `\/run blog-writer topic=…`\. Or tell me what to change\.$/,
    );
    assert.deepEqual(await nodesOf(w, "blog-writer"), ["out", "research", "topic", "writer"]);
    assert.deepEqual(await edgesOf(w, "blog-writer"), ["research>writer", "topic>research", "writer>out"]);
    assert.equal((await w.room.canvases.get("blog-writer"))?.status, "draft");
    // Every edge was made after both of its nodes.
    const at = (x: string) => w.tools.indexOf(x);
    assert.ok(at("canvas_create_node:writer") < w.tools.indexOf("canvas_connect_nodes"), w.tools.join(" "));
    assert.equal(w.tools.filter((t) => t === "canvas_connect_nodes").length, 3);
    // What the models were asked.
    const [sup] = w.model.to(SUP);
    assert.match(sup!.system ?? "", /sent to a builder/);
    assert.match(sup!.system ?? "", /Existing canvases:\n\(none\)/);
    const [arch] = w.model.to(ARCH);
    assert.match(arch!.system ?? "", /You are the Architect/);
    assert.match(arch!.system ?? "", /- writer \(openai\)\n- fast \(openai\)/);
    assert.match(arch!.prompt, /^Build a new system with id "research-topic-write"/);
    assert.match(arch!.prompt, /Request:\nbuild a system that can research a topic and write a post about it$/);
    assert.deepEqual(w.engine.modelCalls, { supervisor: 1, architect: 1 });
    const states = w.events.flatMap((e) => (e.type === "state" && e.conversation === "conv" ? [e.state] : []));
    assert.deepEqual(states, ["routing", "planning", "executing", "completed"]);
    // The new canvas is the conversation's: the Supervisor sees it next time.
    w.intent(/anything/, "UNKNOWN");
    await w.say("anything else?");
    assert.match(w.model.to(SUP)[1]!.system ?? "", /- blog-writer \(draft\)/);
  });

  test("the Architect's reply: fenced JSON and JSON after a sentence are read; a bad plan is sent back once with its errors", async () => {
    const w = await world();
    w.intent(/^build/, "BUILD");
    w.model.queue(ARCH, "```json\n" + plan("fenced", [node("a", "input")]) + "\n```");
    assert.match(textOf(await w.say("build the fenced one")), /Done: \*\*fenced\*\* has 1 nodes/);
    w.model.queue(ARCH, `Here is the plan you asked for: ${plan("prose", [node("a", "input")])} Let me know!`);
    assert.match(textOf(await w.say("build the prose one")), /Done: \*\*prose\*\* has 1 nodes/);

    // A cycle: sent back once with the errors; the repaired plan builds.
    const cycle = plan("loopy", [
      { id: "s1", action: "CREATE_NODE", params: { type: "input", label: "a" }, dependsOn: ["s2"] },
      { id: "s2", action: "CREATE_NODE", params: { type: "input", label: "b" }, dependsOn: ["s1"] },
    ]);
    w.model.queue(ARCH, cycle, plan("loopy", [node("a", "input")]));
    const before = w.model.to(ARCH).length;
    assert.match(textOf(await w.say("build a loopy one")), /Done: \*\*loopy\*\*/);
    const [first, second] = w.model.to(ARCH).slice(before);
    assert.doesNotMatch(first!.prompt, /Problems:/);
    assert.match(second!.prompt, /Your ExecutionPlan cannot be used yet \(it began: .*\)\.\nProblems:\n- .*cycle/is);

    // Bad twice: reported, nothing built.
    w.model.queue(ARCH, cycle, "still thinking about it");
    const bad = textOf(await w.say("build another loopy thing"));
    assert.equal(
      bad,
      "I could not make a plan that works, so nothing was changed. Try describing the system again in other words, step by step, e.g. *first research the topic, then write a post from the research*.\n\nDetails:\n- no JSON object in the reply",
    );
    // A cycle twice: what to do next first, in plain words; the steps after it.
    w.model.queue(ARCH, cycle, cycle);
    const circle = textOf(await w.say("build a circular thing"));
    assert.match(
      circle,
      /^I could not make a plan that works, so nothing was changed\. The steps I planned wait on each other in a circle, so none could start\. Try describing the flow again in order, e\.g\. /,
    );
    assert.match(circle, /\n\nDetails:\n- steps depend on each other in a cycle: s1 → s2 → s1/);
    // A step's result that no step gives, twice: name the input.
    const undefinedRef = plan("refs", [node("a", "input"), edge("topic", "a")]);
    w.model.queue(ARCH, undefinedRef, undefinedRef);
    const unnamed = textOf(await w.say("build a writer of things"));
    assert.match(
      unnamed,
      /^I could not make a plan that works, so nothing was changed\. A step uses a value nothing provides\. Name the input the system needs, e\.g\. /,
    );
    assert.match(unnamed, /Details:\n- step "e-topic-a": unknown step "n-topic"/);
    assert.equal(await w.room.canvases.get("another-loopy-thing"), undefined);

    // The Architect down: nothing changed.
    w.model.queue(ARCH, { error: "overloaded" });
    assert.equal(
      textOf(await w.say("build a quiet one")),
      "I could not reach the planning model (arch); nothing was changed. Try again in a moment.",
    );
    assert.deepEqual((await w.room.canvases.list()).map((c) => c.system).sort(), ["fenced", "loopy", "prose"]);
  });

  test("a second BUILD named like a canvas asks first: 'no' keeps one, 'new' builds beside it with its own id, 'yes' changes the one there (an EDIT)", async () => {
    const w = await world();
    const rb = (summary: string) =>
      JSON.stringify({
        metadata: { system: "research-blog", name: "Research & Blog", summary },
        steps: [
          node("topic", "input", { type: "string", required: true }),
          node("writer", "agent", { model: "writer", prompt: "Write about {{topic}}" }),
          edge("topic", "writer"),
        ],
      });
    w.intent(/research and blog/, "BUILD");
    w.model.queue(ARCH, rb("first"));
    const first = textOf(await w.say("build Research & Blog: research and blog about a topic"));
    assert.match(first, /^Building \*\*Research & Blog\*\* \(`research-blog`, build /);
    assert.match(first, /`research-blog` is a draft — say \*\*deploy\*\* .* run it with `\/run research-blog topic=…`/);

    // The same again: a question, nothing built.
    const ask = async () => {
      w.model.queue(ARCH, rb("again"));
      return textOf(await w.say("build Research & Blog: research and blog about a topic"));
    };
    const question =
      "There is a system named **Research & Blog** already: `research-blog` (draft, 2 nodes). Change it with this request? Say **yes** to change `research-blog`, **new** to build a separate system with its own id, or **no** to leave things as they are.";
    assert.equal(await ask(), question);
    const systems = async () => (await w.room.canvases.list()).map((c) => c.system).sort();
    assert.deepEqual(await systems(), ["research-blog"], "no silent duplicate");
    assert.equal(textOf(await w.say("no")), "Fine, nothing was changed.");
    assert.deepEqual(await systems(), ["research-blog"]);

    // "new": the plan is built beside it, with its own id and name; the reply says so.
    assert.equal(await ask(), question);
    const beside = textOf(await w.say("a new one"));
    assert.match(
      beside,
      /^A new system, `research-blog-2`; `research-blog` stays as it was\.\n\nBuilding \*\*Research & Blog \(research-blog-2\)\*\* \(`research-blog-2`, build /,
    );
    assert.match(beside, /run it with `\/run research-blog-2 topic=…`/);
    assert.deepEqual(await systems(), ["research-blog", "research-blog-2"]);
    assert.equal((await w.room.canvases.get("research-blog"))?.version, 1, "the first is untouched");

    // "yes": the request is planned again as an EDIT of the one there; no third system.
    assert.match(await ask(), /^There is a system named \*\*Research & Blog\*\* already: `research-blog`/);
    const archCalls = w.model.to(ARCH).length;
    w.model.queue(
      ARCH,
      JSON.stringify({
        metadata: { system: "research-blog", summary: "a reviewer" },
        steps: [node("reviewer", "agent", { model: "fast", prompt: "Review {{writer}}" })],
      }),
    );
    const changed = textOf(await w.say("yes"));
    assert.match(
      changed,
      /^Changing the existing `research-blog`; no second system was made\.\n\nChanging \*\*Research & Blog\*\* \(`research-blog`, build /,
    );
    assert.match(w.model.to(ARCH)[archCalls]!.prompt, /^Edit the system "research-blog"/);
    assert.match(w.model.to(ARCH)[archCalls]!.prompt, /research and blog about a topic$/);
    assert.deepEqual(await systems(), ["research-blog", "research-blog-2"]);
    assert.equal((await w.room.canvases.get("research-blog"))?.version, 2);
    assert.ok((await nodesOf(w, "research-blog")).includes("reviewer"));
  });

  test("CONFIGURE renames a system: the name changes after yes, the id stays", async () => {
    const w = await world();
    await w.blog();
    w.intent(/rename blog-writer/, "CONFIGURE");
    const diff = textOf(await w.say("rename blog-writer to Research Digest"));
    assert.match(diff, /^These changes to \*\*blog-writer\*\*:/);
    assert.match(diff, /-name: blog-writer\n\+name: Research Digest/);
    assert.match(
      textOf(await w.say("yes")),
      /^Applied to \*\*blog-writer\*\* \(canvas version 2\)\. `blog-writer` is a draft/,
    );
    assert.equal((await w.room.canvases.get("blog-writer"))?.name, "Research Digest");
    assert.deepEqual(
      (await w.room.canvases.list()).map((c) => c.system),
      ["blog-writer"],
    );
  });

  test("EDIT: changes the canvas it names; a plan that deletes waits for yes ('no' changes nothing); undo goes back one version", async () => {
    const w = await world();
    w.intent(/reviewer|research step/, "EDIT");
    assert.equal(
      textOf(await w.say("add a reviewer")),
      "Which system? Name it, or build one first. There are no canvases yet.",
    );
    assert.equal(w.model.to(ARCH).length, 0);
    await w.blog();
    const reviewer = (system: string) =>
      JSON.stringify({
        metadata: { system, summary: "a reviewer" },
        steps: [
          node("reviewer", "agent", { model: "fast", prompt: "Review {{writer}}" }),
          {
            id: "wire",
            action: "CONNECT_NODES",
            params: { from: "writer", to: "${steps.n-reviewer.output}" },
            dependsOn: ["n-reviewer"],
          },
        ],
      });
    // A file the sandbox holds already (the Architect is told of it).
    mkdirSync(path.join(sandboxDir(w.dataDir, "blog-writer"), "notes"), { recursive: true });
    writeFileSync(path.join(sandboxDir(w.dataDir, "blog-writer"), "notes", "style.md"), "short sentences");
    // The wrong system is sent back once with what to fix.
    w.model.queue(ARCH, reviewer("some-other"), reviewer("blog-writer"));
    const edit = textOf(await w.say("add a reviewer after the writer of blog-writer"));
    assert.match(edit, /^Changing \*\*blog-writer\*\* \(`blog-writer`, build `build_[A-Za-z0-9]+`\): a reviewer/);
    assert.match(edit, /\(canvas version 2\)/);
    const arch = w.model.to(ARCH).at(-2)!;
    assert.match(arch.prompt, /^Edit the system "blog-writer" \(metadata\.system: "blog-writer"\)\./);
    assert.match(
      w.model.to(ARCH).at(-1)!.prompt,
      /- metadata\.system is "some-other" but the canvas being edited is "blog-writer": set metadata\.system to "blog-writer"/,
    );
    assert.match(arch.prompt, /"id": "research"/, "the Architect sees the canvas");
    assert.match(
      arch.system ?? "",
      /Files already in the sandbox:\n- notes\/style\.md \(15 bytes\)/,
      "and the sandbox's files",
    );
    assert.ok((await nodesOf(w, "blog-writer")).includes("reviewer"));

    const drop = JSON.stringify({
      metadata: { system: "blog-writer", summary: "drop research" },
      steps: [
        { id: "del", name: "remove research", action: "DELETE_NODE", params: { node: "research" } },
        { id: "wire", action: "CONNECT_NODES", params: { from: "topic", to: "writer" }, dependsOn: ["del"] },
      ],
    });
    w.model.queue(ARCH, drop, drop);
    const ask = textOf(await w.say("drop the research step"));
    assert.equal(
      ask,
      "This change to **blog-writer** deletes 1 node:\n\n1. DELETE_NODE remove research (`research`)\n2. CONNECT_NODES wire\n\nGo ahead? (yes / no)",
    );
    const calls = w.model.calls.length;
    assert.equal(textOf(await w.say("no")), "Fine, nothing was changed.");
    assert.ok((await nodesOf(w, "blog-writer")).includes("research"));
    textOf(await w.say("drop the research step"));
    const yes = textOf(await w.say("yes"));
    assert.match(yes, /^Changing \*\*blog-writer\*\*/);
    assert.match(yes, /\(canvas version 3\)/);
    assert.deepEqual(await nodesOf(w, "blog-writer"), ["out", "reviewer", "topic", "writer"]);
    assert.ok((await edgesOf(w, "blog-writer")).includes("topic>writer"));
    assert.equal(
      w.model.calls.length,
      calls + 2,
      "'no' and 'yes' ask no model; the second ask: Supervisor + Architect",
    );

    const undo = textOf(await w.say("undo"));
    assert.equal(
      undo,
      "Undone: **blog-writer** is back at canvas version 2 (5 nodes, 4 connections). `blog-writer` is a draft — say **deploy** to make it available from any chat, then run it with `/run blog-writer topic=…`.",
    );
    assert.ok((await nodesOf(w, "blog-writer")).includes("research"));
    await w.room.canvases.create({ system: "empty" });
    assert.equal(textOf(await w.say("undo empty")), "**empty** is at its first version; there is nothing to undo.");
    assert.match(
      textOf(await w.say("undo nosuch")),
      // Most recently changed first: the undo and the create may share a millisecond, so either order.
      /^There is no canvas \*\*nosuch\*\*\. Canvases: (`blog-writer` \(draft\), `empty` \(draft\)|`empty` \(draft\), `blog-writer` \(draft\))\.$/,
    );
    assert.equal(w.model.calls.length, calls + 2, "undo asks no model");
  });

  test("pause stops a build between steps; status tells where it is; resume goes on from the first unfinished step", async () => {
    const w = await world();
    w.intent(/slow chain/, "BUILD");
    w.model.queue(
      ARCH,
      plan("chain", [
        node("c1", "input"),
        node("c2", "agent", { model: "writer" }, ["n-c1"]),
        node("c3", "agent", { model: "writer" }, ["n-c2"]),
        node("c4", "output", {}, ["n-c3"]),
      ]),
    );
    assert.equal(textOf(await w.say("pause")), "No build is running in this conversation.");
    assert.equal(textOf(await w.say("resume")), "No build is paused in this conversation.");
    // c2's tool call is held until the pause was asked for.
    let started!: () => void;
    let release!: () => void;
    const c2Started = new Promise<void>((r) => (started = r));
    const released = new Promise<void>((r) => (release = r));
    w.intercept = (name, args) => {
      if (name !== "canvas_create_node" || args.id !== "c2") return undefined;
      started();
      return released;
    };
    const building = w.say("build a slow chain");
    await c2Started;
    const pausing = w.say("pause");
    release();
    const paused = textOf(await pausing);
    assert.equal(paused, "Paused with 2 steps to go. Say **resume** to go on with `chain`.");
    const built = textOf(await building);
    assert.match(built, /- ✓ `n-c2`/);
    assert.match(built, /\nPaused with 2 steps to go\. Say \*\*resume\*\* to go on with `chain`\.$/);
    assert.deepEqual(await nodesOf(w, "chain"), ["c1", "c2"]);
    const id = /build `(build_[A-Za-z0-9]+)`/.exec(built)![1]!;
    assert.equal(textOf(await w.say("status")), `Build \`${id}\` of **chain** is paused: 2 of 4 steps done.`);
    await assert.rejects(w.manager.pause(id), RunError, "not running: nothing to pause");

    const resumed = textOf(await w.say("resume"));
    assert.match(resumed, new RegExp(`^Resuming build \`${id}\` of \\*\\*chain\\*\\*`));
    assert.match(resumed, /Done: \*\*chain\*\* has 4 nodes and 0 connections/);
    assert.deepEqual(
      w.tools.filter((t) => t.startsWith("canvas_create_node")),
      ["canvas_create_node:c1", "canvas_create_node:c2", "canvas_create_node:c3", "canvas_create_node:c4"],
      "nothing made twice",
    );
    await assert.rejects(w.manager.resume(id), RunError, "a completed build is not resumed");
    assert.equal(w.model.to(SUP).length, 1, "pause, resume and status ask no model");
  });

  test("a tool call that may pass is tried again (retry delays scaled to 0); a refusal fails at once and stops what depends on it", async () => {
    const w = await world();
    w.intent(/flaky|notes/, "BUILD");
    let failures = 2;
    w.intercept = (name) =>
      name === "canvas_connect_nodes" && failures-- > 0
        ? { ok: false, error: "store busy", retryable: true }
        : undefined;
    w.model.queue(ARCH, plan("flaky", [node("x", "input"), node("y", "agent", { model: "writer" }), edge("x", "y")]));
    const t0 = Date.now();
    const text = textOf(await w.say("build a flaky system"));
    assert.match(text, /- ↻ `e-x-y` attempt 2: store busy\n/);
    assert.match(text, /- ↻ `e-x-y` attempt 3: store busy\n/);
    assert.match(text, /Done: \*\*flaky\*\*/);
    assert.ok(Date.now() - t0 < 1000, "no real retry delay");
    assert.deepEqual(await edgesOf(w, "flaky"), ["x>y"]);

    w.intercept = (name, args) =>
      name === "sandbox_create_file" && args.path === "notes.md"
        ? { ok: false, error: "refused", retryable: false }
        : undefined;
    w.model.queue(
      ARCH,
      plan("notes", [
        { id: "f1", name: "notes", action: "CREATE_FILE", params: { path: "notes.md", content: "x" } },
        {
          id: "f2",
          action: "CREATE_FILE",
          params: { path: "README.md", content: "see ${steps.f1.output}" },
          dependsOn: ["f1"],
        },
        { id: "f3", action: "CREATE_FILE", params: { path: "other.md", content: "independent" } },
      ]),
    );
    const failed = textOf(await w.say("build the notes"));
    assert.match(failed, /- ✗ `f1` notes failed: refused/);
    assert.match(failed, /- – `f2` not run: f1 failed/);
    assert.match(failed, /- ✓ `f3`/);
    assert.match(
      failed,
      /The build stopped: step `f1` \(notes\) failed: refused\. Steps that needed it were not run\./,
    );
    assert.equal(
      w.tools.filter((t) => t === "sandbox_create_file").length,
      2,
      "the refusal is not retried; f2 never called",
    );
    assert.equal(readFileSync(path.join(w.dataDir, "sandboxes", "notes", "other.md"), "utf8"), "independent");
  });

  test("QUERY answers from the state; EXPORT writes a bundle that imports back; UNKNOWN is handed over", async () => {
    const w = await world();
    await w.blog();
    w.intent(/what nodes/, "QUERY");
    const q = textOf(await w.say("what nodes does blog-writer have?"));
    assert.match(q, /^ANSWER: State:\n/);
    assert.match(q, /"system": "blog-writer"/);
    assert.match(q, /Question: what nodes does blog-writer have\?$/);
    assert.match(w.model.to(ANS)[0]!.system ?? "", /You answer questions about the person's systems/);
    // A question naming a system is a QUERY by rule: the Supervisor is not asked (it would say BUILD here).
    w.intent(/what does blog-writer do/, "BUILD");
    const supervisorCalls = w.model.to(SUP).length;
    const byRule = textOf(await w.say("what does blog-writer do?"));
    assert.match(byRule, /^ANSWER: State:\n/);
    assert.match(byRule, /"system": "blog-writer"/);
    assert.equal(w.model.to(SUP).length, supervisorCalls, "no Supervisor call for a question about a system");
    // The answer model down: the state, listed.
    w.model.queue(ANS, { error: "down" });
    assert.equal(
      textOf(await w.say("what nodes are there?")),
      "Here is what there is:\n\n- **blog-writer** (draft, canvas version 1): 4 nodes, 3 connections",
    );

    w.intent(/export/, "EXPORT");
    const ex = textOf(await w.say("export blog-writer"));
    const file = /`([^`]+\.tar\.gz)`/.exec(ex)?.[1];
    assert.ok(file && existsSync(file), ex);
    assert.match(ex, /^Exported \*\*blog-writer\*\* \(\d+ bytes\)/);
    assert.equal(textOf(await w.say("export it", { conv: "other" })), "Which system? Canvases: `blog-writer` (draft).");
    // The bundle reads back: into this room only with replace, into another as the same canvas.
    await assert.rejects(w.room.importBundle(readFileSync(file!)), /a canvas "blog-writer" exists/);
    const other = await world();
    assert.deepEqual(await other.room.importBundle(readFileSync(file!)), {
      system: "blog-writer",
      canvas: true,
      files: 0,
    });
    assert.deepEqual(await nodesOf(other, "blog-writer"), await nodesOf(w, "blog-writer"));
    assert.deepEqual(await edgesOf(other, "blog-writer"), await edgesOf(w, "blog-writer"));

    w.intent(/joke/, "UNKNOWN");
    assert.deepEqual(await w.say("tell me a joke"), { kind: "handover", model: ANS });
    const plain = await world({});
    assert.match(textOf(await plain.say("tell me a joke")), /^I build and change systems from plain words/);
  });

  test("without the Supervisor (down or garbled) keywords decide; a message not from the person asks no model", async () => {
    const w = await world();
    w.intent(/counts words/, { error: "supervisor down" });
    w.model.queue(ARCH, plan("counter", [node("text", "input")]));
    assert.match(textOf(await w.say("make a system that counts words")), /^Building \*\*counter\*\*/);
    w.intent(/what is/, "I would say it is a question");
    w.model.queue(ANS, "It has one node.");
    assert.equal(textOf(await w.say("what is in it?")), "It has one node."); // names no system: the Supervisor is asked
    // By keywords, "add … to <an existing canvas>" is an edit of it.
    w.intent(/add a summary/, { error: "supervisor down" });
    w.model.queue(ARCH, plan("counter", [node("summary", "output")]));
    assert.match(textOf(await w.say("add a summary output to counter")), /^Changing \*\*counter\*\*/);
    assert.match(w.model.to(ARCH).at(-1)!.prompt, /^Edit the system "counter"/);
    assert.deepEqual(await nodesOf(w, "counter"), ["summary", "text"]);
    assert.deepEqual(w.engine.modelCalls, { supervisor: 3, architect: 2 });
    const calls = w.model.calls.length;
    assert.match(textOf(await w.say("", { notFromPerson: "tool_result" })), /^I build systems from plain words/);
    assert.equal(w.model.calls.length, calls);
  });

  test("CONFIGURE: plain words become a diff applied after yes; the model's JSON changes an agent's model through the tools", async () => {
    const w = await world();
    await w.blog();
    w.intent(/default|model|ask/, "CONFIGURE");
    const diff = textOf(await w.say("set the default topic of blog-writer to cats"));
    assert.match(diff, /^These changes to \*\*blog-writer\*\*:\n\n```diff\n/);
    assert.match(diff, /\+\s+default: cats/);
    assert.match(diff, /Apply them\? \(yes \/ no\)$/);
    assert.equal(w.model.to(ANS).length, 0, "plain words need no model");
    assert.deepEqual((await w.room.canvases.get("blog-writer"))?.settings.defaults ?? {}, {}, "nothing before yes");
    assert.match(
      textOf(await w.say("yes")),
      /^Applied to \*\*blog-writer\*\* \(canvas version 2\)\. `blog-writer` is a draft/,
    );
    assert.deepEqual((await w.room.canvases.get("blog-writer"))?.settings.defaults, { topic: "cats" });

    w.model.queue(ANS, 'Sure: {"changes":[{"path":"model.writer","value":"fast"}]}');
    const ask = textOf(await w.say("use the fast model for the writer"));
    assert.match(ask, /-\s+model: writer\n\+\s+model: fast/);
    assert.match(
      w.model.to(ANS)[0]!.prompt,
      /^System: blog-writer "blog-writer" \(draft\)\nInputs: topic\nAgent nodes: writer \(model writer\), research \(model writer\)/,
    );
    assert.equal(textOf(await w.say("never mind")), "Fine, nothing was changed.");
    w.model.queue(ANS, '{"changes":[{"path":"model.writer","value":"fast"}]}');
    textOf(await w.say("use the fast model for the writer"));
    const tools = w.tools.length;
    assert.match(textOf(await w.say("yes")), /^Applied to \*\*blog-writer\*\* \(canvas version 3\)\./);
    assert.deepEqual(w.tools.slice(tools), ["canvas_update_property"]);
    assert.equal(
      (await w.room.canvases.get("blog-writer"))?.nodes.find((n) => n.id === "writer")?.properties.model,
      "fast",
    );

    w.model.queue(ANS, '{"changes":[{"path":"model.nobody","value":"fast"}]}');
    assert.match(
      textOf(await w.say("use the fast model for nobody")),
      /^I did not understand which setting to change \(changes\[0\]: no agent node "nobody"\)/,
    );
    assert.equal(
      textOf(await w.say("set the default x of config-only to 1")),
      "**config-only** is defined in config, not on a canvas; change it there.",
    );
  });

  test("a BUILD's examples and keywords become settings and the deployed system's; without a classifier the keyword fallback finds it; CONFIGURE edits them", async () => {
    const w = await world();
    const findable = JSON.parse(BLOG) as { metadata: Record<string, unknown> };
    findable.metadata.examples = ["write a blog post about solar power", "research electric cars and blog about them"];
    findable.metadata.keywords = ["blog post", "article"];
    w.intent(/research a topic/, "BUILD");
    w.model.queue(ARCH, JSON.stringify(findable));
    textOf(await w.say("build a system that can research a topic and write a post about it"));
    assert.match(w.model.to(ARCH)[0]!.system ?? "", /examples: 2-4 messages a person would type to run the system/);
    assert.deepEqual((await w.room.canvases.get("blog-writer"))?.settings, {
      examples: findable.metadata.examples,
      keywords: ["blog post", "article"],
    });
    assert.match(textOf(await w.say("deploy blog-writer")), /^Deploy \*\*blog-writer\*\*\?/);
    textOf(await w.say("yes"));
    const sys = w.host.library.get("blog-writer");
    assert.deepEqual(sys?.examples, findable.metadata.examples);
    assert.deepEqual(sys?.keywords, ["blog post", "article"]);
    // The classifier is down: the router's keyword fallback finds it by its examples' words and keywords.
    const found = fallbackMatch("write me a blog post about wind turbines", w.host.library.systems);
    assert.equal(found?.system, "blog-writer");
    assert.match(found!.matched, /keyword "blog post".*example "write a blog post about solar power"/);
    assert.equal(fallbackMatch("write me a poem", w.host.library.systems), null, "common words match nothing");

    w.intent(/keyword/, "CONFIGURE");
    w.model.queue(ANS, '{"changes":[{"path":"keywords","value":["essay"]}]}');
    assert.match(textOf(await w.say("its keyword is essay")), /-\s+- blog post\n-\s+- article\n\+\s+- essay/);
    assert.match(
      textOf(await w.say("yes")),
      /^Applied to \*\*blog-writer\*\* \(canvas version 2\)\. Deployed again as version 2: that is what runs now\./,
    );
    assert.deepEqual(w.host.library.get("blog-writer")?.keywords, ["essay"]);
    w.model.queue(ANS, '{"changes":[{"path":"keywords","value":"essay"}]}');
    assert.match(
      textOf(await w.say("keyword essay")),
      /^I did not understand which setting to change \(changes\[0\]: keywords is a list of words or short phrases\)/,
    );
  });

  test("deploy and undeploy ask first (no model call); yes writes the system file and the library offers it", async () => {
    const w = await world();
    await w.blog();
    await w.room.canvases.create({ system: "empty" });
    const calls = w.model.calls.length;
    assert.match(textOf(await w.say("deploy empty")), /^\*\*empty\*\* cannot be deployed yet:\n\n- /);
    assert.equal(textOf(await w.say("undeploy blog-writer")), "**blog-writer** is not deployed.");
    const ask = textOf(await w.say("deploy blog-writer"));
    assert.equal(
      ask,
      "Deploy **blog-writer**? The router will offer it as `blog-writer` in every chat and ask for `topic`. (yes / no)",
    );
    assert.equal(w.host.library.get("blog-writer"), undefined, "not before yes");
    assert.equal(
      textOf(await w.say("yes")),
      "Deployed **blog-writer** as version 1. `blog-writer` — run it with `/run blog-writer topic=…`, or ask for it in any chat.",
    );
    assert.equal(w.host.library.get("blog-writer")?.run.kind, "plan");
    assert.equal((await w.room.canvases.get("blog-writer"))?.status, "deployed");
    assert.match(
      readFileSync(path.join(systemsDir(w.dataDir), "blog-writer.yaml"), "utf8"),
      /^# Written by the clawbridge builder/,
    );
    assert.equal(w.model.calls.length, calls, "deploy asks no model");

    // An edit of a deployed canvas deploys it again.
    w.intent(/rename/, "EDIT");
    w.model.queue(
      ARCH,
      JSON.stringify({
        metadata: { system: "blog-writer", summary: "prompt" },
        steps: [
          {
            id: "u",
            action: "UPDATE_NODE",
            params: { node: "writer", properties: { prompt: "Write {{research}} well" } },
          },
        ],
      }),
    );
    assert.match(
      textOf(await w.say("rename the writer's prompt")),
      /Deployed again as version \d+: that is what runs now\. `blog-writer` — run it with `\/run blog-writer topic=…`, or ask for it in any chat\. Or tell me what to change\.$/,
    );

    // Deploying together with another setting: both happen after the one yes.
    w.intent(/tiny one/, "BUILD");
    w.model.queue(
      ARCH,
      plan("tiny", [node("a", "input"), node("b", "agent", { model: "writer", prompt: "{{a}}" }), edge("a", "b")]),
    );
    textOf(await w.say("build a tiny one", { conv: "second" }));
    w.intent(/always ask/, "CONFIGURE");
    const both = textOf(await w.say("deploy tiny and always ask before running it", { conv: "second" }));
    assert.match(both, /^These changes to \*\*tiny\*\*:/);
    assert.match(
      textOf(await w.say("yes", { conv: "second" })),
      /^Applied to \*\*tiny\*\* \(canvas version 2\)\. Deployed again as version \d+: that is what runs now\. `tiny` — run it with `\/run tiny a=…`/,
    );
    assert.equal(w.host.library.get("tiny")?.confirm, "always");
    assert.equal((await w.room.canvases.get("tiny"))?.status, "deployed");

    // CONFIGURE's "undeploy" words go the same way.
    w.intent(/undeploy/, "CONFIGURE");
    assert.equal(
      textOf(await w.say("please undeploy blog-writer")),
      "Stop offering **blog-writer**? Its canvas stays, as a draft. (yes / no)",
    );
    assert.equal(textOf(await w.say("yes")), "**blog-writer** is a draft again; the router no longer offers it.");
    assert.equal(w.host.library.get("blog-writer"), undefined);
    assert.equal(existsSync(path.join(systemsDir(w.dataDir), "blog-writer.yaml")), false);
  });
});
