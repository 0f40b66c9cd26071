/**
 * The dashboard without a browser: `/dashboard` on a real bridge with `server.apiKeys` (the page
 * served without a key, with a strict CSP; assets with their types and long caching; client routes
 * get index.html; no way out of the build folder, whatever the URL or a symlink says; 503 naming
 * `npm run build` when there is no build), and the `/v1/admin/*` routes the views read (401
 * without the key, 200 with it; turns and decisions from the bus, processes, queue, session
 * bindings and "forget", backends and CLIs, the doctor's findings, the router's open questions).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Fastify from "fastify";
import { resolveConfig } from "../../src/core/config/load.js";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import {
  DASHBOARD_CSP,
  DEFAULT_DASHBOARD_DIR,
  registerDashboardRoute,
} from "../../src/request/http/dashboard-route.js";
import type { SystemctlRunner } from "../../src/ops/service/systemd.js";
import { defaultSessionStorePath, openSessionStore } from "../../src/core/store/index.js";
import { CliProcess } from "../../src/core/util/process.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const KEY = "dashboard-test-key-01";
const auth = { authorization: `Bearer ${KEY}` };
const SECRET = "TOP-SECRET-OUTSIDE-THE-BUILD";
const INDEX =
  '<!doctype html><html><head><script type="module" src="/dashboard/assets/app-abc123.js"></script></head><body><div id="root"></div></body></html>\n';
const noBus: SystemctlRunner = async () => ({
  code: 1,
  stdout: "",
  stderr: "Failed to connect to bus: No medium found",
});

/** A GET with the path sent exactly as written (fetch would normalise `..`). */
function rawGet(
  url: string,
  rawPath: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: rawPath, method: "GET", headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("dashboard: the page and its admin routes", () => {
  let dir: string;
  let dist: string;
  let bridge: TestBridge;

  before(async () => {
    dir = tempDir("cb-dashboard-");
    // A stand-in build (the real one is checked below when it exists), with a secret beside it.
    dist = path.join(dir, "dist");
    mkdirSync(path.join(dist, "assets"), { recursive: true });
    writeFileSync(path.join(dist, "index.html"), INDEX);
    writeFileSync(path.join(dist, "assets", "app-abc123.js"), "console.log('dashboard');\n");
    writeFileSync(path.join(dist, "assets", "app-abc123.css"), "body{margin:0}\n");
    writeFileSync(path.join(dist, "favicon.svg"), '<svg xmlns="http://www.w3.org/2000/svg"/>\n');
    writeFileSync(path.join(dist, ".build-stamp"), "STAMP-CONTENT-1234\n");
    writeFileSync(path.join(dir, "secret.txt"), SECRET);
    symlinkSync(path.join(dir, "secret.txt"), path.join(dist, "assets", "leak.js"));
    symlinkSync(dir, path.join(dist, "up"));

    const dataDir = path.join(dir, "data");
    const home = path.join(dir, "home");
    mkdirSync(home);
    const raw = {
      dataDir,
      server: { host: "127.0.0.1", port: 0, apiKeys: [KEY] },
      // Nothing listens on port 9: that backend is "not usable", with its fix.
      backends: {
        up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" },
        cc: { type: "claude-code", command: "/bin/true" },
      },
      models: [
        { id: "m1", backend: "up" },
        { id: "claude", backend: "cc", session: { mode: "resume" } },
      ],
      systems: [
        {
          id: "ask",
          name: "Ask",
          description: "asks the model",
          keywords: ["ask"],
          inputs: {
            type: "object",
            required: ["q", "tone"],
            properties: { q: { type: "string" }, tone: { type: "string" } },
          },
          confirm: "never",
          run: { kind: "model", model: "m1", prompt: "${inputs.q}", timeoutSeconds: 30 },
        },
      ],
    };
    const config = resolveConfig({ intents: { enabled: false }, ...raw }, "test");
    bridge = await startTestBridge(raw, {
      dashboardDir: dist,
      systemsDb: ":memory:",
      doctor: () =>
        runDoctor({
          config,
          backends: bridge.backends,
          openclawHome: path.join(home, ".openclaw"),
          tmpDir: dir,
          unitDir: path.join(home, "units"),
          systemctl: noBus,
          scanClis: false,
          validate: null,
          env: { ...process.env, HOME: home },
        }),
    });
  });

  after(async () => {
    await bridge?.close(1000);
    cleanup(dir);
  });

  test("the page is served without a key, with a strict CSP; client routes get it too", async () => {
    for (const p of ["/dashboard", "/dashboard/", "/dashboard/runs/r_123", "/dashboard/systems/some.id"]) {
      const res = await fetch(`${bridge.url}${p}`);
      assert.equal(res.status, 200, p);
      assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8", p);
      assert.equal(await res.text(), INDEX, p);
      const csp = res.headers.get("content-security-policy") ?? "";
      assert.equal(csp, DASHBOARD_CSP);
      assert.match(csp, /(^|; )default-src 'self'(;|$)/);
      assert.match(csp, /(^|; )connect-src 'self'(;|$)/);
      assert.doesNotMatch(csp, /https?:|\*|unsafe-eval/, "nothing from elsewhere, no eval");
      assert.equal(res.headers.get("cache-control"), "no-cache", p);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    }
    // HEAD works as GET without a body.
    const head = await fetch(`${bridge.url}/dashboard`, { method: "HEAD" });
    assert.equal(head.status, 200);
  });

  test("assets with their content types; hashed ones cached for good", async () => {
    const js = await fetch(`${bridge.url}/dashboard/assets/app-abc123.js`);
    assert.equal(js.status, 200);
    assert.equal(js.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.equal(js.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.equal(await js.text(), "console.log('dashboard');\n");
    const css = await fetch(`${bridge.url}/dashboard/assets/app-abc123.css`);
    assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
    const svg = await fetch(`${bridge.url}/dashboard/favicon.svg`);
    assert.equal(svg.status, 200);
    assert.equal(svg.headers.get("content-type"), "image/svg+xml");
    assert.equal(svg.headers.get("cache-control"), "no-cache");
    // A missing file is 404, not the page.
    for (const p of ["/dashboard/assets/gone-1.js", "/dashboard/nothing.png", "/dashboard/assets/"]) {
      const res = await fetch(`${bridge.url}${p}`);
      if (p.endsWith("/")) {
        // A folder is never listed: the page (a client route) comes back instead.
        assert.equal(await res.text(), INDEX, p);
      } else {
        assert.equal(res.status, 404, p);
        assert.equal(((await res.json()) as any).error.code, "not_found");
      }
    }
  });

  test("no path leads out of the build: dot segments however encoded, backslashes, dotfiles, symlinks", async () => {
    const tries = [
      "/dashboard/../secret.txt",
      "/dashboard/assets/../../secret.txt",
      "/dashboard/%2e%2e/secret.txt",
      "/dashboard/%2E%2E%2Fsecret.txt",
      "/dashboard/assets/..%2f..%2fsecret.txt",
      "/dashboard/..%5csecret.txt",
      "/dashboard/..\\secret.txt",
      "/dashboard/%00/../secret.txt",
      "/dashboard/./index.html",
      "/dashboard/.build-stamp",
      "/dashboard/assets/leak.js",
      "/dashboard/up/secret.txt",
      "/dashboard//etc/passwd",
      "/dashboard/%2fetc%2fpasswd",
    ];
    for (const p of tries) {
      const res = await rawGet(bridge.url, p);
      assert.ok(!res.body.includes(SECRET), `${p} leaked the file`);
      assert.ok(!res.body.includes("root:"), `${p} leaked /etc/passwd`);
      assert.ok(!res.body.includes("STAMP-CONTENT"), `${p} served a dotfile`);
      assert.ok(
        res.status === 404 || res.status === 400 || res.body === INDEX,
        `${p}: ${res.status} ${res.body.slice(0, 100)}`,
      );
    }
  });

  test("without a build: 503 that says to run npm run build", async () => {
    const app = Fastify();
    registerDashboardRoute(app, { dir: path.join(dir, "empty") });
    mkdirSync(path.join(dir, "empty"));
    try {
      const json = await app.inject({ method: "GET", url: "/dashboard" });
      assert.equal(json.statusCode, 503);
      const body = json.json() as { error: { code: string; message: string } };
      assert.equal(body.error.code, "dashboard_not_built");
      assert.match(body.error.message, /npm run build/);
      const page = await app.inject({ method: "GET", url: "/dashboard/live", headers: { accept: "text/html,*/*" } });
      assert.equal(page.statusCode, 503);
      assert.match(page.body, /npm run build/);
      const nowhere = await app.inject({ method: "GET", url: "/dashboard/assets/x.js" });
      assert.equal(nowhere.statusCode, 503);
    } finally {
      await app.close();
    }
    // A folder that does not exist at all is the same.
    const gone = Fastify();
    registerDashboardRoute(gone, { dir: path.join(dir, "never-built") });
    assert.equal((await gone.inject({ method: "GET", url: "/dashboard" })).statusCode, 503);
    await gone.close();
  });

  test("the real build, when there is one, loads nothing from elsewhere", async (t) => {
    if (!existsSync(path.join(DEFAULT_DASHBOARD_DIR, "index.html"))) {
      t.skip("packages/dashboard/dist is not built (npm run build builds it)");
      return;
    }
    const html = readFileSync(path.join(DEFAULT_DASHBOARD_DIR, "index.html"), "utf8");
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(refs.length >= 2, html);
    for (const r of refs) assert.match(r, /^\/dashboard\//, `index.html refers to ${r}`);
    for (const f of readdirSync(path.join(DEFAULT_DASHBOARD_DIR, "assets")).filter((n) => n.endsWith(".css"))) {
      const css = readFileSync(path.join(DEFAULT_DASHBOARD_DIR, "assets", f), "utf8");
      assert.doesNotMatch(css, /@import|url\(\s*["']?(https?:)?\/\//, `${f} loads something from elsewhere`);
    }
    const app = Fastify();
    registerDashboardRoute(app);
    try {
      const page = await app.inject({ method: "GET", url: "/dashboard/live" });
      assert.equal(page.statusCode, 200);
      assert.equal(page.body, html);
      const script = refs.find((r) => r.endsWith(".js"))!;
      const js = await app.inject({ method: "GET", url: script });
      assert.equal(js.statusCode, 200);
      assert.equal(js.headers["content-type"], "text/javascript; charset=utf-8");
      assert.equal(js.headers["cache-control"], "public, max-age=31536000, immutable");
    } finally {
      await app.close();
    }
  });

  test("every admin route needs the key (401 without, 200 with)", async () => {
    const routes = [
      "/v1/admin/turns",
      "/v1/admin/processes",
      "/v1/admin/queue",
      "/v1/admin/sessions",
      "/v1/admin/backends",
      "/v1/admin/doctor",
      "/v1/admin/router",
      "/v1/admin/usage",
    ];
    for (const r of routes) {
      const none = await fetch(`${bridge.url}${r}`);
      assert.equal(none.status, 401, r);
      assert.equal(((await none.json()) as any).error.code, "invalid_api_key", r);
      const wrong = await fetch(`${bridge.url}${r}`, { headers: { authorization: "Bearer not-the-key-at-all" } });
      assert.equal(wrong.status, 401, r);
      await wrong.body?.cancel();
      const ok = await fetch(`${bridge.url}${r}`, { headers: auth });
      assert.equal(ok.status, 200, `${r}: ${await ok.clone().text()}`);
      assert.match(ok.headers.get("content-type") ?? "", /^application\/json/);
      await ok.json();
    }
    const del = await fetch(`${bridge.url}/v1/admin/sessions/x`, { method: "DELETE" });
    assert.equal(del.status, 401);
  });

  test("turns and router decisions from the bus; processes; queue", async () => {
    const bus = bridge.bus;
    bus.emit({
      type: "turn.started",
      turnId: "t-run",
      conversation: "conv-a",
      model: "m1",
      backend: "up",
      mode: "passthrough",
      queuedMs: 3,
    });
    bus.emit({
      type: "turn.started",
      turnId: "t-done",
      conversation: "conv-b",
      model: "claude",
      backend: "cc",
      mode: "resume",
      queuedMs: 0,
    });
    bus.emit({
      type: "turn.firstByte",
      turnId: "t-done",
      conversation: "conv-b",
      model: "claude",
      backend: "cc",
      ms: 120,
    });
    bus.emit({
      type: "turn.completed",
      turnId: "t-done",
      conversation: "conv-b",
      model: "claude",
      backend: "cc",
      ms: 900,
      firstByteMs: 120,
      promptTokens: 42,
      completionTokens: 7,
      finishReason: "stop",
    });
    bus.emit({
      type: "turn.failed",
      turnId: "t-bad",
      conversation: "conv-c",
      model: "m1",
      backend: "up",
      ms: 50,
      code: "backend_unavailable",
      message: "connection refused",
    });
    // A limit, and t-run handed to the next model of its fallback chain: it is still running.
    bus.emit({ type: "backend.limited", backend: "up", message: "rate limit", resetAt: Date.now() + 60_000, until: 0 });
    bus.emit({
      type: "turn.fallback",
      turnId: "t-run",
      conversation: "conv-a",
      model: "m1",
      fromModel: "m1",
      fromBackend: "up",
      to: "claude",
      toBackend: "cc",
      reason: "limit_reached",
    });
    bus.emit({
      type: "decision",
      conversation: "conv-a",
      action: "clarify",
      system: "ask",
      confidence: 0.82,
      source: "classifier",
      reason: "wants an answer",
    });

    const turns = (await (await fetch(`${bridge.url}/v1/admin/turns`, { headers: auth })).json()) as any;
    assert.deepEqual(
      turns.running.map((t: any) => [t.id, t.status, t.mode, t.queued_ms]),
      [["t-run", "running", "passthrough", 3]],
    );
    const done = turns.recent.find((t: any) => t.id === "t-done");
    assert.equal(done.status, "completed");
    assert.equal(done.first_byte_ms, 120);
    assert.equal(done.duration_ms, 900);
    assert.equal(done.prompt_tokens, 42);
    assert.equal(done.completion_tokens, 7);
    assert.equal(done.model, "claude");
    assert.equal(done.backend, "cc");
    const bad = turns.recent.find((t: any) => t.id === "t-bad");
    assert.deepEqual([bad.status, bad.error.code], ["failed", "backend_unavailable"]);
    assert.equal(turns.recent[0].id, "t-bad", "newest first");
    assert.equal(typeof turns.queue.maxConcurrent, "number");
    assert.equal(turns.live, true);

    // Usage per backend per day, from the same events.
    const usage = (await (await fetch(`${bridge.url}/v1/admin/usage?days=1`, { headers: auth })).json()) as any;
    const day = (b: string) => usage.data.find((r: any) => r.backend === b);
    assert.deepEqual([day("cc").turns, day("cc").tokens_in, day("cc").tokens_out], [1, 42, 7]);
    assert.deepEqual(
      [day("up").turns, day("up").failed, day("up").limit_hits, day("up").fallbacks, day("up").last_limit_message],
      [1, 1, 1, 1, "rate limit"],
    );
    const upState = usage.backends.find((b: any) => b.backend === "up");
    assert.ok(upState.next_reset_at > Date.now(), "the next reset is in the future");
    assert.deepEqual(
      usage.recent.map((r: any) => [r.kind, r.backend, r.to_backend]),
      [
        ["fallback", "up", "cc"],
        ["limited", "up", null],
      ],
    );

    const proc = new CliProcess({
      command: "sleep",
      args: ["30"],
      env: process.env,
      label: "dashboard test sleep",
      cwd: dir,
    });
    try {
      const procs = (await (await fetch(`${bridge.url}/v1/admin/processes`, { headers: auth })).json()) as any;
      const mine = procs.data.find((p: any) => p.pid === proc.pid);
      assert.ok(mine, JSON.stringify(procs));
      assert.deepEqual([mine.command, mine.label, mine.cwd], ["sleep", "dashboard test sleep", dir]);
      const queue = (await (await fetch(`${bridge.url}/v1/admin/queue`, { headers: auth })).json()) as any;
      assert.equal(queue.processes >= 1, true);
      for (const k of ["running", "waiting", "conversations", "maxConcurrent", "maxQueue"])
        assert.equal(typeof queue[k], "number", k);
    } finally {
      await proc.terminate("aborted");
    }

    // An open question of the router, as the router writes it.
    await bridge.systems!.conversations.ask("conv-g", {
      kind: "gathering",
      system: "ask",
      values: { q: "why" },
      rounds: 1,
      since: Date.now(),
    });
    await bridge.systems!.conversations.ask("conv-y", {
      kind: "confirm",
      system: "ask",
      values: { q: "why", tone: "dry" },
      hash: "h1",
      since: Date.now(),
    });
    const router = (await (await fetch(`${bridge.url}/v1/admin/router`, { headers: auth })).json()) as any;
    assert.equal(router.enabled, true);
    assert.deepEqual(
      router.gatherings.map((g: any) => [g.conversation, g.system, g.collected, g.missing, g.rounds]),
      [["conv-g", "ask", ["q"], ["tone"], 1]],
    );
    assert.deepEqual(
      router.confirmations.map((c: any) => [c.conversation, c.values]),
      [["conv-y", { q: "why", tone: "dry" }]],
    );
    assert.deepEqual(router.decisions[0], {
      at: router.decisions[0].at,
      conversation: "conv-a",
      action: "clarify",
      system: "ask",
      confidence: 0.82,
      source: "classifier",
      reason: "wants an answer",
    });
  });

  test("session bindings with their history, and forget", async () => {
    const key = "agent:main:telegram:1/x y";
    // The bridge's own store file, written by a second connection as a CLI turn would.
    const store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(bridge.dataDir) });
    try {
      const now = Date.now();
      await store.put({
        key,
        backend: "cc",
        backendSessionId: "33333333-3333-4333-8333-333333333333",
        cwd: path.join(dir, "work"),
        turns: 3,
        createdAt: now,
        updatedAt: now,
        model: "claude",
      });
      await store.appendEvent(key, "healed", "session_not_found");
      await store.recordError(key, "the CLI crashed");
    } finally {
      await store.close();
    }
    const list = async () =>
      ((await (await fetch(`${bridge.url}/v1/admin/sessions`, { headers: auth })).json()) as any).data as any[];
    const before = await list();
    const row = before.find((s) => s.key === key);
    assert.ok(row, JSON.stringify(before));
    assert.equal(row.backend_session_id, "33333333-3333-4333-8333-333333333333");
    assert.equal(row.last_error, "the CLI crashed");
    assert.ok(
      row.events.some((e: any) => e.kind === "healed" && e.reason === "session_not_found"),
      JSON.stringify(row.events),
    );

    const del = await fetch(`${bridge.url}/v1/admin/sessions/${encodeURIComponent(key)}`, {
      method: "DELETE",
      headers: auth,
    });
    assert.equal(del.status, 200, await del.clone().text());
    assert.deepEqual(await del.json(), { id: key, object: "session", deleted: true });
    assert.equal(
      (await list()).some((s) => s.key === key),
      false,
    );
    const again = await fetch(`${bridge.url}/v1/admin/sessions/${encodeURIComponent(key)}`, {
      method: "DELETE",
      headers: auth,
    });
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as any).error.code, "session_not_found");
  });

  test("backends with health and version, the CLIs on this machine, and the doctor's findings with fixes", async () => {
    const b = (await (await fetch(`${bridge.url}/v1/admin/backends`, { headers: auth })).json()) as any;
    const up = b.data.find((x: any) => x.name === "up");
    assert.deepEqual([up.type, up.usable, up.models], ["openai", false, ["m1"]]);
    const cc = b.data.find((x: any) => x.name === "cc");
    assert.deepEqual([cc.type, cc.models], ["claude-code", ["claude"]]);
    assert.deepEqual(b.clis.map((c: any) => c.name).sort(), ["claude", "codex", "gemini", "opencode", "qwen"]);
    const claude = b.clis.find((c: any) => c.name === "claude");
    assert.deepEqual(claude.used_by, ["cc"]);
    // This package installs every CLI as a dev dependency.
    assert.equal(claude.installed, true, JSON.stringify(claude));
    assert.equal(typeof claude.version, "string");

    const d = (await (await fetch(`${bridge.url}/v1/admin/doctor`, { headers: auth })).json()) as any;
    assert.equal(typeof d.ok, "boolean");
    assert.equal(d.findings.find((f: any) => f.id === "config")?.status, "ok");
    const upFinding = d.findings.find((f: any) => f.id === "backend:up");
    assert.equal(upFinding.status, "fail");
    assert.match(upFinding.fix, /start the model server/);
    assert.equal(d.summary.fail >= 1, true);
  });
});
