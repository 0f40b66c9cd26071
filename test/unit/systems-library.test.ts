/**
 * Loading and checking the systems library (src/workflows/systems/library.ts): systems from the config's
 * `systems:` list and one YAML file per system in a directory (a file's id defaults to its name),
 * every problem found at start-up naming where it is (`config` or the file's path) and the
 * offending key, a system with a problem left out while the others load, and side effects
 * inferred when not configured.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { loadSystems, type LibraryProblem, type LoadOptions } from "../../src/workflows/systems/library.js";
import { MAX_SYSTEM_FILE_BYTES } from "../../src/workflows/systems/system-files.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-library-"));
after(() => rmSync(root, { recursive: true, force: true }));

const MODELS: LoadOptions["models"] = new Map([
  ["m", { router: false }],
  ["big", { router: false }],
  ["router-model", { router: true }],
]);

let dirs = 0;
/** A fresh systems directory holding `files` (name → text). */
function dirWith(files: Record<string, string>): string {
  const dir = path.join(root, `systems-${dirs++}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

/** Every problem: the config's (`problems`) and those of the files left out (`library.leftOut`). */
async function load(configSystems: unknown[], dir?: string) {
  const res = await loadSystems({ configSystems, dir, models: MODELS });
  return { library: res.library, problems: [...res.problems, ...res.library.leftOut.flatMap((l) => l.problems)] };
}

const cmd = (id: string, over: Record<string, unknown> = {}) => ({
  id,
  run: { kind: "command", argv: ["/bin/echo", "hi"] },
  ...over,
});

/** The one problem at `key` (fails listing them all when there is none or several). */
function problemAt(problems: LibraryProblem[], key: string): LibraryProblem {
  const found = problems.filter((p) => p.key === key);
  assert.equal(found.length, 1, `expected one problem at ${key}, got:\n${JSON.stringify(problems, null, 2)}`);
  return found[0]!;
}

describe("where systems come from", () => {
  test("the config's list and one file per system; a file's id defaults to its name", async () => {
    const dir = dirWith({
      "from-yaml.yaml": "description: a yaml system\nrun:\n  kind: command\n  argv: [/bin/echo, yaml]\n",
      "other-name.yml": "id: explicit-id\nrun:\n  kind: model\n  model: m\n  prompt: hello\n",
      "as-json.json": JSON.stringify({ run: { kind: "webhook", url: "http://127.0.0.1:9/hook" } }),
      "README.md": "not a system: ignored",
      "notes.txt": "ignored too",
    });
    mkdirSync(path.join(dir, "folder.yaml")); // a directory with a system-like name is skipped
    const { library, problems } = await load([cmd("from-config")], dir);
    assert.deepEqual(problems, []);
    assert.deepEqual(library.systems.map((s) => s.id).sort(), ["as-json", "explicit-id", "from-config", "from-yaml"]);
    assert.equal(library.get("from-config")!.source, "config");
    assert.equal(library.get("from-yaml")!.source, path.join(dir, "from-yaml.yaml"));
    assert.equal(library.get("from-yaml")!.description, "a yaml system");
    assert.equal(library.get("explicit-id")!.source, path.join(dir, "other-name.yml"));
    assert.equal(library.get("other-name"), undefined);
    // Defaults filled in: name, inputs, confirm, the kind's settings.
    const s = library.get("from-yaml")!;
    assert.equal(s.name, "from-yaml");
    assert.deepEqual(s.inputs, { type: "object", properties: {} });
    assert.equal(s.confirm, "auto");
    assert.equal(s.run.kind === "command" && s.run.timeoutSeconds, 300);
  });

  test("a missing directory is fine; no directory at all is fine", async () => {
    assert.deepEqual((await load([cmd("a")], path.join(root, "no-such-dir"))).problems, []);
    const { library, problems } = await load([cmd("a")]);
    assert.deepEqual(problems, []);
    assert.ok(library.get("a"));
  });

  test("a file that is not a mapping, or does not parse, is a problem of that file", async () => {
    const dir = dirWith({
      "a-list.yaml": "- one\n- two\n",
      "a-scalar.yaml": "just text\n",
      "empty.yaml": "",
      "broken.yaml": "run: {kind: command, argv: [unclosed\n",
      "good.yaml": "run: {kind: command, argv: [/bin/true]}\n",
    });
    const { library, problems } = await load([], dir);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["good"],
    );
    for (const name of ["a-list.yaml", "a-scalar.yaml", "empty.yaml"]) {
      const p = problems.find((x) => x.where === path.join(dir, name));
      assert.ok(p, `no problem for ${name}: ${JSON.stringify(problems)}`);
      assert.equal(p.key, "(top)");
      assert.match(p.message, /one mapping/);
    }
    const broken = problems.find((x) => x.where === path.join(dir, "broken.yaml"));
    assert.ok(broken);
    assert.equal(broken.key, "(file)");
    assert.match(broken.message, /not valid YAML/);
    assert.equal(problems.length, 4);
  });

  test("a problem in a file names the file and a key without the config's prefix", async () => {
    const dir = dirWith({
      "plan.yaml": [
        "run:",
        "  kind: plan",
        "  steps:",
        "    - {id: a, uses: command, with: {argv: [/bin/true]}}",
        "    - {id: b, uses: command, with: {argv: [/bin/true]}, dependsOn: [nope]}",
      ].join("\n"),
    });
    const { library, problems } = await load([], dir);
    assert.equal(library.get("plan"), undefined);
    const p = problemAt(problems, "run.steps[1].dependsOn");
    assert.equal(p.where, path.join(dir, "plan.yaml"));
    assert.match(p.message, /unknown step "nope"/);
  });
});

describe("a bad file leaves only itself out", () => {
  test("the config's problems stop the start; a file's problems only leave that file out, named", async () => {
    const dir = dirWith({
      "good.yaml": "run: {kind: command, argv: [/bin/true]}\n",
      "bad.yaml": "run: {kind: command, argv: [/bin/echo, '${inputs.nope}']}\n",
      "broken.yaml": "run: {kind: command, argv: [unclosed\n",
    });
    const res = await loadSystems({ configSystems: [cmd("from-config")], dir, models: MODELS });
    assert.deepEqual(res.problems, [], "nothing that stops a start");
    assert.deepEqual(res.library.systems.map((s) => s.id).sort(), ["from-config", "good"]);
    assert.deepEqual(
      res.library.leftOut.map((l) => [path.basename(l.file), l.id ?? null, l.problems.map((p) => p.key)]),
      [
        ["bad.yaml", "bad", ["run.argv[1]"]],
        ["broken.yaml", null, ["(file)"]],
      ],
    );
    // A problem of the config's own systems is still the caller's to refuse.
    const strict = await loadSystems({ configSystems: [cmd("Bad Id")], dir, models: MODELS });
    assert.equal(strict.problems.length, 1);
    assert.equal(strict.problems[0]!.where, "config");
  });

  test("files in a loop are each named; a reload keeps the left-out list", async () => {
    const dir = dirWith({
      "a.yaml": "run: {kind: plan, steps: [{id: s, uses: b}]}\n",
      "b.yaml": "run: {kind: plan, steps: [{id: s, uses: a}]}\n",
      "ok.yaml": "run: {kind: command, argv: [/bin/true]}\n",
    });
    const res = await loadSystems({ configSystems: [], dir, models: MODELS });
    assert.deepEqual(res.problems, []);
    assert.deepEqual(res.library.leftOut.map((l) => l.id).sort(), ["a", "b"]);
    const { library: empty } = await loadSystems({ configSystems: [], models: MODELS });
    empty.replace(res.library);
    assert.deepEqual(empty.leftOut.map((l) => l.id).sort(), ["a", "b"]);
    assert.deepEqual(
      empty.systems.map((s) => s.id),
      ["ok"],
    );
  });

  test("a file larger than the cap is refused at once, with its size and the limit", async () => {
    // 64 MiB of keys never finished validating: the size is checked before a byte is read.
    const dir = dirWith({ "ok.yaml": "run: {kind: command, argv: [/bin/true]}\n" });
    const big = path.join(dir, "huge.yaml");
    writeFileSync(big, "");
    truncateSync(big, 64 * 1024 * 1024);
    const over = path.join(dir, "just-over.yaml");
    writeFileSync(over, `# ${"x".repeat(MAX_SYSTEM_FILE_BYTES)}\nrun: {kind: command, argv: [/bin/true]}\n`);
    const t0 = performance.now();
    const res = await loadSystems({ configSystems: [], dir, models: MODELS });
    assert.ok(performance.now() - t0 < 2000, `took ${performance.now() - t0} ms`);
    assert.deepEqual(res.problems, []);
    assert.deepEqual(
      res.library.systems.map((s) => s.id),
      ["ok"],
    );
    const huge = res.library.leftOut.find((l) => l.file === big);
    assert.ok(huge, JSON.stringify(res.library.leftOut));
    assert.match(huge.problems[0]!.message, /67108864 bytes \(64 MiB\).*at most 1048576 bytes \(1 MiB\)/);
    const justOver = res.library.leftOut.find((l) => l.file === over);
    assert.match(justOver!.problems[0]!.message, /at most 1048576 bytes/);
  });

  test("a file that is not UTF-8 is a problem naming it, not U+FFFD", async () => {
    const dir = dirWith({});
    const file = path.join(dir, "latin1.yaml");
    writeFileSync(
      file,
      Buffer.concat([
        Buffer.from("description: caf"),
        Buffer.from([0xe9]),
        Buffer.from("\nrun: {kind: command, argv: [/bin/true]}\n"),
      ]),
    );
    const res = await loadSystems({ configSystems: [], dir, models: MODELS });
    assert.deepEqual(res.library.systems, []);
    assert.equal(res.library.leftOut.length, 1);
    assert.equal(res.library.leftOut[0]!.file, file);
    assert.equal(res.library.leftOut[0]!.problems[0]!.key, "(file)");
    assert.match(res.library.leftOut[0]!.problems[0]!.message, /not valid UTF-8/);
  });
});

