/**
 * Part "kill9": kill -9 cycles in resume mode (the fake Claude Code CLI keeps its sessions as
 * files; the bridge binds each conversation to one in sessions.db). Each round: the bridge is
 * (re)started, clients each run turns in their own conversation, and the bridge is SIGKILLed while
 * most of them are mid-turn. Then, WITHOUT a restart: fake CLI processes still alive after a few
 * seconds (orphans — the bridge's orphan watcher should end them), `PRAGMA integrity_check` of
 * sessions.db, and every conversation whose turn got `done` must still have its binding. The next
 * round's start-up is timed, and it must end what earlier rounds left. Last, a restart with 24
 * orphaned process groups alive (each takes 0.5 s to exit on SIGTERM, so a reaper that waits for
 * one group at a time needs ≥ 12 s) is timed: target under 3 s.
 * Each round also starts a run of a system whose MCP stdio step calls a tool that takes a minute on
 * a server that ignores SIGTERM and a closed stdin (lib/mcp.ts), and the kill comes while that call
 * runs: the server and its helper still alive after the same few seconds are orphans too.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { cliEnv, startBridge, workspace, writeConfig, type BridgeProc } from "../lib/bridge.js";
import { readCliLog } from "../lib/clilog.js";
import { startMcpRun, stubbornMcp } from "../lib/mcp.js";
import { emptyTally, type Check, type Part, type PartContext, type PartResult } from "../lib/part.js";
import { alive, groupsOf, killMarked, markedProcesses } from "../lib/procs.js";
import { checkSse } from "../lib/shape.js";
import { Rng, eventually, fmtMs, sleep } from "../lib/util.js";

const MODEL = "faults/resume";
const CHAT = "/v1/chat/completions";
/** "A few seconds": how long orphans may outlive a SIGKILLed bridge. */
const ORPHAN_DEADLINE_MS = 5000;
const RESTART_GROUPS = 24;
const RESTART_TARGET_MS = 3000;
/** How long the harness waits, at the latest, for the MCP tool call to be running before the kill. */
const MCP_CALL_WAIT_MS = 15_000;

interface StoreCheck {
  integrity: string;
  rows: Map<string, number>;
  error?: string;
}

function readStore(dataDir: string): StoreCheck {
  const file = path.join(dataDir, "sessions.db");
  if (!existsSync(file)) return { integrity: "no sessions.db", rows: new Map() };
  const open = (readonly: boolean) => new Database(file, { readonly, fileMustExist: true });
  let db: Database.Database;
  try {
    db = open(true);
  } catch {
    db = open(false);
  }
  try {
    const integrity = String(db.pragma("integrity_check", { simple: true }));
    const rows = new Map<string, number>();
    for (const r of db.prepare("SELECT key, turns FROM sessions").all() as Array<{ key: string; turns: number }>)
      rows.set(r.key, r.turns);
    return { integrity, rows };
  } catch (err) {
    return { integrity: `error: ${(err as Error).message}`, rows: new Map(), error: (err as Error).message };
  } finally {
    db.close();
  }
}

