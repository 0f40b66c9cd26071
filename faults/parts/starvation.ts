/**
 * Part "starvation" (issue 20 #7, issue 30 #1): 5 aggressive conversations, each with 8 clients that
 * resend at once (50 ms after a 429), against 20 polite conversations that send turn after turn and,
 * on a 429, wait the Retry-After the bridge gave before trying again, for a fixed window. The
 * upstream answers in 250 ms; `maxConcurrent: 4` (the default) and `maxQueue: 12`, so that the queue
 * is full: with the default 32 places, 5 aggressive conversations hold at most 10 and every polite one
 * always finds a place. Reported: polite conversations served, turns per polite (and aggressive)
 * conversation, attempts made after honouring a Retry-After that were refused again. Target: every
 * polite conversation served, turns per polite conversation within 2x.
 */
import { Pool } from "undici";
import { startBridge, workspace, writeConfig, type BridgeProc } from "../lib/bridge.js";
import { emptyTally, type Check, type Part, type PartContext, type PartResult } from "../lib/part.js";
import { killMarked } from "../lib/procs.js";
import { badErrorShape } from "../lib/shape.js";
import { startSlowUpstream } from "../lib/upstream.js";
import { fmtMs, int, sleep } from "../lib/util.js";

const MODEL = "faults/up";
const CHAT = "/v1/chat/completions";
const AGGRESSIVE = 5;
const PER_AGGRESSIVE = 8;
const POLITE = 20;
const MAX_QUEUE = 12;

