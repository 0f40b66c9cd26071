/**
 * One bad system file does not take the bridge down (issue 30, item 2). A real bridge starts over a
 * data directory whose `systems/` folder holds one good system file and bad ones (malformed YAML, a
 * step that names an undeclared input, a 64 MiB file, bytes that are not UTF-8): chat and the good
 * system work, every bad file is named with its problem in `/health`, `GET /v1/systems`, `doctor`
 * and `clawbridge systems validate`, and the oversized one is refused quickly with its size and the
 * limit. `clawbridge systems import` of a bundle whose system.yaml the library would refuse exits
 * non-zero and writes nothing. A problem of the config's own systems still stops the start.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { pack as tarPack } from "tar-stream";
import { stringify } from "yaml";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { createLogger } from "../../src/core/log/logger.js";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import type { SystemctlRunner } from "../../src/ops/service/systemd.js";
import { BUNDLE_FORMAT } from "../../src/workflows/builder/bundle.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { walk } from "../helpers/tree.js";

const execFileP = promisify(execFile);
const BIN = path.resolve("bin/clawbridge.js");
const NODE = process.execPath;

const noBus: SystemctlRunner = async () => ({
  code: 1,
  stdout: "",
  stderr: "Failed to connect to bus: No medium found",
});

/** A bundle of `system` whose system.yaml holds `yaml` (plus one sandbox file). */
async function bundle(system: string, yaml: string | Buffer): Promise<Buffer> {
  const p = tarPack();
  const chunks: Buffer[] = [];
  p.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    p.on("end", () => resolve());
    p.on("error", reject);
  });
  const manifest = {
    format: BUNDLE_FORMAT,
    version: 1,
    system,
    createdAt: new Date().toISOString(),
    requiredInputs: [],
    files: ["notes.md"],
  };
  p.entry({ name: `${system}/manifest.json`, type: "file", mode: 0o644 }, Buffer.from(JSON.stringify(manifest)));
  p.entry(
    { name: `${system}/system.yaml`, type: "file", mode: 0o644 },
    Buffer.isBuffer(yaml) ? yaml : Buffer.from(yaml),
  );
  p.entry({ name: `${system}/sandbox/notes.md`, type: "file", mode: 0o644 }, Buffer.from("notes"));
  p.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

