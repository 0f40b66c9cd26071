/**
 * Part "slow": connections that hold the bridge without finishing a request (issue 20 #2).
 * - slow headers (part of the headers, then silence; or one byte every 300 ms) and slow bodies
 *   (`Content-Length: 1000`, one byte, silence; or one byte every 300 ms): each must get 408 (an
 *   OpenAI-shaped body) and be closed within the bridge's timeout — set short here when the bridge
 *   has the option (read from its config schema), else "not configurable" and the default is waited
 *   for (bounded);
 * - an idle keep-alive connection must be closed after the idle timeout;
 * - a request without the API key announcing 1 GiB, and one with the key over the body limit: 401 /
 *   413, and the connection closed without reading the rest (bytes the bridge took are counted);
 * - the connection cap: past it, a connection is not served: refused (503) or closed, never left
 *   hanging.
 */
import { cliEnv, startBridge, workspace, writeConfig, type BridgeProc } from "../lib/bridge.js";
import { Conn, requestBytes } from "../lib/http.js";
import { emptyTally, type Check, type Part, type PartContext, type PartResult } from "../lib/part.js";
import { killMarked } from "../lib/procs.js";
import { badErrorShape, isOpenAIErrorBody } from "../lib/shape.js";
import { fmtMs, int, sleep } from "../lib/util.js";

const CHAT = "/v1/chat/completions";
const KEY = "faults-key-0123456789";
const CAP = 40;
const maxOf = (xs: number[]) => (xs.length ? Math.max(...xs) : NaN);

interface SlowResult {
  name: string;
  n: number;
  closed: number;
  got408: number;
  shaped: number;
  resets: number;
  otherStatus: Map<number, number>;
  closeMs: number[];
  limitMs: number | undefined;
}