describe("ids", () => {
  test("an id used by the config and by a file: the file's is refused, naming both", async () => {
    const dir = dirWith({ "dup.yaml": "run: {kind: command, argv: [/bin/false]}\n" });
    const { library, problems } = await load([cmd("dup")], dir);
    const p = problemAt(problems, "id");
    assert.equal(p.where, path.join(dir, "dup.yaml"));
    assert.match(p.message, /"dup" is already used \(config\)/);
    assert.equal(library.get("dup")!.source, "config");
  });

  test("an id used twice in the config", async () => {
    const { library, problems } = await load([cmd("x"), cmd("y"), cmd("x")]);
    assert.match(problemAt(problems, "systems[2].id").message, /already used/);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["x", "y"],
    );
  });

  test("a bad id (upper case, spaces, too long, a file name that is not an id)", async () => {
    const dir = dirWith({ "Bad Name.yaml": "run: {kind: command, argv: [/bin/true]}\n" });
    const { library, problems } = await load(
      [cmd("Upper"), cmd("has space"), cmd("x".repeat(65)), cmd("-dash"), cmd("ok_id-1")],
      dir,
    );
    for (const i of [0, 1, 2, 3]) assert.match(problemAt(problems, `systems[${i}].id`).message, /lower-case letters/);
    const file = problems.find((p) => p.where === path.join(dir, "Bad Name.yaml"));
    assert.equal(file?.key, "id");
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["ok_id-1"],
    );
  });
});

