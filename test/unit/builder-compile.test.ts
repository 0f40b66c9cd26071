/**
 * From canvas to system, without I/O: compileCanvas (src/workflows/builder/compile.ts) on a content pipeline,
 * a canvas listed out of order, a diamond, every kind of problem (each naming its node) and the
 * default prompt; the deploy policy for chat-built systems (src/workflows/builder/policy.ts: programs,
 * private addresses, DNS answers through an injected resolver); CONFIGURE in words and as model
 * JSON (src/workflows/builder/configure.ts) with the diff a person confirms.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { compileCanvas, type CompileProblem } from "../../src/workflows/builder/compile.js";
import { changesFromWords, parseChanges, systemDiff, withChanges } from "../../src/workflows/builder/configure.js";
import { policyProblems, type DeployPolicy } from "../../src/workflows/builder/policy.js";
import type { Canvas, CanvasNode, NodeType } from "../../src/wire/canvas.js";
import { loadSystems } from "../../src/workflows/systems/library.js";

const n = (id: string, type: NodeType, properties: Record<string, unknown> = {}, label = id): CanvasNode => ({
  id,
  type,
  label,
  properties,
  position: { x: 0, y: 0 },
});

function canvas(nodes: CanvasNode[], edges: Array<[string, string]>, settings: Canvas["settings"] = {}): Canvas {
  return {
    system: "demo",
    name: "Demo",
    description: "a test canvas",
    status: "draft",
    version: 0,
    nodes,
    edges: edges.map(([from, to], i) => ({ id: `e${i + 1}`, from, to })),
    settings,
    updatedAt: 0,
  };
}

function compiled(c: Canvas): Record<string, any> {
  const r = compileCanvas(c);
  assert.ok(r.ok, `compiles: ${JSON.stringify(!r.ok && r.problems)}`);
  return r.system as Record<string, any>;
}

function problemsOf(c: Canvas): CompileProblem[] {
  const r = compileCanvas(c);
  assert.equal(r.ok, false, "does not compile");
  return (r as { problems: CompileProblem[] }).problems;
}

/** The one problem naming `node` whose message matches. */
function hasProblem(problems: CompileProblem[], node: string, message: RegExp): void {
  assert.ok(
    problems.some((p) => p.node === node && message.test(p.message)),
    `a problem on ${node} matching ${message}; got ${JSON.stringify(problems)}`,
  );
}

/** topic (required) + tone (enum, default casual) → research → writer → output. */
function contentPipeline(): Canvas {
  return canvas(
    [
      n("topic", "input", { type: "string", description: "what to write about" }, "Topic"),
      n("tone", "input", { type: "string", enum: ["casual", "formal"], default: "casual" }, "Tone"),
      n("research", "agent", { model: "m1", prompt: "Find facts about {{topic}}." }, "Research"),
      n(
        "writer",
        "agent",
        {
          model: "m2",
          prompt: "Write about {{topic}} in a {{ tone }} tone.\n\nFacts:\n{{research}}",
          system: "You write for {{tone}} readers.",
          timeoutSeconds: 60,
        },
        "Writer",
      ),
      n("out", "output", {}, "Article"),
    ],
    [
      ["topic", "research"],
      ["research", "writer"],
      ["topic", "writer"],
      ["tone", "writer"],
      ["writer", "out"],
    ],
  );
}

