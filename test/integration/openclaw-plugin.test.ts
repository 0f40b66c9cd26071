/**
 * The OpenClaw plugin (packages/openclaw-plugin) outside OpenClaw: its register() is driven with a
 * stand-in for OpenClaw's plugin API (the peer), and it starts the REAL bridge in a worker thread.
 * Settings and secrets, the lock file, the port-owner check, the process-wide guard, the session
 * header wrapper. The same plugin inside the real OpenClaw: test/e2e/openclaw.test.ts.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir } from "../helpers/bridge.js";

const PLUGIN_DIR = path.resolve("packages/openclaw-plugin");
const load = async (rel: string): Promise<any> => import(pathToFileURL(path.join(PLUGIN_DIR, rel)).href);

interface Logged {
  level: string;
  msg: string;
}

/** A stand-in for OpenClaw's plugin API: records what the plugin registers. */
function fakeApi(pluginConfig: Record<string, unknown>, opts: { mode?: string; config?: unknown } = {}) {
  const logs: Logged[] = [];
  const logger = Object.fromEntries(
    ["debug", "info", "warn", "error"].map((level) => [level, (msg: string) => logs.push({ level, msg })]),
  );
  const reg = {
    providers: [] as any[],
    services: [] as any[],
    hooks: new Map<string, Array<(...a: any[]) => unknown>>(),
  };
  const api = {
    id: "clawbridge",
    registrationMode: opts.mode ?? "full",
    pluginConfig,
    config: opts.config ?? {},
    logger,
    registerProvider: (p: any) => reg.providers.push(p),
    registerService: (s: any) => reg.services.push(s),
    on: (name: string, fn: (...a: any[]) => unknown) => reg.hooks.set(name, [...(reg.hooks.get(name) ?? []), fn]),
  };
  return { api, logs, reg, logger };
}

async function freePort(): Promise<number> {
  const srv = http.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

async function listening(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) });
    return true;
  } catch {
    return false;
  }
}

describe("openclaw plugin: settings", () => {
  let settings: any;
  let dir: string;
  before(async () => {
    settings = await load("lib/settings.js");
    dir = tempDir("cb-plugin-set-");
  });
  after(() => cleanup(dir));

  test("reads OpenClaw's JSON5 config (comments, trailing commas, unquoted keys, single quotes)", () => {
    const doc = settings.parseJson5(
      `{
      // a comment
      plugins: { entries: { clawbridge: { config: { apiKey: 'it''s-not', port: 4100, }, }, }, },
      /* block */ "s": "a // not a comment",
    }`.replace("'it''s-not'", "'it\\'s \"quoted\"'"),
    );
    assert.equal(doc.plugins.entries.clawbridge.config.apiKey, `it's "quoted"`);
    assert.equal(doc.plugins.entries.clawbridge.config.port, 4100);
    assert.equal(doc.s, "a // not a comment");
  });

  test("a redacted secret is read back from the raw config file (literal, ${ENV}, SecretRef)", () => {
    const file = path.join(dir, "openclaw.json");
    const env = { OPENCLAW_CONFIG_PATH: file, MY_KEY: "from-env-0123456789", HOME: dir };
    writeFileSync(file, `{ plugins: { entries: { clawbridge: { config: { apiKey: "raw-secret-0123456789" } } } } }`);
    let s = settings.resolveSettings({ apiKey: settings.REDACTED, port: 4200 }, { env });
    assert.equal(s.apiKey, "raw-secret-0123456789");
    assert.equal(s.port, 4200);
    assert.deepEqual(s.warnings, []);
    writeFileSync(file, `{ plugins: { entries: { clawbridge: { config: { apiKey: "\${MY_KEY}" } } } } }`);
    assert.equal(settings.resolveSettings({ apiKey: settings.REDACTED }, { env }).apiKey, "from-env-0123456789");
    writeFileSync(
      file,
      JSON.stringify({
        plugins: {
          entries: { clawbridge: { config: { apiKey: { source: "env", provider: "default", id: "MY_KEY" } } } },
        },
      }),
    );
    assert.equal(settings.resolveSettings({ apiKey: settings.REDACTED }, { env }).apiKey, "from-env-0123456789");
    writeFileSync(file, `{}`);
    s = settings.resolveSettings({ apiKey: settings.REDACTED }, { env });
    assert.equal(s.apiKey, undefined, "a redacted value is never used as the key");
    assert.match(s.warnings[0], /arrived redacted/);
  });

  test("port from the provider's loopback baseUrl; defaults; the repository found from the plugin folder", () => {
    const env = { HOME: dir, PATH: "" };
    const oc = { models: { providers: { clawbridge: { baseUrl: "http://127.0.0.1:4321/v1" } } } };
    const s = settings.resolveSettings({}, { openclawConfig: oc, env });
    assert.equal(s.port, 4321);
    assert.equal(
      settings.providerPort({ models: { providers: { clawbridge: { baseUrl: "https://example.com/v1" } } } }),
      undefined,
      "a remote baseUrl is not ours",
    );
    assert.equal(s.dataDir, path.join(dir, ".clawbridge"));
    assert.equal(s.autoStart, true);
    assert.equal(s.sessionHeaders, true);
    assert.equal(s.root, path.resolve("."), `repository found: ${s.rootHint}`);
    // A copied plugin folder (what `openclaw plugins install <path>` makes) cannot find it.
    const copied = settings.findClawbridgeRoot(undefined, env, path.join(dir, "extensions", "clawbridge"));
    assert.equal(copied.root, undefined);
    assert.match(copied.hint, /clawbridgeRoot/);
    assert.equal(settings.findClawbridgeRoot(path.resolve("."), env, path.join(dir, "x")).root, path.resolve("."));
  });
});