describe("shape and kinds", () => {
  test("an unknown kind names run.kind", async () => {
    const { library, problems } = await load([cmd("fine"), { id: "odd", run: { kind: "teleport", where: "mars" } }]);
    problemAt(problems, "systems[1].run.kind");
    assert.equal(library.get("odd"), undefined);
    assert.ok(library.get("fine"));
  });

  test("an unknown key is refused (strict objects)", async () => {
    const { problems } = await load([{ ...cmd("x"), colour: "blue" }]);
    assert.equal(problems.length, 1);
    assert.equal(problems[0]!.where, "config");
    assert.match(problems[0]!.key, /^systems\[0\]/);
  });

  test("a webhook URL with an input in the host, scheme or port", async () => {
    const inputs = { type: "object", properties: { h: { type: "string" } } };
    const { library, problems } = await load([
      { id: "host", inputs, run: { kind: "webhook", url: "http://${inputs.h}/x" } },
      { id: "port", inputs, run: { kind: "webhook", url: "http://127.0.0.1:${inputs.h}/x" } },
      { id: "ok", inputs, run: { kind: "webhook", url: "http://127.0.0.1:8080/items/${inputs.h}?q=${inputs.h}" } },
      { id: "ftp", run: { kind: "webhook", url: "ftp://127.0.0.1/x" } },
    ]);
    assert.match(problemAt(problems, "systems[0].run.url").message, /never in the scheme, host or port/);
    assert.match(problemAt(problems, "systems[1].run.url").message, /never in the scheme, host or port/);
    assert.match(problemAt(problems, "systems[3].run.url").message, /http or https/);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["ok"],
    );
  });

  test("a command with an input in argv[0]", async () => {
    const inputs = { type: "object", properties: { prog: { type: "string" } } };
    const { library, problems } = await load([
      { id: "prog", inputs, run: { kind: "command", argv: ["${inputs.prog}", "x"] } },
      { id: "part", inputs, run: { kind: "command", argv: ["/usr/bin/${inputs.prog}"] } },
      { id: "empty", run: { kind: "command", argv: [] } },
    ]);
    assert.match(problemAt(problems, "systems[0].run.argv").message, /argv\[0\] is the program/);
    assert.match(problemAt(problems, "systems[1].run.argv").message, /argv\[0\] is the program/);
    assert.match(problemAt(problems, "systems[2].run.argv").message, /at least the program/);
    assert.deepEqual(library.systems, []);
  });

  test("a model that is not configured, or is a router", async () => {
    const { library, problems } = await load([
      { id: "unknown", run: { kind: "model", model: "nope", prompt: "hi" } },
      { id: "router", run: { kind: "model", model: "router-model", prompt: "hi" } },
      {
        id: "steps",
        run: {
          kind: "plan",
          steps: [
            { id: "a", uses: "model", with: { model: "m", prompt: "fine" } },
            { id: "b", uses: "model", with: { model: "router-model", prompt: "no" } },
            { id: "c", uses: "model", with: { model: "ghost", prompt: "no" } },
          ],
        },
      },
      { id: "good", run: { kind: "model", model: "big", prompt: "hi" } },
    ]);
    assert.match(
      problemAt(problems, "systems[0].run.model").message,
      /no configured model "nope" \(models: m, big, router-model\)/,
    );
    assert.match(problemAt(problems, "systems[1].run.model").message, /is a router model/);
    assert.match(problemAt(problems, "systems[2].run.steps[1].with.model").message, /is a router model/);
    assert.match(problemAt(problems, "systems[2].run.steps[2].with.model").message, /no configured model "ghost"/);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["good"],
    );
  });
});

