/**
 * Part "starvation" (issue 20 #7): 5 aggressive conversations, each with 8 clients that resend at
 * once (50 ms after a 429), against 20 light conversations that send one turn each and, on a 429,
 * wait the Retry-After the bridge gave before trying again. The upstream answers in 250 ms; the
 * bridge's default `maxConcurrent: 4`, `maxQueue: 32`. Reported: light conversations served, the
 * attempts it took, and the time to be served. Target: every light conversation served.
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
const LIGHT = 20;

export const starvationPart: Part = {
  name: "starvation",
  title: "5 aggressive conversations against 20 light ones that honour Retry-After",
  measures: ["starvation", "shape", "crashes"],
  async run(ctx: PartContext): Promise<PartResult> {
    const seconds = ctx.small ? 20 : 60;
    const ws = workspace(ctx.tmpRoot, "starvation", ctx.runMark);
    const upstream = await startSlowUpstream();
    const config = writeConfig(ws, "starvation", {
      // The bridge's defaults (written out): 5 conversations × 8 clients keep more than maxQueue
      // turns waiting unless each conversation's backlog is capped.
      server: { maxConcurrent: 4, maxQueue: 32, queueTimeoutSeconds: 60 },
      backends: { up: { type: "openai", baseUrl: upstream.url, maxConnections: 16 } },
      models: [{ id: MODEL, backend: "up", model: "fake-model" }],
    });
    let bridge: BridgeProc | undefined;
    let pool: Pool | undefined;
    try {
      bridge = await startBridge(config);
      const b = bridge;
      const p = (pool = new Pool(b.origin, {
        connections: AGGRESSIVE * PER_AGGRESSIVE + LIGHT + 10,
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
      const aggressive = Array.from({ length: AGGRESSIVE * PER_AGGRESSIVE }, async (_, i) => {
        const key = `hog-${i % AGGRESSIVE}`;
        for (let t = 0; t < 100_000 && !stop && Date.now() < deadline; t++) {
          const r = await send(key, `hog turn ${t}`);
          if (r.status === 200) aggressiveServed++;
          else {
            if (r.status === 429) aggressive429++;
            await sleep(50);
          }
        }
      });
      await sleep(500); // the flood is on before the light conversations come
      const light = await Promise.all(
        Array.from({ length: LIGHT }, async (_, i) => {
          await sleep(i * 50);
          const key = `light-${i}`;
          const t0 = Date.now();
          let attempts = 0;
          for (; attempts < 10_000 && Date.now() < deadline; ) {
            attempts++;
            const r = await send(key, "a light turn");
            if (r.status === 200) return { served: true, attempts, ms: Date.now() - t0 };
            const waitS = r.status === 429 && Number.isFinite(r.retryAfter) ? r.retryAfter : 1;
            await sleep(Math.min(Math.max(0, waitS) * 1000, Math.max(0, deadline - Date.now())));
          }
          return { served: false, attempts, ms: Date.now() - t0 };
        }),
      );
      stop = true;
      await Promise.race([Promise.all(aggressive), sleep(15_000)]);
      const served = light.filter((l) => l.served);
      const attempts = light.reduce((a, l) => a + l.attempts, 0);
      const maxAttempts = Math.max(...light.map((l) => l.attempts));
      const times = served.map((l) => l.ms).sort((a, x) => a - x);
      const crashed = b.crash ? 1 : 0;
      await p.close().catch(() => {});
      await b.stop(5000);

      const tally = emptyTally(
        `${int(attempts)} light attempts (20 conversations) against ${int(aggressiveServed + aggressive429)} aggressive requests (5 conversations × 8 clients) in ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      tally.badShape = badShape;
      tally.crashes = crashed;
      tally.notes = `light served ${served.length}/${LIGHT}; aggressive turns served ${aggressiveServed}, refused ${aggressive429}`;
      const checks: Check[] = [
        {
          item: "#7",
          check: "starvation: 429 answers carry Retry-After",
          goal: "all",
          measured: `${missingRetryAfter} without`,
          pass: missingRetryAfter === 0,
        },
        {
          item: "#7",
          check: "starvation: attempts a light conversation needed",
          goal: "few",
          measured: `${int(attempts)} in all for ${served.length} served; at most ${maxAttempts}; time to be served p50 ${fmtMs(times[Math.floor(times.length / 2)])}, max ${fmtMs(times[times.length - 1])}`,
          pass: undefined,
        },
      ];
      const details = [
        `\`maxConcurrent: 4\`, \`maxQueue: 32\`, \`queueTimeoutSeconds: 60\` (the defaults)${ctx.knobs.perConversationQueue ? `, \`${ctx.knobs.perConversationQueue}\` left at its default` : ""}; every turn takes ~250 ms upstream; 5 aggressive conversations × 8 clients that resend at once (50 ms after a 429). They start 0.5 s before the light conversations (staggered 50 ms apart); the run stops when every light conversation is served or after ${seconds} s.`,
        "",
        "| measure | value |",
        "| --- | --- |",
        `| light conversations served | **${served.length}/${LIGHT}** |`,
        `| light attempts (all / most for one conversation) | ${attempts} / ${maxAttempts} |`,
        `| time for a light conversation to be served (p50 / max) | ${fmtMs(times[Math.floor(times.length / 2)])} / ${fmtMs(times[times.length - 1])} |`,
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
            measured: `${served.length}/${LIGHT} light conversations served in ${attempts} attempts (at most ${maxAttempts} for one)`,
            pass: served.length === LIGHT,
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
