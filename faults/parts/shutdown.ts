/**
 * Part "shutdown": SIGTERM in the middle of turns (issue 20 #3, #4).
 * A. Turns that finish within the grace period, plus an idle keep-alive client: the time from the
 *    last turn's end to the process's exit (target under 1 s), what the clients got (complete
 *    answers, `Connection: close`), and what requests arriving during the shutdown got (503 with
 *    Retry-After, or a refused connection — not a reset).
 * B. Turns longer than the grace period: cut by the shutdown; a non-streaming client must get 503
 *    with Retry-After (not 499, not a reset), a streaming one an OpenAI-shaped error frame; no fake
 *    CLI process may outlive the bridge.
 * C. A second SIGTERM while turns run: the bridge exits at once, and its CLI process groups are
 *    ended before it does.
 */
import { cliEnv, startBridge, workspace, writeConfig, type BridgeProc, type Workspace } from "../lib/bridge.js";
import { readCliLog } from "../lib/clilog.js";
import { Conn, requestBytes, type RawResponse } from "../lib/http.js";
import { emptyTally, type Check, type Part, type PartContext, type PartResult } from "../lib/part.js";
import { killMarked, markedProcesses } from "../lib/procs.js";
import { badErrorShape, checkSse, isOpenAIErrorBody } from "../lib/shape.js";
import { startSlowUpstream, type SlowUpstream } from "../lib/upstream.js";
import { eventually, fmtMs, sleep } from "../lib/util.js";

const CHAT = "/v1/chat/completions";
const CLI = "faults/cli";
/** "A few seconds": how long a CLI may outlive its bridge (the same limit as after kill -9). */
const ORPHAN_DEADLINE_MS = 5000;
const UP = "faults/up";

interface TurnSpec {
  label: string;
  model: string;
  stream: boolean;
  key: string;
  directives: string;
}

interface TurnOutcome {
  spec: TurnSpec;
  response: RawResponse | undefined;
  /** Date.now() when the answer was complete (or the connection ended). */
  endAt: number | undefined;
  reset: boolean;
  closedWithoutAnswer: boolean;
  partialStatus: number | undefined;
  /** Date.now() when the answer's headers had arrived. */
  headAt: number | undefined;
  sse: ReturnType<typeof checkSse> | undefined;
}

function startTurn(
  port: number,
  spec: TurnSpec,
  waitMs: number,
): { conn: Promise<Conn>; outcome: Promise<TurnOutcome> } {
  const conn = Conn.open(port, ["POST"]);
  const outcome = (async () => {
    const c = await conn;
    const body = JSON.stringify({
      model: spec.model,
      stream: spec.stream,
      messages: [{ role: "user", content: `FAULTKEY-${spec.key} ${spec.directives} shutdown` }],
    });
    await c.write(
      requestBytes(
        "POST",
        CHAT,
        [
          ["Content-Type", "application/json"],
          ["X-Session-Id", spec.key],
        ],
        body,
      ),
    );
    const rs = await c.responses(1, waitMs);
    const r = rs[0];
    const endAt = r ? c.opened + r.at : c.closed ? c.opened + (c.end.at ?? 0) : undefined;
    const partial = c.parser.partial;
    const bodyText = r ? r.body.toString("utf8") : partial ? Buffer.concat(partial.body).toString("utf8") : "";
    const isSse = /event-stream/.test((r ?? partial)?.headers["content-type"] ?? "");
    return {
      spec,
      response: r,
      endAt,
      reset: !r && c.end.reset,
      closedWithoutAnswer: !r && c.closed && !partial,
      partialStatus: partial?.status,
      headAt: r ? c.opened + r.headAt : partial ? c.opened + partial.headAt : undefined,
      sse: isSse ? checkSse(bodyText) : undefined,
    };
  })();
  return { conn, outcome };
}

