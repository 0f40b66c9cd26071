/**
 * A cold turn ends on the CLI's own end-of-turn event, not on its exit (issue 34, item 3;
 * src/backends/cli/base.ts): `done` — and at the client `finish_reason` and `[DONE]` — goes out
 * at the `result` line while the process still runs; the process is still reaped (and the
 * conversation's next turn waits for that, never meeting it); an error result still waits for the
 * exit, whose code and stderr classify it.
 *
 * Through a bridge: testkit/fakes/fake-claude-cli.sh told to linger 1.5 s after its result line
 * (`FAULTLINGER-1500`), which logs its start and end (`cli.log`, with `overlap` lines when two
 * processes of one conversation run at once). Directly: `runCliTurn` with the Claude mapper over a
 * shell script that prints a result and exits late (non-zero).
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { ClaudeStreamMapper } from "../../src/backends/claude-code/backend.js";
import { runCliTurn } from "../../src/backends/cli/base.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { defaultSessionStorePath, openSessionStore } from "../../src/core/store/index.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge, within } from "../helpers/bridge.js";
import { groupAlive, killGroups } from "../helpers/process-groups.js";

const FAKE = path.resolve("testkit/fakes/fake-claude-cli.sh");
const groups = new Set<number>();
let dir: string;

after(() => {
  killGroups(groups);
  if (dir) cleanup(dir);
});
before(() => {
  dir = tempDir("cb-coldend-");
});

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface Streamed {
  /** Date.now() when `[DONE]` arrived. */
  doneAt: number;
  /** Whether the turn's CLI process was still running when `[DONE]` arrived. */
  cliAliveAtDone: boolean;
  text: string;
  finish?: string;
  usage?: { completion_tokens?: number };
}