describe("openclaw plugin: session header wrapper", () => {
  test("adds x-session-id from options.sessionId and keeps the other options and headers", async () => {
    const { wrapStreamWithSessionHeaders } = await load("lib/headers.js");
    const seen: any[] = [];
    const inner = (model: unknown, context: unknown, options: any) => {
      seen.push(options);
      return "stream";
    };
    assert.equal(wrapStreamWithSessionHeaders({}), undefined, "nothing to wrap");
    const wrapped = wrapStreamWithSessionHeaders({ streamFn: inner });
    assert.equal(
      wrapped({ id: "m" }, {}, { sessionId: "6f1c2a7e-aaaa", headers: { "x-other": "1" }, maxTokens: 5 }),
      "stream",
    );
    assert.deepEqual(seen[0], {
      sessionId: "6f1c2a7e-aaaa",
      headers: { "x-other": "1", "x-session-id": "6f1c2a7e-aaaa" },
      maxTokens: 5,
    });
    wrapped({}, {}, { headers: { a: "b" } });
    assert.deepEqual(seen[1], { headers: { a: "b" } }, "no session id: options untouched");
  });
});

describe("openclaw plugin: lock file", () => {
  let lock: any;
  let dir: string;
  before(async () => {
    lock = await load("lib/lock.js");
    dir = tempDir("cb-plugin-lock-");
  });
  after(() => cleanup(dir));

  test("exclusive; a dead PID is stale and replaced; a live holder wins; only the holder removes it", async () => {
    const d = path.join(dir, "a");
    assert.deepEqual(lock.acquireLock(d, { port: 1 }), { ok: true });
    assert.equal(lock.readLock(d).pid, process.pid);
    lock.releaseLock(d);
    assert.equal(existsSync(lock.lockPath(d)), false);

    writeFileSync(lock.lockPath(d), JSON.stringify({ pid: 2 ** 22 + 777 }));
    const r = lock.acquireLock(d);
    assert.equal(r.ok, true);
    assert.equal(r.replaced.pid, 2 ** 22 + 777);
    lock.releaseLock(d);

    writeFileSync(lock.lockPath(d), "{half a lock");
    assert.equal(lock.acquireLock(d).ok, true, "an unreadable lock is stale");
    lock.releaseLock(d);

    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    try {
      await new Promise((r) => holder.once("spawn", r));
      writeFileSync(lock.lockPath(d), JSON.stringify({ pid: holder.pid, url: "http://127.0.0.1:9" }));
      const held = lock.acquireLock(d);
      assert.equal(held.ok, false);
      assert.equal(held.holder.pid, holder.pid);
      lock.releaseLock(d);
      assert.ok(existsSync(lock.lockPath(d)), "not ours: left alone");
    } finally {
      holder.kill("SIGKILL");
      await new Promise((r) => holder.once("exit", r));
    }
  });
});