async function startedAll(
  ws: Workspace,
  upstream: SlowUpstream,
  specs: TurnSpec[],
  upBefore: number,
): Promise<boolean> {
  const cliKeys = specs.filter((s) => s.model === CLI).map((s) => s.key);
  const ups = specs.filter((s) => s.model === UP).length;
  const r = await eventually(
    () => {
      const log = readCliLog(ws.faultsDir);
      return cliKeys.every((k) => log.startsByKey.has(k)) && upstream.requests() - upBefore >= ups ? true : undefined;
    },
    15_000,
    50,
  );
  return r.value === true;
}

const describe = (o: TurnOutcome): string => {
  if (o.response) {
    const s = o.sse;
    if (s)
      return `${o.response.status} stream${s.done ? " [DONE]" : ""}${s.errorFrames ? ` error frame${s.badErrorFrames ? " (NOT shaped)" : ""}: ${s.firstError?.slice(0, 80)}` : ""}`;
    return `${o.response.status}${o.response.headers["retry-after"] ? ` Retry-After ${o.response.headers["retry-after"]}` : ""}${o.response.status >= 400 ? ` ${o.response.body.toString("utf8", 0, 90)}` : ""}`;
  }
  if (o.partialStatus)
    return `${o.partialStatus} cut mid-answer${o.reset ? " (reset)" : ""}${o.sse?.errorFrames ? `, error frame: ${o.sse.firstError?.slice(0, 80)}` : ""}`;
  return o.reset ? "reset, no answer" : o.closedWithoutAnswer ? "closed, no answer" : "no answer in time";
};

