/**
 * The `openclaw`, `service` and `doctor` commands run as a child process (the real command line,
 * exit codes, stdout/stderr), with a private HOME: install -> status against a RUNNING bridge ->
 * status against a dead one -> uninstall; service install with a systemctl stand-in (no user bus,
 * and one that records its calls); doctor --json.
 */
import { strict as assert } from "node:assert";
import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const repo = path.resolve(import.meta.dirname, "../..");
const cli = path.join(repo, "test/fixtures/cli-with-openclaw.ts");
const root = tempDir("cb-occmd-");
const home = path.join(root, "home");
const ocHome = path.join(home, ".openclaw");
const tmp = path.join(root, "tmp");
mkdirSync(ocHome, { recursive: true });
mkdirSync(tmp, { recursive: true });

const ORIGINAL = `{
  // my OpenClaw settings
  gateway: { port: 18789, auth: { token: "gw-secret-token" } },
  agents: { defaults: { model: { primary: "anthropic/claude-opus-4-6" } } },
}
`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const childEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    TMPDIR: tmp,
    NO_COLOR: "1",
    ...env,
  };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", cli, ...args],
      { cwd: repo, env: childEnv, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
        resolve({ code: typeof code === "number" ? code : null, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

let bridge: TestBridge | undefined;
let configPath = "";
const KEY = "bridge-key-for-tests-0123";

before(async () => {
  bridge = await startTestBridge({
    server: { apiKeys: [KEY] },
    backends: { cc: { type: "claude-code" } },
    models: [{ id: "claude-cli", backend: "cc", name: "Claude (CLI)" }],
  });
  configPath = path.join(root, "bridge.json");
  writeFileSync(
    configPath,
    JSON.stringify({
      server: { port: bridge.port, apiKeys: [KEY] },
      dataDir: path.join(root, "data"),
      backends: { cc: { type: "claude-code" } },
      models: [{ id: "claude-cli", backend: "cc", name: "Claude (CLI)" }],
    }),
  );
  writeFileSync(path.join(ocHome, "openclaw.json"), ORIGINAL);
});

after(async () => {
  await bridge?.close();
  if (bridge) cleanup(bridge.dataDir);
  cleanup(root);
});

describe("clawbridge openclaw (child process)", () => {
  it("install writes only our keys, shows a masked diff and makes a backup", async () => {
    const r = await run(["openclaw", "install", "--config", configPath, "--set-default", "--no-validate"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^\+\s+clawbridge: \{/m);
    assert.match(r.stdout, /^-.*primary: "anthropic\/claude-opus-4-6"/m);
    assert.match(r.stdout, /^\+.*primary: "clawbridge\/claude-cli"/m);
    assert.ok(!r.stdout.includes(KEY) && !r.stdout.includes("gw-secret-token"), "no secrets printed");
    assert.match(r.stdout, /updated .*openclaw\.json \(backup: .*openclaw\.json\.bak-/);
    const text = readFileSync(path.join(ocHome, "openclaw.json"), "utf8");
    assert.ok(text.includes("// my OpenClaw settings") && text.includes('token: "gw-secret-token"'));
    assert.ok(text.includes(KEY), "the bridge key is in OpenClaw's config");
    const backups = readdirSync(ocHome).filter((f) => f.startsWith("openclaw.json.bak-"));
    assert.equal(backups.length, 1);
    assert.equal(readFileSync(path.join(ocHome, backups[0]!), "utf8"), ORIGINAL);

    const again = await run([
      "openclaw",
      "install",
      "--config",
      configPath,
      "--set-default",
      "--dry-run",
      "--no-validate",
    ]);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /already up to date/);
  });

  it("status: OpenClaw points at a running bridge with the same models and key (exit 0, --json)", async () => {
    const r = await run(["openclaw", "status", "--json"]);
    assert.equal(r.code, 0, r.stdout);
    const s = JSON.parse(r.stdout);
    assert.equal(s.ok, true);
    assert.equal(s.providerId, "clawbridge");
    assert.equal(s.baseUrl, `http://127.0.0.1:${bridge!.port}/v1`);
    assert.equal(s.bridge.isClawbridge, true);
    assert.deepEqual(s.bridge.models, ["claude-cli"]);
    const ids = s.findings.map((f: { id: string; status: string }) => `${f.id}=${f.status}`);
    for (const want of [
      "openclaw:provider=ok",
      "bridge:running=ok",
      "bridge:api-key=ok",
      "bridge:models=ok",
      "openclaw:default:agents.defaults=ok",
    ])
      assert.ok(ids.includes(want), `${want} in ${ids}`);

    const human = await run(["openclaw", "status"]);
    assert.equal(human.code, 0);
    assert.match(human.stdout, /✓ bridge at http:\/\/127\.0\.0\.1:\d+: running \(clawbridge /);
    assert.match(human.stdout, /✓ models agree \(claude-cli\)/);
  });

  it("install --api anthropic-messages writes the origin as baseUrl; status finds the running bridge through it", async () => {
    const other = path.join(root, "oc-anthropic");
    mkdirSync(other, { recursive: true });
    const inst = await run([
      "openclaw",
      "install",
      "--config",
      configPath,
      "--openclaw-home",
      other,
      "--api",
      "anthropic-messages",
      "--no-validate",
    ]);
    assert.equal(inst.code, 0, inst.stderr);
    assert.match(inst.stdout, /through anthropic-messages\./);
    const p = JSON.parse(readFileSync(path.join(other, "openclaw.json"), "utf8")).models.providers.clawbridge;
    assert.equal(p.api, "anthropic-messages");
    assert.equal(p.baseUrl, `http://127.0.0.1:${bridge!.port}`);
    assert.deepEqual(p.models[0].input, ["text", "image"], "a claude-code model sees images");
    const r = await run(["openclaw", "status", "--config", configPath, "--openclaw-home", other, "--json"]);
    assert.equal(r.code, 0, r.stdout);
    const ids = JSON.parse(r.stdout).findings.map((f: { id: string; status: string }) => `${f.id}=${f.status}`);
    for (const want of ["bridge:running=ok", "bridge:api-key=ok", "bridge:models=ok", "openclaw:compat=ok"])
      assert.ok(ids.includes(want), `${want} in ${ids}`);
  });

  it("status: a wrong API key is reported (exit 1)", async () => {
    const other = path.join(root, "oc-wrongkey");
    mkdirSync(other, { recursive: true });
    const inst = await run([
      "openclaw",
      "install",
      "--config",
      configPath,
      "--openclaw-home",
      other,
      "--api-key",
      "not-the-right-key",
      "--no-validate",
    ]);
    assert.equal(inst.code, 0, inst.stderr);
    const r = await run(["openclaw", "status", "--openclaw-home", other, "--json"]);
    assert.equal(r.code, 1);
    const s = JSON.parse(r.stdout);
    const f = s.findings.find((x: { id: string }) => x.id === "bridge:api-key");
    assert.equal(f.status, "fail");
    assert.match(f.title, /rejects OpenClaw's apiKey \(HTTP 401\)/);
  });

  it("status against a dead bridge fails with the fix (exit 1)", async () => {
    const dead = path.join(root, "oc-dead");
    mkdirSync(dead, { recursive: true });
    const deadConfig = path.join(root, "dead.json");
    // A port nothing listens on: take the running bridge's port + a fresh closed one.
    const { createServer } = await import("node:net");
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    await new Promise((r) => srv.close(r));
    writeFileSync(
      deadConfig,
      JSON.stringify({
        server: { port },
        backends: { cc: { type: "claude-code" } },
        models: [{ id: "claude-cli", backend: "cc" }],
      }),
    );
    assert.equal(
      (await run(["openclaw", "install", "--config", deadConfig, "--openclaw-home", dead, "--no-validate"])).code,
      0,
    );
    const r = await run(["openclaw", "status", "--openclaw-home", dead]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /✗ bridge at http:\/\/127\.0\.0\.1:\d+: not running/);
    assert.match(r.stdout, /connection refused/);
    assert.match(r.stdout, /fix: start it: clawbridge serve/);
  });

  it("uninstall gives the original file back", async () => {
    const r = await run(["openclaw", "uninstall", "--no-validate"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /agents\.defaults\.model\.primary restored to anthropic\/claude-opus-4-6/);
    assert.equal(readFileSync(path.join(ocHome, "openclaw.json"), "utf8"), ORIGINAL);
    const status = await run(["openclaw", "status", "--json"]);
    assert.equal(status.code, 1);
    assert.equal(JSON.parse(status.stdout).findings[0].id, "openclaw:provider");
  });

  it("bad input exits 2 with a message and changes nothing", async () => {
    const bad = path.join(root, "oc-bad");
    mkdirSync(bad, { recursive: true });
    writeFileSync(path.join(bad, "openclaw.json"), "{ models: ");
    const r = await run(["openclaw", "install", "--config", configPath, "--openclaw-home", bad, "--no-validate"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /not valid JSON5/);
    assert.equal(readFileSync(path.join(bad, "openclaw.json"), "utf8"), "{ models: ");
    const r2 = await run(["openclaw", "install", "--config", configPath, "--openclaw-home", bad, "--agent", "x"]);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr, /--agent only makes sense with --set-default/);
    const r3 = await run(["openclaw", "install", "--config", configPath, "--openclaw-home", bad, "--api", "openai"]);
    assert.equal(r3.code, 2);
    assert.match(r3.stderr, /--api openai: use one of openai-completions, openai-responses, anthropic-messages/);
  });
});

describe("clawbridge service (child process, systemctl stand-in)", () => {
  function fakeSystemctl(name: string, body: string): string {
    const file = path.join(root, name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  }
  const unit = path.join(home, ".config", "systemd", "user", "clawbridge.service");

  it("without a user bus: writes the unit, prints the commands, exit 0, no secret values", async () => {
    const sc = fakeSystemctl("systemctl-nobus", 'echo "Failed to connect to bus: No medium found" >&2; exit 1');
    const r = await run(
      ["service", "install", "--config", configPath, "--env", "ANTHROPIC_API_KEY=sk-ant-very-secret", "--no-start"],
      { CLAWBRIDGE_SYSTEMCTL: sc },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /wrote .*clawbridge\.service \(Environment: ANTHROPIC_API_KEY, PATH; values not shown\)/);
    assert.match(r.stdout, /systemctl --user cannot be used here: no systemd user session/);
    assert.match(r.stdout, /^ {2}systemctl --user daemon-reload$/m);
    assert.match(r.stdout, /^ {2}systemctl --user enable clawbridge\.service$/m);
    assert.ok(!r.stdout.includes("sk-ant-very-secret") && !r.stderr.includes("sk-ant-very-secret"));
    const text = readFileSync(unit, "utf8");
    assert.ok(
      text.includes(
        `ExecStart=${process.execPath} ${path.join(repo, "bin", "clawbridge.js")} serve --config ${configPath}`,
      ),
      text,
    );
    assert.match(text, /^Environment="ANTHROPIC_API_KEY=sk-ant-very-secret"$/m);
    assert.match(text, /^Restart=on-failure$/m);
    assert.match(text, /^StandardOutput=journal$/m);
    assert.match(text, /^WantedBy=default\.target$/m);

    const st = await run(["service", "status"], { CLAWBRIDGE_SYSTEMCTL: sc });
    assert.equal(st.code, 0);
    assert.match(st.stdout, /\(installed\)/);
    assert.match(st.stdout, /systemd: unavailable here/);
    assert.match(st.stdout, /Environment: ANTHROPIC_API_KEY, PATH \(values not shown\)/);
  });

  it("with systemd: reload, enable --now; uninstall disables and removes", async () => {
    const log = path.join(root, "systemctl.log");
    const sc = fakeSystemctl("systemctl-ok", `echo "$@" >> ${log}; exit 0`);
    const r = await run(["service", "install", "--config", configPath], { CLAWBRIDGE_SYSTEMCTL: sc });
    assert.equal(r.code, 0, r.stderr);
    // The bridge of this test holds the configured port: the install warns about it.
    assert.match(r.stdout, /is in use by pid \d+: the service cannot listen until that process stops/);
    const calls = readFileSync(log, "utf8").trim().split("\n");
    assert.deepEqual(calls.slice(0, 2), ["--user daemon-reload", "--user enable --now clawbridge.service"]);
    const u = await run(["service", "uninstall"], { CLAWBRIDGE_SYSTEMCTL: sc });
    assert.equal(u.code, 0, u.stderr);
    assert.equal(existsSync(unit), false);
    assert.deepEqual(readFileSync(log, "utf8").trim().split("\n").slice(-2), [
      "--user disable --now clawbridge.service",
      "--user daemon-reload",
    ]);
  });

  it("an invalid bridge config is refused before anything is written (exit 2)", async () => {
    const bad = path.join(root, "bad.json");
    writeFileSync(bad, JSON.stringify({ backends: {}, models: [] }));
    const r = await run(["service", "install", "--config", bad], { CLAWBRIDGE_SYSTEMCTL: "/nonexistent" });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /invalid configuration/);
    assert.equal(existsSync(unit), false);
  });
});

describe("clawbridge doctor (child process)", () => {
  it("--json reports the running bridge's port and exits by its verdict", async () => {
    writeFileSync(path.join(tmp, "clawbridge-old.lock"), "999999999\n");
    const r = await run(["doctor", "--config", configPath, "--json", "--no-validate", "--no-cli-scan"], {
      CLAWBRIDGE_SYSTEMCTL: "/nonexistent",
    });
    const rep = JSON.parse(r.stdout);
    assert.equal(r.code, rep.ok ? 0 : 1);
    const port = rep.findings.find((f: { id: string }) => f.id === "port");
    assert.equal(port.status, "ok", JSON.stringify(port));
    assert.match(port.title, /a clawbridge .* answers/);
    const lock = rep.findings.find((f: { id: string }) => f.id.endsWith("clawbridge-old.lock"));
    assert.equal(lock.status, "warn");
    assert.equal(rep.summary.fail, rep.findings.filter((f: { status: string }) => f.status === "fail").length);
  });
});
