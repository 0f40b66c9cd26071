/**
 * A real `clawbridge serve` (child process) with a warm Claude Code backend (the REAL claude against
 * a fake Anthropic API) stopped with SIGTERM while its warm process idles: every line of its log
 * parses with a JSON parser that refuses a key twice, no line says "unexpectedly", and the last
 * line counts the warm process as closed by the shutdown, not as died (issue 31 item 4).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, tempDir } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";
import { bridgeListening } from "../helpers/process-groups.js";
import { parseStrictJson } from "../helpers/strict-json.js";

const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");

test("the strict parser refuses a key twice, as JSON.parse does not", () => {
  assert.deepEqual(parseStrictJson('{"a":1,"b":[true,null,{"c":"x"}]}'), { a: 1, b: [true, null, { c: "x" }] });
  assert.throws(() => parseStrictJson('{"backend":"cc","backend":"cc"}'), /key "backend" twice/);
  assert.throws(() => parseStrictJson('{"a":{"b":1,"b":2}}'), /key "b" twice/);
});

test("SIGTERM with a warm process idle: every log line has each key once, none says 'unexpectedly', the warm process is counted closed", async () => {
  const fake = await startFakeAnthropic(() => ({ kind: "text", chunks: ["warm ", "reply"] }));
  const home = tempDir("cb-sd-home-");
  const dataDir = tempDir("cb-sd-data-");
  const configFile = path.join(dataDir, "clawbridge.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      server: { host: "127.0.0.1", port: 0, shutdownGraceSeconds: 5 },
      logging: { level: "debug" },
      dataDir,
      intents: { enabled: false },
      // One warm process and no standby: the log is about that one process.
      warm: { standby: 0 },
      backends: {
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
      },
      models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
    }),
  );
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  delete env.CLAWBRIDGE_CONFIG;
  const proc = spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, "serve", "--config", configFile], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<{ code: number | null }>((resolve) => proc.once("exit", (code) => resolve({ code })));
  // The whole log (bridgeListening keeps only its tail).
  let log = "";
  proc.stderr.on("data", (d: Buffer) => {
    log += d.toString();
  });
  const killer = setTimeout(() => proc.kill("SIGKILL"), 90_000);
  try {
    const base = await bridgeListening(proc).url;
    const chat = new Chat(`${base}/v1`, "shutdown-log", "claude");
    assert.equal((await chat.say("hello")).text, "warm reply");
    assert.equal((await chat.say("again")).text, "warm reply");
    proc.kill("SIGTERM");
    assert.equal((await exited).code, 0);

    const lines = log.split("\n").filter((l) => l.startsWith("{"));
    assert.ok(lines.length >= 5, `the log has lines (${lines.length})`);
    const records = lines.map((l) => {
      try {
        return parseStrictJson(l) as Record<string, unknown>;
      } catch (err) {
        assert.fail(`${(err as Error).message}\n${l}`);
      }
    });
    assert.deepEqual(
      records.filter((r) => /unexpectedly/.test(String(r.msg))),
      [],
    );
    const stopped = records.find((r) => r.msg === "clawbridge stopped") as { warm?: Record<string, any> } | undefined;
    assert.ok(stopped, "the last words are in the log");
    assert.equal(stopped.warm?.cc?.started, 1, JSON.stringify(stopped));
    assert.equal(stopped.warm?.cc?.closed, 1, JSON.stringify(stopped));
    assert.equal(stopped.warm?.cc?.died, 0, JSON.stringify(stopped));
  } finally {
    clearTimeout(killer);
    if (proc.exitCode === null) proc.kill("SIGKILL");
    await exited;
    await fake.close();
    cleanup(home);
    cleanup(dataDir);
  }
});