describe("inputs", () => {
  test("an input schema that is not a valid JSON Schema of an object", async () => {
    const { library, problems } = await load([
      cmd("typo", { inputs: { type: "object", properties: { x: { type: "strng" } } } }),
      cmd("array", { inputs: { type: "array", items: { type: "string" } } }),
      cmd("req", { inputs: { type: "object", properties: { a: { type: "string" } }, required: ["b"] } }),
      cmd("bad-keyword", { inputs: { type: "object", properties: { a: { type: "string", minLength: "three" } } } }),
      cmd("good", { inputs: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } }),
    ]);
    assert.match(problemAt(problems, "systems[0].inputs").message, /unknown type "strng"/);
    assert.match(problemAt(problems, "systems[1].inputs").message, /must describe an object/);
    assert.match(problemAt(problems, "systems[2].inputs").message, /"b", not in properties/);
    assert.match(problemAt(problems, "systems[3].inputs").message, /not a valid JSON Schema/);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["good"],
    );
    assert.deepEqual(library.get("good")!.inputs.required, ["a"]);
  });

  test("`fromTool` only on an mcp system", async () => {
    const { library, problems } = await load([cmd("c", { inputs: "fromTool" })]);
    assert.match(problemAt(problems, "systems[0].inputs").message, /only for systems with run\.kind mcp/);
    assert.equal(library.get("c"), undefined);
  });

  test("`fromTool` takes the tool's schema, and its annotations decide side effects", async () => {
    const server = { transport: "stdio", command: "/bin/true" };
    const asked: string[] = [];
    const { library, problems } = await loadSystems({
      configSystems: [
        { id: "reader", inputs: "fromTool", run: { kind: "mcp", server, tool: "read" } },
        { id: "writer", run: { kind: "mcp", server, tool: "write" } },
        { id: "broken", inputs: "fromTool", run: { kind: "mcp", server, tool: "missing" } },
      ],
      models: MODELS,
      describeTool: async (_server, tool) => {
        asked.push(tool);
        if (tool === "missing") throw new Error("no such tool");
        return { inputSchema: { type: "object", properties: { path: { type: "string" } } }, readOnly: tool === "read" };
      },
    });
    assert.deepEqual(asked.sort(), ["missing", "read", "write"]);
    assert.match(
      problemAt(problems, "systems[2].inputs").message,
      /cannot read the input schema of MCP tool "missing": no such tool/,
    );
    assert.deepEqual(Object.keys(library.get("reader")!.inputs.properties), ["path"]);
    assert.equal(library.get("reader")!.sideEffects, false);
    assert.equal(library.get("writer")!.sideEffects, true);
  });

  test("${inputs.x} must name a declared input; the key is the exact string's", async () => {
    const inputs = { type: "object", properties: { name: { type: "string" } } };
    const { library, problems } = await load([
      { id: "argv", inputs, run: { kind: "command", argv: ["/bin/echo", "${inputs.name}", "${inputs.nmae}"] } },
      { id: "env", run: { kind: "command", argv: ["/bin/echo"], setEnv: { X: "${inputs.x}" } } },
      {
        id: "body",
        inputs,
        run: {
          kind: "webhook",
          url: "http://127.0.0.1:9/h",
          body: { deep: { list: ["ok ${inputs.name}", "${inputs.other}"] } },
        },
      },
      { id: "fine", inputs, run: { kind: "command", argv: ["/bin/echo", "hello ${inputs.name}"] } },
    ]);
    assert.match(
      problemAt(problems, "systems[0].run.argv[2]").message,
      /"nmae" is not a declared input \(declared: name\)/,
    );
    assert.match(
      problemAt(problems, "systems[1].run.setEnv.X").message,
      /"x" is not a declared input \(declared: none\)/,
    );
    assert.match(problemAt(problems, "systems[2].run.body.deep.list[1]").message, /"other" is not a declared input/);
    assert.equal(problems.length, 3);
    assert.deepEqual(
      library.systems.map((s) => s.id),
      ["fine"],
    );
  });
});

