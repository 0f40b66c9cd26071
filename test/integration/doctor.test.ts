/**
 * `clawbridge doctor` against temp set-ups: a dead lock PID, a free port, a port owned by a running
 * clawbridge, a port owned by another program, OpenClaw pointing at the bridge (or stale), the real
 * Claude Code CLI's --version, a missing CLI, disk space.
 */
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, describe, it } from "node:test";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import { findListeningPid, pidAlive, readLock } from "../../src/ops/doctor/probes.js";
import { renderFindings } from "../../src/ops/report/findings.js";
import type { Finding } from "../../src/wire/admin.js";
import { installOpenClaw } from "../../src/ops/openclaw/install.js";
import { resolveOpenClawPaths } from "../../src/ops/openclaw/provider.js";
import { resolveConfig } from "../../src/core/config/load.js";
import type { SystemctlRunner } from "../../src/ops/service/systemd.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";

const dirs: string[] = [];
const closers: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of closers) await c();
  dirs.forEach(cleanup);
});

const noBus: SystemctlRunner = async () => ({
  code: 1,
  stdout: "",
  stderr: "Failed to connect to bus: No medium found",
});

async function freePort(): Promise<number> {
  const srv = http.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** A PID that certainly belonged to a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  const pid = child.pid!;
  await new Promise((r) => child.once("exit", r));
  return pid;
}

interface Setup {
  root: string;
  configPath: string;
  dataDir: string;
  tmpDir: string;
  openclawHome: string;
  unitDir: string;
}

function setup(
  port: number,
  extraBackends: Record<string, unknown> = {},
  models: Array<Record<string, unknown>> = [{ id: "claude-cli", backend: "cc" }],
): Setup {
  const root = tempDir("cb-doctor-");
  dirs.push(root);
  const s: Setup = {
    root,
    configPath: path.join(root, "clawbridge.json"),
    dataDir: path.join(root, "data"),
    tmpDir: path.join(root, "tmp"),
    openclawHome: path.join(root, "openclaw"),
    unitDir: path.join(root, "units"),
  };
  mkdirSync(s.tmpDir, { recursive: true });
  mkdirSync(s.dataDir, { recursive: true });
  writeFileSync(
    s.configPath,
    JSON.stringify(
      {
        server: { port },
        dataDir: s.dataDir,
        intents: { enabled: false },
        backends: { cc: { type: "claude-code" }, ...extraBackends },
        models,
      },
      null,
      2,
    ),
  );
  return s;
}

const doctor = (s: Setup, extra: Parameters<typeof runDoctor>[0] = {}) =>
  runDoctor({
    configPath: s.configPath,
    openclawHome: s.openclawHome,
    tmpDir: s.tmpDir,
    unitDir: s.unitDir,
    systemctl: noBus,
    scanClis: false,
    validate: null,
    env: { ...process.env, HOME: s.root },
    ...extra,
  });

const byId = (findings: Finding[], id: string) => findings.find((f) => f.id === id);

