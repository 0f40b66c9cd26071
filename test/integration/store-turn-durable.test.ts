/**
 * The session store's writes that left the turn's path (issue 34, item 4) are still durable: a new
 * conversation's binding is written after its first output instead of before it, and the finished
 * turn is recorded after `[DONE]` (src/request/pipeline/resume.ts). The bridge runs as a CHILD
 * PROCESS (`clawbridge serve`) and is killed with SIGKILL the moment the client has read `[DONE]`;
 * restarted on the same data dir, the binding is there and the conversation's next turn resumes its
 * CLI session (no reset, no new session). The CLI is testkit/fakes/fake-claude-cli.sh (cold), which
 * keeps its sessions as files, so a resumed session shows as a second line in its file.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { defaultSessionStorePath, openSessionStore, type SessionBinding } from "../../src/core/store/index.js";
import { cleanup, eventually, tempDir, within } from "../helpers/bridge.js";
import { bridgeListening } from "../helpers/process-groups.js";

const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");
const FAKE = path.resolve("testkit/fakes/fake-claude-cli.sh");

interface ChildBridge {
  proc: ChildProcess;
  url: string;
  exited: Promise<unknown>;
}

async function startChildBridge(configFile: string): Promise<ChildBridge> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLAWBRIDGE_CONFIG;
  const proc = spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, "serve", "--config", configFile], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  return { proc, url: await bridgeListening(proc).url, exited };
}

/**
 * A streamed turn; with `killOnDone`, the bridge is sent SIGKILL in the same tick the client reads
 * `[DONE]`. Returns the answer's text.
 */
async function turn(b: ChildBridge, session: string, content: string, killOnDone = false): Promise<string> {
  const res = await fetch(`${b.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": session },
    body: JSON.stringify({ model: "claude", stream: true, messages: [{ role: "user", content }] }),
    signal: AbortSignal.timeout(20_000),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let text = "";
  for (let i = 0; i < 1000; i++) {
    const r = await within(reader.read(), 10_000, "a streamed chunk");
    if (r.done) break;
    buf += dec.decode(r.value, { stream: true });
    for (let cut = buf.indexOf("\n\n"); cut >= 0; cut = buf.indexOf("\n\n")) {
      const data = buf.slice(0, cut).replace(/^data: /, "");
      buf = buf.slice(cut + 2);
      if (data === "[DONE]") {
        if (killOnDone) b.proc.kill("SIGKILL");
        await reader.cancel().catch(() => {});
        return text;
      }
      text +=
        (JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content ?? "";
    }
  }
  throw new Error("the stream ended without [DONE]");
}

async function bindingOf(dataDir: string, session: string): Promise<SessionBinding | undefined> {
  const store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(dataDir) });
  try {
    return (await store.list()).find((b) => b.key.includes(session));
  } finally {
    await store.close();
  }
}

describe("the store's writes off the turn's path survive kill -9 right after the answer", () => {
  let dataDir: string;
  let cliDir: string;
  let cfgDir: string;
  let configFile: string;
  let bridge: ChildBridge | undefined;

  before(() => {
    dataDir = tempDir("cb-durable-data-");
    cliDir = tempDir("cb-durable-cli-");
    cfgDir = tempDir("cb-durable-cfg-");
    configFile = path.join(cfgDir, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        server: { host: "127.0.0.1", port: 0, shutdownGraceSeconds: 1 },
        logging: { level: "warn" },
        dataDir,
        intents: { enabled: false },
        backends: {
          cc: {
            type: "claude-code",
            command: FAKE,
            env: { FAULTS_DIR: cliDir },
            timeoutSeconds: 30,
            killGraceSeconds: 1,
            warm: { enabled: false },
          },
        },
        models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
      }),
    );
  });

  after(async () => {
    if (bridge && bridge.proc.exitCode === null && bridge.proc.signalCode === null) {
      bridge.proc.kill("SIGTERM");
      await within(bridge.exited, 15_000, "the bridge's exit").catch(() => bridge?.proc.kill("SIGKILL"));
    }
    for (const d of [dataDir, cliDir, cfgDir]) if (d) cleanup(d);
  });

  test("a new conversation's binding is on disk when [DONE] arrives; after a restart its session goes on", async () => {
    const session = `durable-${randomUUID()}`;
    bridge = await startChildBridge(configFile);
    const first = await turn(bridge, session, "hello FAULTKEY-durable FAULTN-2", true);
    assert.equal(first, "FAULTS-OK durable 1. FAULTS-OK durable 2. ");
    await within(bridge.exited, 10_000, "the killed bridge's exit");

    // The fake CLI's session: one file, one line per turn that ran in it.
    const sessions = readdirSync(path.join(cliDir, "sessions"));
    assert.equal(sessions.length, 1);
    const sid = sessions[0]!;
    const bound = await bindingOf(dataDir, session);
    assert.ok(bound, "the binding survived kill -9 right after [DONE]");
    assert.equal(bound.backendSessionId, sid);

    bridge = await startChildBridge(configFile);
    const second = await turn(bridge, session, "and again FAULTKEY-durable FAULTN-1");
    assert.equal(second, "FAULTS-OK durable 1. ");
    const lines = readFileSync(path.join(cliDir, "sessions", sid), "utf8")
      .trim()
      .split("\n");
    assert.equal(lines.length, 2, "the second turn resumed the first turn's session");
    assert.deepEqual(readdirSync(path.join(cliDir, "sessions")), [sid], "no new session was started");
    // The finished turn is recorded just after [DONE] has gone out (off the answer's path).
    let after: SessionBinding | undefined;
    await eventually(async () => (after = await bindingOf(dataDir, session))?.lastError === null, 5000);
    assert.equal(after?.backendSessionId, sid);
    assert.equal(after?.lastError, null, "the second turn was recorded");
    assert.ok((after?.turns ?? 0) >= 1);
  });
});