describe("templates", () => {
  test("a malformed template (`${foo}`, an unclosed `${`) names its key", async () => {
    const { library, problems } = await load([
      { id: "foo", run: { kind: "command", argv: ["/bin/echo", "${foo}"] } },
      { id: "unclosed", run: { kind: "command", argv: ["/bin/echo", "${inputs.x"] } },
      { id: "output-of-nothing", run: { kind: "command", argv: ["/bin/echo", "${steps.a}"] } },
    ]);
    assert.match(problemAt(problems, "systems[0].run.argv[1]").message, /\$\{foo\} is not a reference/);
    assert.match(problemAt(problems, "systems[1].run.argv[1]").message, /unclosed/);
    assert.match(problemAt(problems, "systems[2].run.argv[1]").message, /is not a reference/);
    assert.deepEqual(library.systems, []);
  });

  test("`$${` is a literal and loads as written", async () => {
    const { library, problems } = await load([
      { id: "lit", run: { kind: "command", argv: ["/bin/echo", "cost: $${HOME} and $${foo}"] } },
    ]);
    assert.deepEqual(problems, []);
    const s = library.get("lit")!;
    assert.deepEqual(s.run.kind === "command" && s.run.argv, ["/bin/echo", "cost: $${HOME} and $${foo}"]);
  });

  test("${steps.x.output} only in a plan step that depends on x, directly or transitively", async () => {
    const step = (id: string, dependsOn: string[], arg: string) => ({
      id,
      uses: "command",
      dependsOn,
      with: { argv: ["/bin/echo", arg] },
    });
    const { library, problems } = await load([
      {
        id: "p",
        run: {
          kind: "plan",
          steps: [
            step("a", [], "a"),
            step("b", ["a"], "${steps.a.output}"),
            step("c", ["b"], "${steps.a.output.field} ${steps.b.output}"), // a is a transitive dependency: fine
            step("d", [], "${steps.c.output}"), // independent of c
          ],
        },
      },
      { id: "single", run: { kind: "command", argv: ["/bin/echo", "${steps.a.output}"] } },
      { id: "sibling", run: { kind: "plan", steps: [step("x", [], "x"), step("y", [], "${steps.x.output}")] } },
    ]);
    assert.match(
      problemAt(problems, "systems[0].run.steps[3].with.argv[1]").message,
      /does not depend on step "c" \(add it to dependsOn\)/,
    );
    assert.match(problemAt(problems, "systems[1].run.argv[1]").message, /only for plan steps/);
    assert.match(problemAt(problems, "systems[2].run.steps[1].with.argv[1]").message, /does not depend on step "x"/);
    assert.equal(problems.length, 3);
    assert.deepEqual(library.systems, []);
  });

  test("a step id that starts with a digit can be referred to", async () => {
    const { problems } = await load([
      {
        id: "digits",
        run: {
          kind: "plan",
          steps: [
            { id: "1st", uses: "command", with: { argv: ["/bin/echo", "x"] } },
            { id: "2nd", uses: "command", dependsOn: ["1st"], with: { argv: ["/bin/echo", "${steps.1st.output}"] } },
          ],
        },
      },
    ]);
    assert.deepEqual(problems, []);
  });
});