describe("compileCanvas", () => {
  test("a content pipeline compiles to the exact plan system", () => {
    const sys = compiled(contentPipeline());
    assert.deepEqual(sys, {
      id: "demo",
      name: "Demo",
      description: "a test canvas",
      inputs: {
        type: "object",
        properties: {
          topic: { type: "string", description: "what to write about" },
          tone: { type: "string", description: "Tone", enum: ["casual", "formal"], default: "casual" },
        },
        required: ["topic"],
      },
      confirm: "auto",
      enabled: true,
      run: {
        kind: "plan",
        steps: [
          {
            id: "research",
            uses: "model",
            with: { model: "m1", prompt: "Find facts about ${inputs.topic}." },
            dependsOn: [],
          },
          {
            id: "writer",
            uses: "model",
            with: {
              model: "m2",
              prompt: "Write about ${inputs.topic} in a ${inputs.tone} tone.\n\nFacts:\n${steps.research.output}",
              system: "You write for ${inputs.tone} readers.",
              timeoutSeconds: 60,
            },
            dependsOn: ["research"],
          },
        ],
        output: "writer",
      },
    });
  });

  test("the compiled pipeline is a system the library loads without a problem", async () => {
    const sys = compiled(contentPipeline());
    const models = new Map([
      ["m1", { router: false }],
      ["m2", { router: false }],
    ]);
    const { library, problems } = await loadSystems({
      configSystems: [],
      dir: "/nonexistent/cb-compile-test",
      models,
      candidates: [{ where: "canvas demo", value: sys }],
    });
    assert.deepEqual(problems, []);
    assert.equal(library.get("demo")?.run.kind, "plan");
    // And one step naming a model that is not configured is the library's problem, not compile's.
    const other = await loadSystems({
      configSystems: [],
      dir: "/nonexistent/cb-compile-test",
      models: new Map([["m1", { router: false }]]),
      candidates: [{ where: "canvas demo", value: sys }],
    });
    assert.ok(
      other.problems.some((p) => /m2/.test(p.message)),
      JSON.stringify(other.problems),
    );
  });

  test("settings: defaults win over the node's, confirm, enabled, examples and keywords go in", () => {
    const c = contentPipeline();
    c.settings = {
      confirm: "always",
      enabled: false,
      defaults: { tone: "formal", topic: "tides" },
      examples: ["write about tides"],
      keywords: ["article"],
    };
    const sys = compiled(c);
    assert.equal(sys.inputs.properties.tone.default, "formal");
    assert.equal(sys.inputs.properties.topic.default, "tides");
    assert.equal(sys.inputs.required, undefined, "every input has a default: none required");
    assert.equal(sys.confirm, "always");
    assert.equal(sys.enabled, false);
    assert.deepEqual(sys.examples, ["write about tides"]);
    assert.deepEqual(sys.keywords, ["article"]);
  });

  test("an input with a name, a type and required: false", () => {
    const c = canvas(
      [
        n("in-1", "input", { name: "count", type: "integer", required: false }, "How many"),
        n("a", "agent", { model: "m", prompt: "Give {{count}} ideas; again {{in-1}}." }),
      ],
      [["in-1", "a"]],
    );
    const sys = compiled(c);
    assert.deepEqual(sys.inputs, {
      type: "object",
      properties: { count: { type: "integer", description: "How many" } },
    });
    assert.equal(
      sys.run.steps[0].with.prompt,
      "Give ${inputs.count} ideas; again ${inputs.count}.",
      "by name and by node id",
    );
    assert.equal(sys.run.output, undefined, "no output node: the plan's own default");
  });

  test("a canvas listed out of order compiles in dependency order", () => {
    const c = canvas(
      [
        n("out", "output"),
        n("publish", "webhook", { url: "https://example.com/hook", body: { text: "{{edit}}" } }),
        n("edit", "agent", { model: "m", prompt: "Edit: {{draft}}" }),
        n("draft", "agent", { model: "m", prompt: "Draft about {{topic}}" }),
        n("topic", "input"),
      ],
      [
        ["edit", "publish"],
        ["publish", "out"],
        ["draft", "edit"],
        ["topic", "draft"],
      ],
    );
    const sys = compiled(c);
    assert.deepEqual(
      sys.run.steps.map((s: any) => [s.id, s.dependsOn]),
      [
        ["draft", []],
        ["edit", ["draft"]],
        ["publish", ["edit"]],
      ],
    );
    assert.deepEqual(sys.run.steps[2].with, {
      url: "https://example.com/hook",
      body: { text: "${steps.edit.output}" },
    });
    assert.equal(sys.run.output, "publish");
  });

  test("a diamond: both middle steps depend on the first, the last on both; a transitive upstream is reachable", () => {
    const c = canvas(
      [
        n("join", "agent", { model: "m", prompt: "{{left}} + {{right}} (from {{start}})" }),
        n("right", "agent", { model: "m", prompt: "right of {{start}}" }),
        n("left", "command", { argv: ["echo", "{{start}}", "{{q}}"] }),
        n("start", "agent", { model: "m", prompt: "start {{q}}" }),
        n("q", "input"),
        n("out", "output"),
      ],
      [
        ["q", "start"],
        ["start", "left"],
        ["start", "right"],
        ["left", "join"],
        ["right", "join"],
        ["join", "out"],
      ],
    );
    const sys = compiled(c);
    const steps = sys.run.steps as Array<{ id: string; dependsOn: string[]; with: any; uses: string }>;
    assert.deepEqual(
      steps.map((s) => s.id),
      ["start", "right", "left", "join"],
    );
    const by = Object.fromEntries(steps.map((s) => [s.id, s]));
    assert.deepEqual(by.left!.dependsOn, ["start"]);
    assert.deepEqual(by.right!.dependsOn, ["start"]);
    assert.deepEqual([...by.join!.dependsOn].sort(), ["left", "right"]);
    assert.equal(by.join!.with.prompt, "${steps.left.output} + ${steps.right.output} (from ${steps.start.output})");
    assert.equal(by.left!.uses, "command");
    assert.deepEqual(by.left!.with, { argv: ["echo", "${steps.start.output}", "${inputs.q}"] });
  });

  test("problems: no steps", () => {
    hasProblem(problemsOf(canvas([n("topic", "input"), n("out", "output")], [])), "canvas", /no step/);
  });

  test("problems: an agent without a model", () => {
    hasProblem(problemsOf(canvas([n("a", "agent", { prompt: "hi" })], [])), "a", /properties\.model/);
    hasProblem(problemsOf(canvas([n("a", "agent", { model: "", prompt: "hi" })], [])), "a", /properties\.model/);
  });

  test("problems: {{unknown}} names no input and no node; the inputs are listed", () => {
    const p = problemsOf(
      canvas(
        [n("topic", "input"), n("a", "agent", { model: "m", prompt: "About {{topic}} and {{unknown}}" })],
        [["topic", "a"]],
      ),
    );
    hasProblem(p, "a", /properties\.prompt: \{\{unknown\}\} names no input and no node \(inputs: topic\)/);
    assert.equal(p.length, 1, "{{topic}} is fine");
    // In a webhook's nested settings the place is named too.
    const w = problemsOf(
      canvas([n("hook", "webhook", { url: "https://example.com", body: { list: ["{{nope}}"] } })], []),
    );
    hasProblem(w, "hook", /properties\.body\.list\[0\]: \{\{nope\}\}/);
  });

  test("problems: {{x}} naming a step that is not upstream (a sibling, one downstream)", () => {
    const c = canvas(
      [
        n("a", "agent", { model: "m", prompt: "uses {{b}}" }),
        n("b", "agent", { model: "m", prompt: "b" }),
        n("c", "agent", { model: "m", prompt: "after {{a}}" }),
      ],
      [["c", "a"]],
    );
    // c → a: a may name c; a names b, which does not feed it.
    const p = problemsOf(c);
    hasProblem(p, "a", /\{\{b\}\} is a node this one is not connected from; connect b → a/);
    hasProblem(p, "c", /\{\{a\}\} is a node this one is not connected from/);
  });

  test("problems: two output nodes; an output with two incoming edges; an output fed by an input", () => {
    const two = problemsOf(
      canvas(
        [n("a", "agent", { model: "m", prompt: "x" }), n("out", "output"), n("out2", "output")],
        [
          ["a", "out"],
          ["a", "out2"],
        ],
      ),
    );
    hasProblem(two, "out2", /one output node/);
    const b = n("b", "agent", { model: "m", prompt: "y" });
    const both = problemsOf(
      canvas(
        [n("a", "agent", { model: "m", prompt: "x" }), b, n("out", "output")],
        [
          ["a", "out"],
          ["b", "out"],
        ],
      ),
    );
    hasProblem(both, "out", /exactly one step/);
    const fromInput = problemsOf(
      canvas(
        [n("q", "input"), n("a", "agent", { model: "m", prompt: "{{q}}" }), n("out", "output")],
        [
          ["q", "a"],
          ["q", "out"],
        ],
      ),
    );
    hasProblem(fromInput, "out", /exactly one step/);
    const none = problemsOf(canvas([n("a", "agent", { model: "m", prompt: "x" }), n("out", "output")], []));
    hasProblem(none, "out", /exactly one step/);
  });

  test("problems: a bad input name, a bad type, a name declared twice", () => {
    hasProblem(
      problemsOf(canvas([n("in", "input", { name: "my topic" }), n("a", "agent", { model: "m", prompt: "x" })], [])),
      "in",
      /input name "my topic" must be letters, digits and _/,
    );
    hasProblem(
      problemsOf(canvas([n("in-put", "input"), n("a", "agent", { model: "m", prompt: "x" })], [])),
      "in-put",
      /input name "in-put"/,
    );
    hasProblem(
      problemsOf(canvas([n("in", "input", { type: "date" }), n("a", "agent", { model: "m", prompt: "x" })], [])),
      "in",
      /properties\.type "date"/,
    );
    hasProblem(
      problemsOf(
        canvas([n("x", "input"), n("y", "input", { name: "x" }), n("a", "agent", { model: "m", prompt: "x" })], []),
      ),
      "y",
      /declared twice/,
    );
  });

  test("problems: a cycle, an edge to a node that is gone, a system node without its system", () => {
    const cyc = problemsOf(
      canvas(
        [n("a", "agent", { model: "m", prompt: "x" }), n("b", "agent", { model: "m", prompt: "y" })],
        [
          ["a", "b"],
          ["b", "a"],
        ],
      ),
    );
    hasProblem(cyc, "canvas", /cycle/);
    const gone = problemsOf(canvas([n("a", "agent", { model: "m", prompt: "x" })], [["a", "ghost"]]));
    hasProblem(gone, "e1", /does not exist/);
    hasProblem(problemsOf(canvas([n("sub", "system", { with: {} })], [])), "sub", /properties\.system/);
  });

  test("a system node becomes a step that uses it, with its inputs converted", () => {
    const sys = compiled(
      canvas([n("q", "input"), n("sub", "system", { system: "summarize", with: { text: "{{q}}" } })], [["q", "sub"]]),
    );
    assert.deepEqual(sys.run.steps, [{ id: "sub", uses: "summarize", with: { text: "${inputs.q}" }, dependsOn: [] }]);
  });

  test("the default prompt: the label, the description, then every connected value", () => {
    const c = canvas(
      [
        n("topic", "input", { name: "subject" }, "Topic"),
        n("research", "agent", { model: "m", prompt: "r {{subject}}" }, "Research"),
        n("sum", "agent", { model: "m", description: "Keep it under 100 words." }, "Summarize the findings"),
        n("blank", "agent", { model: "m", prompt: "   " }, "Shout"),
      ],
      [
        ["topic", "sum"],
        ["research", "sum"],
        ["topic", "blank"],
      ],
    );
    const sys = compiled(c);
    const by = Object.fromEntries((sys.run.steps as any[]).map((s) => [s.id, s]));
    assert.equal(
      by.sum.with.prompt,
      "Summarize the findings\nKeep it under 100 words.\n\nTopic:\n${inputs.subject}\n\nResearch:\n${steps.research.output}",
    );
    assert.deepEqual(by.sum.dependsOn, ["research"]);
    assert.equal(by.blank.with.prompt, "Shout\n\nTopic:\n${inputs.subject}", "a blank prompt is no prompt");
  });
});