describe("doctor", () => {
  it("free port, dead lock PID, live lock, real CLI version, missing CLI, OpenClaw not set up", async () => {
    const port = await freePort();
    const s = setup(port, { ghost: { type: "gemini-cli", command: "/nonexistent/gemini" } }, [
      { id: "claude-cli", backend: "cc" },
      { id: "ghost-model", backend: "ghost" },
    ]);
    const dead = await deadPid();
    assert.equal(pidAlive(dead), false);
    writeFileSync(path.join(s.dataDir, "plugin.lock"), `${dead}\n`);
    writeFileSync(path.join(s.tmpDir, "clawbridge-gateway.lock"), JSON.stringify({ pid: process.pid, startedAt: 1 }));
    writeFileSync(path.join(s.tmpDir, "unrelated.lock"), "1");

    const r = await doctor(s);
    assert.equal(r.ok, false, "a missing CLI is a failure");
    assert.equal(byId(r.findings, "config")!.status, "ok");
    const cc = byId(r.findings, "backend:cc")!;
    assert.equal(cc.status, "ok");
    assert.match(cc.title, /usable, .*Claude Code/);
    assert.match(cc.detail!, /--version/);
    assert.match(cc.detail!, /A real turn was not tried/);
    const ghost = byId(r.findings, "backend:ghost")!;
    assert.equal(ghost.status, "fail");
    assert.match(ghost.detail!, /not found/);
    assert.match(ghost.fix!, /npm i -g @google\/gemini-cli/);
    const p = byId(r.findings, "port")!;
    assert.equal(p.status, "ok");
    assert.match(p.title, new RegExp(`127\\.0\\.0\\.1:${port}: free`));
    const stale = byId(r.findings, `lock:${path.join(s.dataDir, "plugin.lock")}`)!;
    assert.equal(stale.status, "warn");
    assert.match(stale.title, new RegExp(`pid ${dead} is not running`));
    assert.match(stale.fix!, /rm .*plugin\.lock/);
    const live = byId(r.findings, `lock:${path.join(s.tmpDir, "clawbridge-gateway.lock")}`)!;
    assert.equal(live.status, "ok");
    assert.match(live.title, new RegExp(`running pid ${process.pid}`));
    assert.ok(!r.findings.some((f) => f.id.includes("unrelated.lock")), "only clawbridge-*.lock in tmp");
    assert.equal(byId(r.findings, "openclaw:config")!.status, "warn", "no OpenClaw is a warning for doctor");
    assert.equal(byId(r.findings, "disk")!.status, "ok");
    assert.equal(byId(r.findings, "service")!.status, "info");

    const text = renderFindings(r.findings, "clawbridge doctor");
    assert.match(text, /✓ backend cc/);
    assert.match(text, /✗ backend ghost/);
    assert.match(text, /! stale lock file/);
    assert.match(text, /fix: /);
    assert.match(text, /\n✗ \d+ ok, \d+ warnings?, 1 failed/);

    // --fix removes the stale lock, leaves the live one.
    const fixed = await doctor(s, { fix: true });
    assert.match(byId(fixed.findings, `lock:${path.join(s.dataDir, "plugin.lock")}`)!.title, /removed/);
    assert.equal(existsSync(path.join(s.dataDir, "plugin.lock")), false);
    assert.equal(existsSync(path.join(s.tmpDir, "clawbridge-gateway.lock")), true);
  });

  it("a port owned by this bridge (running) with OpenClaw pointing at it; then a stale models.json", async () => {
    const bridge: TestBridge = await startTestBridge({
      backends: { cc: { type: "claude-code" } },
      models: [{ id: "claude-cli", backend: "cc" }],
    });
    closers.push(() => bridge.close());
    dirs.push(bridge.dataDir);
    const s = setup(bridge.port);
    const config = resolveConfig(
      JSON.parse((await import("node:fs")).readFileSync(s.configPath, "utf8")),
      s.configPath,
    );
    const paths = resolveOpenClawPaths({ openclawHome: s.openclawHome });
    await installOpenClaw({ config, paths, setDefault: true });

    const r = await doctor(s);
    const p = byId(r.findings, "port")!;
    assert.equal(p.status, "ok", p.title);
    assert.match(p.title, /a clawbridge .* answers/);
    assert.match(p.title, new RegExp(`pid ${process.pid}`), "the owner PID is found via /proc");
    assert.equal(byId(r.findings, "openclaw:provider")!.status, "ok");
    assert.equal(byId(r.findings, "openclaw:compat")!.status, "ok");
    assert.equal(byId(r.findings, "bridge:models")!.status, "ok");
    assert.equal(byId(r.findings, "bridge:api-key")!.status, "ok");
    assert.equal(byId(r.findings, "openclaw:default:agents.defaults")!.status, "ok");
    assert.equal(r.ok, true, renderFindings(r.findings));

    // OpenClaw's agent cache still has an old URL for our provider.
    const mj = path.join(s.openclawHome, "agents", "main", "agent", "models.json");
    mkdirSync(path.dirname(mj), { recursive: true });
    writeFileSync(
      mj,
      JSON.stringify({ providers: { clawbridge: { baseUrl: "http://127.0.0.1:1/v1", apiKey: "x", models: [] } } }),
    );
    // And the config now has a model the running bridge does not serve.
    writeFileSync(
      s.configPath,
      JSON.stringify({
        server: { port: bridge.port },
        dataDir: s.dataDir,
        backends: { cc: { type: "claude-code" } },
        models: [
          { id: "claude-cli", backend: "cc" },
          { id: "new-model", backend: "cc" },
        ],
      }),
    );
    const r2 = await doctor(s);
    assert.equal(r2.ok, false);
    const staleF = byId(r2.findings, "openclaw:models-json:main")!;
    assert.equal(staleF.status, "fail");
    assert.match(staleF.detail!, /baseUrl "http:\/\/127\.0\.0\.1:1\/v1"/);
    assert.match(byId(r2.findings, "port")!.detail!, /this config has claude-cli, new-model/);
    assert.equal(byId(r2.findings, "port")!.status, "warn");
    assert.equal(byId(r2.findings, "openclaw:models-config")!.status, "warn");
  });

  it("a port owned by another program is a failure naming its PID", async () => {
    const srv = http.createServer((_req, res) =>
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":"nope"}'),
    );
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    closers.push(() => new Promise((r) => srv.close(r)));
    const port = (srv.address() as AddressInfo).port;
    const s = setup(port);
    const r = await doctor(s);
    const p = byId(r.findings, "port")!;
    assert.equal(p.status, "fail");
    assert.match(p.title, /used by another program \(pid \d+/);
    assert.equal(findListeningPid(port), process.pid);
    assert.match(p.fix!, /server\.port/);
    assert.equal(r.ok, false);
  });

  it("an invalid config fails with the key named; too little disk space fails", async () => {
    const s = setup(await freePort());
    writeFileSync(s.configPath, JSON.stringify({ server: { port: 1 }, backends: {}, models: [], bogus: 1 }));
    const r = await doctor(s, { minFreeBytes: Number.MAX_SAFE_INTEGER });
    const c = byId(r.findings, "config")!;
    assert.equal(c.status, "fail");
    assert.match(c.detail!, /bogus/);
    assert.equal(byId(r.findings, "disk")!.status, "fail");
    assert.equal(r.ok, false);
  });

  it("names every configured model its server does not offer, with the live ones and the fix; with remap.onMissing, what serves it (issue 27)", async () => {
    const fake = await startFakeOpenAI();
    try {
      const s = setup(
        await freePort(),
        {
          up: { type: "openai", baseUrl: fake.url },
          up2: { type: "openai", baseUrl: fake.url, remap: { onMissing: "first" } },
        },
        [
          { id: "claude-cli", backend: "cc" },
          { id: "real", backend: "up", model: "fake-model" },
          { id: "gone", backend: "up", model: "vanished-model" },
          { id: "gone2", backend: "up2", model: "vanished-model" },
        ],
      );
      const r = await doctor(s);
      const gone = byId(r.findings, "model:gone")!;
      assert.equal(gone.status, "fail");
      assert.match(gone.title, /up does not offer vanished-model/);
      assert.match(gone.detail!, /up offers: fake-model/);
      assert.match(gone.fix!, /models\[2\]\.model/);
      assert.match(gone.fix!, /backends\.up\.remap\.onMissing: best-free/);
      const gone2 = byId(r.findings, "model:gone2")!;
      assert.equal(gone2.status, "warn");
      assert.match(gone2.title, /served by fake-model \(remap\.onMissing: first\)/);
      assert.equal(byId(r.findings, "model:real"), undefined, "a model it offers is not named");
      assert.equal(byId(r.findings, "model:claude-cli"), undefined, "Claude Code takes names it does not list");
    } finally {
      await fake.close();
    }
  });

  it("reads PIDs from plain and JSON lock files", async () => {
    const root = tempDir("cb-lock-");
    dirs.push(root);
    const a = path.join(root, "a.lock");
    writeFileSync(a, `${process.pid}\nextra`);
    assert.deepEqual([readLock(a).pid, readLock(a).alive], [process.pid, true]);
    const b = path.join(root, "b.lock");
    writeFileSync(b, JSON.stringify({ pid: String(await deadPid()) }));
    assert.equal(readLock(b).alive, false);
    const c = path.join(root, "c.lock");
    writeFileSync(c, "hello");
    assert.equal(readLock(c).problem, "holds no PID");
    // A live PID that is not node/openclaw/clawbridge: reused by the system, so the lock is stale.
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      const d = path.join(root, "d.lock");
      writeFileSync(d, JSON.stringify({ pid: other.pid }));
      const info = readLock(d);
      assert.equal(info.alive, true);
      assert.equal(info.reused, true);
      assert.match(info.command!, /^sleep 30/);
    } finally {
      other.kill("SIGKILL");
      await new Promise((r) => other.once("exit", r));
    }
  });
});
