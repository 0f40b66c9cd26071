/**
 * The pieces of the "client-tools" suite (bench/suites/client-tools.ts) that run in the bench
 * process: the fake Anthropic API with a script that stamps each model call, a TCP relay between
 * claude and the bridge's MCP endpoint that stamps the tool call and its result as they pass, the
 * notes of the stdio tap (tap.mjs), and a streaming chat client that reads tool calls.
 *
 * Every time is `now()`: CLOCK_MONOTONIC in ms (process.hrtime), the clock tap.mjs uses too, so the
 * tap's notes (another process) and the bench's own stamps are on one time line.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import type { Pool } from "undici";
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from "../../../testkit/fakes/anthropic-api.js";

export const now = (): number => Number(process.hrtime.bigint()) / 1e6;

/** The tool the fake model calls, as the client offers it (OpenClaw's own `session_status`). */
export const STATUS_TOOL = "session_status";
/** Every tool result the client sends starts with this, so the relay knows it when it passes. */
export const RESULT_MARK = "BENCH-RESULT-";

/** The reply chunks of an instant model. */
const PLAIN = ["The ", "plain ", "answer ", "comes ", "in ", "pieces."];
const AFTER_TOOL = ["The ", "status ", "says ", "all ", "is ", "well."];

export type ModelCallKind = "plain" | "status" | "result";

export interface Stamp<K extends string = string> {
  at: number;
  kind: K;
}

/** The first stamp of `kind` at or after `from`. */
export function firstAfter<K extends string>(stamps: readonly Stamp<K>[], kind: K, from: number): number | undefined {
  for (const s of stamps) if (s.kind === kind && s.at >= from) return s.at;
  return undefined;
}