export const shutdownPart: Part = {
  name: "shutdown",
  title:
    "SIGTERM in the middle of turns: finishing turns + idle keep-alive client, turns cut by the grace period, double SIGTERM",
  measures: ["shutdown", "orphans", "shape", "crashes"],
  async run(ctx: PartContext): Promise<PartResult> {
    const exitWaitMs = ctx.small ? 15_000 : 90_000;
    const ws = workspace(ctx.tmpRoot, "shutdown", ctx.runMark);
    const upstream = await startSlowUpstream();
    const backends = {
      cli: {
        type: "opencode",
        command: ws.opencodeBin,
        env: cliEnv(ws),
        timeoutSeconds: 120,
        killGraceSeconds: 1,
        warm: { enabled: false },
      },
      up: { type: "openai", baseUrl: upstream.url, maxConnections: 16 },
    };
    const models = [
      { id: CLI, backend: "cli" },
      { id: UP, backend: "up", model: "fake-model" },
    ];
    const bridges: BridgeProc[] = [];
    let badShape = 0;
    let crashes = 0;
    const judgeShape = (outs: TurnOutcome[]) => {
      for (const o of outs) {
        if (o.response && badErrorShape(o.response.status, o.response.body)) badShape++;
        if (o.sse) badShape += o.sse.badErrorFrames;
      }
    };
    try {
      // ---- A: turns that finish within the grace period, and an idle keep-alive client.
      const cfgA = writeConfig(ws, "shutdown-a", {
        server: { maxConcurrent: 16, shutdownGraceSeconds: 8 },
        backends,
        models,
      });
      const a = await startBridge(cfgA);
      bridges.push(a);
      // SSE honours a client's `Connection: close` (checked before the shutdown).
      const sseClose = await (async () => {
        const c = await Conn.open(a.port, ["POST"]);
        const body = JSON.stringify({
          model: UP,
          stream: true,
          messages: [{ role: "user", content: "FAULTKEY-sa-sse-close FAULTN-2 hello" }],
        });
        await c.write(
          requestBytes(
            "POST",
            CHAT,
            [
              ["Content-Type", "application/json"],
              ["Connection", "close"],
              ["X-Session-Id", "sa-sse-close"],
            ],
            body,
          ),
        );
        const r = (await c.responses(1, 10_000))[0];
        const closed = await c.waitClosed(2000);
        c.close();
        return { header: r?.headers.connection ?? "–", closed: closed && c.end.by === "server", status: r?.status };
      })();
      // Two idle keep-alive clients (each made one GET /health): one stays idle through the
      // shutdown, the other sends a request on its connection during it.
      const idle = await Conn.open(a.port, ["GET", "POST"]);
      await idle.write(requestBytes("GET", "/health", []));
      await idle.responses(1, 5000);
      const reused = await Conn.open(a.port, ["GET", "POST"]);
      await reused.write(requestBytes("GET", "/health", []));
      await reused.responses(1, 5000);
      const specsA: TurnSpec[] = [
        {
          label: "CLI, non-streaming",
          model: CLI,
          stream: false,
          key: "sa-cli-json",
          directives: "FAULTN-6 FAULTMS-200",
        },
        { label: "CLI, streaming", model: CLI, stream: true, key: "sa-cli-sse", directives: "FAULTN-7 FAULTMS-200" },
        {
          label: "CLI, streaming, longer",
          model: CLI,
          stream: true,
          key: "sa-cli-sse2",
          directives: "FAULTN-9 FAULTMS-200",
        },
        {
          label: "upstream, non-streaming",
          model: UP,
          stream: false,
          key: "sa-up-json",
          directives: "FAULTN-1 FAULTFIRST-1400",
        },
        { label: "upstream, streaming", model: UP, stream: true, key: "sa-up-sse", directives: "FAULTN-7 FAULTMS-200" },
        {
          label: "upstream, streaming, longer",
          model: UP,
          stream: true,
          key: "sa-up-sse2",
          directives: "FAULTN-9 FAULTMS-200",
        },
      ];
      const upBeforeA = upstream.requests();
      const turnsA = specsA.map((s) => startTurn(a.port, s, exitWaitMs + 5000));
      const allStartedA = await startedAll(ws, upstream, specsA, upBeforeA);
      await sleep(300);
      const sigAt = Date.now();
      a.signal("SIGTERM");
      // Requests arriving during the shutdown: on a kept-alive connection, and on new connections.
      await sleep(200);
      const onKept = (async () => {
        if (reused.closed)
          return {
            kind: "closed before the request" as string,
            status: undefined as number | undefined,
            retryAfter: false,
            shaped: false,
          };
        await reused.write(
          requestBytes(
            "POST",
            CHAT,
            [
              ["Content-Type", "application/json"],
              ["X-Session-Id", "sa-late-kept"],
            ],
            JSON.stringify({ model: UP, messages: [{ role: "user", content: "late" }] }),
          ),
        );
        const r = (await reused.responses(2, 5000))[1];
        const closed = await reused.waitClosed(2000);
        if (r && badErrorShape(r.status, r.body)) badShape++;
        return r
          ? {
              kind: closed ? "answer, then closed" : "answer, left open",
              status: r.status,
              retryAfter: r.headers["retry-after"] !== undefined,
              shaped: isOpenAIErrorBody(r.body),
            }
          : {
              kind: reused.end.reset ? "reset" : reused.closed ? "closed" : "no answer",
              status: undefined,
              retryAfter: false,
              shaped: false,
            };
      })();
      const late = await Promise.all(
        [0, 1].map(async (i) => {
          const c = await Conn.open(a.port, ["POST"]);
          if (c.closed)
            return {
              kind: c.end.by === "refused" ? "refused" : "reset",
              status: undefined as number | undefined,
              retryAfter: false,
              shaped: false,
            };
          await c.write(
            requestBytes(
              "POST",
              CHAT,
              [
                ["Content-Type", "application/json"],
                ["X-Session-Id", `sa-late-${i}`],
              ],
              JSON.stringify({ model: UP, messages: [{ role: "user", content: "late" }] }),
            ),
          );
          const r = (await c.responses(1, 5000))[0];
          c.close();
          if (r && badErrorShape(r.status, r.body)) badShape++;
          return r
            ? {
                kind: "answer",
                status: r.status,
                retryAfter: r.headers["retry-after"] !== undefined,
                shaped: isOpenAIErrorBody(r.body),
              }
            : {
                kind: c.end.reset ? "reset" : c.closed ? "closed" : "no answer",
                status: undefined,
                retryAfter: false,
                shaped: false,
              };
        }),
      );
      const kept = await onKept;
      const outsA = await Promise.all(turnsA.map((t) => t.outcome));
      const exitA = await Promise.race([a.exited, sleep(exitWaitMs).then(() => undefined)]);
      if (!exitA) await a.stop(1000);
      for (const t of turnsA) void t.conn.then((c) => c.close());
      await idle.waitClosed(500);
      const idleClosedAt = idle.closed && idle.end.by === "server" ? idle.opened + (idle.end.at ?? 0) : undefined;
      const idleClosedMs = idleClosedAt === undefined ? undefined : idleClosedAt - sigAt;
      // Closed by the bridge, at the latest as it exits (not left to the keep-alive timeout).
      const idleClosed = idleClosedAt !== undefined && exitA !== undefined && idleClosedAt <= exitA.at + 200;
      idle.close();
      reused.close();
      judgeShape(outsA);
      const lastEnd = Math.max(...outsA.map((o) => o.endAt ?? 0));
      const completeA = outsA.filter(
        (o) => o.response?.status === 200 && (!o.sse || (o.sse.done && o.sse.errorFrames === 0)),
      ).length;
      // Answers whose headers went out after SIGTERM must say `Connection: close` (a stream that
      // started before cannot, but its connection must not stay open: the exit time shows that).
      const startedClosing = outsA.filter((o) => o.response && o.headAt !== undefined && o.headAt > sigAt);
      const closeHeader = startedClosing.filter((o) => /close/i.test(o.response!.headers.connection ?? "")).length;
      const exitAfterLast = exitA ? exitA.at - lastEnd : undefined;
      await eventually(() => (markedProcesses(ws.mark).length === 0 ? true : undefined), 1000, 50);
      const orphansA = markedProcesses(ws.mark).length;
      killMarked(ws.mark);

      // ---- B: turns longer than the grace period.
      const graceB = 1;
      const cfgB = writeConfig(ws, "shutdown-b", {
        server: { maxConcurrent: 16, shutdownGraceSeconds: graceB },
        backends,
        models,
      });
      const bb = await startBridge(cfgB);
      bridges.push(bb);
      const specsB: TurnSpec[] = [
        {
          label: "CLI, non-streaming",
          model: CLI,
          stream: false,
          key: "sb-cli-json",
          directives: "FAULTN-100 FAULTMS-200",
        },
        { label: "CLI, streaming", model: CLI, stream: true, key: "sb-cli-sse", directives: "FAULTN-100 FAULTMS-200" },
        {
          label: "CLI (ignores SIGTERM), non-streaming",
          model: CLI,
          stream: false,
          key: "sb-cli-stubborn",
          directives: "FAULTMODE-stubborn FAULTN-100 FAULTMS-200",
        },
        {
          label: "upstream, non-streaming",
          model: UP,
          stream: false,
          key: "sb-up-json",
          directives: "FAULTN-1 FAULTFIRST-20000",
        },
        {
          label: "upstream, streaming",
          model: UP,
          stream: true,
          key: "sb-up-sse",
          directives: "FAULTN-100 FAULTMS-200",
        },
      ];
      const upBeforeB = upstream.requests();
      const turnsB = specsB.map((s) => startTurn(bb.port, s, exitWaitMs));
      const allStartedB = await startedAll(ws, upstream, specsB, upBeforeB);
      await sleep(300);
      const sigB = Date.now();
      bb.signal("SIGTERM");
      const outsB = await Promise.all(turnsB.map((t) => t.outcome));
      const exitB = await Promise.race([bb.exited, sleep(exitWaitMs).then(() => undefined)]);
      if (!exitB) await bb.stop(1000);
      for (const t of turnsB) void t.conn.then((c) => c.close());
      judgeShape(outsB);
      const orphanWaitB = await eventually(
        () => (markedProcesses(ws.mark).length === 0 ? true : undefined),
        ORPHAN_DEADLINE_MS,
        50,
      );
      const orphansB = markedProcesses(ws.mark).length;
      killMarked(ws.mark);
      const nonStreamB = outsB.filter((o) => !o.spec.stream);
      const good503 = nonStreamB.filter(
        (o) =>
          o.response?.status === 503 &&
          o.response.headers["retry-after"] !== undefined &&
          isOpenAIErrorBody(o.response.body),
      ).length;
      const streamB = outsB.filter((o) => o.spec.stream);
      const goodStream = streamB.filter(
        (o) => o.sse && o.sse.errorFrames > 0 && o.sse.badErrorFrames === 0 && !o.reset,
      ).length;
      const resetsB = outsB.filter((o) => o.reset || o.closedWithoutAnswer).length;
      const got499 = outsB.filter((o) => o.response?.status === 499).length;

      // ---- C: a second SIGTERM while turns run.
      const cfgC = writeConfig(ws, "shutdown-c", {
        server: { maxConcurrent: 16, shutdownGraceSeconds: 30 },
        backends,
        models,
      });
      const c = await startBridge(cfgC);
      bridges.push(c);
      const specsC: TurnSpec[] = [
        { label: "CLI", model: CLI, stream: true, key: "sc-cli-1", directives: "FAULTN-100 FAULTMS-200" },
        { label: "CLI", model: CLI, stream: false, key: "sc-cli-2", directives: "FAULTN-100 FAULTMS-200" },
        {
          label: "CLI with a child holding stdout",
          model: CLI,
          stream: true,
          key: "sc-cli-3",
          directives: "FAULTMODE-linger FAULTLINGER-30 FAULTN-100 FAULTMS-200",
        },
        {
          label: "CLI ignoring SIGTERM",
          model: CLI,
          stream: true,
          key: "sc-cli-4",
          directives: "FAULTMODE-stubborn FAULTN-100 FAULTMS-200",
        },
      ];
      const turnsC = specsC.map((s) => startTurn(c.port, s, 10_000));
      const allStartedC = await startedAll(ws, upstream, specsC, upstream.requests());
      await sleep(300);
      c.signal("SIGTERM");
      await sleep(300);
      const sig2 = Date.now();
      c.signal("SIGTERM");
      const exitC = await Promise.race([c.exited, sleep(10_000).then(() => undefined)]);
      const exitCms = exitC ? exitC.at - sig2 : undefined;
      // "Before it exits": what is alive right after the exit (a SIGKILL takes effect within ms).
      const atExit = exitC
        ? await eventually(() => (markedProcesses(ws.mark).length === 0 ? true : undefined), 500, 20)
        : undefined;
      const leftC = markedProcesses(ws.mark);
      const aliveAtExitC = leftC.length;
      // Orphans (the "Done when" line): still alive a few seconds later, whoever was to end them.
      await eventually(() => (markedProcesses(ws.mark).length === 0 ? true : undefined), ORPHAN_DEADLINE_MS, 50);
      const orphansC = markedProcesses(ws.mark).length;
      if (!exitC) await c.stop(1000);
      await Promise.race([Promise.all(turnsC.map((t) => t.outcome)), sleep(3000)]);
      for (const t of turnsC) void t.conn.then((x) => x.close());
      killMarked(ws.mark);

      for (const x of bridges) {
        // Exits the harness asked for are not crashes; an exit before the signal is.
        if (x.crash) crashes++;
      }
      const orphans = orphansA + orphansB + orphansC;
      const shutdownOk = exitAfterLast !== undefined && exitAfterLast < 1000 && completeA === specsA.length;
      const lateOk = late.every(
        (l) => (l.kind === "answer" && l.status === 503 && l.retryAfter && l.shaped) || l.kind === "refused",
      );
      const checks: Check[] = [
        {
          item: "#3",
          check: "shutdown A: turns running at SIGTERM finish within the grace period with complete answers",
          goal: `${specsA.length}/${specsA.length}`,
          measured: `${completeA}/${specsA.length}${allStartedA ? "" : " (not all turns had started)"}`,
          pass: completeA === specsA.length,
        },
        {
          item: "#3",
          check: "shutdown A: the idle keep-alive connection is closed by the bridge",
          goal: "by the time it exits (not left to the keep-alive timeout)",
          measured:
            idleClosedMs !== undefined
              ? `closed ${fmtMs(idleClosedMs)} after SIGTERM${exitA ? ` (exit ${fmtMs(exitA.at - sigAt)} after)` : ""}`
              : "**not closed by the bridge**",
          pass: idleClosed,
        },
        {
          item: "#3",
          check: "shutdown A: a request on a kept-alive connection during the shutdown",
          goal: "503 + Retry-After (shaped), then closed; not a reset",
          measured:
            `${kept.status ?? ""}${kept.retryAfter ? " + Retry-After" : ""}${kept.status && !kept.shaped ? " (not shaped)" : ""} ${kept.kind}`.trim(),
          pass: kept.status === 503 && kept.retryAfter && kept.shaped && kept.kind === "answer, then closed",
        },
        {
          item: "#3",
          check: "shutdown A: answers whose headers went out after SIGTERM say `Connection: close`",
          goal: "all",
          measured: `${closeHeader}/${startedClosing.length}`,
          pass: closeHeader === startedClosing.length,
        },
        {
          item: "#3",
          check: "SSE honours a client's `Connection: close`",
          goal: "`Connection: close`, closed after [DONE]",
          measured: `${sseClose.status ?? "no answer"}, Connection: ${sseClose.header}, ${sseClose.closed ? "closed by the bridge" : "**left open**"}`,
          pass: /close/i.test(sseClose.header) && sseClose.closed,
        },
        {
          item: "#3",
          check: "shutdown A: requests arriving during the shutdown (new connections)",
          goal: "503 + Retry-After (shaped), or refused; not a reset",
          measured: late
            .map((l) =>
              l.kind === "answer"
                ? `${l.status}${l.retryAfter ? " + Retry-After" : ""}${l.shaped ? "" : " (not shaped)"}`
                : l.kind,
            )
            .join(", "),
          pass: lateOk,
        },
        {
          item: "#4",
          check: "shutdown B: non-streaming turns cut by the shutdown",
          goal: "503 + Retry-After, OpenAI-shaped (not 499, not a reset)",
          measured: `${good503}/${nonStreamB.length} (${nonStreamB.map(describe).join("; ")})`,
          pass: good503 === nonStreamB.length,
        },
        {
          item: "#4",
          check: "shutdown B: streaming turns cut by the shutdown",
          goal: "an OpenAI-shaped error frame, not a reset",
          measured: `${goodStream}/${streamB.length} (${streamB.map(describe).join("; ")})`,
          pass: goodStream === streamB.length,
        },
        {
          item: "#3",
          check: "shutdown B: exit after the grace period ended",
          goal: "< 5 s",
          measured: exitB ? fmtMs(exitB.at - sigB - graceB * 1000) : `no exit within ${fmtMs(exitWaitMs)}`,
          pass: exitB !== undefined && exitB.at - sigB - graceB * 1000 < 5000,
        },
        {
          item: "#3",
          check: "shutdown C: exit after a second SIGTERM, its CLI groups ended before it exits",
          goal: "< 3 s (`killGraceSeconds: 1`); no fake CLI process alive 0.5 s after the exit",
          measured: `${exitCms === undefined ? "no exit within 10 s" : fmtMs(exitCms)}, ${aliveAtExitC} fake CLI processes alive${atExit?.value ? " (none right after the exit)" : " 0.5 s after the exit"}, ${orphansC} ${ORPHAN_DEADLINE_MS / 1000} s after${allStartedC ? "" : " (not all turns had started)"}`,
          pass: exitCms !== undefined && exitCms < 3000 && aliveAtExitC === 0,
        },
      ];
      const tally = emptyTally(
        `3 shutdowns: ${specsA.length} finishing turns + idle client + 2 late requests; ${specsB.length} turns longer than the grace; ${specsC.length} turns + double SIGTERM`,
      );
      tally.orphans = orphans;
      tally.badShape = badShape;
      tally.crashes = crashes;
      tally.noAnswer =
        resetsB +
        outsA.filter((o) => o.reset || o.closedWithoutAnswer).length +
        late.filter((l) => l.kind === "reset" || l.kind === "closed").length;
      tally.notes = `exit ${exitAfterLast === undefined ? `not within ${fmtMs(exitWaitMs)}` : fmtMs(exitAfterLast)} after the last turn ended; cut non-streaming turns: ${nonStreamB.map((o) => o.response?.status ?? "no answer").join(", ")}${got499 ? " (499!)" : ""}`;
      const details = [
        `A. \`shutdownGraceSeconds: 8\`. Two keep-alive clients that made one GET /health each, and ${specsA.length} turns that end 1–2 s after they start; SIGTERM ${allStartedA ? "once every turn was running" : "(**not every turn had started**)"} (+300 ms). 200 ms after SIGTERM, one of the two clients sends a request on its connection, and two more come on new connections; the other client stays idle.`,
        "",
        "| turn | answer | ended after SIGTERM | Connection |",
        "| --- | --- | --- | --- |",
        ...outsA.map(
          (o) =>
            `| ${o.spec.label} | ${describe(o)} | ${o.endAt ? fmtMs(o.endAt - sigAt) : "–"} | ${o.response?.headers.connection ?? "–"} |`,
        ),
        "",
        `Last turn ended ${fmtMs(lastEnd - sigAt)} after SIGTERM; the process exited ${exitA ? `${fmtMs(exitA.at - sigAt)} after SIGTERM, **${fmtMs(exitAfterLast)} after the last turn ended**` : `**not within ${fmtMs(exitWaitMs)}** (stopped by the harness)`}. Idle connection: ${idleClosedMs !== undefined ? `closed by the bridge ${fmtMs(idleClosedMs)} after SIGTERM` : "not closed by the bridge"}. Request on the kept-alive connection: ${kept.status ?? ""} ${kept.kind}. Requests on new connections: ${late.map((l) => (l.kind === "answer" ? String(l.status) : l.kind)).join(", ")}. Fake CLI processes left: ${orphansA}.`,
        "",
        `B. \`shutdownGraceSeconds: ${graceB}\`; ${specsB.length} turns of ~20 s; SIGTERM ${allStartedB ? "once every turn was running" : "(**not every turn had started**)"}.`,
        "",
        "| turn | what the client got |",
        "| --- | --- |",
        ...outsB.map((o) => `| ${o.spec.label} | ${describe(o)} |`),
        "",
        `Exit ${exitB ? `${fmtMs(exitB.at - sigB)} after SIGTERM (exit code ${exitB.code ?? exitB.signal})` : "not in time"}. Fake CLI processes alive after the exit: ${orphansB}${orphanWaitB.value ? "" : ` (after ${ORPHAN_DEADLINE_MS / 1000} s)`}.`,
        "",
        `C. \`shutdownGraceSeconds: 30\`; ${specsC.length} CLI turns of ~20 s (one with a child holding stdout, one ignoring SIGTERM); SIGTERM, then SIGTERM again 300 ms later. Exit ${exitCms === undefined ? "not within 10 s" : `${fmtMs(exitCms)} after the second SIGTERM (exit code ${exitC?.code ?? exitC?.signal})`}; fake CLI processes alive 0.5 s after the exit: ${aliveAtExitC}${
          aliveAtExitC
            ? ` (${leftC
                .slice(0, 4)
                .map((p) => p.cmd.replace(/^\S*bash \S*\//, "").slice(0, 60))
                .join("; ")})`
            : ""
        }, ${ORPHAN_DEADLINE_MS / 1000} s after the exit: ${orphansC}.`,
      ].join("\n");
      return {
        name: "shutdown",
        title: shutdownPart.title,
        tally,
        done: {
          shutdown: {
            measured:
              exitAfterLast === undefined
                ? `no exit within ${fmtMs(exitWaitMs)} of SIGTERM`
                : `exit ${fmtMs(exitAfterLast)} after the last turn ended (${completeA}/${specsA.length} turns complete)`,
            pass: shutdownOk,
          },
          orphans: {
            count: orphans,
            measured: `${orphans} after shutdowns (A ${orphansA}, B ${orphansB}, C ${orphansC})`,
            pass: orphans === 0,
          },
          shape: { count: badShape, measured: `${badShape} in shutdown`, pass: badShape === 0 },
          crashes: { count: crashes, measured: `${crashes} in shutdown`, pass: crashes === 0 },
        },
        checks,
        details,
      };
    } finally {
      for (const x of bridges) await x.stop(1000);
      await upstream.close();
      killMarked(ws.mark);
    }
  },
};