describe("a cold Claude Code turn through the bridge ends at the CLI's result line", () => {
  let bridge: TestBridge;
  const cliDir = () => path.join(dir, "cli");
  const lastPid = () => (bridge.backends.get("cc") as unknown as { lastPid?: number }).lastPid!;

  before(async () => {
    bridge = await startTestBridge({
      backends: {
        cc: {
          type: "claude-code",
          command: FAKE,
          env: { FAULTS_DIR: cliDir() },
          timeoutSeconds: 30,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
    });
  });
  after(async () => {
    await bridge?.close(0);
    if (bridge) cleanup(bridge.dataDir);
  });

  async function turn(session: string, messages: Array<{ role: string; content: string }>): Promise<Streamed> {
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": session },
      body: JSON.stringify({ model: "claude", stream: true, stream_options: { include_usage: true }, messages }),
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = "";
    const out: Partial<Streamed> & { text: string } = { text: "" };
    for (let i = 0; i < 1000 && out.doneAt === undefined; i++) {
      const r = await within(reader.read(), 10_000, "a streamed chunk");
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      for (let cut = buf.indexOf("\n\n"); cut >= 0; cut = buf.indexOf("\n\n")) {
        const data = buf.slice(0, cut).replace(/^data: /, "");
        buf = buf.slice(cut + 2);
        if (data === "[DONE]") {
          out.doneAt = Date.now();
          out.cliAliveAtDone = alive(lastPid());
          continue;
        }
        const chunk = JSON.parse(data) as {
          choices?: Array<{ delta?: { content?: string }; finish_reason?: string | null }>;
          usage?: { completion_tokens?: number };
        };
        out.text += chunk.choices?.[0]?.delta?.content ?? "";
        out.finish ??= chunk.choices?.[0]?.finish_reason ?? undefined;
        if (chunk.usage) out.usage = chunk.usage;
      }
    }
    await reader.cancel().catch(() => {});
    assert.ok(out.doneAt !== undefined, "the stream ended with [DONE]");
    return out as Streamed;
  }

  /** `cli.log` lines: `start <key> <pid> <time> <mode>`, `end <key> <pid> <time>`, `overlap …` (times in seconds). */
  const log = () =>
    readFileSync(path.join(cliDir(), "cli.log"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split(" "));

  test("[DONE] comes while the CLI still runs; it is reaped after; the next turn never meets it", async (t) => {
    const session = `coldend-${randomUUID()}`;
    const first = "hello FAULTKEY-one FAULTN-2 FAULTLINGER-1500";
    const t0 = Date.now();
    const a = await turn(session, [{ role: "user", content: first }]);
    const pid = lastPid();
    groups.add(pid);
    t.diagnostic(`[DONE] ${a.doneAt - t0} ms after the request; the fake lingers 1500 ms after its result line`);
    assert.equal(a.text, "FAULTS-OK one 1. FAULTS-OK one 2. ");
    assert.equal(a.finish, "stop");
    assert.equal(a.usage?.completion_tokens, 2, "the result line's usage is in the answer");
    assert.ok(a.cliAliveAtDone, "the CLI was still running when [DONE] arrived");
    assert.ok(a.doneAt - t0 < 1500, `[DONE] within the linger (${a.doneAt - t0} ms)`);

    // The same conversation at once: it resumes the session after the first process is gone.
    const b = await turn(session, [
      { role: "user", content: first },
      { role: "assistant", content: a.text },
      { role: "user", content: "again FAULTKEY-one FAULTN-1" },
    ]);
    groups.add(lastPid());
    assert.equal(b.text, "FAULTS-OK one 1. ");
    assert.ok(!alive(pid) || (await eventually(() => !alive(pid), 5000)), "the first CLI was reaped");
    assert.ok(await eventually(() => !groupAlive(lastPid()), 5000), "the second CLI was reaped");

    const lines = log();
    assert.deepEqual(
      lines.filter((l) => l[0] === "overlap"),
      [],
      "never two processes of the conversation",
    );
    const ends = lines.filter((l) => l[0] === "end" && l[2] === String(pid));
    const starts = lines.filter((l) => l[0] === "start");
    assert.equal(ends.length, 1, "the first CLI ended");
    assert.equal(starts.length, 2);
    const endedAt = Number(ends[0]![3]) * 1000;
    assert.ok(endedAt >= a.doneAt - 50, "the first CLI ended after [DONE] had arrived");
    assert.ok(Number(starts[1]![3]) * 1000 >= endedAt, "the second turn's CLI started after the first ended");
    const store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(bridge.dataDir) });
    try {
      const binding = (await store.list()).find((x) => x.key.includes(session));
      assert.equal(binding?.turns, 2, "both turns were recorded on the binding");
    } finally {
      await store.close();
    }
  });
});

describe("runCliTurn with the Claude mapper: the result line ends the turn", () => {
  const RESULT_OK =
    '{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"s-1","usage":{"input_tokens":3,"output_tokens":1}}';
  const RESULT_ERR =
    '{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"result":"API Error: 400 bad request xyz","session_id":"s-1"}';

  function script(name: string, body: string): string {
    const file = path.join(dir, name);
    writeFileSync(file, `#!/bin/sh\ncat >/dev/null\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  }

  async function run(
    bin: string,
  ): Promise<{ events: Array<BackendEvent & { at: number }>; endedAt: number; pid: number }> {
    let pid = 0;
    const it = runCliTurn(
      {
        label: "claude",
        bin,
        args: [],
        env: { PATH: process.env.PATH },
        cwd: dir,
        stdin: "hi",
        signal: new AbortController().signal,
        killGraceSeconds: 1,
        logger: createLogger("silent"),
        onSpawn: (p) => {
          pid = p!;
          groups.add(p!);
        },
      },
      new ClaudeStreamMapper("claude", false),
    );
    const events: Array<BackendEvent & { at: number }> = [];
    for (let i = 0; i < 50; i++) {
      const r = await within(it.next(), 10_000, "an event");
      if (r.done) break;
      events.push({ ...r.value, at: Date.now(), ...(r.value.type === "done" ? { alive: alive(pid) } : {}) });
    }
    return { events, endedAt: Date.now(), pid };
  }

  test("a success result: done at once, while the CLI runs; its late lines and non-zero exit change nothing", async () => {
    const bin = script(
      "late-exit.sh",
      `echo '${RESULT_OK}'\nsleep 0.8\necho '{"type":"result","subtype":"success","is_error":true,"result":"late"}'\nexit 3`,
    );
    const t0 = Date.now();
    const { events, endedAt, pid } = await run(bin);
    assert.deepEqual(
      events.map((e) => e.type),
      ["session", "text", "usage", "done"],
    );
    const done = events.at(-1) as BackendEvent & { at: number; alive?: boolean };
    assert.equal(done.alive, true, "the CLI still ran when done was given");
    assert.ok(done.at - t0 < 700, `done ${done.at - t0} ms after the start`);
    assert.ok(endedAt - t0 >= 700, "the turn's generator returned only once the CLI had exited");
    assert.ok(!groupAlive(pid), "reaped");
  });

  test("an error result still waits for the exit and is classified as before", async () => {
    const bin = script("error-exit.sh", `echo '${RESULT_ERR}'\nsleep 0.3\necho 'more on stderr' >&2\nexit 1`);
    const t0 = Date.now();
    const { events, pid } = await run(bin);
    const last = events.at(-1) as Extract<BackendEvent, { type: "error" }> & { at: number };
    assert.equal(last.type, "error");
    assert.equal(last.error.code, "upstream_error");
    assert.match(last.error.message, /bad request xyz/);
    assert.ok(last.at - t0 >= 250, "the error came after the exit");
    assert.ok(!groupAlive(pid), "reaped");
  });
});