/** The last user message's tool_result blocks (a continuation after a tool call). */
function hasToolResults(req: RecordedRequest): boolean {
  const last = (req.body?.messages ?? []).filter((m: any) => m?.role === "user").at(-1); // eslint-disable-line @typescript-eslint/no-explicit-any
  return Array.isArray(last?.content) && last.content.some((b: any) => b?.type === "tool_result"); // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The newest text the person said: the last text block of the last user message that is not a system reminder. */
function newestText(req: RecordedRequest): string {
  const last = (req.body?.messages ?? []).filter((m: any) => m?.role === "user").at(-1); // eslint-disable-line @typescript-eslint/no-explicit-any
  if (typeof last?.content === "string") return last.content;
  const texts = (Array.isArray(last?.content) ? last.content : []).filter(
    (b: any) => b?.type === "text" && !/^\s*<system-reminder>/.test(b.text),
  ); // eslint-disable-line @typescript-eslint/no-explicit-any
  return texts.at(-1)?.text ?? "";
}

export interface StampedFake {
  fake: FakeAnthropic;
  /** When each model call arrived (body read and parsed; the fake writes its first bytes in the same tick). */
  calls: Stamp<ModelCallKind>[];
}

/**
 * The fake model: a continuation after a tool result → text; a message with "STATUS" → a sentence
 * and a call of `mcp__openclaw__session_status`; anything else → text. All at once, no delay.
 */
export async function startStampedFake(): Promise<StampedFake> {
  const calls: Stamp<ModelCallKind>[] = [];
  let n = 0;
  const fake = await startFakeAnthropic((req) => {
    const at = now();
    if (hasToolResults(req)) {
      calls.push({ at, kind: "result" });
      return { kind: "text", chunks: AFTER_TOOL };
    }
    if (newestText(req).includes("STATUS")) {
      calls.push({ at, kind: "status" });
      return {
        kind: "text",
        chunks: ["Let me check. "],
        toolUses: [
          { id: `toolu_bench${String(++n).padStart(6, "0")}`, name: `mcp__openclaw__${STATUS_TOOL}`, input: {} },
        ],
      };
    }
    calls.push({ at, kind: "plain" });
    return { kind: "text", chunks: PLAIN };
  });
  return { fake, calls };
}

export type RelayKind = "call" | "result";

export interface McpRelay {
  port: number;
  /** The bridge's port (set once it listens; connections before that are refused). */
  target: number | undefined;
  /** `call`: a chunk from claude holding `"tools/call"`; `result`: a chunk from the bridge holding RESULT_MARK. */
  stamps: Stamp<RelayKind>[];
  close(): Promise<void>;
}

/**
 * A byte-for-byte TCP relay on 127.0.0.1 between claude's MCP client and the bridge. It parses
 * nothing; it only looks for two strings in the chunks passing by. The time is taken when a chunk
 * arrives, before it is passed on.
 */
export async function startMcpRelay(): Promise<McpRelay> {
  const sockets = new Set<net.Socket>();
  const relay: McpRelay = { port: 0, target: undefined, stamps: [], close: async () => {} };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    if (!relay.target) {
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    const up = net.connect(relay.target, "127.0.0.1");
    up.setNoDelay(true);
    sockets.add(up);
    up.on("close", () => sockets.delete(up));
    client.on("data", (d: Buffer) => {
      const at = now();
      up.write(d);
      if (d.includes('"tools/call"')) relay.stamps.push({ at, kind: "call" });
    });
    up.on("data", (d: Buffer) => {
      const at = now();
      client.write(d);
      if (d.includes(RESULT_MARK)) relay.stamps.push({ at, kind: "result" });
    });
    client.on("end", () => up.end());
    up.on("end", () => client.end());
    client.on("error", () => up.destroy());
    up.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  relay.port = (server.address() as net.AddressInfo).port;
  relay.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return relay;
}

export type TapKind = "in" | "text" | "tooluse" | "start" | "exit";

/** The tap's notes so far (tap.mjs appends `<ms> <tap pid> <in|text|tooluse|start <pid>|exit <code>>` lines). */
export function readTap(file: string): Array<Stamp<TapKind> & { pid: number }> {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  const out: Array<Stamp<TapKind> & { pid: number }> = [];
  for (const line of text.split("\n")) {
    const [at, pid, kind] = line.split(" ");
    if (!at || !pid || !kind) continue;
    out.push({ at: Number(at), pid: Number(pid), kind: kind as TapKind });
  }
  return out;
}

export interface ToolCallSeen {
  id: string;
  name: string;
  arguments: string;
}

export interface StreamedReply {
  status: number;
  /** When the request was handed to undici (the body already serialised): the time every other one is measured from. */
  sentAt: number;
  /** When the first chunk with non-empty `delta.content` arrived. */
  firstContentAt?: number;
  /** When the chunk with a `finish_reason` arrived, and which. */
  finishAt?: number;
  finish?: string;
  text: string;
  calls: ToolCallSeen[];
  endAt: number;
}

/**
 * One streamed chat completion through an undici pool (keep-alive), read to its end. The time of
 * each event is when the body chunk holding it arrived. Throws on a non-200 answer or an error frame.
 */
export async function streamChat(pool: Pool, key: string, body: unknown): Promise<StreamedReply> {
  const json = JSON.stringify(body);
  const sentAt = now();
  const res = await pool.request({
    path: "/v1/chat/completions",
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": key },
    body: json,
  });
  const out: StreamedReply = { status: res.statusCode, sentAt, text: "", calls: [], endAt: 0 };
  let buf = "";
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    const at = now();
    buf += chunk.toString("utf8");
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      if (res.statusCode !== 200) continue;
      const data = block.startsWith("data: ") ? block.slice(6) : "";
      if (!data || data === "[DONE]") continue;
      const obj = JSON.parse(data) as {
        error?: { message: string };
        choices?: Array<{
          finish_reason?: string | null;
          delta?: {
            content?: string | null;
            tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }>;
          };
        }>;
      };
      if (obj.error) throw new Error(`stream error: ${obj.error.message}`);
      const choice = obj.choices?.[0];
      const d = choice?.delta;
      if (d?.content) {
        out.firstContentAt ??= at;
        out.text += d.content;
      }
      for (const tc of d?.tool_calls ?? []) {
        const call = (out.calls[tc.index] ??= { id: "", name: "", arguments: "" });
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name += tc.function.name;
        if (tc.function?.arguments) call.arguments += tc.function.arguments;
      }
      if (choice?.finish_reason) {
        out.finish = choice.finish_reason;
        out.finishAt ??= at;
      }
    }
  }
  out.endAt = now();
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${buf.slice(0, 300)}`);
  return out;
}