describe("policyProblems", () => {
  const plan = (...steps: Array<{ id: string; uses: string; with: Record<string, unknown> }>) => ({
    id: "s",
    run: { kind: "plan", steps: steps.map((s) => ({ ...s, dependsOn: [] })) },
  });
  const none: DeployPolicy = {
    allowCommands: [],
    allowHosts: [],
    resolve: async () => assert.fail("no lookup expected"),
  };
  const answering =
    (address: string, seen: string[] = []): DeployPolicy["resolve"] =>
    async (host) => {
      seen.push(host);
      return [{ address, family: address.includes(":") ? 6 : 4 }];
    };

  test("a command whose program is not allowed is named by its step; an allowed one passes", async () => {
    const sys = plan({ id: "shell", uses: "command", with: { argv: ["bash", "-c", "rm -rf ~"] } });
    const p = await policyProblems(sys, none);
    assert.equal(p.length, 1);
    assert.match(p[0]!, /^step shell: the program "bash" is not in the builder's allowCommands \(none\)/);
    assert.deepEqual(await policyProblems(sys, { ...none, allowCommands: ["bash"] }), []);
    assert.match(
      (await policyProblems(sys, { ...none, allowCommands: ["jq", "python3"] }))[0]!,
      /allowCommands \(jq, python3\)/,
    );
    // By path: a listed path is that path; a listed name also covers that program by path.
    assert.deepEqual(
      await policyProblems(plan({ id: "j", uses: "command", with: { argv: ["/usr/bin/jq", "."] } }), {
        ...none,
        allowCommands: ["/usr/bin/jq"],
      }),
      [],
    );
    assert.equal(
      (
        await policyProblems(plan({ id: "j", uses: "command", with: { argv: ["jq", "."] } }), {
          ...none,
          allowCommands: ["/usr/bin/jq"],
        })
      ).length,
      1,
    );
    // No argv at all is no program.
    assert.match((await policyProblems(plan({ id: "e", uses: "command", with: {} }), none))[0]!, /program ""/);
  });

  test("a command built by chat may not choose its working directory", async () => {
    const p = await policyProblems(plan({ id: "c", uses: "command", with: { argv: ["jq"], cwd: "/etc" } }), {
      ...none,
      allowCommands: ["jq"],
    });
    assert.deepEqual(p, ["step c: a command built by chat runs in its run directory; remove cwd"]);
  });

  test("a system node naming the `command` kind is checked like a command node (the policy reads the compiled steps)", async () => {
    const c = canvas([n("sneaky", "system", { system: "command", with: { argv: ["sh", "-c", "id"] } })], []);
    const sys = compiled(c);
    const p = await policyProblems(sys, none);
    assert.match(p[0] ?? "", /^step sneaky: the program "sh"/);
  });

  test("a webhook to a loopback address is refused unless allowHosts lists it", async () => {
    const sys = plan({ id: "hook", uses: "webhook", with: { url: "http://127.0.0.1/x" } });
    const p = await policyProblems(sys, none);
    assert.equal(p.length, 1);
    assert.match(
      p[0]!,
      /^step hook: the webhook URL is refused: loopback address 127\.0\.0\.1 is not allowed; the operator can allow it under the builder's allowHosts/,
    );
    assert.deepEqual(await policyProblems(sys, { ...none, allowHosts: ["127.0.0.1"] }), []);
    assert.deepEqual(await policyProblems(sys, { ...none, allowHosts: ["127.0.0.0/8"] }), []);
    assert.equal(
      (await policyProblems(sys, { ...none, allowHosts: ["10.0.0.0/8"] })).length,
      1,
      "another range does not help",
    );
  });

  test("other spellings of private addresses are refused too (decimal, IPv4-mapped IPv6, metadata)", async () => {
    for (const url of [
      "http://2130706433/x",
      "http://[::ffff:127.0.0.1]/x",
      "http://169.254.169.254/latest/meta-data",
      "http://[::1]:8080/",
      "http://10.1.2.3/x",
    ]) {
      const p = await policyProblems(plan({ id: "h", uses: "webhook", with: { url } }), none);
      assert.equal(p.length, 1, `${url}: ${JSON.stringify(p)}`);
    }
    assert.match(
      (await policyProblems(plan({ id: "h", uses: "webhook", with: { url: "file:///etc/passwd" } }), none))[0]!,
      /scheme file: is not allowed/,
    );
  });

  test("a hostname is judged by what it resolves to (the resolver is injected)", async () => {
    const sys = plan({ id: "hook", uses: "webhook", with: { url: "https://example.com/api?q=${inputs.q}" } });
    const seen: string[] = [];
    assert.deepEqual(await policyProblems(sys, { ...none, resolve: answering("93.184.216.34", seen) }), []);
    assert.deepEqual(seen, ["example.com"]);
    const p = await policyProblems(sys, { ...none, resolve: answering("10.0.0.1") });
    assert.deepEqual(p, [
      "step hook: the webhook URL is refused: example.com resolves to a private address 10.0.0.1; the operator can allow it under the builder's allowHosts",
    ]);
    // One private answer among public ones is enough (DNS rebinding).
    const mixed = await policyProblems(sys, {
      ...none,
      resolve: async () => [
        { address: "93.184.216.34", family: 4 },
        { address: "192.168.1.5", family: 4 },
      ],
    });
    assert.equal(mixed.length, 1);
    // A host listed by name may resolve to anything, and is not looked up.
    assert.deepEqual(await policyProblems(sys, { ...none, allowHosts: ["example.com"] }), []);
    assert.deepEqual(await policyProblems(sys, { ...none, allowHosts: ["*.com"] }), []);
    // A name that does not resolve is a problem, named.
    const failing = await policyProblems(sys, {
      ...none,
      resolve: async () => Promise.reject(new Error("getaddrinfo ENOTFOUND example.com")),
    });
    assert.match(failing[0] ?? "", /^step hook: the webhook URL is refused: getaddrinfo ENOTFOUND/);
  });

  test("mcp: a stdio server's program is checked; an HTTP server's URL is checked", async () => {
    const stdio = plan({
      id: "tool",
      uses: "mcp",
      with: { server: { transport: "stdio", command: "/opt/evil/server", args: [] }, tool: "t" },
    });
    const p = await policyProblems(stdio, { ...none, allowCommands: ["node"] });
    assert.equal(p.length, 1);
    assert.match(
      p[0]!,
      /^step tool: the MCP server program "\/opt\/evil\/server" is not in the builder's allowCommands \(node\)/,
    );
    assert.deepEqual(await policyProblems(stdio, { ...none, allowCommands: ["/opt/evil/server"] }), []);

    const http = plan({
      id: "remote",
      uses: "mcp",
      with: { server: { transport: "http", url: "http://192.168.0.10:3000/mcp" }, tool: "t" },
    });
    assert.match(
      (await policyProblems(http, none))[0] ?? "",
      /^step remote: the MCP server URL is refused: private address 192\.168\.0\.10/,
    );
    assert.deepEqual(await policyProblems(http, { ...none, allowHosts: ["192.168.0.0/16"] }), []);
  });

  test("model steps and systems used by id are not the policy's business; every problem is listed", async () => {
    const sys = plan(
      { id: "m", uses: "model", with: { model: "x", prompt: "y" } },
      { id: "sub", uses: "other-system", with: {} },
      { id: "c1", uses: "command", with: { argv: ["curl"] } },
      { id: "w1", uses: "webhook", with: { url: "http://127.0.0.1:9/" } },
    );
    const p = await policyProblems(sys, none);
    assert.deepEqual(
      p.map((x) => x.split(":")[0]),
      ["step c1", "step w1"],
    );
  });
});

describe("CONFIGURE", () => {
  const c = contentPipeline();

  test("changesFromWords: common phrasings", () => {
    assert.deepEqual(changesFromWords("always ask before running content", c), [{ path: "confirm", value: "always" }]);
    assert.deepEqual(changesFromWords("Always confirm first", c), [{ path: "confirm", value: "always" }]);
    assert.deepEqual(changesFromWords("run it without asking", c), [{ path: "confirm", value: "never" }]);
    assert.deepEqual(changesFromWords("disable it", c), [{ path: "enabled", value: false }]);
    assert.deepEqual(changesFromWords("enable it again", c), [{ path: "enabled", value: true }]);
    assert.deepEqual(changesFromWords("set the default tone to formal", c), [
      { path: "defaults.tone", value: "formal" },
    ]);
    assert.deepEqual(changesFromWords("Set the default value of the Tone to 'formal'.", c), [
      { path: "defaults.tone", value: "formal" },
    ]);
    assert.deepEqual(changesFromWords("tone defaults to formal", c), [{ path: "defaults.tone", value: "formal" }]);
    assert.deepEqual(changesFromWords("deploy it", c), [{ path: "deployed", value: true }]);
    assert.deepEqual(changesFromWords("undeploy it", c), [{ path: "deployed", value: false }]);
    assert.deepEqual(changesFromWords("deploy it, always ask first and make the default topic to tides", c), [
      { path: "deployed", value: true },
      { path: "confirm", value: "always" },
      { path: "defaults.topic", value: "tides" },
    ]);
    assert.deepEqual(changesFromWords("make it shorter", c), [], "not a setting: left to the model");
    assert.deepEqual(changesFromWords("set the default colour to red", c), [], "no such input");
  });

  test("parseChanges: valid changes are taken (a fenced reply too)", () => {
    const reply =
      '```json\n{"changes":[{"path":"confirm","value":"never"},{"path":"defaults.tone","value":"formal"},{"path":"model.writer","value":"m3"},{"path":"examples","value":["write about tides"]},{"path":"deployed","value":true}]}\n```';
    assert.deepEqual(parseChanges(reply, c), {
      changes: [
        { path: "confirm", value: "never" },
        { path: "defaults.tone", value: "formal" },
        { path: "model.writer", value: "m3" },
        { path: "examples", value: ["write about tides"] },
        { path: "deployed", value: true },
      ],
    });
    assert.deepEqual(parseChanges('{"changes":[]}', c), { changes: [] });
  });

  test("parseChanges: an unknown input, node or path, or a bad value, is refused with a message", () => {
    const bad = parseChanges(
      JSON.stringify({
        changes: [
          { path: "defaults.colour", value: "red" },
          { path: "model.ghost", value: "m1" },
          { path: "model.topic", value: "m1" },
          { path: "retries", value: 3 },
          { path: "confirm", value: "sometimes" },
          { path: "enabled", value: "yes" },
          { path: "model.writer", value: "" },
          { value: 1 },
        ],
      }),
      c,
    );
    assert.ok("errors" in bad, JSON.stringify(bad));
    assert.deepEqual(bad.errors, [
      'changes[0]: no input "colour" (inputs: topic, tone)',
      'changes[1]: no agent node "ghost"',
      'changes[2]: no agent node "topic"',
      'changes[3]: unknown setting "retries"',
      "changes[4]: confirm is auto, always or never",
      "changes[5]: enabled is true or false",
      "changes[6]: a model is a model id",
      "changes[7]: no path",
    ]);
    const prose = parseChanges("I would make it formal.", c);
    assert.ok("errors" in prose);
    assert.match(prose.errors[0]!, /no \{"changes": \[\.\.\.\]\} object/);
  });

  test("withChanges leaves the canvas it was given as it was", () => {
    const before = structuredClone(c);
    const next = withChanges(c, [
      { path: "defaults.tone", value: "formal" },
      { path: "model.writer", value: "m9" },
      { path: "confirm", value: "always" },
    ]);
    assert.deepEqual(c, before);
    assert.equal(next.settings.defaults?.tone, "formal");
    assert.equal(next.nodes.find((x) => x.id === "writer")!.properties.model, "m9");
  });

  test("systemDiff: a changed default is one - line and one + line", () => {
    const diff = systemDiff(c, [{ path: "defaults.tone", value: "formal" }]);
    assert.match(diff, /^```diff\n/);
    assert.match(diff, /\n```$/);
    const lines = diff.split("\n");
    assert.deepEqual(
      lines.filter((l) => /^[-+] /.test(l) || /^[-+]\s/.test(l)),
      ["-      default: casual", "+      default: formal"],
    );
    assert.ok(
      lines.some((l) => l.startsWith("@@")),
      "a hunk header",
    );
    // A model change shows in the step; confirm in its own line.
    const more = systemDiff(c, [
      { path: "model.writer", value: "m9" },
      { path: "confirm", value: "always" },
    ]);
    assert.match(more, /\n-confirm: auto\n\+confirm: always\n/);
    assert.match(more, /\n-\s+model: m2\n\+\s+model: m9\n/);
  });

  test("systemDiff of a canvas that does not compile lists the changes instead", () => {
    const broken = canvas([n("a", "agent", { prompt: "x" })], []);
    assert.equal(systemDiff(broken, [{ path: "confirm", value: "always" }]), '- `confirm` → `"always"`');
  });
});

/** Regressions of what a review found wrong (a spaced `=`, a trailing word, a default outside its enum, a program by path). */
describe("configure and policy regressions", () => {
  test("changesFromWords: `default for the tone = formal` (a spaced `=`) is read", () => {
    assert.deepEqual(changesFromWords("make the default for the tone = formal", contentPipeline()), [
      { path: "defaults.tone", value: "formal" },
    ]);
  });

  test("changesFromWords: a trailing word is not part of the value", () => {
    assert.deepEqual(changesFromWords("set the default tone to formal please", contentPipeline()), [
      { path: "defaults.tone", value: "formal" },
    ]);
  });

  test("parseChanges: a default outside the input's enum is refused", () => {
    const r = parseChanges('{"changes":[{"path":"defaults.tone","value":"shouty"}]}', contentPipeline());
    assert.ok("errors" in r, JSON.stringify(r));
  });

  test("policy: an allowCommands name does not allow any program of that name at any path", async () => {
    const sys = {
      run: { kind: "plan", steps: [{ id: "c", uses: "command", with: { argv: ["./node", "x.js"] }, dependsOn: [] }] },
    };
    assert.equal((await policyProblems(sys, { allowCommands: ["node"], allowHosts: [] })).length, 1);
  });
});
