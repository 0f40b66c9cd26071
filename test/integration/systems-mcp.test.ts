/**
 * The `mcp` kind against a real MCP server (testkit/mcp-server.ts, built with the SDK), over both
 * transports: stdio (the server started as a child process per attempt) and Streamable HTTP (the
 * same tools served in-process on 127.0.0.1). Covered: text streamed and joined, typed arguments
 * from templates, structuredContent as the output, isError and unknown tools as tool_error, the
 * deadline (retryable timeout) and cancellation reaching the server, `describeMcpTool` (schema and
 * annotations), and for stdio the environment allow-list, a missing command, a server that dies
 * at start, and a server that ignores SIGTERM. Every stdio server writes its pid to a file; after
 * each call the test checks it is gone (and its helper, when it started one).
 */
import { execContext } from "../helpers/exec-context.js";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { describeMcpTool, runMcp } from "../../src/workflows/systems/executors/mcp.js";
import { ExecError } from "../../src/workflows/systems/step-executor.js";
import type { McpRun, McpServer } from "../../src/workflows/systems/schema.js";
import { procStat } from "../../src/core/util/run-records.js";
import { mcpStdioCommand, startMcpHttpServer, type McpHttpServer } from "../../testkit/mcp-server.js";

const dir = mkdtempSync(path.join(tmpdir(), "cb-mcp-"));
let pidFiles = 0;
/** Every pid file handed to a stdio server, for the final sweep. */
const allPidFiles: string[] = [];
let http: McpHttpServer;

before(async () => {
  http = await startMcpHttpServer();
});