export const slowPart: Part = {
  name: "slow",
  title: "Slow-header and slow-body connections, 401 / 413 bodies, the connection cap",
  measures: ["shape", "5xx", "crashes"],
  async run(ctx: PartContext): Promise<PartResult> {
    const n = ctx.small ? 20 : 200;
    const idleN = ctx.small ? 5 : 50;
    const ws = workspace(ctx.tmpRoot, "slow", ctx.runMark);
    const knobs = ctx.knobs;
    // The short timeout set for this part (when the bridge has the options).
    const TIMEOUT_S = ctx.small ? 1 : 2;
    const timeoutKeys = Object.fromEntries(knobs.timeouts.map((k) => [k.key, k.value(TIMEOUT_S)]));
    const byName = (re: RegExp) => knobs.timeouts.find((k) => re.test(k.key))?.key;
    const headersKey = byName(/header/i);
    const bodyKey = byName(/body|request|read/i);
    const idleKey = byName(/idle|keepalive/i);
    const configurable = { headers: headersKey ?? bodyKey, body: bodyKey, idle: idleKey };
    // Not configurable: wait for the bridge's default, bounded.
    const fallbackWaitS = ctx.small ? 4 : 35;
    const waitFor = (key: string | undefined) => (key ? TIMEOUT_S + 3 : fallbackWaitS);
    const backends = {
      cli: {
        type: "opencode",
        command: ws.opencodeBin,
        env: cliEnv(ws),
        timeoutSeconds: 30,
        killGraceSeconds: 1,
        warm: { enabled: false },
      },
    };
    const models = [{ id: "faults/cli", backend: "cli" }];
    const config = writeConfig(ws, "slow", {
      server: {
        apiKeys: [KEY],
        bodyLimitBytes: 1024 * 1024,
        ...timeoutKeys,
        ...(knobs.connectionCap ? { [knobs.connectionCap]: 8 * n + 200 } : {}),
      },
      backends,
      models,
    });
    let bridge: BridgeProc | undefined;
    let capBridge: BridgeProc | undefined;
    let badShape = 0;
    let crashes = 0;
    const examples: string[] = [];
    try {
      bridge = await startBridge(config);
      const b = bridge;
      const body = JSON.stringify({
        model: "faults/cli",
        messages: [{ role: "user", content: "FAULTKEY-slow hello" }],
      });
      const auth: Array<[string, string]> = [
        ["Authorization", `Bearer ${KEY}`],
        ["Content-Type", "application/json"],
      ];
      const full = requestBytes("POST", CHAT, auth, body);
      const headEnd = full.indexOf("\r\n\r\n");

      /** Open `count` connections, send `first`, then `trickle` one byte every 300 ms until closed or `waitS`. */
      const scenario = async (
        name: string,
        count: number,
        first: Buffer,
        trickle: Buffer | undefined,
        key: string | undefined,
      ): Promise<SlowResult> => {
        const conns: Conn[] = [];
        for (let i = 0; i < count; i++) {
          const c = await Conn.open(b.port, ["POST"]);
          conns.push(c);
          void c.write(first);
        }
        const t0 = Date.now();
        const waitMs = waitFor(key) * 1000;
        const trickling = trickle
          ? (async () => {
              for (let i = 0; i < 10_000 && Date.now() - t0 < waitMs && conns.some((c) => !c.closed); i++) {
                await sleep(300);
                const byte = trickle.subarray(i % trickle.length, (i % trickle.length) + 1);
                for (const c of conns) if (!c.closed) void c.write(byte);
              }
            })()
          : Promise.resolve();
        await Promise.all(conns.map((c) => c.waitClosed(Math.max(1, waitMs - (Date.now() - t0)))));
        await trickling;
        const r: SlowResult = {
          name,
          n: count,
          closed: 0,
          got408: 0,
          shaped: 0,
          resets: 0,
          otherStatus: new Map(),
          closeMs: [],
          limitMs: key ? TIMEOUT_S * 1000 : undefined,
        };
        for (const c of conns) {
          if (c.closed && c.end.by === "server") {
            r.closed++;
            r.closeMs.push(c.end.at ?? 0); // since the connection opened
          }
          const res = c.parser.responses[0];
          if (res) {
            if (res.status === 408) r.got408++;
            else r.otherStatus.set(res.status, (r.otherStatus.get(res.status) ?? 0) + 1);
            if (res.status === 408 && isOpenAIErrorBody(res.body)) r.shaped++;
            if (badErrorShape(res.status, res.body)) {
              badShape++;
              if (examples.length < 4)
                examples.push(`${name}: ${res.status} ${JSON.stringify(res.body.toString("utf8", 0, 100))}`);
            }
          } else if (c.end.reset) r.resets++;
          c.close();
        }
        return r;
      };

      // Idle keep-alive connections: closed after the idle timeout (no answer due). Timed alongside the slow ones.
      const idle = (async () => {
        const conns: Conn[] = [];
        for (let i = 0; i < idleN; i++) {
          const c = await Conn.open(b.port, ["GET"]);
          await c.write(requestBytes("GET", "/health", []));
          await c.responses(1, 5000);
          conns.push(c);
        }
        const t0 = Date.now();
        await Promise.all(conns.map((c) => c.waitClosed(waitFor(configurable.idle) * 1000)));
        const closed = conns.filter((c) => c.closed && c.end.by === "server").length;
        const ms = Date.now() - t0;
        for (const c of conns) c.close();
        return { closed, ms };
      })();

      ctx.log(
        `slow: ${4 * n} slow connections at once (timeouts ${Object.keys(timeoutKeys).length ? JSON.stringify(timeoutKeys) : "not configurable"})`,
      );
      const slow = await Promise.all([
        scenario(
          "slow headers: part of the headers, then silence",
          n,
          full.subarray(0, Math.floor(headEnd / 2)),
          undefined,
          configurable.headers,
        ),
        scenario(
          "slow headers: one byte every 300 ms",
          n,
          Buffer.from(`POST ${CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-`),
          Buffer.from("abcdefghijklmnopqrstuvwxyz"),
          configurable.headers,
        ),
        scenario(
          "slow body: Content-Length 1000, 1 byte, silence",
          n,
          Buffer.concat([requestBytes("POST", CHAT, [...auth, ["Content-Length", "1000"]]), Buffer.from("{")]),
          undefined,
          configurable.body,
        ),
        scenario(
          "slow body: one byte every 300 ms",
          n,
          Buffer.concat([requestBytes("POST", CHAT, [...auth, ["Content-Length", "100000"]]), Buffer.from("{")]),
          Buffer.from(" "),
          configurable.body,
        ),
      ]);
      const { closed: idleClosed, ms: idleMs } = await idle;

      // 401 without the key, and 413 over the limit: answered, closed, the rest not read. Each
      // is tried several times: a close that resets the connection under a client still sending
      // loses the answer only now and then.
      const floodTimes = ctx.small ? 8 : 30;
      const floods = async (withKey: boolean, expected: number) => {
        const hs: Array<[string, string]> = withKey ? [...auth] : [["Content-Type", "application/json"]];
        const out = {
          times: floodTimes,
          answered: 0,
          lost: 0,
          lostReset: 0,
          keptOpen: 0,
          maxAccepted: 0,
          maxCloseMs: 0,
        };
        for (let i = 0; i < floodTimes; i++) {
          const c = await Conn.open(b.port, ["POST"]);
          await c.write(requestBytes("POST", CHAT, [...hs, ["Content-Length", String(1024 ** 3)]]));
          const accepted = await c.flood(1024 ** 3, ctx.small ? 1500 : 4000);
          const res = (await c.responses(1, 1000))[0];
          await c.waitClosed(500);
          if (res && badErrorShape(res.status, res.body)) badShape++;
          if (res?.status === expected && isOpenAIErrorBody(res.body)) out.answered++;
          else if (!res) {
            out.lost++;
            if (c.end.reset || c.end.error === "EPIPE") out.lostReset++;
          }
          if (!(c.closed && c.end.by === "server")) out.keptOpen++;
          out.maxAccepted = Math.max(out.maxAccepted, accepted);
          out.maxCloseMs = Math.max(out.maxCloseMs, c.end.at ?? 0);
          c.close();
        }
        return out;
      };
      const f401 = await floods(false, 401);
      const f413 = await floods(true, 413);
      if (b.crash) crashes++;
      await b.stop(5000);

      // The connection cap, on a bridge of its own: 2 × cap + 20 connections held open, then a
      // request on each one still open. At most `cap` may be served; every other one must be
      // refused (503, OpenAI-shaped, with Retry-After) or closed — none left hanging.
      let cap:
        | {
            opened: number;
            closedAtOnce: number;
            served: number;
            refused503: number;
            shaped503: number;
            closedUnanswered: number;
            hung: number;
            afterWorks: boolean;
          }
        | undefined;
      if (knobs.connectionCap) {
        const capConfig = writeConfig(ws, "slow-cap", {
          server: { apiKeys: [KEY], [knobs.connectionCap]: CAP },
          backends,
          models,
        });
        capBridge = await startBridge(capConfig);
        const cb = capBridge;
        const open: Conn[] = [];
        const total = 2 * CAP + 20;
        for (let i = 0; i < total; i++) open.push(await Conn.open(cb.port, ["GET"]));
        await Promise.all(open.map((c) => c.until(() => c.closed, 300)));
        const closedAtOnce = open.filter((c) => c.closed && c.parser.responses.length === 0).length;
        const health = requestBytes("GET", "/health", [["Authorization", `Bearer ${KEY}`]]);
        await Promise.all(open.filter((c) => !c.closed).map((c) => c.write(health)));
        await Promise.all(open.map((c) => c.responses(1, 5000)));
        let served = 0;
        let refused503 = 0;
        let shaped503 = 0;
        let closedUnanswered = 0;
        let hung = 0;
        for (const c of open) {
          const r = c.parser.responses[0];
          if (r?.status === 200) served++;
          else if (r?.status === 503) {
            refused503++;
            if (isOpenAIErrorBody(r.body) && r.headers["retry-after"] !== undefined) shaped503++;
            if (badErrorShape(503, r.body)) badShape++;
          } else if (r) {
            if (badErrorShape(r.status, r.body)) badShape++;
            closedUnanswered++;
          } else if (c.closed) closedUnanswered++;
          else hung++;
        }
        for (const c of open) c.close();
        let afterWorks = false;
        for (let i = 0; i < 20 && !afterWorks; i++) {
          const c = await Conn.open(cb.port, ["GET"]);
          await c.write(health);
          afterWorks = (await c.responses(1, 3000))[0]?.status === 200;
          c.close();
          if (!afterWorks) await sleep(200);
        }
        cap = { opened: total, closedAtOnce, served, refused503, shaped503, closedUnanswered, hung, afterWorks };
        if (cb.crash) crashes++;
        await cb.stop(5000);
      }

      const slowOk = (r: SlowResult) =>
        r.limitMs !== undefined &&
        r.closed === r.n &&
        r.got408 === r.n &&
        r.shaped === r.n &&
        Math.max(...r.closeMs) <= r.limitMs + 3000;
      const p = (xs: number[], q: number) =>
        xs.length ? [...xs].sort((a, x) => a - x)[Math.min(xs.length - 1, Math.floor(q * xs.length))]! : NaN;
      const checks: Check[] = [
        ...slow.map((r) => ({
          item: "#2",
          check: `slow: ${r.name} (${r.n} connections)`,
          goal:
            r.limitMs === undefined
              ? "408 + close within the timeout"
              : `408 (OpenAI-shaped) + closed within ${TIMEOUT_S} s + 3 s`,
          measured: `${r.closed}/${r.n} closed (p50 ${fmtMs(p(r.closeMs, 0.5))}, max ${fmtMs(maxOf(r.closeMs))}), ${r.got408} got 408 (${r.shaped} shaped)${r.resets ? `, ${r.resets} reset` : ""}${r.limitMs === undefined ? `; not configurable (waited ${fallbackWaitS} s)` : ""}`,
          pass: r.limitMs === undefined ? undefined : slowOk(r),
        })),
        {
          item: "#2",
          check: `slow: idle keep-alive connections (${idleN}) closed after the idle timeout`,
          goal: configurable.idle ? `closed within ${TIMEOUT_S} s + 3 s` : "closed",
          measured: `${idleClosed}/${idleN} closed within ${fmtMs(idleMs)}${configurable.idle ? "" : `; not configurable (waited ${fallbackWaitS} s)`}`,
          pass: configurable.idle ? idleClosed === idleN : undefined,
        },
        ...(
          [
            ["no API key, Content-Length 1 GiB, body sent as fast as taken", f401, 401],
            ["with the key, Content-Length 1 GiB (limit 1 MiB), body sent as fast as taken", f413, 413],
          ] as const
        ).map(([what, f, status]) => ({
          item: "#2",
          check: `slow: ${what} (${f.times} times)`,
          goal: `${status} (shaped) every time, closed, the rest not read (< 32 MiB taken)`,
          measured: `${f.answered}/${f.times} answered ${status}${f.lost ? `, **${f.lost} lost** (${f.lostReset} reset under the client's write)` : ""}; ${f.keptOpen ? `**${f.keptOpen} kept open**` : "all closed"} (latest after ${fmtMs(f.maxCloseMs)}); at most ${int(f.maxAccepted / 1024)} KiB taken`,
          pass: f.answered === f.times && f.keptOpen === 0 && f.maxAccepted < 32 * 1024 * 1024,
        })),
        cap
          ? {
              item: "#2",
              check: `slow: connection cap (\`${knobs.connectionCap}: ${CAP}\`; ${cap.opened} connections held open, then a GET /health on each)`,
              goal: `≤ ${CAP} served; every other one refused (503, shaped, Retry-After) or closed, none hanging; served again once they are gone`,
              measured: `${cap.closedAtOnce} closed at once; ${cap.served} served, ${cap.refused503} got 503 (${cap.shaped503} shaped with Retry-After), ${cap.closedUnanswered} closed unanswered, ${cap.hung} hanging; afterwards ${cap.afterWorks ? "served" : "**not served**"}`,
              pass:
                cap.served <= CAP &&
                cap.served > 0 &&
                cap.hung === 0 &&
                cap.served + cap.refused503 + cap.closedUnanswered === cap.opened &&
                cap.shaped503 === cap.refused503 &&
                cap.afterWorks,
            }
          : {
              item: "#2",
              check: "slow: connection cap",
              goal: "a cap",
              measured: "not configurable (no such server option)",
              pass: undefined,
            },
      ];
      const tally = emptyTally(
        `${4 * n} slow + ${idleN} idle connections, ${2 * floodTimes} floods of 1 GiB, ${cap ? `${cap.opened} connections against a cap of ${CAP}` : "no connection cap"}`,
      );
      tally.badShape = badShape;
      tally.crashes = crashes;
      tally.noAnswer = slow.reduce((a, r) => a + r.resets, 0) + f401.lost + f413.lost;
      tally.notes = `${slow.reduce((a, r) => a + r.closed, 0)}/${4 * n} slow connections closed, ${slow.reduce((a, r) => a + r.got408, 0)} with 408`;
      const details = [
        `Timeouts set for this part: ${
          Object.keys(timeoutKeys).length
            ? Object.entries(timeoutKeys)
                .map(([k, v]) => `\`server.${k}: ${v}\``)
                .join(", ")
            : "none (not configurable): the bridge's defaults were waited for, at most " + fallbackWaitS + " s"
        }. All ${4 * n} slow connections are open at the same time, with the API key (so the 401 does not end them first).`,
        "",
        "| scenario | connections | closed by the bridge | close time p50 / max | 408 (shaped) | other answers | resets |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        ...slow.map(
          (r) =>
            `| ${r.name} | ${r.n} | ${r.closed} | ${fmtMs(p(r.closeMs, 0.5))} / ${fmtMs(maxOf(r.closeMs))} | ${r.got408} (${r.shaped}) | ${[...r.otherStatus.entries()].map(([s, c]) => `${s}×${c}`).join(" ") || "–"} | ${r.resets} |`,
        ),
        `| idle keep-alive after GET /health | ${idleN} | ${idleClosed} | within ${fmtMs(idleMs)} | – | – | – |`,
        "",
        ...(examples.length ? ["Non-OpenAI error bodies:", "", ...examples.map((e) => `- ${e}`)] : []),
      ].join("\n");
      return {
        name: "slow",
        title: slowPart.title,
        tally,
        done: {
          shape: { count: badShape, measured: `${badShape} in slow / 401 / 413 / cap answers`, pass: badShape === 0 },
          "5xx": { count: 0, measured: "0 (503 from the connection cap is not a client error)", pass: true },
          crashes: { count: crashes, measured: `${crashes} in slow`, pass: crashes === 0 },
        },
        checks,
        details,
      };
    } finally {
      await bridge?.stop(2000);
      await capBridge?.stop(2000);
      killMarked(ws.mark);
    }
  },
};