/** One streamed resume turn; resolves with whether the client saw it finish (finish_reason + [DONE]). */
async function turn(
  origin: string,
  key: string,
  text: string,
  signal: AbortSignal,
): Promise<{ done: boolean; conversation?: string; status: number }> {
  const res = await fetch(`${origin}${CHAT}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": key },
    body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: text }] }),
    signal,
  });
  const conversation = res.headers.get("x-clawbridge-conversation") ?? undefined;
  const body = await res.text();
  if (res.status !== 200) return { done: false, status: res.status, ...(conversation ? { conversation } : {}) };
  const sse = checkSse(body);
  return {
    done: sse.done && sse.finish === "stop" && sse.errorFrames === 0,
    status: res.status,
    ...(conversation ? { conversation } : {}),
  };
}

export const kill9Part: Part = {
  name: "kill9",
  title: "kill -9 cycles in resume mode: orphans, sessions.db integrity, confirmed bindings, restart time",
  measures: ["orphans", "bindings", "restart", "crashes"],
  async run(ctx: PartContext): Promise<PartResult> {
    const rounds = ctx.small ? 2 : 6;
    const clients = ctx.small ? 8 : 24;
    const ws = workspace(ctx.tmpRoot, "kill9", ctx.runMark);
    const mcp = stubbornMcp(ws.tmp, `${ws.mark}:mcp`);
    /** The fake CLIs' processes and the MCP servers' (each with its own mark). */
    const everyMarked = () => [...markedProcesses(ws.mark), ...markedProcesses(mcp.mark)];
    const config = writeConfig(ws, "kill9", {
      server: { maxConcurrent: 32, maxQueue: 64, queueTimeoutSeconds: 30, shutdownGraceSeconds: 0 },
      backends: {
        resume: {
          type: "claude-code",
          command: ws.claudeBin,
          env: cliEnv(ws),
          timeoutSeconds: 120,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: MODEL, backend: "resume", session: { mode: "resume" } }],
      systems: [mcp.system],
    });
    const rng = new Rng(ctx.seed * 31 + 9);
    /** Turns each conversation's client saw finish, and the conversation key the bridge named. */
    const doneTurns = new Map<string, number>();
    const convKey = new Map<string, string>();
    interface Round {
      startMs: number;
      groupsBefore: number;
      survivedStart: number;
      turnsDone: number;
      turnsCut: number;
      atKill: number;
      groupsAtKill: number;
      orphans: number;
      /** The MCP tool call was running when the bridge got SIGKILL. */
      mcpMidCall: boolean;
      mcpAtKill: number;
      mcpOrphans: number;
      goneMs: number | undefined;
      integrity: string;
      lost: string[];
      behind: number;
      bindings: number;
    }
    const rowsOut: Round[] = [];
    let crashes = 0;
    let bridge: BridgeProc | undefined;
    const otherErrors: string[] = [];
    try {
      for (let r = 0; r < rounds; r++) {
        const before = everyMarked();
        bridge = await startBridge(config);
        const b = bridge;
        // What the previous round left must be gone once the bridge listens (its start-up reaper).
        const gone = await eventually(() => (before.every((p) => !alive(p.pid)) ? true : undefined), 1000, 50);
        const survivedStart = gone.value ? 0 : before.filter((p) => alive(p.pid)).length;
        killMarked(ws.mark); // the round starts clean either way (survivors were counted)
        killMarked(mcp.mark);
        const callsBefore = mcp.calls();
        const mcpRun = startMcpRun(b.origin);
        let turnsDone = 0;
        let turnsCut = 0;
        const runFor = ctx.small ? rng.int(1500, 2000) : rng.int(5000, 8000);
        const stopAt = Date.now() + runFor;
        const ac = new AbortController();
        const loops = Array.from({ length: clients }, async (_, c) => {
          const key = `k9-${c}`;
          for (let t = 0; t < 1000 && Date.now() < stopAt && b.alive; t++) {
            const mode = rng.weighted({ stream: 55, helper: 25, stubborn: 10, slowterm: 10 });
            const text = `FAULTKEY-${key} FAULTMODE-${mode} FAULTN-${rng.int(2, 10)} FAULTMS-${rng.int(20, 100)} FAULTHELPER-30 round ${r} turn ${t}`;
            try {
              const res = await turn(b.origin, key, text, ac.signal);
              if (res.conversation) convKey.set(key, res.conversation);
              if (res.done) {
                turnsDone++;
                doneTurns.set(key, (doneTurns.get(key) ?? 0) + 1);
              } else if (res.status !== 200 && otherErrors.length < 3)
                otherErrors.push(`round ${r}: HTTP ${res.status}`);
            } catch {
              turnsCut++;
              return;
            }
          }
        });
        await Promise.race([Promise.all(loops), sleep(runFor)]);
        // The kill must find the MCP tool call running (on a slow machine its server may take a while).
        const started = await mcpRun;
        if (started.error && otherErrors.length < 3) otherErrors.push(`round ${r}: MCP run: ${started.error}`);
        const midCall = started.id
          ? await eventually(() => (mcp.calls() > callsBefore ? true : undefined), MCP_CALL_WAIT_MS, 50)
          : { value: undefined };
        const atKill = markedProcesses(ws.mark);
        const mcpAtKill = markedProcesses(mcp.mark);
        if (b.crash) crashes++;
        b.signal("SIGKILL");
        await b.exited;
        const killedAt = Date.now();
        ac.abort();
        await Promise.race([Promise.all(loops), sleep(5000)]);
        // Orphans: no restart; the bridge's own watcher must end them within a few seconds.
        const wait = await eventually(
          () => (everyMarked().length === 0 ? true : undefined),
          ORPHAN_DEADLINE_MS - (Date.now() - killedAt),
          50,
        );
        const left = markedProcesses(ws.mark);
        const mcpLeft = markedProcesses(mcp.mark);
        const store = readStore(ws.dataDir);
        const lost: string[] = [];
        let behind = 0;
        for (const [key, n] of doneTurns) {
          const stored = store.rows.get(convKey.get(key) ?? key);
          if (stored === undefined) lost.push(key);
          else if (stored < n) behind++;
        }
        rowsOut.push({
          startMs: b.startMs,
          groupsBefore: groupsOf(before),
          survivedStart,
          turnsDone,
          turnsCut,
          atKill: atKill.length,
          groupsAtKill: groupsOf(atKill),
          orphans: left.length + mcpLeft.length,
          mcpMidCall: midCall.value === true,
          mcpAtKill: mcpAtKill.length,
          mcpOrphans: mcpLeft.length,
          goneMs: wait.value ? Date.now() - killedAt : undefined,
          integrity: store.integrity,
          lost,
          behind,
          bindings: store.rows.size,
        });
        ctx.log(
          `kill9: round ${r + 1}/${rounds}: ${turnsDone} turns done, ${atKill.length} fake CLI processes at the kill, ${left.length} alive ${ORPHAN_DEADLINE_MS / 1000} s later; MCP tool call ${midCall.value ? "running" : "NOT running"} at the kill, ${mcpAtKill.length} MCP server processes then, ${mcpLeft.length} alive ${ORPHAN_DEADLINE_MS / 1000} s later; integrity ${store.integrity}; lost bindings ${lost.length}`,
        );
        // Left for the next start-up to end (counted there as "survived the start").
      }

      // Restart with 24 orphaned groups alive.
      const before = everyMarked();
      bridge = await startBridge(config);
      const b = bridge;
      const baseStartMs = b.startMs;
      await eventually(() => (before.every((p) => !alive(p.pid)) ? true : undefined), 1000, 50);
      const survivedLast = before.filter((p) => alive(p.pid)).length;
      killMarked(ws.mark);
      killMarked(mcp.mark);
      const ac = new AbortController();
      const held = Array.from({ length: RESTART_GROUPS }, (_, c) =>
        turn(
          b.origin,
          `k9r-${c}`,
          `FAULTKEY-k9r-${c} FAULTMODE-slowterm FAULTN-300 FAULTMS-100 FAULTHELPER-60 hold`,
          ac.signal,
        ).catch(() => undefined),
      );
      const leaders = () => readCliLog(ws.faultsDir).startsByKey;
      const allRunning = await eventually(
        () => {
          const started = [...leaders().entries()].filter(([k]) => k.startsWith("k9r-")).flatMap(([, pids]) => pids);
          return started.length >= RESTART_GROUPS && started.every((pid) => alive(pid)) ? true : undefined;
        },
        20_000,
        100,
      );
      await sleep(200); // their first lines are out: each conversation is bound
      b.signal("SIGKILL");
      await b.exited;
      ac.abort();
      const orphaned = markedProcesses(ws.mark);
      const groupsAtRestart = groupsOf(orphaned);
      let restartMs: number | undefined;
      let survivedRestart = orphaned.length;
      let restartError: string | undefined;
      try {
        bridge = await startBridge(config, ctx.small ? 15_000 : 30_000);
        restartMs = bridge.startMs;
        const end = await eventually(() => (orphaned.every((p) => !alive(p.pid)) ? true : undefined), 1000, 50);
        survivedRestart = end.value ? 0 : orphaned.filter((p) => alive(p.pid)).length;
      } catch (err) {
        restartError = (err as Error).message.split("\n")[0]!.replace(/\. stderr:$/, "");
        survivedRestart = orphaned.filter((p) => alive(p.pid)).length;
      }
      await Promise.race([Promise.all(held), sleep(3000)]);
      if (bridge?.crash) crashes++;
      await bridge?.stop(5000);
      const leftAtEnd = everyMarked().length;
      killMarked(ws.mark);
      killMarked(mcp.mark);

      const overlaps = readCliLog(ws.faultsDir).overlaps;
      const orphans = rowsOut.reduce((a, x) => a + x.orphans, 0);
      const mcpOrphans = rowsOut.reduce((a, x) => a + x.mcpOrphans, 0);
      const mcpMid = rowsOut.filter((x) => x.mcpMidCall).length;
      const lost = rowsOut.reduce((a, x) => a + x.lost.length, 0);
      const badIntegrity = rowsOut.filter((x) => x.integrity !== "ok").length;
      const survived = rowsOut.reduce((a, x) => a + x.survivedStart, 0) + survivedLast;
      const restartOk =
        restartMs !== undefined &&
        restartMs < RESTART_TARGET_MS &&
        groupsAtRestart >= RESTART_GROUPS &&
        survivedRestart === 0;
      const turnsDone = rowsOut.reduce((a, x) => a + x.turnsDone, 0);
      const tally = emptyTally(
        `${rounds} kill -9 rounds × ${clients} clients (${turnsDone} turns done), then a restart with ${RESTART_GROUPS} orphaned groups`,
      );
      tally.orphans = orphans;
      tally.lost = lost;
      tally.crashes = crashes;
      tally.notes = `${mcpOrphans} of the ${orphans} orphans MCP server processes (an MCP tool call running at ${mcpMid}/${rounds} kills); integrity_check not ok in ${badIntegrity} rounds; ${survived} processes survived a start-up; restart with ${groupsAtRestart} groups alive: ${restartMs === undefined ? (restartError ?? "did not start") : fmtMs(restartMs)}`;
      const table = [
        "| round | start-up (groups left alive before / still alive after) | turns done / cut | fake CLI processes (groups) at the kill | MCP tool call at the kill (server processes) | alive 5 s later, no restart (of them MCP) | all gone after | integrity_check | bindings | lost bindings | turn count behind |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ...rowsOut.map(
          (x, i) =>
            `| ${i + 1} | ${fmtMs(x.startMs)} (${x.groupsBefore} / ${x.survivedStart ? `**${x.survivedStart}**` : 0}) | ${x.turnsDone} / ${x.turnsCut} | ${x.atKill} (${x.groupsAtKill}) | ${x.mcpMidCall ? "running" : "**not running**"} (${x.mcpAtKill}) | ${x.orphans ? `**${x.orphans}** (${x.mcpOrphans})` : "0 (0)"} | ${x.goneMs === undefined ? "—" : fmtMs(x.goneMs)} | ${x.integrity === "ok" ? "ok" : `**${x.integrity}**`} | ${x.bindings} | ${x.lost.length ? `**${x.lost.length}** (${x.lost.slice(0, 4).join(", ")})` : 0} | ${x.behind} |`,
        ),
      ];
      const checks: Check[] = [
        {
          item: "store",
          check: "kill9: sessions.db `PRAGMA integrity_check` after every kill",
          goal: "ok",
          measured: `${rounds - badIntegrity}/${rounds} ok`,
          pass: badIntegrity === 0,
        },
        {
          item: "30/3",
          check: "kill9: an MCP stdio step's tool call (stubborn server) was running at the kill",
          goal: `${rounds}/${rounds}`,
          measured: `${mcpMid}/${rounds}`,
          pass: mcpMid === rounds,
        },
        {
          item: "#8",
          check: "kill9: processes left by a killed bridge still alive after the next start-up (its reaper)",
          goal: "0",
          measured: String(survived + survivedRestart),
          pass: survived + survivedRestart === 0,
        },
        {
          item: "FIFO",
          check:
            "kill9: a conversation's CLI started while an earlier one of it (orphaned by the kill) was still alive",
          goal: "0",
          measured: `${overlaps.length}${
            overlaps.length
              ? ` (${overlaps
                  .slice(0, 3)
                  .map((o) => o.key)
                  .join(", ")})`
              : ""
          }`,
          pass: overlaps.length === 0,
        },
      ];
      if (leftAtEnd)
        checks.push({
          item: "#3",
          check: "kill9: fake CLI and MCP server processes left after the last bridge stopped (SIGTERM)",
          goal: "0",
          measured: String(leftAtEnd),
          pass: false,
        });
      const details = [
        `${rounds} rounds. Each: the bridge starts (the start-up is timed; what earlier rounds left alive must be gone once it listens), ${clients} clients each stream turns in their own conversation (the fake CLI streams 2–10 deltas 20–100 ms apart; 25% of turns also start a helper \`sleep 30\` that stays in the group when the leader dies of SIGPIPE, 10% ignore SIGTERM and SIGPIPE, 10% take 0.5 s to exit on SIGTERM and ignore SIGPIPE), and a run of the system \`faults-mcp\` is started over HTTP (\`POST /v1/systems/faults-mcp/runs\`): its MCP stdio step calls a tool that takes 60 s, on a server that ignores SIGTERM and the end of its stdin and keeps a \`sleep\` helper in its process group. After ${ctx.small ? "1.5–2" : "5–8"} s, and once that tool call runs (at most ${MCP_CALL_WAIT_MS / 1000} s more), the bridge gets SIGKILL. Then, without a restart, the harness polls for ${ORPHAN_DEADLINE_MS / 1000} s for fake CLI and MCP server processes (each marked in its environment; the start-up columns count both), runs \`PRAGMA integrity_check\` on sessions.db and checks that every conversation whose client saw a turn finish still has its binding (and a turn count no lower than the turns the client saw).`,
        "",
        ...table,
        "",
        `Restart with orphans: ${RESTART_GROUPS} clients each hold a turn (the fake takes 0.5 s to exit on SIGTERM, ignores SIGPIPE, and has a helper in its group); ${allRunning.value ? `all ${RESTART_GROUPS} CLIs were running` : "**not all CLIs started**"}; the bridge gets SIGKILL and is started again at once. Process groups alive when it was started: ${groupsAtRestart} (${orphaned.length} processes). Start-up until it listened: **${restartMs === undefined ? (restartError ?? "did not start") : fmtMs(restartMs)}** (the same bridge with nothing to reap: ${fmtMs(baseStartMs)}; a reaper that waits for one group at a time needs ≥ ${((RESTART_GROUPS * 500) / 1000).toFixed(0)} s). Orphans still alive 1 s after it listened: ${survivedRestart}.`,
        ...(otherErrors.length ? ["", `Other answers: ${otherErrors.join("; ")}`] : []),
      ].join("\n");
      return {
        name: "kill9",
        title: kill9Part.title,
        tally,
        done: {
          orphans: {
            count: orphans,
            measured: `${orphans} alive ${ORPHAN_DEADLINE_MS / 1000} s after ${rounds} kill -9s (no restart), ${mcpOrphans} of them MCP server processes (an MCP tool call running at ${mcpMid}/${rounds} kills)`,
            pass: orphans === 0 && mcpMid === rounds,
          },
          bindings: {
            count: lost,
            measured: `${lost} of ${doneTurns.size} conversations with a finished turn, over ${rounds} kill -9s (integrity_check ok in ${rounds - badIntegrity}/${rounds})`,
            pass: lost === 0 && doneTurns.size > 0,
          },
          restart: {
            measured: `${restartMs === undefined ? (restartError ?? "did not start") : fmtMs(restartMs)} with ${groupsAtRestart} orphaned groups alive (${survivedRestart} survived)`,
            pass: restartOk,
          },
          crashes: { count: crashes, measured: `${crashes} in kill9`, pass: crashes === 0 },
        },
        checks,
        details,
      };
    } finally {
      await bridge?.stop(2000);
      killMarked(ws.mark);
      killMarked(mcp.mark);
    }
  },
};