after(async () => {
  await http?.close();
  // Nothing should be left; should a test have failed half-way, do not leave processes behind.
  for (const f of allPidFiles) {
    for (const pid of pidsIn(f)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone, as it should be */
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Gone, or a zombie waiting for init. */
const exited = (pid: number): boolean => {
  const s = procStat(pid);
  return s === undefined || s.state === "Z";
};

function pidsIn(file: string): number[] {
  if (!existsSync(file)) return [];
  const { pid, helper } = JSON.parse(readFileSync(file, "utf8")) as { pid: number; helper?: number };
  return helper ? [pid, helper] : [pid];
}

async function eventually(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (let i = 0; i < 1000 && Date.now() < end; i++) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return check();
}

type Kind = "stdio" | "http";

/** A server config; stdio ones get a fresh pid file (returned too) and a cwd that is not the repo. */
function serverFor(
  kind: Kind,
  opts: { flags?: Array<"--stubborn" | "--crash">; env?: string[]; setEnv?: Record<string, string> } = {},
): { server: McpServer; pidFile?: string } {
  if (kind === "http")
    return { server: { transport: "http", url: http.url, headers: { authorization: "Bearer test-token" } } };
  const pidFile = path.join(dir, `server-${++pidFiles}.json`);
  allPidFiles.push(pidFile);
  return {
    server: {
      transport: "stdio",
      ...mcpStdioCommand(...(opts.flags ?? [])),
      env: opts.env ?? [],
      setEnv: { MCP_TESTKIT_PIDFILE: pidFile, ...opts.setEnv },
      cwd: dir,
    },
    pidFile,
  };
}

function context(inputs: Record<string, unknown> = {}) {
  const r = execContext(inputs, { systemId: "sys-mcp", workDir: () => dir });
  return { ...r, cancel: r.ctx.cancel };
}

function spec(server: McpServer, tool: string, extra: Partial<McpRun> = {}): McpRun {
  return { kind: "mcp", server, tool, timeoutSeconds: 30, ...extra };
}

/** The server of `pidFile` (and its helper) must be gone once the attempt has ended. */
async function assertReaped(pidFile: string | undefined, helperWaitMs = 0): Promise<void> {
  if (!pidFile) return;
  const [pid, helper] = pidsIn(pidFile);
  assert.ok(pid, "the stdio server wrote its pid");
  assert.ok(exited(pid), `stdio server ${pid} is still running after the attempt ended`);
  // A helper is reparented to init when the group is killed; give init a moment to reap it.
  if (helper)
    assert.ok(
      await eventually(() => exited(helper), helperWaitMs || 1000),
      `helper ${helper} of the server is still running`,
    );
}

/** Run, then check the stdio server is gone; returns the result or the ExecError. */
async function call(
  kind: Kind,
  tool: string,
  opts: { inputs?: Record<string, unknown>; arguments?: Record<string, unknown>; timeoutSeconds?: number } = {},
) {
  const { server, pidFile } = serverFor(kind);
  const { ctx, pieces } = context(opts.inputs);
  const extra: Partial<McpRun> = {};
  if (opts.arguments) extra.arguments = opts.arguments;
  if (opts.timeoutSeconds) extra.timeoutSeconds = opts.timeoutSeconds;
  const settled = await runMcp(spec(server, tool, extra), ctx).then(
    (r) => ({ ok: true as const, output: r.output }),
    (e: unknown) => ({ ok: false as const, error: e }),
  );
  await assertReaped(pidFile);
  return { ...settled, pieces, pidFile };
}

function execError(r: { ok: boolean; error?: unknown }): ExecError {
  assert.equal(r.ok, false, "the call should have failed");
  assert.ok(r.error instanceof ExecError, `expected an ExecError, got ${String(r.error)}`);
  return r.error;
}

for (const kind of ["stdio", "http"] as const) {
  describe(`mcp over ${kind}`, () => {
    test("echo: the text is streamed and is the output", async () => {
      const before = http.requests.length;
      const r = await call(kind, "echo", { inputs: { text: "hello there" } });
      assert.deepEqual(r, { ok: true, output: "echo: hello there", pieces: ["echo: hello there"], pidFile: r.pidFile });
      if (kind === "http") {
        const seen = http.requests.slice(before);
        assert.ok(
          seen.length > 0 && seen.every((h) => h.authorization === "Bearer test-token"),
          "configured headers go with every request",
        );
        // The session is ended (DELETE) when the attempt closes.
        assert.ok(await eventually(() => http.sessions() === 0, 2000), "the HTTP session was closed");
      }
    });

    test("several text blocks are streamed one by one and joined by newlines", async () => {
      const r = await call(kind, "lines", { arguments: { count: 3 } });
      assert.equal(r.ok, true);
      assert.equal(r.ok && r.output, "line 1\nline 2\nline 3");
      assert.deepEqual(r.pieces, ["line 1", "\nline 2", "\nline 3"]);
    });

    test("templated arguments keep their types; structuredContent is the output", async () => {
      const r = await call(kind, "add", { inputs: { a: 2, b: 40 }, arguments: { a: "${inputs.a}", b: "${inputs.b}" } });
      assert.equal(r.ok, true, r.ok ? "" : String((r as { error: unknown }).error));
      assert.deepEqual(r.ok && r.output, { sum: 42 });
      assert.deepEqual(r.pieces, ["2 + 40 = 42"]);
      // Text around a reference makes a string.
      const e = await call(kind, "echo", { inputs: { a: 2 }, arguments: { text: "n=${inputs.a} in ${run.id}" } });
      assert.equal(e.ok && e.output, "echo: n=2 in run-1");
    });

    test("non-text content only: the output is the content blocks", async () => {
      const r = await call(kind, "pixel");
      assert.equal(r.ok, true);
      const out = (r.ok ? r.output : undefined) as Array<{ type: string; mimeType: string }>;
      assert.equal(out.length, 1);
      assert.equal(out[0]!.type, "image");
      assert.equal(out[0]!.mimeType, "image/png");
      assert.deepEqual(r.pieces, []);
    });

    test("isError becomes tool_error with the tool's text, not retried", async () => {
      const e = execError(await call(kind, "fail"));
      assert.equal(e.code, "tool_error");
      assert.equal(e.message, "the tool failed on purpose");
      assert.equal(e.retryable, false);
    });

    test("an unknown tool is a tool_error naming the tools the server has", async () => {
      const e = execError(await call(kind, "no_such_tool"));
      assert.equal(e.code, "tool_error");
      assert.match(e.message, /^MCP server has no tool no_such_tool \(it has: .*\becho\b.*\bdelete_item\b.*\)$/);
    });

    test("arguments the tool rejects are a tool_error, not an unknown tool", async () => {
      const e = execError(await call(kind, "echo", { arguments: { text: 5 } }));
      assert.equal(e.code, "tool_error");
      assert.doesNotMatch(e.message, /has no tool/);
      assert.match(e.message, /text/);
    });

    test("the deadline: a slow tool is a retryable timeout and the server hears of it", async () => {
      const aborted = http.state.abortedSlow;
      // The deadline covers starting a stdio server too, so give that time before the call.
      const seconds = kind === "stdio" ? 4 : 0.3;
      const t0 = Date.now();
      const r = await call(kind, "slow", { arguments: { ms: 10_000 }, timeoutSeconds: seconds });
      const elapsed = Date.now() - t0;
      const e = execError(r);
      assert.equal(e.code, "timeout");
      assert.equal(e.retryable, true);
      assert.match(e.message, /did not finish within/);
      assert.ok(elapsed < seconds * 1000 + 2000, `ended ${elapsed} ms after the start`);
      if (kind === "stdio")
        assert.ok(existsSync(`${r.pidFile}.slow`), "the deadline passed during the call, not while starting");
      else
        assert.ok(
          await eventually(() => http.state.abortedSlow === aborted + 1 && http.state.activeSlow === 0, 2000),
          "the server's handler was cancelled",
        );
    });

    test("cancelling mid-call ends the attempt promptly", async () => {
      const { server, pidFile } = serverFor(kind);
      const { ctx, cancel } = context();
      const aborted = http.state.abortedSlow;
      const running = runMcp(spec(server, "slow", { arguments: { ms: 20_000 } }), ctx).then(
        () => undefined,
        (e: unknown) => e,
      );
      const started = await eventually(
        () => (pidFile ? existsSync(`${pidFile}.slow`) : http.state.activeSlow > 0),
        15_000,
      );
      assert.ok(started, "the slow call started");
      const t0 = Date.now();
      cancel.abort();
      const err = await running;
      const elapsed = Date.now() - t0;
      assert.ok(err instanceof ExecError, String(err));
      assert.equal(err.code, "cancelled");
      assert.equal(err.retryable, false);
      assert.ok(elapsed < 1500, `the attempt ended ${elapsed} ms after the cancel`);
      await assertReaped(pidFile);
      if (kind === "http")
        assert.ok(
          await eventually(() => http.state.abortedSlow === aborted + 1 && http.state.activeSlow === 0, 2000),
          "the server's handler was cancelled",
        );
    });

    test("describeMcpTool: input schema and the destructive / read-only hints", async () => {
      const a = serverFor(kind);
      const del = await describeMcpTool(a.server, "delete_item", { timeoutMs: 20_000 });
      await assertReaped(a.pidFile);
      assert.equal(del.destructive, true);
      assert.equal(del.readOnly, false);
      assert.equal(del.description, "Delete an item.");
      assert.equal(del.inputSchema.type, "object");
      assert.deepEqual((del.inputSchema.properties as Record<string, unknown>).id, { type: "string" });
      assert.deepEqual(del.inputSchema.required, ["id"]);

      const b = serverFor(kind);
      const echo = await describeMcpTool(b.server, "echo", { timeoutMs: 20_000 });
      await assertReaped(b.pidFile);
      assert.equal(echo.readOnly, true);
      assert.equal(echo.destructive, undefined);

      const c = serverFor(kind);
      await assert.rejects(
        describeMcpTool(c.server, "nope", { timeoutMs: 20_000 }),
        /has no tool nope \(it has: .*\badd\b.*\bslow\b/,
      );
      await assertReaped(c.pidFile);
    });
  });
}

describe("mcp over stdio: the server process", () => {
  test("the server sees PATH, HOME and only the variables it is given", async () => {
    const saved = { ...process.env };
    process.env.CLAWBRIDGE_TEST_SECRET = "s3cret";
    process.env.CLAWBRIDGE_TEST_ALLOWED = "allowed-value";
    // What the SDK's own stdio transport would pass on by default.
    process.env.USER ??= "tester";
    process.env.SHELL ??= "/bin/sh";
    try {
      const run = async (env: string[]) => {
        const { server, pidFile } = serverFor("stdio", { env, setEnv: { CLAWBRIDGE_TEST_SET: "fixed" } });
        const { ctx } = context();
        const r = await runMcp(spec(server, "env"), ctx);
        await assertReaped(pidFile);
        return JSON.parse(r.output as string) as { seen: Record<string, string | null>; names: string[] };
      };
      const listed = await run(["CLAWBRIDGE_TEST_ALLOWED"]);
      assert.equal(listed.seen.CLAWBRIDGE_TEST_SECRET, null, "an unlisted variable leaked");
      assert.equal(listed.seen.CLAWBRIDGE_TEST_ALLOWED, "allowed-value");
      assert.equal(listed.seen.CLAWBRIDGE_TEST_SET, "fixed");
      assert.equal(listed.seen.PATH, process.env.PATH);
      assert.equal(listed.seen.HOME, process.env.HOME ?? null);
      assert.deepEqual(
        listed.names.filter(
          (n) => !["PATH", "HOME", "CLAWBRIDGE_TEST_ALLOWED", "CLAWBRIDGE_TEST_SET", "MCP_TESTKIT_PIDFILE"].includes(n),
        ),
        [],
        "nothing else of the bridge's environment reaches the server",
      );

      const secret = await run(["CLAWBRIDGE_TEST_SECRET", "CLAWBRIDGE_TEST_UNSET_NAME"]);
      assert.equal(secret.seen.CLAWBRIDGE_TEST_SECRET, "s3cret", "a listed variable is passed");
      assert.equal(secret.seen.CLAWBRIDGE_TEST_ALLOWED, null);
      assert.ok(!secret.names.includes("CLAWBRIDGE_TEST_UNSET_NAME"), "a listed name that is not set is not passed");
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });

  test("a command that does not exist is spawn_failed, at once", async () => {
    const server: McpServer = {
      transport: "stdio",
      command: path.join(dir, "no-such-mcp-server"),
      args: [],
      env: [],
      setEnv: {},
    };
    const { ctx } = context();
    const t0 = Date.now();
    const err = await runMcp(spec(server, "echo"), ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ExecError, String(err));
    assert.equal(err.code, "spawn_failed");
    assert.equal(err.retryable, false);
    assert.match(err.message, /no-such-mcp-server/);
    assert.match(err.message, /ENOENT/);
    assert.ok(Date.now() - t0 < 1000, "reported without waiting for a deadline");
    await assert.rejects(
      describeMcpTool(server, "echo", { timeoutMs: 5000 }),
      (e: unknown) => e instanceof ExecError && e.code === "spawn_failed",
    );
  });

  test("a server that exits before answering is spawn_failed with its stderr", async () => {
    const { server, pidFile } = serverFor("stdio", { flags: ["--crash"] });
    const { ctx } = context();
    const err = await runMcp(spec(server, "echo"), ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ExecError, String(err));
    assert.equal(err.code, "spawn_failed");
    assert.match(err.message, /exited before it answered \(exit code 3\)/);
    assert.match(err.message, /missing configuration, giving up/);
    assert.ok(!existsSync(pidFile!), "the crashing server never got as far as its pid file");
  });

  test("a server that ignores SIGTERM and the end of stdin is killed with its process group", async () => {
    const { server, pidFile } = serverFor("stdio", { flags: ["--stubborn"] });
    const { ctx, cancel } = context();
    const running = runMcp(spec(server, "slow", { arguments: { ms: 20_000 } }), ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(await eventually(() => existsSync(`${pidFile}.slow`), 15_000), "the slow call started");
    const [, helper] = pidsIn(pidFile!);
    assert.ok(helper && !exited(helper), "the server's helper runs");
    const t0 = Date.now();
    cancel.abort();
    const err = await running;
    assert.ok(err instanceof ExecError && err.code === "cancelled", String(err));
    // stdin grace (short after a cancel) + SIGTERM grace, then SIGKILL.
    assert.ok(Date.now() - t0 < 4000, `took ${Date.now() - t0} ms`);
    await assertReaped(pidFile, 3000);
  });

  test("a run already cancelled starts nothing", async () => {
    const { server, pidFile } = serverFor("stdio");
    const { ctx, cancel } = context({ text: "x" });
    cancel.abort();
    await assert.rejects(
      runMcp(spec(server, "echo"), ctx),
      (e: unknown) => e instanceof ExecError && e.code === "cancelled",
    );
    assert.ok(!existsSync(pidFile!), "no server was started");
  });
});

describe("mcp over http: the connection", () => {
  test("nothing listening is a retryable network error", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer();
      s.listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const { ctx } = context({ text: "x" });
    const err = await runMcp(
      spec({ transport: "http", url: `http://127.0.0.1:${port}/mcp`, headers: {} }, "echo"),
      ctx,
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ExecError, String(err));
    assert.equal(err.code, "network");
    assert.equal(err.retryable, true);
    assert.match(err.message, /127\.0\.0\.1/);
  });

  test("an HTTP error status from the endpoint is http_status", async () => {
    const { ctx } = context({ text: "x" });
    const err = await runMcp(
      spec({ transport: "http", url: http.url.replace(/\/mcp$/, "/elsewhere"), headers: {} }, "echo"),
      ctx,
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof ExecError, String(err));
    assert.equal(err.code, "http_status");
    assert.match(err.message, /404/);
    assert.equal(err.retryable, false);
  });
});
