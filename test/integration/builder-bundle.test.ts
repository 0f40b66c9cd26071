/**
 * A system as one file, end to end: a canvas built through the real canvas and sandbox tools, read
 * out over HTTP (`GET /v1/systems/:id/export` on a real bridge) and by `clawbridge systems export`,
 * read back by `clawbridge systems import` into a second, empty data directory — the same canvas
 * and the same files, byte for byte (`${HOME}` kept literally, bytes that are not UTF-8 kept). A
 * second import needs --replace; a hostile archive (`..`, absolute names, links) writes nothing
 * outside the sandbox; a system declared in the config comes back as a system file.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { gunzipSync, gzipSync } from "node:zlib";
import { extract as tarExtract, pack as tarPack } from "tar-stream";
import { parse as parseYaml, stringify } from "yaml";
import { readBundle, BUNDLE_FORMAT } from "../../src/workflows/builder/bundle.js";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { CanvasStore } from "../../src/workflows/builder/canvas-store.js";
import { Sandbox } from "../../src/workflows/builder/sandbox.js";
import { openBuilderRoom } from "../../src/workflows/builder/service.js";
import type { Canvas } from "../../src/wire/canvas.js";
import { openSystemsDb, systemsDbPath } from "../../src/workflows/systems/db.js";
import { cleanup, startTestBridge, tempDir } from "../helpers/bridge.js";
import { walk } from "../helpers/tree.js";

const execFileP = promisify(execFile);
const BIN = path.resolve("bin/clawbridge.js");
const NODE = process.execPath;
/** server.apiKeys entries must be at least 8 characters (src/core/config/schema.ts). */
const KEY = "k-bundle-test";
const SYS = "content";

/** A byte string that is not UTF-8 (a lone 0xff, a NUL, a truncated sequence). */
const BINARY = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0xfe, 0x80, 0xc3, 0x0d, 0x0a, 0x1a, 0x00, 0x7f]);
const NOTES = "# Plan\n\nKeep ${HOME} and $HOME and $(whoami) and `id` and ${inputs.topic} as they are.\n";
const SKILL =
  "---\nname: research\ndescription: Find sources on a topic\n---\n\nSearch for ${TOPIC}; cite each source.\n";
const CONTROL = "\u0000\u0001\u0002 ünïcödé ☃ \r\n\t\u001b[31mred\u001b[0m";

type Picked = Pick<Canvas, "name" | "description" | "nodes" | "edges" | "settings">;
const pick = (c: Canvas): Picked => ({
  name: c.name,
  description: c.description,
  nodes: c.nodes,
  edges: c.edges,
  settings: c.settings,
});

async function canvasOf(dataDir: string, system = SYS): Promise<Canvas | undefined> {
  const db = openSystemsDb(systemsDbPath(dataDir));
  try {
    return await new CanvasStore(sqliteSqlOf(db)).get(system);
  } finally {
    db.close();
  }
}

function filesOf(dataDir: string, system = SYS): Map<string, Buffer> {
  const sb = Sandbox.forSystem(dataDir, system);
  return new Map(sb.files().map((f) => [f.path, sb.readBytes(f.path)]));
}

/** The archive's entries (name → content) and their types, read without the bundle code. */
async function tarEntries(gz: Buffer): Promise<Map<string, { type: string; content: Buffer }>> {
  const out = new Map<string, { type: string; content: Buffer }>();
  const ex = tarExtract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on("entry", (h, stream, next) => {
      const parts: Buffer[] = [];
      stream.on("data", (c: unknown) => parts.push(c as Buffer));
      stream.on("end", () => {
        out.set(h.name, { type: String(h.type), content: Buffer.concat(parts) });
        next();
      });
    });
    ex.on("finish", () => resolve());
    ex.on("error", reject);
  });
  ex.end(gunzipSync(gz));
  await done;
  return out;
}

type Entry = {
  name: string;
  content?: Buffer | string;
  type?: "file" | "symlink" | "link" | "directory";
  linkname?: string;
};