describe("a bad system file leaves only itself out", () => {
  let root: string;
  let dataDir: string;
  let configPath: string;
  let fake: FakeOpenAI;
  let bridge: TestBridge | undefined;
  const files = {
    good: "",
    broken: "",
    undeclared: "",
    huge: "",
    latin1: "",
  };

  const cli = async (...args: string[]) => {
    try {
      const r = await execFileP(NODE, [BIN, ...args], {
        env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
        timeout: 60_000,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err: any) {
      return { code: err.code as number, stdout: String(err.stdout), stderr: String(err.stderr) };
    }
  };

  before(async () => {
    root = tempDir("cb-bad-system-");
    dataDir = path.join(root, "data");
    const sys = path.join(dataDir, "systems");
    mkdirSync(sys, { recursive: true });
    fake = await startFakeOpenAI();
    configPath = path.join(root, "clawbridge.json");
    writeFileSync(
      configPath,
      JSON.stringify({
        server: { port: 1 }, // only the CLI and doctor read it; the bridge below listens on a port from the OS
        dataDir,
        intents: { enabled: false },
        backends: { up: { type: "openai", baseUrl: fake.url } },
        models: [{ id: "m", backend: "up" }],
      }),
    );
    files.good = path.join(sys, "good.yaml");
    writeFileSync(
      files.good,
      stringify({
        description: "says hi",
        sideEffects: false,
        run: { kind: "command", argv: [NODE, "-e", "console.log('hi from good')"] },
      }),
    );
    files.broken = path.join(sys, "broken.yaml");
    writeFileSync(files.broken, "run: {kind: command, argv: [unclosed\n");
    files.undeclared = path.join(sys, "undeclared.yaml");
    writeFileSync(files.undeclared, stringify({ run: { kind: "command", argv: ["/bin/echo", "${inputs.nope}"] } }));
    // 64 MiB (sparse): before the cap, one like it never finished validating.
    files.huge = path.join(sys, "huge.yaml");
    writeFileSync(files.huge, "");
    truncateSync(files.huge, 64 * 1024 * 1024);
    files.latin1 = path.join(sys, "latin1.yaml");
    writeFileSync(
      files.latin1,
      Buffer.concat([
        Buffer.from("description: caf"),
        Buffer.from([0xe9]),
        Buffer.from("\nrun: {kind: command, argv: [/bin/true]}\n"),
      ]),
    );
  });
  after(async () => {
    await bridge?.close();
    await fake?.close();
    cleanup(root);
  });

  test("the bridge starts quickly; chat and the good system work; the bad files are named in /health and /v1/systems", async () => {
    const t0 = performance.now();
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    bridge = await startTestBridge(
      {
        dataDir,
        backends: { up: { type: "openai", baseUrl: fake.url } },
        models: [{ id: "m", backend: "up" }],
      },
      { systemsDb: ":memory:", logger: createLogger("info", sink) },
    );
    assert.ok(performance.now() - t0 < 10_000, `started in ${Math.round(performance.now() - t0)} ms`);
    // The log names each file left out, once, with its problem.
    const warned = lines
      .map((l) => JSON.parse(l) as { msg: string; file?: string; problems?: string[] })
      .filter((l) => /left out/.test(l.msg));
    assert.deepEqual(
      warned.map((l) => l.file).sort(),
      [files.broken, files.huge, files.latin1, files.undeclared].sort(),
    );
    assert.match(warned.find((l) => l.file === files.huge)!.problems!.join(), /at most 1048576 bytes/);

    const chat = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hello there" }] }),
    });
    assert.equal(chat.status, 200);
    const reply = (await chat.json()) as { choices: Array<{ message: { content: string } }> };
    assert.match(reply.choices[0]!.message.content, /hello there/);

    const run = await fetch(`${bridge.baseURL}/systems/good/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ inputs: {}, wait: true }),
    });
    const ran = (await run.json()) as { status: string; output: unknown };
    assert.equal(ran.status, "completed", JSON.stringify(ran));
    assert.match(String(ran.output), /hi from good/);
    const badRun = await fetch(`${bridge.baseURL}/systems/broken/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(badRun.status, 404);

    const health = (await (await fetch(`${bridge.url}/health`)).json()) as {
      systems: { loaded: number; left_out: Array<{ file: string; id: string | null; problems: string[] }> };
    };
    assert.equal(health.systems.loaded, 1);
    const named = new Map(health.systems.left_out.map((l) => [l.file, l.problems.join("\n")]));
    assert.deepEqual([...named.keys()].sort(), [files.broken, files.huge, files.latin1, files.undeclared].sort());
    assert.match(named.get(files.broken)!, /not valid YAML/);
    assert.match(named.get(files.undeclared)!, /run\.argv\[1\]: .*"nope" is not a declared input/);
    assert.match(
      named.get(files.huge)!,
      /67108864 bytes \(64 MiB\); a system file may be at most 1048576 bytes \(1 MiB\)/,
    );
    assert.match(named.get(files.latin1)!, /not valid UTF-8/);
    assert.equal(health.systems.left_out.find((l) => l.file === files.undeclared)?.id, "undeclared");

    const list = (await (await fetch(`${bridge.baseURL}/systems`)).json()) as {
      data: Array<{ id: string }>;
      left_out: Array<{ file: string }>;
    };
    assert.deepEqual(
      list.data.map((s) => s.id),
      ["good"],
    );
    assert.equal(list.left_out.length, 4);
  });

  test("doctor and systems validate name each bad file; validate answers quickly", async () => {
    const report = await runDoctor({
      configPath,
      openclawHome: path.join(root, "openclaw"),
      tmpDir: root,
      unitDir: path.join(root, "units"),
      systemctl: noBus,
      scanClis: false,
      validate: null,
      env: { ...process.env, HOME: root },
    });
    const f = report.findings.find((x) => x.id === "systems:files");
    assert.ok(f, JSON.stringify(report.findings.map((x) => x.id)));
    assert.equal(f.status, "warn");
    assert.match(f.title, /1 system loaded, 4 files left out/);
    for (const file of [files.broken, files.huge, files.latin1, files.undeclared])
      assert.ok(f.detail?.includes(file), file);
    assert.equal(
      report.findings.find((x) => x.id === "systems:config"),
      undefined,
    );

    const t0 = performance.now();
    const v = await cli("systems", "validate", "--config", configPath);
    assert.ok(performance.now() - t0 < 20_000);
    assert.equal(v.code, 1, v.stdout + v.stderr);
    assert.match(
      v.stdout,
      new RegExp(`problem: ${files.huge.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: \\(file\\): it is 67108864 bytes`),
    );
    assert.match(v.stdout, /latin1\.yaml: \(file\): it is not valid UTF-8/);
    assert.match(v.stdout, /left out: .*undeclared\.yaml \(system undeclared\)/);
    assert.match(v.stdout, /1 system OK, 4 problems/);
  });

  test("import refuses a bundle the library would refuse: exit 1, nothing written", async () => {
    const target = path.join(root, "target");
    mkdirSync(target);
    const cfg = path.join(root, "target.json");
    writeFileSync(
      cfg,
      JSON.stringify({
        dataDir: target,
        backends: { up: { type: "openai", baseUrl: fake.url } },
        models: [{ id: "m", backend: "up" }],
      }),
    );
    const cases: Array<[string, string | Buffer, RegExp]> = [
      ["malformed", "run: {kind: command, argv: [unclosed\n", /system\.yaml: it is not valid YAML/],
      [
        "undeclared",
        stringify({ run: { kind: "command", argv: ["/bin/echo", "${inputs.nope}"] } }),
        /run\.argv\[1\]: .*"nope" is not a declared input/,
      ],
      [
        "nomodel",
        stringify({ run: { kind: "model", model: "ghost", prompt: "x" } }),
        /run\.model: no configured model "ghost"/,
      ],
      ["latin", Buffer.from([0x72, 0x75, 0x6e, 0x3a, 0x20, 0xff, 0x0a]), /system\.yaml: it is not valid UTF-8/],
      ["huge", `# ${"x".repeat(2 * 1024 * 1024)}\n`, /system\.yaml: it is 2097155 bytes .*at most 1048576 bytes/],
      ["notamap", "- a\n- b\n", /one mapping/],
      [
        "otherid",
        stringify({ id: "someone-else", run: { kind: "command", argv: ["/bin/true"] } }),
        /id "someone-else" is not the bundle's system "otherid"/,
      ],
    ];
    for (const [system, yaml, why] of cases) {
      const file = path.join(root, `${system}.tar.gz`);
      writeFileSync(file, await bundle(system, yaml));
      const r = await cli("systems", "import", file, "--config", cfg, "--no-mcp");
      assert.equal(r.code, 1, `${system}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, why, system);
      assert.doesNotMatch(r.stdout, /imported/);
      assert.deepEqual(
        walk(target).filter((p) => !p.startsWith("systems.db")),
        [],
        `${system}: nothing written`,
      );
    }
    // The same bundle with a good system.yaml is imported, and the library loads it.
    const file = path.join(root, "fine.tar.gz");
    writeFileSync(file, await bundle("fine", stringify({ run: { kind: "command", argv: ["/bin/true"] } })));
    const ok = await cli("systems", "import", file, "--config", cfg, "--no-mcp");
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /imported fine/);
    const v = await cli("systems", "validate", "--config", cfg);
    assert.equal(v.code, 0, v.stdout);
    assert.match(v.stdout, /1 system OK/);
  });

  test("the config file stays strict: a problem of its own systems stops the start", async () => {
    await assert.rejects(
      startTestBridge(
        {
          dataDir: path.join(root, "strict"),
          backends: { up: { type: "openai", baseUrl: fake.url } },
          models: [{ id: "m", backend: "up" }],
          systems: [{ id: "cfg", run: { kind: "command", argv: ["/bin/echo", "${inputs.nope}"] } }],
        },
        { systemsDb: ":memory:" },
      ),
      (err: Error) => err.name === "SystemsConfigError" && /systems\[0\]\.run\.argv\[1\]/.test(err.message),
    );
    // Nothing of the refused start outlives it: its orphan watcher (a child process) was stopped.
    const strict = path.join(root, "strict");
    const left = readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          const argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
          return argv.includes("clawbridge-orphan-watcher") && argv.some((a) => a.startsWith(strict));
        } catch {
          return false;
        }
      });
    assert.deepEqual(left, [], "the orphan watcher of the refused start is gone");
  });
});