export const starvationPart: Part = {
  name: "starvation",
  title: "5 aggressive conversations against 20 polite ones that honour Retry-After",
  measures: ["starvation", "shape", "crashes"],
  async run(ctx: PartContext): Promise<PartResult> {
    const seconds = ctx.small ? 10 : 30;
    const ws = workspace(ctx.tmpRoot, "starvation", ctx.runMark);
    const upstream = await startSlowUpstream();
    const config = writeConfig(ws, "starvation", {
      // maxConcurrent and queueTimeoutSeconds are the defaults; the queue is small so that it is full
      // (5 aggressive conversations keep 2 turns waiting each, 10 of the 12 places).
      server: { maxConcurrent: 4, maxQueue: MAX_QUEUE, queueTimeoutSeconds: 60 },
      backends: { up: { type: "openai", baseUrl: upstream.url, maxConnections: 16 } },
      models: [{ id: MODEL, backend: "up", model: "fake-model" }],
    });
    let bridge: BridgeProc | undefined;
    let pool: Pool | undefined;
    try {
      bridge = await startBridge(config);
      const b = bridge;
      const p = (pool = new Pool(b.origin, {
        connections: AGGRESSIVE * PER_AGGRESSIVE + POLITE + 10,
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      }));
      let badShape = 0;
      let missingRetryAfter = 0;
      const statuses = new Map<number, number>();
      const send = async (key: string, text: string) => {
        try {
          const res = await p.request({
            method: "POST",
            path: CHAT,
            headers: { "content-type": "application/json", "x-session-id": key },
            body: JSON.stringify({
              model: MODEL,
              messages: [{ role: "user", content: `FAULTKEY-${key} FAULTN-1 FAULTFIRST-250 ${text}` }],
            }),
          });
          const body = Buffer.from(await res.body.arrayBuffer());
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          if (badErrorShape(res.statusCode, body)) badShape++;
          const ra = res.headers["retry-after"];
          if (res.statusCode === 429 && ra === undefined) missingRetryAfter++;
          return { status: res.statusCode, retryAfter: Number(Array.isArray(ra) ? ra[0] : ra) };
        } catch (err) {
          return { status: 0, retryAfter: NaN, error: (err as Error).message };
        }
      };

      const started = Date.now();
      const deadline = started + seconds * 1000;
      let stop = false;
      let aggressiveServed = 0;
      let aggressive429 = 0;
      const aggressiveTurns = Array.from({ length: AGGRESSIVE }, () => 0);
      const aggressive = Array.from({ length: AGGRESSIVE * PER_AGGRESSIVE }, async (_, i) => {
        const key = `hog-${i % AGGRESSIVE}`;
        for (let t = 0; t < 100_000 && !stop && Date.now() < deadline; t++) {
          const r = await send(key, `hog turn ${t}`);
          if (r.status === 200) {
            aggressiveServed++;
            aggressiveTurns[i % AGGRESSIVE]!++;
          } else {
            if (r.status === 429) aggressive429++;
            await sleep(50);
          }
        }
      });
      await sleep(500); // the flood is on before the polite conversations come
      const polite = await Promise.all(
        Array.from({ length: POLITE }, async (_, i) => {
          await sleep(i * 50);
          const key = `polite-${i}`;
          const t0 = Date.now();
          let attempts = 0;
          let turns = 0;
          let firstMs: number | undefined;
          let honoured = 0; // attempts made after sleeping a Retry-After
          let honouredRefused = 0; // ... refused again
          let afterRetryAfter = false;
          for (; attempts < 10_000 && Date.now() < deadline; ) {
            attempts++;
            const r = await send(key, `a polite turn ${turns}`);
            if (afterRetryAfter) honoured++;
            if (r.status === 200) {
              turns++;
              firstMs ??= Date.now() - t0;
              afterRetryAfter = false;
              continue; // its next turn at once
            }
            if (afterRetryAfter) honouredRefused++;
            afterRetryAfter = r.status === 429 && Number.isFinite(r.retryAfter);
            const waitS = afterRetryAfter ? r.retryAfter : 1;
            await sleep(Math.min(Math.max(0, waitS) * 1000, Math.max(0, deadline - Date.now())));
          }
          return { turns, attempts, firstMs, honoured, honouredRefused };
        }),
      );
      stop = true;
      await Promise.race([Promise.all(aggressive), sleep(15_000)]);
      const served = polite.filter((l) => l.turns > 0);
      const attempts = polite.reduce((a, l) => a + l.attempts, 0);
      const turns = polite.map((l) => l.turns);
      const minTurns = Math.min(...turns);
      const maxTurns = Math.max(...turns);
      const spreadOk = minTurns > 0 && maxTurns <= 2 * minTurns;
      const honoured = polite.reduce((a, l) => a + l.honoured, 0);
      const honouredRefused = polite.reduce((a, l) => a + l.honouredRefused, 0);
      const times = served.map((l) => l.firstMs!).sort((a, x) => a - x);
      const crashed = b.crash ? 1 : 0;
      await p.close().catch(() => {});
      await b.stop(5000);

      const tally = emptyTally(
        `${int(attempts)} polite attempts (20 conversations) against ${int(aggressiveServed + aggressive429)} aggressive requests (5 conversations × 8 clients) in ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      tally.badShape = badShape;
      tally.crashes = crashed;
      tally.notes = `polite conversations served: ${served.length} of ${POLITE}; turns per polite conversation: ${minTurns}/${maxTurns}; aggressive turns served ${aggressiveServed}, refused ${aggressive429}`;
      const checks: Check[] = [
        {
          item: "#7",
          check: "starvation: 429 answers carry Retry-After",
          goal: "all",
          measured: `${missingRetryAfter} without`,
          pass: missingRetryAfter === 0,
        },
        {
          item: "30 #1",
          check: "starvation: turns per polite conversation (min/max)",
          goal: "max within 2x of min",
          measured: `${minTurns}/${maxTurns}`,
          pass: spreadOk,
        },
        {
          item: "30 #1",
          check: "starvation: a polite client coming back at its Retry-After gets in",
          goal: "most",
          measured: `${int(honoured - honouredRefused)} of ${int(honoured)} attempts after a Retry-After admitted`,
          pass: undefined,
        },
        {
          item: "#7",
          check: "starvation: time to a polite conversation's first turn",
          goal: "short",
          measured: `p50 ${fmtMs(times[Math.floor(times.length / 2)])}, max ${fmtMs(times[times.length - 1])}`,
          pass: undefined,
        },
      ];
      const details = [
        `\`maxConcurrent: 4\`, \`queueTimeoutSeconds: 60\` (the defaults), \`maxQueue: ${MAX_QUEUE}\` (so that the queue is full: with the default 32, the aggressive conversations hold at most 10 places and a polite one always finds one)${ctx.knobs.perConversationQueue ? `, \`${ctx.knobs.perConversationQueue}\` left at its default` : ""}; every turn takes ~250 ms upstream; 5 aggressive conversations × 8 clients that resend at once (50 ms after a 429). They start 0.5 s before the 20 polite conversations (staggered 50 ms apart), which send turn after turn and sleep the Retry-After of each 429; the run lasts ${seconds} s.`,
        "",
        "| measure | value |",
        "| --- | --- |",
        `| polite conversations served | **${served.length} of ${POLITE}** |`,
        `| turns per polite conversation (min/max) | **${minTurns}/${maxTurns}** |`,
        `| turns per aggressive conversation (min/max) | ${Math.min(...aggressiveTurns)}/${Math.max(...aggressiveTurns)} |`,
        `| polite attempts (all / most for one conversation) | ${attempts} / ${Math.max(...polite.map((l) => l.attempts))} |`,
        `| polite attempts after a Retry-After (all / refused again) | ${honoured} / ${honouredRefused} |`,
        `| time to a polite conversation's first turn (p50 / max) | ${fmtMs(times[Math.floor(times.length / 2)])} / ${fmtMs(times[times.length - 1])} |`,
        `| aggressive turns served / refused (429) | ${aggressiveServed} / ${aggressive429} |`,
        `| statuses | ${[...statuses.entries()]
          .sort((a, x) => x[1] - a[1])
          .map(([s, c]) => `${s === 0 ? "no answer" : s}×${c}`)
          .join(" ")} |`,
        `| error answers not OpenAI-shaped | ${badShape} |`,
      ].join("\n");
      return {
        name: "starvation",
        title: starvationPart.title,
        tally,
        done: {
          starvation: {
            measured: `polite conversations served: ${served.length} of ${POLITE}; turns per polite conversation: ${minTurns}/${maxTurns}`,
            pass: served.length === POLITE && spreadOk,
          },
          shape: { count: badShape, measured: `${badShape} in starvation`, pass: badShape === 0 },
          crashes: { count: crashed, measured: `${crashed} in starvation`, pass: crashed === 0 },
        },
        checks,
        details,
      };
    } finally {
      await pool?.destroy().catch(() => {});
      await bridge?.stop(2000);
      await upstream.close();
      killMarked(ws.mark);
    }
  },
};
