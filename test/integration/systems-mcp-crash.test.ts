/**
 * A bridge killed with SIGKILL while an `mcp` step's stdio server is in the middle of a tool call
 * (issue 30, item 3). The bridge runs as a CHILD PROCESS through its real command line
 * (`clawbridge serve --config <file>`); the MCP server is a small SDK server written by this test
 * that is as stubborn as a server can be: it ignores SIGTERM and the end of its stdin, keeps a
 * `sleep` helper in its process group, and its tool takes a minute. Every call it gets is appended
 * to a file, so the test counts calls, not server starts.
 *
 * - the orphan watcher ends the server (and its helper) within seconds of the bridge's death;
 * - with the watcher gone too, the next bridge's start-up reaper ends it before it listens;
 * - the run is found `interrupted`; resuming it does not call the tool a second time (the step
 *   fails saying the call may have done its work); resuming once more calls it, once.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { cleanup, eventually, tempDir } from "../helpers/bridge.js";
import { bridgeListening, exited } from "../helpers/process-groups.js";

const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");
const SDK_MCP = import.meta.resolve("@modelcontextprotocol/sdk/server/mcp.js");
const SDK_STDIO = import.meta.resolve("@modelcontextprotocol/sdk/server/stdio.js");

/** argv: calls file, pid file, delay file (ms the tool takes; 60 s when absent). */
const SERVER = `
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { McpServer } from ${JSON.stringify(SDK_MCP)};
import { StdioServerTransport } from ${JSON.stringify(SDK_STDIO)};
const [calls, pidFile, delayFile] = process.argv.slice(2);
process.on("SIGTERM", () => {}); // stubborn: only SIGKILL ends it
const helper = spawn("sleep", ["90"], { stdio: "ignore" }).pid; // in our process group
setTimeout(() => process.exit(0), 90_000); // bounded, whatever happens
const server = new McpServer({ name: "crash-test", version: "1.0.0" });
server.registerTool("work", { description: "Works for a while." }, async () => {
  appendFileSync(calls, process.pid + "\\n");
  let ms = 60_000;
  try { ms = Number(readFileSync(delayFile, "utf8")); } catch {}
  await new Promise((r) => setTimeout(r, ms));
  return { content: [{ type: "text", text: "worked" }] };
});
await server.connect(new StdioServerTransport()); // the end of stdin is ignored
writeFileSync(pidFile, JSON.stringify({ pid: process.pid, helper }));
`;

interface Child {
  proc: ChildProcess;
  url: string;
  exited: Promise<unknown>;
}

/** Every pid this file saw (bridges, servers, helpers, watchers): SIGKILLed at the end, should a test fail half-way. */
const seen = new Set<number>();
const dirs: string[] = [];

after(() => {
  for (const pid of seen) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone, as it should be */
    }
  }
  for (const d of dirs) cleanup(d);
});

async function startBridge(configFile: string): Promise<Child> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLAWBRIDGE_CONFIG;
  const proc = spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, "serve", "--config", configFile], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  if (proc.pid) seen.add(proc.pid);
  const done = new Promise((resolve) => proc.once("exit", resolve));
  const { url } = bridgeListening(proc);
  return { proc, url: await url, exited: done };
}

async function stopBridge(b: Child | undefined): Promise<void> {
  if (!b || b.proc.exitCode !== null || b.proc.signalCode !== null) return;
  b.proc.kill("SIGTERM");
  const timer = setTimeout(() => b.proc.kill("SIGKILL"), 15_000);
  await b.exited;
  clearTimeout(timer);
}

/** A data directory, a config with one `mcp` system over the stubborn server, and the files it writes. */
function setup() {
  const dir = tempDir("cb-mcp-crash-");
  dirs.push(dir);
  const f = {
    dir,
    dataDir: path.join(dir, "data"),
    configFile: path.join(dir, "clawbridge.json"),
    calls: path.join(dir, "calls"),
    pidFile: path.join(dir, "server.json"),
    delay: path.join(dir, "delay"),
  };
  const script = path.join(dir, "server.mjs");
  writeFileSync(script, SERVER);
  writeFileSync(
    f.configFile,
    JSON.stringify({
      server: { host: "127.0.0.1", port: 0, shutdownGraceSeconds: 1 },
      logging: { level: "warn" },
      dataDir: f.dataDir,
      backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
      models: [{ id: "m", backend: "up" }],
      systems: [
        {
          id: "work",
          description: "does some work with side effects",
          sideEffects: true,
          confirm: "never",
          run: {
            kind: "mcp",
            server: { transport: "stdio", command: process.execPath, args: [script, f.calls, f.pidFile, f.delay] },
            tool: "work",
            timeoutSeconds: 120,
          },
        },
      ],
    }),
  );
  return f;
}

const callCount = (file: string): number =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).length : 0;

function serverPids(pidFile: string): { pid: number; helper: number } {
  const p = JSON.parse(readFileSync(pidFile, "utf8")) as { pid: number; helper: number };
  seen.add(p.pid);
  seen.add(p.helper);
  return p;
}

