/**
 * A CLI must not outlive a killed bridge (issue 20, item 9). The bridge runs as a CHILD PROCESS
 * through its real command line (`node bin/clawbridge.js serve --config <file>`) with an
 * opencode-type backend whose CLI is a shell script that hangs (its leader, and a helper that
 * ignores SIGTERM). A turn starts, the bridge is killed with SIGKILL, and — WITHOUT a restart —
 * the CLI's process group is gone within a few seconds, ended by the bridge's orphan watcher,
 * which is gone too. The watcher also shrugs off SIGINT/SIGTERM/SIGHUP while the bridge lives.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmodSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { procStat } from "../../src/core/util/run-records.js";
import { cleanup, eventually, pidsWithEnv, tempDir } from "../helpers/bridge.js";
import { bridgeListening, exited as gone, groupAlive, killGroups, killMarked } from "../helpers/process-groups.js";

const marker = randomUUID();
const MARK = `CB_WATCH_MARKER=${marker}`;
let dir: string;
let dataDir: string;
let configFile: string;
let bridge: ChildProcess | undefined;
let watcher: number | undefined;
const groups = new Set<number>();

/** The watcher of the bridge whose run directory is `runDir` (found by its command line). */
function findWatcher(runDir: string): number | undefined {
  for (const n of readdirSync("/proc")) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const argv = readFileSync(`/proc/${n}/cmdline`, "utf8").split("\0");
      if (argv.includes("clawbridge-orphan-watcher") && argv.includes(runDir) && !gone(Number(n))) return Number(n);
    } catch {
      /* gone */
    }
  }
  return undefined;
}

before(() => {
  dir = tempDir("cb-watch-");
  dataDir = path.join(dir, "data");
  const cli = path.join(dir, "hang.sh");
  writeFileSync(
    cli,
    `#!/bin/sh\ncat >/dev/null\necho '{"type":"text","part":{"type":"text","text":"hello"}}'\n(trap '' TERM; exec sleep 30) &\nexec sleep 31\n`,
  );
  chmodSync(cli, 0o755);
  configFile = path.join(dir, "clawbridge.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      server: {
        host: "127.0.0.1",
        port: 0,
        heartbeatSeconds: 0.5,
        shutdownGraceSeconds: 1,
        // No background probe: it would run the stand-in's `--version` (which hangs) and every CLI's beside the turn's.
        backendProbes: { enabled: false },
      },
      logging: { level: "warn" },
      dataDir,
      intents: { enabled: false },
      backends: {
        // discovery off: the stand-in CLI hangs on every command, `opencode models` too (the turn's CLI is the one watched).
        oc: {
          type: "opencode",
          command: cli,
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
          discovery: { enabled: false },
        },
      },
      models: [{ id: "fake/hang", backend: "oc" }],
    }),
  );
});

after(async () => {
  if (bridge && bridge.exitCode === null && bridge.signalCode === null) bridge.kill("SIGKILL");
  killGroups(groups);
  if (watcher && !gone(watcher)) process.kill(watcher, "SIGKILL");
  killMarked(MARK);
  await eventually(() => pidsWithEnv(MARK).length === 0, 5000);
  cleanup(dir);
});

test("kill -9 of the bridge mid-turn: the CLI's group and the watcher are gone within seconds, without a restart", async (t) => {
  const env: NodeJS.ProcessEnv = { ...process.env, CB_WATCH_MARKER: marker };
  delete env.CLAWBRIDGE_CONFIG;
  const proc = spawn(process.execPath, [path.resolve("bin/clawbridge.js"), "serve", "--config", configFile], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  bridge = proc;
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.once("exit", (_code, signal) => resolve(signal)));
  const url = await bridgeListening(proc).url;

  const runDir = path.join(dataDir, "run");
  watcher = findWatcher(runDir);
  if (watcher) {
    t.diagnostic(
      `watcher pid ${watcher}, ${/VmRSS:\s*(\d+ kB)/.exec(readFileSync(`/proc/${watcher}/status`, "utf8"))?.[1]} resident`,
    );
    assert.notEqual(procStat(watcher)!.session, procStat(proc.pid!)!.session, "the watcher runs in its own session");
    // A terminal's Ctrl-C, a hang-up or a stray kill must not take it away while the bridge lives.
    for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.kill(watcher, sig);
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(!gone(watcher), "the watcher ignores SIGINT, SIGTERM and SIGHUP");
  }

  // A turn: the CLI prints its text and hangs.
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "fake/hang", stream: true, messages: [{ role: "user", content: "hi" }] }),
    signal: ac.signal,
  });
  const reader = res.body!.getReader();
  let seen = "";
  for (let i = 0; i < 100 && !seen.includes("hello"); i++) {
    const r = await reader.read();
    if (r.done) break;
    seen += Buffer.from(r.value).toString();
  }
  assert.match(seen, /hello/, "the CLI is mid-turn");
  const records = readdirSync(runDir).filter((n) => n.endsWith(".json"));
  assert.equal(records.length, 1, "the running CLI is recorded");
  const pgid = Number(records[0]!.replace(/\.json$/, ""));
  groups.add(pgid);
  assert.ok(groupAlive(pgid));

  proc.kill("SIGKILL");
  assert.equal(await exited, "SIGKILL");
  ac.abort();
  await reader.cancel().catch(() => {});
  const t0 = Date.now();
  const ended = await eventually(() => !groupAlive(pgid), 8000);
  t.diagnostic(
    `the CLI's group was ${ended ? "gone" : "STILL RUNNING"} ${Date.now() - t0} ms after the bridge died (its helper ignores SIGTERM: grace 2 s, then SIGKILL)`,
  );
  assert.ok(ended, "the orphaned CLI group is gone without a restart");
  assert.ok(watcher, "the bridge had started an orphan watcher");
  assert.ok(await eventually(() => gone(watcher!), 3000), "the watcher is gone too");
  assert.deepEqual(
    readdirSync(runDir).filter((n) => n.endsWith(".json")),
    [],
    "the watcher removed the record",
  );
});