describe("plans", () => {
  const leaf = (id: string, dependsOn: string[] = []) => ({
    id,
    uses: "command",
    dependsOn,
    with: { argv: ["/bin/true"] },
  });

  test("a cycle is refused and named", async () => {
    const { library, problems } = await load([
      { id: "loop", run: { kind: "plan", steps: [leaf("a", ["b"]), leaf("b", ["a"]), leaf("c")] } },
    ]);
    const p = problemAt(problems, "systems[0].run.steps");
    assert.match(p.message, /cycle: a → b → a/);
    assert.equal(library.get("loop"), undefined);
  });

  test("a step depending on itself", async () => {
    const { problems } = await load([{ id: "self", run: { kind: "plan", steps: [leaf("a", ["a"])] } }]);
    assert.match(problemAt(problems, "systems[0].run.steps[0].dependsOn").message, /cannot depend on itself/);
    assert.equal(problems.length, 1, "said once, not again as a cycle");
  });

  test("an unknown dependsOn names the step's key", async () => {
    const { problems } = await load([
      cmd("first"),
      { id: "p", run: { kind: "plan", steps: [leaf("a"), leaf("b", ["a"]), leaf("c", ["b", "zz"])] } },
    ]);
    const p = problemAt(problems, "systems[1].run.steps[2].dependsOn");
    assert.equal(p.where, "config");
    assert.match(p.message, /unknown step "zz" \(steps: a, b, c\)/);
  });

  test("a step id used twice, an unknown output step", async () => {
    const { problems } = await load([{ id: "p", run: { kind: "plan", steps: [leaf("a"), leaf("a")], output: "b" } }]);
    assert.match(problemAt(problems, "systems[0].run.steps[1].id").message, /used twice/);
    assert.match(problemAt(problems, "systems[0].run.output").message, /unknown step "b"/);
  });

  test("a step whose `uses` is neither a kind nor a known system", async () => {
    const { problems } = await load([{ id: "p", run: { kind: "plan", steps: [{ id: "a", uses: "nothing-here" }] } }]);
    assert.match(
      problemAt(problems, "systems[0].run.steps[0].uses").message,
      /"nothing-here" is neither a kind \(webhook, command, mcp, model, approval\) nor a known system/,
    );
  });

  test("a leaf step's `with` is checked as that kind's settings", async () => {
    const { library, problems } = await load([
      {
        id: "p",
        inputs: { type: "object", properties: { h: { type: "string" } } },
        run: {
          kind: "plan",
          steps: [
            { id: "hook", uses: "webhook", with: { method: "POST" } },
            { id: "cmd", uses: "command", with: { argv: ["/bin/true"], timeoutSeconds: -1 } },
            { id: "extra", uses: "model", with: { model: "m", prompt: "hi", colour: "red" } },
            { id: "host", uses: "webhook", with: { url: "http://${inputs.h}/x" } },
          ],
        },
      },
    ]);
    problemAt(problems, "systems[0].run.steps[0].with.url");
    problemAt(problems, "systems[0].run.steps[1].with.timeoutSeconds");
    assert.ok(
      problems.some((p) => p.key.startsWith("systems[0].run.steps[2].with")),
      JSON.stringify(problems),
    );
    assert.match(problemAt(problems, "systems[0].run.steps[3].with.url").message, /never in the scheme, host or port/);
    assert.equal(library.get("p"), undefined);
  });

  test("a valid plan compiles with each leaf's defaults filled in", async () => {
    const { library, problems } = await load([
      {
        id: "p",
        inputs: { type: "object", properties: { q: { type: "string" } } },
        run: {
          kind: "plan",
          maxParallel: 2,
          steps: [
            { id: "get", uses: "webhook", with: { url: "http://127.0.0.1:9/search?q=${inputs.q}" } },
            {
              id: "sum",
              uses: "model",
              dependsOn: ["get"],
              with: { model: "m", prompt: "Summarise ${steps.get.output.text}" },
              retry: 1,
            },
          ],
          output: "get",
        },
      },
    ]);
    assert.deepEqual(problems, []);
    const plan = library.plan("p");
    assert.equal(plan.maxParallel, 2);
    assert.equal(plan.output, "get");
    assert.deepEqual(
      plan.steps.map((s) => [s.id, s.dependsOn, s.retry]),
      [
        ["get", [], 3],
        ["sum", ["get"], 1],
      ],
    );
    const hook = plan.steps[0]!.target;
    assert.equal(hook.kind, "leaf");
    assert.deepEqual(hook.kind === "leaf" && hook.spec, {
      kind: "webhook",
      url: "http://127.0.0.1:9/search?q=${inputs.q}",
      method: "POST",
      headers: {},
      timeoutSeconds: 30,
      maxResponseBytes: 4 * 1024 * 1024,
    });
    assert.equal(library.plan("p"), plan, "compiled once");
    assert.throws(() => library.plan("nope"), /no system nope/);
  });
});