/** A hand-made archive (nothing of src/workflows/builder/bundle.ts is used to make it). */
async function craft(entries: Entry[]): Promise<Buffer> {
  const p = tarPack();
  const chunks: Buffer[] = [];
  p.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    p.on("end", () => resolve());
    p.on("error", reject);
  });
  for (const e of entries) {
    const type = e.type ?? "file";
    if (type === "file")
      p.entry(
        { name: e.name, type, mode: 0o644 },
        typeof e.content === "string" ? Buffer.from(e.content) : (e.content ?? Buffer.alloc(0)),
      );
    else p.entry({ name: e.name, type, linkname: e.linkname, mode: 0o755 });
  }
  p.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

const manifestFor = (system: string, files: string[] = []) =>
  JSON.stringify({
    format: BUNDLE_FORMAT,
    version: 1,
    system,
    createdAt: new Date().toISOString(),
    requiredInputs: [],
    files,
  });

describe("system bundles: export and import", () => {
  let dir: string;
  let dataA: string;
  let dataB: string;
  let cfgA: string;
  let cfgB: string;
  let original: Canvas;
  let originalFiles: Map<string, Buffer>;
  let bundleHttp: string;
  let bundleAskHttp: string;

  const backends = { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } };
  const models = [{ id: "m1", backend: "up" }];
  const ask = {
    id: "ask",
    name: "Ask",
    description: "asks the model",
    keywords: ["ask"],
    inputs: { type: "object", required: ["q"], properties: { q: { type: "string", description: "the question" } } },
    confirm: "never",
    run: { kind: "model", model: "m1", prompt: "Answer: ${inputs.q}", timeoutSeconds: 30 },
  };
  const rawA = () => ({
    dataDir: dataA,
    server: { host: "127.0.0.1", port: 0, apiKeys: [KEY] },
    backends,
    models,
    systems: [ask],
  });

  const cli = async (config: string, ...args: string[]) => {
    try {
      const r = await execFileP(NODE, [BIN, ...args, "--config", config], {
        cwd: dir,
        env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
        timeout: 90_000,
        encoding: "buffer",
        maxBuffer: 64 * 1024 * 1024,
      });
      return { code: 0, stdout: r.stdout, out: r.stdout.toString(), err: r.stderr.toString() };
    } catch (e: any) {
      return { code: e.code as number, stdout: e.stdout as Buffer, out: String(e.stdout), err: String(e.stderr) };
    }
  };

  before(async () => {
    dir = tempDir("cb-bundle-");
    dataA = path.join(dir, "a");
    dataB = path.join(dir, "b");
    cfgA = path.join(dir, "a.yaml");
    cfgB = path.join(dir, "b.yaml");
    writeFileSync(cfgA, stringify({ ...rawA(), server: { host: "127.0.0.1", port: 4097, apiKeys: [KEY] } }));
    // The second data directory knows the same models but declares no system of its own.
    writeFileSync(
      cfgB,
      stringify({ dataDir: dataB, server: { host: "127.0.0.1", port: 4097, apiKeys: [KEY] }, backends, models }),
    );

    // The canvas, through the real tools on data directory A.
    const db = openSystemsDb(systemsDbPath(dataA));
    try {
      const room = openBuilderRoom({ sql: sqliteSqlOf(db), db, dataDir: dataA });
      const t = room.tools;
      await t.createNode(SYS, {
        type: "input",
        id: "topic",
        label: "Topic",
        properties: { type: "string", description: "what to write about" },
      });
      await t.createNode(SYS, {
        type: "input",
        id: "tone",
        label: "Tone",
        properties: { type: "string", enum: ["casual", "formal", "playful"], default: "casual", required: false },
      });
      await t.createNode(SYS, {
        type: "agent",
        id: "research",
        label: "Research",
        properties: { model: "m1", prompt: "Find three facts about {{topic}}." },
        position: { x: 300, y: 0 },
      });
      await t.createNode(SYS, { type: "agent", id: "writer", label: "Writer", properties: { model: "m1" } });
      await t.createNode(SYS, { type: "output", id: "out", label: "Article" });
      await t.connectNodes(SYS, { from: "topic", to: "research" });
      await t.connectNodes(SYS, { from: "research", to: "writer" });
      await t.connectNodes(SYS, { from: "topic", to: "writer" });
      await t.connectNodes(SYS, { from: "tone", to: "writer" });
      await t.connectNodes(SYS, { from: "writer", to: "out" });
      await t.updateProperty(SYS, {
        node: "writer",
        key: "prompt",
        value: "Write about {{topic}} in a {{tone}} tone, using:\n{{research}}",
      });
      await t.updateProperty(SYS, { node: "writer", key: "properties.timeoutSeconds", value: 90 });
      await t.updateProperty(SYS, { node: "research", key: "label", value: "Research the topic" });
      await t.createFile(SYS, ".claude/skills/research/SKILL.md", SKILL);
      await t.createFile(SYS, "notes/plan.md", NOTES);
      await t.createFile(SYS, "notes/control.txt", CONTROL);
      await t.createFile(SYS, "AGENTS.md", "Write plainly.\n");
      Sandbox.forSystem(dataA, SYS).write("assets/logo.bin", BINARY);
      await room.canvases.mutate(SYS, (c) => ({
        ...c,
        name: "Content pipeline",
        description: "researches a topic, then writes about it",
        settings: {
          confirm: "always",
          defaults: { tone: "formal" },
          examples: ["write about tides"],
          keywords: ["article"],
        },
      }));
    } finally {
      db.close();
    }
    original = (await canvasOf(dataA))!;
    originalFiles = filesOf(dataA);
    bundleHttp = path.join(dir, "http.tar.gz");
    bundleAskHttp = path.join(dir, "ask-http.tar.gz");
  });
  after(() => cleanup(dir));

  test("the canvas and files to carry (built through the tools)", () => {
    assert.equal(original.nodes.length, 5);
    assert.equal(original.edges.length, 5);
    assert.deepEqual([...originalFiles.keys()].sort(), [
      ".claude/skills/research/SKILL.md",
      "AGENTS.md",
      "assets/logo.bin",
      "notes/control.txt",
      "notes/plan.md",
    ]);
    assert.equal(originalFiles.get("notes/plan.md")!.toString("utf8"), NOTES, "written literally");
    assert.ok(originalFiles.get("assets/logo.bin")!.equals(BINARY));
  });

  test("GET /v1/systems/:id/export: the bundle with the key; 401 without; 404 OpenAI-shaped for an unknown id", async () => {
    const bridge = await startTestBridge(rawA());
    try {
      const auth = { authorization: `Bearer ${KEY}` };
      const res = await fetch(`${bridge.url}/v1/systems/${SYS}/export`, { headers: auth });
      assert.equal(res.status, 200, await res.clone().text());
      assert.match(res.headers.get("content-type") ?? "", /^application\/gzip/);
      assert.match(
        res.headers.get("content-disposition") ?? "",
        new RegExp(`attachment; filename="${SYS}\\.tar\\.gz"`),
      );
      const data = Buffer.from(await res.arrayBuffer());
      assert.deepEqual([...data.subarray(0, 2)], [0x1f, 0x8b], "gzip magic");
      writeFileSync(bundleHttp, data);

      const noKey = await fetch(`${bridge.url}/v1/systems/${SYS}/export`);
      assert.equal(noKey.status, 401);
      const wrongKey = await fetch(`${bridge.url}/v1/systems/${SYS}/export`, {
        headers: { authorization: "Bearer not-the-key" },
      });
      assert.equal(wrongKey.status, 401);
      assert.equal(typeof ((await wrongKey.json()) as { error?: { message?: unknown } }).error?.message, "string");

      const unknown = await fetch(`${bridge.url}/v1/systems/no-such-system/export`, { headers: auth });
      assert.equal(unknown.status, 404);
      const body = (await unknown.json()) as { error: { message: string; type: string; code: string } };
      assert.equal(body.error.type, "not_found_error");
      assert.equal(body.error.code, "system_not_found");
      assert.match(body.error.message, /no-such-system/);

      // A system of the config file (no canvas, no file): exported from the library.
      const askRes = await fetch(`${bridge.url}/v1/systems/ask/export`, { headers: auth });
      assert.equal(askRes.status, 200, await askRes.clone().text());
      writeFileSync(bundleAskHttp, Buffer.from(await askRes.arrayBuffer()));
    } finally {
      await bridge.close();
    }

    const entries = await tarEntries(readFileSync(bundleHttp));
    assert.deepEqual([...entries.keys()].sort(), [
      `${SYS}/canvas.json`,
      `${SYS}/manifest.json`,
      `${SYS}/sandbox/.claude/skills/research/SKILL.md`,
      `${SYS}/sandbox/AGENTS.md`,
      `${SYS}/sandbox/assets/logo.bin`,
      `${SYS}/sandbox/notes/control.txt`,
      `${SYS}/sandbox/notes/plan.md`,
      `${SYS}/system.yaml`,
    ]);
    const manifest = JSON.parse(entries.get(`${SYS}/manifest.json`)!.content.toString("utf8"));
    assert.equal(manifest.format, BUNDLE_FORMAT);
    assert.equal(manifest.system, SYS);
    assert.deepEqual(manifest.requiredInputs, ["topic"], "tone has a default");
    // The draft compiled: the system the router would run.
    const sys = parseYaml(entries.get(`${SYS}/system.yaml`)!.content.toString("utf8"));
    assert.equal(sys.id, SYS);
    assert.equal(sys.confirm, "always");
    assert.equal(sys.inputs.properties.tone.default, "formal", "the settings' default wins");
    assert.deepEqual(
      sys.run.steps.map((s: { id: string }) => s.id),
      ["research", "writer"],
    );
    assert.equal(
      sys.run.steps[1].with.prompt,
      "Write about ${inputs.topic} in a ${inputs.tone} tone, using:\n${steps.research.output}",
    );
    assert.equal(sys.run.output, "writer");
  });

  test("clawbridge systems import: the same canvas and the same files in an empty data directory", async () => {
    assert.equal(await canvasOf(dataB), undefined);
    const r = await cli(cfgB, "systems", "import", bundleHttp);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`imported ${SYS}: a draft canvas and 5 files`));

    const got = (await canvasOf(dataB))!;
    assert.ok(got, "a canvas was made");
    assert.deepEqual(pick(got), pick(original));
    assert.equal(got.status, "draft", "an import is a draft until deployed");
    const files = filesOf(dataB);
    assert.deepEqual([...files.keys()], [...originalFiles.keys()]);
    for (const [p, content] of originalFiles) assert.ok(files.get(p)!.equals(content), `${p} is byte-identical`);
    assert.equal(
      readFileSync(path.join(dataB, "sandboxes", SYS, "notes", "plan.md"), "utf8"),
      NOTES,
      "${HOME} stays literal on disk",
    );
    assert.equal(existsSync(path.join(dataB, "systems", `${SYS}.yaml`)), false, "a draft is not deployed by an import");
  });

  test("a second import needs --replace; with it, what was there is replaced", async () => {
    const again = await cli(cfgB, "systems", "import", bundleHttp);
    assert.equal(again.code, 1);
    assert.match(again.err, new RegExp(`canvas "${SYS}" exists.*--replace`));
    assert.equal(again.err.trim().split("\n").length, 1, `one line: ${again.err}`);
    assert.doesNotMatch(again.err, /\n\s+at /, "no stack");

    // Change what is there, so a replace has something to undo.
    const db = openSystemsDb(systemsDbPath(dataB));
    try {
      const room = openBuilderRoom({ sql: sqliteSqlOf(db), db, dataDir: dataB });
      await room.tools.createNode(SYS, { type: "agent", id: "extra", label: "Extra", properties: { model: "m1" } });
      await room.tools.createFile(SYS, "stray.txt", "left over");
      await room.tools.createFile(SYS, "notes/plan.md", "changed");
    } finally {
      db.close();
    }
    assert.notDeepEqual(pick((await canvasOf(dataB))!), pick(original));

    const replaced = await cli(cfgB, "systems", "import", bundleHttp, "--replace");
    assert.equal(replaced.code, 0, replaced.err);
    assert.deepEqual(pick((await canvasOf(dataB))!), pick(original));
    const files = filesOf(dataB);
    assert.deepEqual([...files.keys()], [...originalFiles.keys()], "the stray file is gone");
    for (const [p, content] of originalFiles) assert.ok(files.get(p)!.equals(content), `${p} is byte-identical`);
  });

  test("clawbridge systems export on the second data directory gives the same bundle", async () => {
    const fileB = path.join(dir, "from-b.tar.gz");
    const r = await cli(cfgB, "systems", "export", SYS, "-o", fileB);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /wrote .*from-b\.tar\.gz \(\d+ bytes\)/);
    const a = await readBundle(readFileSync(bundleHttp));
    const b = await readBundle(readFileSync(fileB));
    assert.equal(b.system, a.system);
    assert.equal(b.yaml, a.yaml);
    assert.ok(a.canvas && b.canvas);
    assert.deepEqual(pick(b.canvas), pick(a.canvas));
    assert.equal(b.canvas.status, a.canvas.status);
    assert.deepEqual(
      b.files.map((f) => f.path),
      a.files.map((f) => f.path),
    );
    for (const [i, f] of a.files.entries())
      assert.ok(b.files[i]!.content.equals(f.content), `${f.path} is byte-identical`);

    // The manifests differ in createdAt only.
    const ma = JSON.parse(
      (await tarEntries(readFileSync(bundleHttp))).get(`${SYS}/manifest.json`)!.content.toString("utf8"),
    );
    const mb = JSON.parse(
      (await tarEntries(readFileSync(fileB))).get(`${SYS}/manifest.json`)!.content.toString("utf8"),
    );
    assert.ok(Number.isFinite(Date.parse(mb.createdAt)));
    assert.deepEqual({ ...mb, createdAt: 0 }, { ...ma, createdAt: 0 });

    // `-o -` writes the bundle to stdout; the default is <id>.tar.gz in the working directory.
    const piped = await cli(cfgB, "systems", "export", SYS, "-o", "-");
    assert.equal(piped.code, 0, piped.err);
    assert.equal((await readBundle(piped.stdout)).yaml, a.yaml);
    const dflt = await cli(cfgB, "systems", "export", SYS);
    assert.equal(dflt.code, 0, dflt.err);
    assert.equal((await readBundle(readFileSync(path.join(dir, `${SYS}.tar.gz`)))).yaml, a.yaml);

    const missing = await cli(cfgB, "systems", "export", "nope");
    assert.equal(missing.code, 1);
    assert.match(missing.err, /^clawbridge: .*no system or canvas "nope"\n$/);
  });

  test("bad bundles are refused in one line: not gzip, gzip but not a bundle, a missing file", async () => {
    const junk = path.join(dir, "junk.tar.gz");
    writeFileSync(junk, "this is not an archive");
    const notGzip = await cli(cfgB, "systems", "import", junk);
    assert.equal(notGzip.code, 1);
    assert.match(notGzip.err, /^clawbridge: cannot import .*junk\.tar\.gz: not a gzip archive/);
    assert.equal(notGzip.err.trim().split("\n").length, 1);

    writeFileSync(junk, await craft([{ name: "readme.txt", content: "hello" }]));
    const notBundle = await cli(cfgB, "systems", "import", junk);
    assert.equal(notBundle.code, 1);
    assert.match(notBundle.err, /no <id>\/manifest\.json/);
    assert.equal(notBundle.err.trim().split("\n").length, 1);

    const none = await cli(cfgB, "systems", "import", path.join(dir, "missing.tar.gz"));
    assert.equal(none.code, 1);
    assert.match(none.err, /^clawbridge: cannot read .*missing\.tar\.gz: ENOENT/);
  });

  test("a hostile bundle (.., absolute names, links) writes nothing outside the sandbox", async () => {
    const before = walk(dataB);
    const stamp = `${process.pid}-${Date.now()}`;
    const absTop = path.join("/tmp", `cb-bundle-abs-${stamp}`);
    const absIn = `/tmp/cb-bundle-abs-in-${stamp}`;
    const dotdot = await craft([
      { name: "evil/manifest.json", content: manifestFor("evil", ["ok.txt", "../../escape.txt"]) },
      {
        name: "evil/system.yaml",
        content: stringify({ id: "evil", run: { kind: "model", model: "m1", prompt: "x" } }),
      },
      { name: "evil/sandbox/../../escape.txt", content: "escaped" },
      { name: absTop, content: "absolute" },
      { name: "evil/sandbox/ok.txt", content: "fine" },
    ]);
    const f1 = path.join(dir, "dotdot.tar.gz");
    writeFileSync(f1, dotdot);
    const r1 = await cli(cfgB, "systems", "import", f1);
    assert.equal(r1.code, 1);
    assert.match(r1.err, /^clawbridge: cannot import .*: .*"\.\.\/\.\.\/escape\.txt" contains "\.\."/);
    assert.equal(r1.err.trim().split("\n").length, 1);

    const absolute = await craft([
      { name: "evil2/manifest.json", content: manifestFor("evil2") },
      {
        name: "evil2/system.yaml",
        content: stringify({ id: "evil2", run: { kind: "model", model: "m1", prompt: "x" } }),
      },
      { name: `evil2/sandbox/${absIn}`, content: "absolute inside" },
    ]);
    const f2 = path.join(dir, "absolute.tar.gz");
    writeFileSync(f2, absolute);
    const r2 = await cli(cfgB, "systems", "import", f2);
    assert.equal(r2.code, 1);
    assert.match(r2.err, /is absolute/);

    for (const p of [
      path.join(dataB, "escape.txt"),
      path.join(dir, "escape.txt"),
      path.join(dataB, "sandboxes", "escape.txt"),
      absTop,
      absIn,
    ])
      assert.equal(existsSync(p), false, `${p} was not written`);
    // Nothing at all in the data directory: the CLI checks every path before the room writes
    // anything (the room alone would not: see "known gaps" below).
    const added = walk(dataB).filter((p) => !before.includes(p) && !/^systems\.db/.test(p));
    assert.deepEqual(added, []);
    assert.equal(await canvasOf(dataB, "evil"), undefined);

    // --replace with a bundle that is refused keeps what was there.
    const overMine = await craft([
      { name: `${SYS}/manifest.json`, content: manifestFor(SYS) },
      { name: `${SYS}/system.yaml`, content: stringify({ id: SYS, run: { kind: "model", model: "m1", prompt: "x" } }) },
      { name: `${SYS}/sandbox/notes/plan.md`, content: "overwritten" },
      { name: `${SYS}/sandbox/../../../escape.txt`, content: "escaped" },
    ]);
    const f4 = path.join(dir, "over-mine.tar.gz");
    writeFileSync(f4, overMine);
    const r4 = await cli(cfgB, "systems", "import", f4, "--replace");
    assert.equal(r4.code, 1);
    assert.match(r4.err, /contains "\.\."/);
    assert.deepEqual(pick((await canvasOf(dataB))!), pick(original), "the canvas is still there");
    assert.deepEqual(filesOf(dataB), originalFiles, "and its files");
    assert.equal(existsSync(path.join(dataB, "systems", `${SYS}.yaml`)), false);

    // Links in an archive are never made: only regular files are taken.
    const links = await craft([
      { name: "linky/manifest.json", content: manifestFor("linky", ["ok.txt"]) },
      {
        name: "linky/system.yaml",
        content: stringify({ id: "linky", run: { kind: "model", model: "m1", prompt: "x" } }),
      },
      { name: "linky/sandbox/passwd", type: "symlink", linkname: "/etc/passwd" },
      { name: "linky/sandbox/hard", type: "link", linkname: "/etc/hostname" },
      { name: "linky/sandbox/ok.txt", content: "fine" },
    ]);
    const f3 = path.join(dir, "links.tar.gz");
    writeFileSync(f3, links);
    const r3 = await cli(cfgB, "systems", "import", f3);
    assert.equal(r3.code, 0, r3.err);
    assert.match(r3.out, /imported linky: the system file .*linky\.yaml and 1 file in/);
    assert.deepEqual(walk(path.join(dataB, "sandboxes", "linky")), ["ok.txt"]);
  });

  test("a system of the config file exports and imports as a system file", async () => {
    // By the CLI too (no canvas, no file: found through the loaded library).
    const fileCli = path.join(dir, "ask-cli.tar.gz");
    const r = await cli(cfgA, "systems", "export", "ask", "-o", fileCli);
    assert.equal(r.code, 0, r.err);
    const viaHttp = await readBundle(readFileSync(bundleAskHttp));
    const viaCli = await readBundle(readFileSync(fileCli));
    assert.equal(viaCli.canvas, undefined);
    assert.equal(viaHttp.canvas, undefined);
    assert.equal(viaCli.yaml, viaHttp.yaml);
    assert.deepEqual(viaCli.files, []);
    const declared = parseYaml(viaCli.yaml);
    assert.equal(declared.id, "ask");
    assert.deepEqual(declared.run, ask.run);
    assert.deepEqual(declared.inputs, ask.inputs);
    assert.equal(declared.confirm, "never");

    // Importing it where the config declares it would make the id twice: refused.
    const clash = await cli(cfgA, "systems", "import", fileCli);
    assert.equal(clash.code, 1);
    assert.match(clash.err, /the config file declares a system "ask"/);

    const imp = await cli(cfgB, "systems", "import", bundleAskHttp);
    assert.equal(imp.code, 0, imp.err);
    assert.match(imp.out, /imported ask: the system file .*systems\/ask\.yaml/);
    assert.equal(await canvasOf(dataB, "ask"), undefined, "no canvas for a system that had none");
    const file = path.join(dataB, "systems", "ask.yaml");
    assert.deepEqual(parseYaml(readFileSync(file, "utf8")), parseYaml(viaHttp.yaml));
    // The second data directory's library loads it as its own.
    const show = await cli(cfgB, "systems", "show", "ask");
    assert.equal(show.code, 0, show.err);
    const loaded = JSON.parse(show.out);
    assert.deepEqual(loaded.run, ask.run);
    assert.equal(loaded.source, file);
    const again = await cli(cfgB, "systems", "import", bundleAskHttp);
    assert.equal(again.code, 1);
    assert.match(again.err, /ask\.yaml exists; .*--replace/);
    assert.equal((await cli(cfgB, "systems", "import", bundleAskHttp, "--replace")).code, 0);
  });
});