async function post(url: string, body?: unknown): Promise<any> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body ?? {}),
  });
  const json = await res.json();
  assert.ok(res.status < 300, `${url}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Poll the run until it has ended (not running or pending); bounded. */
async function settled(base: string, id: string, ms = 30_000): Promise<any> {
  let run: any;
  await eventually(async () => {
    run = await (await fetch(`${base}/v1/runs/${id}`)).json();
    return !["running", "pending"].includes(run.status);
  }, ms);
  return run;
}

/** Start the run and wait until the server is in the middle of the tool call; returns the run id and the server's pids. */
async function startRun(base: string, f: ReturnType<typeof setup>) {
  const run = await post(`${base}/v1/systems/work/runs`, { inputs: {} });
  assert.ok(await eventually(() => callCount(f.calls) === 1 && existsSync(f.pidFile), 20_000), "the tool call started");
  const pids = serverPids(f.pidFile);
  assert.ok(!exited(pids.pid) && !exited(pids.helper), "the server and its helper run");
  // Recorded for the orphan watcher and the start-up reaper, as a CLI is.
  assert.ok(existsSync(path.join(f.dataDir, "run", `${pids.pid}.json`)), "the server has a run record");
  return { id: run.id as string, ...pids };
}

/** The orphan watcher of the bridge whose run directory is `runDir`. */
function watcherOf(runDir: string): number | undefined {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      if (argv.includes("clawbridge-orphan-watcher") && argv.includes(runDir)) return Number(d);
    } catch {
      /* gone */
    }
  }
  return undefined;
}

describe("an MCP stdio server when the bridge is killed (SIGKILL) mid-call", { timeout: 180_000 }, () => {
  test("the watcher ends it within seconds; resuming does not call the tool again; resuming once more calls it once", async () => {
    const f = setup();
    let bridge: Child | undefined = await startBridge(f.configFile);
    try {
      const { id, pid, helper } = await startRun(bridge.url, f);

      const t0 = Date.now();
      bridge.proc.kill("SIGKILL");
      await bridge.exited;
      assert.ok(
        await eventually(() => exited(pid) && exited(helper), 8000),
        "the server and its helper are gone within seconds",
      );
      const goneMs = Date.now() - t0;
      // SIGTERM (ignored), the watcher's 2 s grace, SIGKILL to the group.
      assert.ok(goneMs < 6000, `the server outlived the bridge by ${goneMs} ms`);
      process.stderr.write(`# server gone ${goneMs} ms after the bridge's SIGKILL\n`);

      bridge = await startBridge(f.configFile);
      const found = (await (await fetch(`${bridge.url}/v1/runs/${id}`)).json()) as { status: string };
      assert.equal(found.status, "interrupted");

      // Resume: the call may have done its work; it is not made a second time.
      await post(`${bridge.url}/v1/runs/${id}/resume`);
      const failed = await settled(bridge.url, id);
      assert.equal(failed.status, "failed", JSON.stringify(failed));
      assert.match(failed.error, /MCP tool work was called at .* by a bridge that stopped before the answer came/);
      assert.match(failed.error, /may have done its work, so it is not called again on its own/);
      assert.match(failed.error, /resume the run again to call it once more/);
      assert.equal(callCount(f.calls), 1, "resuming did not call the tool again");

      // A deliberate second resume calls it, once, and the run completes.
      writeFileSync(f.delay, "0");
      await post(`${bridge.url}/v1/runs/${id}/resume`);
      const done = await settled(bridge.url, id);
      assert.equal(done.status, "completed", JSON.stringify(done));
      assert.equal(done.output, "worked");
      assert.equal(callCount(f.calls), 2, "the second resume called the tool once");
      const second = serverPids(f.pidFile);
      assert.ok(exited(second.pid), "the second server was reaped when its call ended");
      assert.ok(await eventually(() => exited(second.helper), 3000), "and its helper");
      assert.deepEqual(readdirSync(path.join(f.dataDir, "runs", id, "mcp-calls")), [], "no call is left written down");
    } finally {
      await stopBridge(bridge);
    }
  });

  test("with the orphan watcher killed too, the next bridge's start-up reaper ends it before it listens", async () => {
    const f = setup();
    let bridge: Child | undefined = await startBridge(f.configFile);
    try {
      const { id, pid, helper } = await startRun(bridge.url, f);
      const watcher = watcherOf(path.join(f.dataDir, "run"));
      assert.ok(watcher, "the bridge's orphan watcher was found");
      seen.add(watcher);
      process.kill(watcher, "SIGKILL");
      assert.ok(await eventually(() => exited(watcher), 3000), "the watcher is gone");
      bridge.proc.kill("SIGKILL");
      await bridge.exited;
      // Stubborn: a closed stdin does not end it, and nobody else will.
      await new Promise((r) => setTimeout(r, 1000));
      assert.ok(!exited(pid), "without a watcher the server outlives the bridge (until the next start)");

      const t0 = Date.now();
      bridge = await startBridge(f.configFile);
      process.stderr.write(`# next bridge listening after ${Date.now() - t0} ms\n`);
      assert.ok(exited(pid), "the start-up reaper ended the server before the bridge listened");
      assert.ok(await eventually(() => exited(helper), 3000), "and its helper");

      await post(`${bridge.url}/v1/runs/${id}/resume`);
      const failed = await settled(bridge.url, id);
      assert.equal(failed.status, "failed", JSON.stringify(failed));
      assert.match(failed.error, /may have done its work, so it is not called again on its own/);
      assert.equal(callCount(f.calls), 1, "resuming did not call the tool again");
    } finally {
      await stopBridge(bridge);
    }
  });
});