describe("systems that use systems", () => {
  const uses = (id: string, ...others: string[]) => ({
    id,
    run: { kind: "plan", steps: others.map((o, i) => ({ id: `s${i}`, uses: o })) },
  });

  test("a nested system with inputs loads", async () => {
    const { library, problems } = await load([
      {
        id: "greet",
        inputs: { type: "object", properties: { name: { type: "string" } } },
        run: { kind: "command", argv: ["/bin/echo", "${inputs.name}"] },
      },
      {
        id: "outer",
        inputs: { type: "object", properties: { who: { type: "string" } } },
        run: { kind: "plan", steps: [{ id: "g", uses: "greet", with: { name: "${inputs.who}" } }] },
      },
    ]);
    assert.deepEqual(problems, []);
    const t = library.plan("outer").steps[0]!.target;
    assert.deepEqual(t, { kind: "system", system: "greet", with: { name: "${inputs.who}" } });
  });

  test("`with` of a nested system is checked for templates", async () => {
    const { problems } = await load([
      cmd("leaf"),
      { id: "outer", run: { kind: "plan", steps: [{ id: "g", uses: "leaf", with: { name: "${inputs.nope}" } }] } },
    ]);
    assert.match(problemAt(problems, "systems[1].run.steps[0].with.name").message, /"nope" is not a declared input/);
  });

  test("systems that use each other in a loop are refused, every loop", async () => {
    const { library, problems } = await load([
      uses("a", "b"),
      uses("b", "a"),
      uses("c", "d"),
      uses("d", "e"),
      uses("e", "c"),
      uses("selfish", "selfish"),
      cmd("fine"),
      uses("user", "fine"),
    ]);
    const loops = problems.filter((p) => /use each other in a loop/.test(p.message));
    assert.equal(loops.length, 3, JSON.stringify(problems, null, 2));
    assert.match(problemAt(problems, "systems[0].run.steps").message, /a → b → a/);
    assert.match(problemAt(problems, "systems[2].run.steps").message, /c → d → e → c/);
    assert.match(problemAt(problems, "systems[5].run.steps").message, /selfish → selfish/);
    assert.deepEqual(library.systems.map((s) => s.id).sort(), ["fine", "user"]);
  });

  test("a plan using a system that has problems of its own is left out too, through any depth", async () => {
    const dir = dirWith({ "mid.yaml": "run:\n  kind: plan\n  steps:\n    - {id: s0, uses: broken}\n" });
    const { library, problems } = await load(
      [
        { id: "broken", run: { kind: "command", argv: ["/bin/echo", "${inputs.missing}"] } },
        uses("top", "mid"), // top → mid (file) → broken
        uses("fine", "command-ok"),
        cmd("command-ok"),
      ],
      dir,
    );
    problemAt(problems, "systems[0].run.argv[1]");
    const mid = problemAt(problems, "run.steps[0].uses");
    assert.equal(mid.where, path.join(dir, "mid.yaml"));
    assert.match(mid.message, /system "broken" has problems of its own/);
    assert.match(problemAt(problems, "systems[1].run.steps[0].uses").message, /system "mid" has problems of its own/);
    assert.deepEqual(library.systems.map((s) => s.id).sort(), ["command-ok", "fine"]);
  });

  test("a plan using a system refused for its shape is told so", async () => {
    const dir = dirWith({ "shapeless.yaml": "run: {kind: command}\n" });
    const { library, problems } = await load([uses("top", "shapeless"), uses("other", "ghost")], dir);
    problemAt(problems, "run.argv");
    assert.match(
      problemAt(problems, "systems[0].run.steps[0].uses").message,
      /system "shapeless" has problems of its own/,
    );
    assert.match(problemAt(problems, "systems[1].run.steps[0].uses").message, /"ghost" is neither a kind/);
    assert.deepEqual(library.systems, []);
  });

  test("a plan using a system in a loop is left out too", async () => {
    const { library, problems } = await load([uses("a", "b"), uses("b", "a"), uses("top", "a")]);
    assert.match(problemAt(problems, "systems[2].run.steps[0].uses").message, /system "a" has problems of its own/);
    assert.deepEqual(library.systems, []);
  });
});