/**
 * Regressions of what a review found wrong in src/workflows/builder/service.ts (a refused import left a
 * partial one, --replace removed what was there first, a draft with a command could not be
 * exported). In process, on a room of its own.
 */
describe("system bundles: refused imports and drafts", () => {
  /** A room on a fresh data directory, closed and removed after `fn`. */
  const onRoom = async (fn: (r: ReturnType<typeof openBuilderRoom>, dataDir: string) => Promise<void>) => {
    const d = tempDir("cb-bundle-gap-");
    const db = openSystemsDb(systemsDbPath(d));
    try {
      await fn(openBuilderRoom({ sql: sqliteSqlOf(db), db, dataDir: d }), d);
    } finally {
      db.close();
      cleanup(d);
    }
  };
  const hostile = (system: string, canvas?: Record<string, unknown>) =>
    craft([
      { name: `${system}/manifest.json`, content: manifestFor(system) },
      {
        name: `${system}/system.yaml`,
        content: stringify({ id: system, run: { kind: "command", argv: ["sh", "-c", "id"] } }),
      },
      ...(canvas ? [{ name: `${system}/canvas.json`, content: JSON.stringify(canvas) }] : []),
      { name: `${system}/sandbox/ok.txt`, content: "fine" },
      { name: `${system}/sandbox/../../escape.txt`, content: "escaped" },
    ]);

  test("a refused import leaves nothing behind (no system file, no canvas, no sandbox)", async () => {
    await onRoom(async (r, d) => {
      await assert.rejects(r.importBundle(await hostile("evf")), /contains "\.\."/);
      const emptyCanvas = {
        system: "evc",
        name: "evc",
        description: "",
        status: "draft",
        version: 0,
        nodes: [],
        edges: [],
        settings: {},
        updatedAt: 0,
      };
      await assert.rejects(r.importBundle(await hostile("evc", emptyCanvas)), /contains "\.\."/);
      assert.equal(await r.canvases.get("evc"), undefined, "no canvas");
      assert.deepEqual(
        walk(d).filter((p) => !p.startsWith("systems.db")),
        [],
        "nothing written",
      );
    });
  });

  test("a refused import with --replace keeps what was there", async () => {
    await onRoom(async (r) => {
      await r.tools.createNode("keep", {
        type: "agent",
        id: "a",
        label: "A",
        properties: { model: "m1", prompt: "x" },
      });
      await r.tools.createFile("keep", "precious.md", "do not lose me");
      const canvas = {
        system: "keep",
        name: "keep",
        description: "",
        status: "draft",
        version: 0,
        nodes: [],
        edges: [],
        settings: {},
        updatedAt: 0,
      };
      await assert.rejects(r.importBundle(await hostile("keep", canvas), { replace: true }));
      assert.equal((await r.canvases.get("keep"))?.nodes.length, 1, "the canvas is still there");
      assert.equal((await r.tools.readFile("keep", "precious.md")).content, "do not lose me");
    });
  });

  test("a draft with a command node exports (no deploy policy applies to reading a canvas out)", async () => {
    await onRoom(async (r) => {
      await r.tools.createNode("tool", {
        type: "command",
        id: "list",
        label: "List",
        properties: { argv: ["ls", "-l"] },
      });
      const b = await readBundle(await r.exportBundle("tool"));
      assert.match(b.yaml, /argv:\n\s+- ls/);
    });
  });
});
