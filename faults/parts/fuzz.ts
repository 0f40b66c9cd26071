/**
 * Part "fuzz": ≥ 10,000 hostile requests (500 with --small) against one bridge with a fake
 * upstream (bench/fake-upstream.ts, in this process) and a fake OpenCode CLI. Counted: crashes
 * (the bridge process gone; it is restarted and the run goes on), 5xx answers (the fake backends
 * never fail, so every 5xx is the bridge's), error answers whose body is not OpenAI-shaped, and
 * connections reset or closed instead of answered.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool, errors as undiciErrors } from "undici";
import { FAKE_MODEL, startFakeUpstream } from "../../bench/fake-upstream.js";
import { cliEnv, startBridge, workspace, writeConfig, type BridgeProc } from "../lib/bridge.js";
import { Conn, type RawResponse } from "../lib/http.js";
import { emptyTally, type Check, type Part, type PartContext, type PartResult } from "../lib/part.js";
import { killMarked, markedProcesses } from "../lib/procs.js";
import { badErrorShape, checkSse } from "../lib/shape.js";
import { Rng, int, workers } from "../lib/util.js";
import {
  BODY_LIMIT,
  CHAT,
  CLI_MODEL,
  UP_MODEL,
  makeCase,
  requestsIn,
  type FuzzCase,
  type JsonCase,
  type PipelineCase,
  type RawCase,
} from "./fuzz-cases.js";

interface FamilyStats {
  requests: number;
  s2xx: number;
  s4xx: number;
  s5xx: number;
  other: number;
  badShape: number;
  reset: number;
  closed: number;
  hung: number;
  statuses: Map<number, number>;
}

const newStats = (): FamilyStats => ({
  requests: 0,
  s2xx: 0,
  s4xx: 0,
  s5xx: 0,
  other: 0,
  badShape: 0,
  reset: 0,
  closed: 0,
  hung: 0,
  statuses: new Map(),
});

const MAX_RESTARTS = 5;
const EXAMPLES = 6;

export const fuzzPart: Part = {
  name: "fuzz",
  title: "Fuzzed requests (JSON, nesting, huge strings, invalid UTF-8, HTTP-level abuse, pipelining)",
  measures: ["crashes", "5xx", "shape"],
  async run(ctx: PartContext): Promise<PartResult> {
    const target = ctx.small ? 500 : 10_000;
    const seconds = ctx.small ? 30 : 400;
    const concurrency = 8;
    const ws = workspace(ctx.tmpRoot, "fuzz", ctx.runMark);
    const upstream: Server = await startFakeUpstream(3);
    const upstreamPort = (upstream.address() as AddressInfo).port;
    const config = writeConfig(ws, "fuzz", {
      server: { maxConcurrent: 16, maxQueue: 512, queueTimeoutSeconds: 30, bodyLimitBytes: BODY_LIMIT },
      backends: {
        up: { type: "openai", baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, maxConnections: 32 },
        cli: {
          type: "opencode",
          command: ws.opencodeBin,
          env: cliEnv(ws),
          timeoutSeconds: 30,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [
        { id: UP_MODEL, backend: "up", model: FAKE_MODEL },
        { id: CLI_MODEL, backend: "cli" },
      ],
    });

    const families = new Map<string, FamilyStats>();
    const examples: string[] = [];
    const seen = new Set<string>();
    /** One example per kind of failure and family (and never the same case twice), at most EXAMPLES families per kind. */
    const example = (kind: string, c: FuzzCase, detail: string) => {
      const perKind = [...seen].filter((k) => k.startsWith(`${kind}\0`) && k.split("\0").length === 2).length;
      if (seen.has(`${kind}\0${c.family}`) || seen.has(`${kind}\0${c.family}\0${c.what}`) || perKind >= EXAMPLES)
        return;
      seen.add(`${kind}\0${c.family}`);
      seen.add(`${kind}\0${c.family}\0${c.what}`);
      examples.push(`- ${kind}: ${c.family} — ${c.what.slice(0, 90)} → ${detail.replace(/\s+/g, " ").slice(0, 200)}`);
    };
    const fam = (c: FuzzCase) => {
      let s = families.get(c.family);
      if (!s) families.set(c.family, (s = newStats()));
      return s;
    };
    const crashes: Array<{ cases: string[]; detail: string }> = [];
    let sent = 0;
    let next = 0;
    let skipped = 0;

    let bridge: BridgeProc = await startBridge(config);
    let pool = new Pool(bridge.origin, {
      connections: concurrency,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
      keepAliveTimeout: 10_000,
    });
    const inFlight = new Set<FuzzCase>();
    let restarting: Promise<void> | undefined;
    let gaveUp = false;
    const ensureBridge = async () => {
      if (bridge.alive) return;
      restarting ??= (async () => {
        await bridge.exited;
        crashes.push({
          cases: [...inFlight].map((c) => `${c.family}: ${c.what.slice(0, 80)}`),
          detail: `exit ${bridge.exit?.code ?? bridge.exit?.signal}; stderr: ${(bridge.crash?.stderr ?? "").slice(-600)}`,
        });
        ctx.log(`fuzz: the bridge exited (${bridge.exit?.code ?? bridge.exit?.signal}); restarting it`);
        await pool.destroy().catch(() => {});
        if (crashes.length > MAX_RESTARTS) {
          gaveUp = true;
          return;
        }
        bridge = await startBridge(config);
        pool = new Pool(bridge.origin, {
          connections: concurrency,
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
          keepAliveTimeout: 10_000,
        });
      })().finally(() => (restarting = undefined));
      await restarting;
    };

    /** One answer: its status class, its shape, and for SSE the shape of error frames. */
    const judge = (
      c: FuzzCase,
      s: FamilyStats,
      status: number,
      headers: Record<string, string | string[] | undefined>,
      body: Buffer,
      method: string,
    ) => {
      s.requests++;
      s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1);
      if (status >= 200 && status < 300) s.s2xx++;
      else if (status >= 400 && status < 500) s.s4xx++;
      else if (status >= 500) {
        s.s5xx++;
        example("5xx", c, `${status} ${body.toString("utf8", 0, 200)}`);
      } else s.other++;
      if (badErrorShape(status, body, method)) {
        s.badShape++;
        example("non-OpenAI error body", c, `${status} ${JSON.stringify(body.toString("utf8", 0, 160))}`);
      }
      const ct = String(headers["content-type"] ?? "");
      if (status === 200 && ct.includes("text/event-stream")) {
        const sse = checkSse(body.toString("utf8"));
        if (sse.badErrorFrames) {
          s.badShape += sse.badErrorFrames;
          example("non-OpenAI SSE error frame", c, sse.firstError ?? "");
        }
      }
    };

    const lost = (c: FuzzCase, s: FamilyStats, kind: "reset" | "closed" | "hung", detail: string) => {
      s.requests++;
      s[kind]++;
      example(
        kind === "hung"
          ? "no answer in time"
          : kind === "reset"
            ? "reset instead of an answer"
            : "closed without an answer",
        c,
        detail,
      );
    };

    const runJson = async (c: JsonCase) => {
      const s = fam(c);
      try {
        const res = await pool.request({
          method: c.method as "POST",
          path: c.path,
          headers: c.headers,
          ...(c.body ? { body: c.body } : {}),
        });
        const body = Buffer.from(await res.body.arrayBuffer());
        judge(c, s, res.statusCode, res.headers, body, c.method);
      } catch (err) {
        const e = err as Error & { code?: string; cause?: { code?: string } };
        const code = e.code ?? "";
        if (code === "UND_ERR_INVALID_ARG" || err instanceof undiciErrors.InvalidArgumentError) {
          skipped++;
          sent--; // not sent: another case takes its place
          return;
        }
        if (!bridge.alive) return lost(c, s, "closed", `bridge gone (${e.message})`);
        if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") return lost(c, s, "hung", e.message);
        if (code === "ECONNRESET" || e.cause?.code === "ECONNRESET" || /reset/i.test(e.message))
          return lost(c, s, "reset", `${code} ${e.message}`);
        return lost(c, s, "closed", `${code} ${e.message}`);
      }
    };

    const timeoutMs = ctx.small ? 8000 : 15_000;
    const runRaw = async (c: RawCase) => {
      const s = fam(c);
      const conn = await Conn.open(bridge.port, c.methods);
      try {
        if (conn.closed) return lost(c, s, "closed", `connect: ${conn.end.error}`);
        for (const w of c.writes) {
          if (typeof w === "number")
            await conn.until(() => conn.parser.interim > 0 || conn.parser.responses.length > 0 || conn.closed, w);
          else if (w.length) await conn.write(w);
        }
        if (c.flood) {
          const stopWhenAnswered = conn.responses(1, timeoutMs);
          await Promise.race([conn.flood(c.flood, timeoutMs), stopWhenAnswered]);
        }
        const rs: RawResponse[] = await conn.responses(c.expect, timeoutMs);
        if (rs.length === 0) {
          if (conn.parser.error) return lost(c, s, "closed", `unparseable answer: ${conn.parser.error}`);
          if (!conn.closed) return lost(c, s, "hung", `no answer within ${timeoutMs} ms`);
          return lost(
            c,
            s,
            conn.end.reset ? "reset" : "closed",
            `${conn.end.error ?? "FIN"} after ${conn.written} bytes sent`,
          );
        }
        for (const r of rs.slice(0, c.expect)) judge(c, s, r.status, r.headers, r.body, c.methods[0] ?? "POST");
      } finally {
        conn.close();
      }
    };

    const pipelineMismatch: string[] = [];
    let pipelineUnanswered = 0;
    const runPipeline = async (c: PipelineCase) => {
      const s = fam(c);
      const conn = await Conn.open(bridge.port, c.methods);
      try {
        if (conn.closed) {
          for (let j = 0; j < c.statuses.length; j++) lost(c, s, "closed", `connect: ${conn.end.error}`);
          return;
        }
        await conn.write(c.bytes);
        const rs = await conn.responses(c.statuses.length, timeoutMs);
        for (let j = 0; j < c.statuses.length; j++) {
          const r = rs[j];
          if (!r) {
            pipelineUnanswered++;
            lost(
              c,
              s,
              !conn.closed ? "hung" : conn.end.reset ? "reset" : "closed",
              `request ${j + 1} of ${c.statuses.length} unanswered`,
            );
            continue;
          }
          judge(c, s, r.status, r.headers, r.body, c.methods[j] ?? "POST");
          if (r.status !== c.statuses[j] && pipelineMismatch.length < EXAMPLES)
            pipelineMismatch.push(`${c.what}: answer ${j + 1} was ${r.status}, expected ${c.statuses[j]}`);
        }
      } finally {
        conn.close();
      }
    };

    const started = Date.now();
    const deadline = started + seconds * 1000;
    try {
      await workers(concurrency, deadline, async () => {
        if (sent >= target || gaveUp) return false;
        const i = next++;
        const c = makeCase(new Rng((ctx.seed * 1_000_003 + i) >>> 0), i, ctx.small);
        sent += requestsIn(c);
        await ensureBridge();
        if (gaveUp) return false;
        inFlight.add(c);
        try {
          if (c.kind === "json") await runJson(c);
          else if (c.kind === "raw") await runRaw(c);
          else await runPipeline(c);
        } finally {
          inFlight.delete(c);
        }
        // A crash shows as an exit; wait for it to be noticed before the next case is judged.
        if (!bridge.alive) await ensureBridge();
        return true;
      });
      await ensureBridge();
      const seconds_ = (Date.now() - started) / 1000;
      ctx.log(`fuzz: ${sent} requests in ${seconds_.toFixed(1)} s`);

      // Still answering, and no fake CLI left behind.
      let answers = false;
      if (!gaveUp) {
        const res = await pool
          .request({
            method: "POST",
            path: CHAT,
            headers: { "content-type": "application/json", "x-session-id": "fuzz-final" },
            body: JSON.stringify({ model: UP_MODEL, messages: [{ role: "user", content: "still there?" }] }),
          })
          .catch(() => undefined);
        answers = res?.statusCode === 200;
        await res?.body.arrayBuffer().catch(() => undefined);
      }
      await pool.close().catch(() => {});
      await bridge.stop(5000);
      const leftover = markedProcesses(ws.mark).length;
      killMarked(ws.mark);

      const all = [...families.values()];
      const sum = (k: keyof Omit<FamilyStats, "statuses">) => all.reduce((a, s) => a + s[k], 0);
      const tally = emptyTally(`${int(sum("requests"))} requests (${int(next)} cases) in ${seconds_.toFixed(0)} s`);
      tally.crashes = crashes.length;
      tally.fivexx = sum("s5xx");
      tally.badShape = sum("badShape");
      tally.noAnswer = sum("reset") + sum("closed") + sum("hung");
      tally.notes = `${int(sum("reset"))} resets, ${int(sum("closed"))} closed, ${int(sum("hung"))} without an answer in time${skipped ? `; ${skipped} cases the HTTP client refused to send` : ""}`;

      const rows = [...families.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, s]) => {
          const top = [...s.statuses.entries()]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 5)
            .map(([st, n]) => `${st}×${n}`)
            .join(" ");
          return `| ${name} | ${int(s.requests)} | ${int(s.s2xx)} | ${int(s.s4xx)} | ${s.s5xx ? `**${int(s.s5xx)}**` : "0"} | ${s.badShape ? `**${int(s.badShape)}**` : "0"} | ${s.reset ? `**${s.reset}**` : 0} / ${s.closed ? `**${s.closed}**` : 0} / ${s.hung ? `**${s.hung}**` : 0} | ${top} |`;
        });
      const checks: Check[] = [
        {
          item: "#6",
          check: "fuzz: resets / closes instead of answers",
          goal: "0",
          measured: `${tally.noAnswer} (${tally.notes})`,
          pass: tally.noAnswer === 0,
        },
        {
          item: "#6",
          check: "fuzz: pipelined requests answered, in order",
          goal: "all",
          measured: `${pipelineUnanswered} unanswered, ${pipelineMismatch.length ? `${pipelineMismatch.length}+ out of order or unexpected` : "statuses as expected"}`,
          pass: pipelineUnanswered === 0 && pipelineMismatch.length === 0,
        },
        {
          item: "—",
          check: "fuzz: the bridge still answers a valid request afterwards",
          goal: "200",
          measured: answers ? "200" : "no",
          pass: answers,
        },
        {
          item: "suite",
          check: "fuzz: requests sent within the time limit",
          goal: `≥ ${int(target)}`,
          measured: `${int(sum("requests"))} in ${seconds_.toFixed(0)} s (limit ${seconds} s)`,
          pass: sum("requests") >= target,
        },
      ];
      if (leftover)
        checks.push({
          item: "—",
          check: "fuzz: fake CLI processes left after the bridge stopped",
          goal: "0",
          measured: String(leftover),
          pass: false,
        });
      const details = [
        `${int(sum("requests"))} requests from ${int(next)} seeded cases (seed ${ctx.seed}), ${concurrency} at a time, against one bridge (\`server.bodyLimitBytes: ${BODY_LIMIT}\`, a fake upstream and a fake OpenCode CLI that never fail). JSON cases go over keep-alive connections (undici); HTTP-level cases and pipelined batches over raw sockets, one connection each. Deep nesting goes to 20,000 levels; oversized bodies are written while the answer is read.`,
        "",
        "| family | requests | 2xx | 4xx | 5xx | non-OpenAI error bodies | reset / closed / no answer | statuses |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ...rows,
        "",
        crashes.length
          ? `**Crashes: ${crashes.length}.** ${crashes.map((c, i) => `#${i + 1}: in flight: ${c.cases.slice(0, 4).join("; ")} — ${c.detail.slice(0, 400)}`).join(" ")}`
          : "Crashes: 0 (the bridge process never exited).",
        "",
        ...(examples.length ? ["Examples:", "", ...examples.sort()] : ["No failures to show."]),
        ...(pipelineMismatch.length ? ["", "Pipelining:", "", ...pipelineMismatch.map((m) => `- ${m}`)] : []),
      ].join("\n");
      return {
        name: "fuzz",
        title: fuzzPart.title,
        tally,
        done: {
          crashes: {
            count: crashes.length,
            measured: `${crashes.length} in ${int(sum("requests"))} fuzzed requests`,
            pass: crashes.length === 0,
          },
          "5xx": {
            count: tally.fivexx,
            measured: `${tally.fivexx} of ${int(sum("requests"))} fuzzed requests`,
            pass: tally.fivexx === 0,
          },
          shape: { count: tally.badShape, measured: `${tally.badShape} in the fuzz`, pass: tally.badShape === 0 },
        },
        checks,
        details,
      };
    } finally {
      await pool.destroy().catch(() => {});
      await bridge.stop(2000);
      upstream.closeAllConnections();
      await new Promise<void>((r) => upstream.close(() => r()));
      killMarked(ws.mark);
    }
  },
};