describe("side effects", () => {
  test("inferred: command and webhook yes, model no, plan yes unless only model steps; a configured value wins", async () => {
    const model = { kind: "model", model: "m", prompt: "hi" };
    const mstep = (id: string) => ({ id, uses: "model", with: { model: "m", prompt: "hi" } });
    const { library, problems } = await load([
      cmd("cmd"),
      { id: "hook", run: { kind: "webhook", url: "http://127.0.0.1:9/x" } },
      { id: "ask", run: model },
      { id: "models-plan", run: { kind: "plan", steps: [mstep("a"), mstep("b")] } },
      {
        id: "mixed-plan",
        run: { kind: "plan", steps: [mstep("a"), { id: "b", uses: "command", with: { argv: ["/bin/true"] } }] },
      },
      // Steps that use systems: the plan has side effects when one of those systems has.
      {
        id: "uses-ask",
        run: { kind: "plan", steps: [{ id: "a", uses: "ask" }, { id: "b", uses: "models-plan" }, mstep("c")] },
      },
      {
        id: "uses-cmd",
        run: {
          kind: "plan",
          steps: [
            { id: "a", uses: "models-plan" },
            { id: "b", uses: "cmd" },
          ],
        },
      },
      { id: "uses-declared-safe", run: { kind: "plan", steps: [{ id: "a", uses: "safe-command" }] } },
      { id: "uses-uses-cmd", run: { kind: "plan", steps: [{ id: "a", uses: "uses-cmd" }] } },
      cmd("safe-command", { sideEffects: false }),
      { id: "risky-model", sideEffects: true, run: model },
      {
        id: "declared-plan",
        sideEffects: false,
        run: { kind: "plan", steps: [{ id: "b", uses: "command", with: { argv: ["/bin/true"] } }] },
      },
      { id: "declared-risky-plan", sideEffects: true, run: { kind: "plan", steps: [mstep("a")] } },
    ]);
    assert.deepEqual(problems, []);
    const effects = Object.fromEntries(library.systems.map((s) => [s.id, s.sideEffects]));
    assert.deepEqual(effects, {
      cmd: true,
      hook: true,
      ask: false,
      "models-plan": false,
      "mixed-plan": true,
      "uses-ask": false,
      "uses-cmd": true,
      "uses-declared-safe": false,
      "uses-uses-cmd": true,
      "safe-command": false,
      "risky-model": true,
      "declared-plan": false,
      "declared-risky-plan": true,
    });
  });
});