describe("openclaw plugin: the bridge in the gateway process", { concurrency: false }, () => {
  let plugin: any;
  let sidecar: any;
  let upstream: FakeOpenAI;
  let dir: string;
  let bridgeConfig: string;

  before(async () => {
    plugin = (await load("index.js")).default;
    sidecar = await load("lib/sidecar.js");
    upstream = await startFakeOpenAI(() => ({ kind: "text", chunks: ["from ", "upstream"] }));
    dir = tempDir("cb-plugin-run-");
    bridgeConfig = path.join(dir, "bridge.json");
    writeFileSync(
      bridgeConfig,
      JSON.stringify({
        server: { port: 4097, shutdownGraceSeconds: 1 },
        logging: { level: "info" },
        intents: { enabled: false },
        backends: { up: { type: "openai", baseUrl: upstream.url } },
        models: [{ id: "fake", backend: "up" }],
      }),
    );
  });
  after(async () => {
    await upstream?.close();
    cleanup(dir);
  });

  const stopAll = async (reg: { services: any[]; hooks: Map<string, any[]> }) => {
    for (const s of reg.services) await s.stop({});
    for (const h of reg.hooks.get("gateway_stop") ?? []) await h({ reason: "test" });
  };

  test("register() starts nothing; the service starts one bridge per process; stop closes it and removes the lock", async () => {
    const port = await freePort();
    const dataDir = path.join(dir, "d1");
    const cfg = { configPath: bridgeConfig, port, dataDir, apiKey: "plugin-key-0123456789" };
    const a = fakeApi(cfg);
    const b = fakeApi(cfg);
    plugin.register(a.api);
    plugin.register(b.api); // OpenClaw loads a plugin more than once per process
    assert.equal(a.reg.services.length, 1);
    assert.equal(a.reg.providers[0].id, "clawbridge");
    assert.equal(typeof a.reg.providers[0].wrapStreamFn, "function");
    assert.equal(await listening(port), false, "register() alone starts nothing");
    assert.equal(existsSync(path.join(dataDir, "plugin.lock")), false);
    try {
      await Promise.all([a.reg.services[0].start({ config: {} }), b.reg.services[0].start({ config: {} })]);
      assert.equal(await listening(port), true);
      const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as any;
      assert.equal(health.name, "clawbridge");
      assert.equal(JSON.parse(readFileSync(path.join(dataDir, "plugin.lock"), "utf8")).pid, process.pid);
      assert.ok(
        a.logs.concat(b.logs).some((l) => /already started in this process/.test(l.msg)),
        "the second start was refused",
      );
      assert.ok(
        a.logs.concat(b.logs).some((l) => l.level === "info" && /listening on http:\/\/127\.0\.0\.1:/.test(l.msg)),
      );
      // The plugin's apiKey is required; a turn works with it.
      assert.equal((await fetch(`http://127.0.0.1:${port}/v1/models`)).status, 401);
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: "Bearer plugin-key-0123456789",
          "x-session-id": "sess-1",
        },
        body: JSON.stringify({ model: "fake", stream: true, messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(res.status, 200);
      assert.match(await res.text(), /upstream/);
      assert.equal(res.headers.get("x-clawbridge-conversation"), "sess-1");
    } finally {
      await stopAll(a.reg);
      await stopAll(b.reg);
    }
    assert.equal(await listening(port), false, "port closed after stop");
    assert.equal(existsSync(path.join(dataDir, "plugin.lock")), false, "lock removed");
    assert.equal(sidecar.sidecarState().phase, "idle");
  });

  test("a port held by another program: a clear error, nothing started, no lock left", async () => {
    const other = http.createServer((_req, res) => res.writeHead(404, { server: "not-clawbridge" }).end("nope"));
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    const port = (other.address() as AddressInfo).port;
    const dataDir = path.join(dir, "d2");
    const { api, reg, logs } = fakeApi({ configPath: bridgeConfig, port, dataDir });
    try {
      plugin.register(api);
      await reg.services[0].start({ config: {} });
      const err = logs.find((l) => l.level === "error");
      assert.ok(err, JSON.stringify(logs));
      assert.match(err!.msg, new RegExp(`127\\.0\\.0\\.1:${port} is already in use by another program`));
      assert.equal(existsSync(path.join(dataDir, "plugin.lock")), false);
      assert.equal(sidecar.sidecarState().phase, "idle");
    } finally {
      await stopAll(reg);
      await new Promise<void>((r) => other.close(() => r()));
    }
  });

  test("a port already served by a clawbridge is reused, not fought over", async () => {
    const port = await freePort();
    const running = await startTestBridge({
      server: { port },
      backends: { up: { type: "openai", baseUrl: upstream.url } },
      models: [{ id: "fake", backend: "up" }],
    });
    const dataDir = path.join(dir, "d3");
    const { api, reg, logs } = fakeApi({ configPath: bridgeConfig, port, dataDir });
    try {
      plugin.register(api);
      await reg.services[0].start({ config: {} });
      assert.ok(
        logs.some((l) => /already serves 127\.0\.0\.1:\d+; using it/.test(l.msg)),
        JSON.stringify(logs),
      );
      assert.equal(existsSync(path.join(dataDir, "plugin.lock")), false);
      assert.equal(sidecar.sidecarState().phase, "idle");
    } finally {
      await stopAll(reg);
      await running.close(0);
      cleanup(running.dataDir);
    }
  });

  test("a lock held by another live process: this process does not start a second bridge", async () => {
    const port = await freePort();
    const dataDir = path.join(dir, "d4");
    mkdirSync(dataDir, { recursive: true });
    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    const { api, reg, logs } = fakeApi({ configPath: bridgeConfig, port, dataDir });
    try {
      await new Promise((r) => holder.once("spawn", r));
      writeFileSync(
        path.join(dataDir, "plugin.lock"),
        JSON.stringify({ pid: holder.pid, url: `http://127.0.0.1:${port}` }),
      );
      plugin.register(api);
      await reg.services[0].start({ config: {} });
      assert.ok(
        logs.some((l) => l.level === "warn" && new RegExp(`another process \\(pid ${holder.pid}`).test(l.msg)),
        JSON.stringify(logs),
      );
      assert.equal(await listening(port), false);
      assert.equal(
        JSON.parse(readFileSync(path.join(dataDir, "plugin.lock"), "utf8")).pid,
        holder.pid,
        "the holder's lock is left alone",
      );
    } finally {
      await stopAll(reg);
      holder.kill("SIGKILL");
      await new Promise((r) => holder.once("exit", r));
    }
  });

  test("discovery and metadata loads register no service; autoStart false only adds the header", () => {
    const disc = fakeApi({ configPath: bridgeConfig }, { mode: "discovery" });
    plugin.register(disc.api);
    assert.equal(disc.reg.services.length, 0);
    assert.equal(disc.reg.providers.length, 1, "the provider wrapper is inert and registered for discovery");
    const meta = fakeApi({}, { mode: "cli-metadata" });
    plugin.register(meta.api);
    assert.equal(meta.reg.services.length + meta.reg.providers.length + meta.reg.hooks.size, 0);
    const manual = fakeApi({ autoStart: false });
    plugin.register(manual.api);
    assert.equal(manual.reg.services.length, 0);
    assert.equal(manual.reg.providers.length, 1);
  });

  test("clawbridge not found (a copied plugin without clawbridgeRoot): an error in the log, nothing started", async () => {
    const { startSidecar } = sidecar;
    const logs: Logged[] = [];
    const logger = Object.fromEntries(
      ["debug", "info", "warn", "error"].map((level) => [level, (msg: string) => logs.push({ level, msg })]),
    );
    await startSidecar(
      { root: undefined, rootHint: "clawbridge was not found: set clawbridgeRoot", dataDir: path.join(dir, "d5") },
      logger,
    );
    assert.match(logs.find((l) => l.level === "error")?.msg ?? "", /not started: clawbridge was not found/);
    assert.equal(existsSync(path.join(dir, "d5", "plugin.lock")), false);
  });
});
