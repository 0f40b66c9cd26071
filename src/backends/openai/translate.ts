/**
 * Upstream chunk → events: the pure part of the OpenAI-compatible backend. `StreamTranslator` turns
 * the upstream's `chat.completion.chunk`s (or one whole `chat.completion`) into bridge events, with
 * the finish-reason and usage mapping. No I/O: the body is read and framed in `transport.ts`.
 *
 * Every upstream chunk is translated into events as soon as it is read — no sleeps, no batching.
 * The only hold-backs are inherent: the tool-call extractor keeps text that may be the start of a
 * call, a `<` that may start a special token is held until the token is decided, and a native
 * tool call that the upstream interleaves with another is buffered so each call's chunks stay
 * together (see `StreamTranslator`).
 */
import type { Logger } from "pino";
import type { BackendEvent, FinishReason, Usage } from "../contract/backend.js";
import { SpecialTokenStripper, ToolCallExtractor, type ExtractEvent } from "./toolcalls/extract.js";
import { newCallId } from "../../core/util/ids.js";

/** Upstream shapes we read (everything optional: servers differ). */
export interface UpstreamToolCallDelta {
  index?: number;
  id?: string | null;
  type?: string;
  function?: { name?: string | null; arguments?: unknown } | null;
}
export interface UpstreamDelta {
  role?: string;
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  refusal?: unknown;
  tool_calls?: UpstreamToolCallDelta[] | null;
}
export interface UpstreamChoice {
  index?: number;
  delta?: UpstreamDelta | null;
  message?: UpstreamDelta | null;
  finish_reason?: string | null;
}
export interface UpstreamUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}
export interface UpstreamChunk {
  choices?: UpstreamChoice[] | null;
  usage?: UpstreamUsage | null;
}

interface NativeCall {
  /** Upstream id (raw), to tell calls apart when a server reuses an index. */
  upstreamId?: string;
  id?: string;
  name?: string;
  /** Arguments not yet emitted. */
  pending: string;
  /** All arguments seen (to judge whether the call looks complete). */
  args: string;
  /** Output index once the call was started in the output. */
  outIndex?: number;
  state: "buffered" | "live" | "closed" | "dropped";
  order: number;
}

export interface TranslatorOptions {
  /** Names of the tools the request offered; empty = no extraction. */
  tools: readonly string[];
  extract: boolean;
  maxToolCalls: number;
  logger?: Logger;
}

/** The bridge's finish reason for the upstream's `finish_reason` (unknown or missing: `stop`). */
export function mapFinish(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case "length":
      return "length";
    case "content_filter":
      return "content_filter";
    case "tool_calls":
    case "function_call":
      return "tool_calls";
    default:
      return "stop";
  }
}

/** The bridge's usage for the upstream's `usage` (cached and reasoning tokens only when > 0); undefined without token counts. */
export function mapUsage(u: UpstreamUsage | null | undefined): Usage | undefined {
  if (!u || typeof u !== "object") return undefined;
  const prompt = typeof u.prompt_tokens === "number" ? u.prompt_tokens : undefined;
  const completion = typeof u.completion_tokens === "number" ? u.completion_tokens : undefined;
  if (prompt === undefined && completion === undefined) return undefined;
  const usage: Usage = {
    promptTokens: prompt ?? 0,
    completionTokens: completion ?? 0,
    totalTokens: typeof u.total_tokens === "number" ? u.total_tokens : (prompt ?? 0) + (completion ?? 0),
  };
  const cached = u.prompt_tokens_details?.cached_tokens;
  if (typeof cached === "number" && cached > 0) usage.cachedTokens = cached;
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (typeof reasoning === "number" && reasoning > 0) usage.reasoningTokens = reasoning;
  return usage;
}

function argsText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v == null) return "";
  return JSON.stringify(v);
}

function looksComplete(args: string): boolean {
  if (!args.trim()) return false;
  try {
    JSON.parse(args);
    return true;
  } catch {
    return false;
  }
}

/**
 * Turns upstream chunks (or one non-streaming `chat.completion`) into bridge events. One instance
 * per turn. `chunk()` returns the events of one upstream chunk at once; `finish()` flushes what was
 * held back and returns the closing `usage` + `done`.
 */
export class StreamTranslator {
  private readonly extractor?: ToolCallExtractor;
  private readonly maxToolCalls: number;
  private readonly logger?: Logger;
  private nextIndex = 0;
  /** Ids given out (made on the first tool call). */
  private usedIds?: Set<string>;
  private readonly calls: NativeCall[] = [];
  /** Native calls by their upstream index (made on the first native call). */
  private byKey?: Map<number, NativeCall>;
  private live?: NativeCall;
  /** Special tokens in text (when there is no extractor: the extractor strips them itself). */
  private readonly textStripper?: SpecialTokenStripper;
  /** Special tokens in reasoning (made on the first reasoning delta). */
  private reasoningStripper?: SpecialTokenStripper;
  private usage?: Usage;
  private upstreamFinish?: string;
  /** Where the events of the chunk being translated begin in its `out` (see `chunkInto`). */
  private chunkStart = 0;
  /** Calls dropped because of the cap. */
  droppedCalls = 0;
  /** Set when a call beyond the cap appeared: the caller should stop reading the upstream. */
  capReached = false;
  /** A finish_reason was seen. */
  sawFinish = false;

  constructor(opts: TranslatorOptions) {
    this.maxToolCalls = opts.maxToolCalls;
    this.logger = opts.logger;
    if (opts.extract && opts.tools.length > 0) {
      // One more than the cap so the translator sees (and reports) the first call beyond it.
      this.extractor = new ToolCallExtractor({
        tools: opts.tools,
        maxCalls: opts.maxToolCalls + 1,
        newId: newCallId,
        stripSpecialTokens: true,
      });
    } else {
      this.textStripper = new SpecialTokenStripper();
    }
  }

  /** Tool calls emitted so far (native and extracted). */
  get toolCalls(): number {
    return this.nextIndex;
  }

  /** Events for one streamed `chat.completion.chunk`. */
  chunk(c: UpstreamChunk): BackendEvent[] {
    const out: BackendEvent[] = [];
    this.chunkInto(c, out);
    return out;
  }

  /**
   * `chunk()` appending to `out` (the events of a whole upstream read, without an array per
   * chunk). The chunk's own events are the ones from `out.length` on: text is joined into one
   * event per upstream chunk, never across chunks.
   */
  chunkInto(c: UpstreamChunk, out: BackendEvent[]): void {
    this.chunkStart = out.length;
    const choices = c.choices;
    let choice: UpstreamChoice | undefined;
    if (Array.isArray(choices)) {
      // The choice with index 0 (a missing index counts as 0), else the first.
      for (let i = 0; i < choices.length; i++) {
        const ch = choices[i];
        if ((ch?.index ?? 0) === 0) {
          choice = ch;
          break;
        }
      }
      choice ??= choices[0];
    }
    if (choice) {
      const delta = choice.delta ?? choice.message;
      if (delta && typeof delta === "object") this.delta(delta, out);
      if (typeof choice.finish_reason === "string" && choice.finish_reason) {
        this.sawFinish = true;
        this.upstreamFinish = choice.finish_reason;
      }
    }
    if (c.usage != null) {
      const u = mapUsage(c.usage);
      if (u) this.usage = u;
    }
  }

  /**
   * Events for a whole `chat.completion` (the answer to a non-streamed request, or a JSON reply to
   * a streaming one): its message is one delta whose tool calls are told apart by position.
   */
  message(body: UpstreamChunk): BackendEvent[] {
    const out: BackendEvent[] = [];
    this.chunkStart = 0;
    const choice = Array.isArray(body.choices) ? body.choices[0] : undefined;
    const msg = choice?.message ?? choice?.delta;
    if (msg && typeof msg === "object") this.delta(msg, out, true);
    this.sawFinish = true;
    this.upstreamFinish =
      typeof choice?.finish_reason === "string" && choice.finish_reason ? choice.finish_reason : "stop";
    const u = mapUsage(body.usage);
    if (u) this.usage = u;
    return out;
  }

  /** Flush everything held back; closing events (`usage`, `done`). Call once. */
  finish(): BackendEvent[] {
    const out: BackendEvent[] = [];
    this.chunkStart = 0;
    const r = this.reasoningStripper?.end();
    if (r) out.push({ type: "reasoning", text: r });
    // After the cap, whatever the extractor still holds is part of the runaway reply: dropped.
    if (!this.capReached && this.extractor) for (const ev of this.extractor.end()) this.extracted(ev, out);
    this.flushText(out);
    if (!this.capReached) this.flushBufferedCalls(out);
    const dropped = this.droppedCalls + (this.extractor?.droppedCalls ?? 0);
    if (dropped > 0) this.logger?.warn({ dropped, kept: this.nextIndex }, "tool-call cap reached: extra calls dropped");
    if (this.usage) out.push({ type: "usage", usage: this.usage });
    let finishReason: FinishReason = this.nextIndex > 0 ? "tool_calls" : mapFinish(this.upstreamFinish);
    if (finishReason === "tool_calls" && this.nextIndex === 0) finishReason = "stop";
    out.push({ type: "done", finishReason });
    return out;
  }

  /** `whole`: the delta is a whole message, whose tool calls are numbered by position (any `index` ignored). */
  private delta(d: UpstreamDelta, out: BackendEvent[], whole = false): void {
    const reasoning =
      typeof d.reasoning_content === "string" && d.reasoning_content
        ? d.reasoning_content
        : typeof d.reasoning === "string" && d.reasoning
          ? d.reasoning
          : "";
    if (reasoning) {
      const r = (this.reasoningStripper ??= new SpecialTokenStripper()).push(reasoning);
      if (r) out.push({ type: "reasoning", text: r });
    }
    if (typeof d.content === "string" && d.content) this.text(d.content, out);
    if (typeof d.refusal === "string" && d.refusal) this.text(d.refusal, out);
    if (Array.isArray(d.tool_calls)) {
      d.tool_calls.forEach((tc, pos) => {
        if (tc && typeof tc === "object") this.nativeCall(tc, pos, out, whole);
      });
    }
  }

  private text(raw: string, out: BackendEvent[]): void {
    if (this.capReached) return;
    if (this.extractor) {
      for (const ev of this.extractor.push(raw)) this.extracted(ev, out);
    } else {
      this.pushText(this.textStripper?.push(raw) ?? raw, out);
    }
  }

  private extracted(ev: ExtractEvent, out: BackendEvent[]): void {
    if (ev.type === "text") this.pushText(ev.text, out);
    else {
      if (this.live) this.live.state = "closed"; // keep the live native call's chunks together
      this.live = undefined;
      this.flushText(out);
      const index = this.claimIndex(ev.call.name);
      if (index === undefined) return;
      out.push({
        type: "tool_call",
        index,
        id: this.cleanId(ev.call.id),
        name: ev.call.name,
        argumentsDelta: ev.call.arguments,
        extracted: true,
      });
    }
  }

  /** Text the special-token stripper still holds (a possible token's start), before a call or at the end. */
  private flushText(out: BackendEvent[]): void {
    if (this.textStripper) this.pushText(this.textStripper.end(), out);
  }

  private pushText(t: string, out: BackendEvent[]): void {
    if (!t) return;
    const last = out.length > this.chunkStart ? out[out.length - 1] : undefined;
    if (last?.type === "text")
      last.text += t; // same upstream chunk: one event
    else out.push({ type: "text", text: t });
  }

  private cleanId(raw: string | null | undefined): string {
    let id = typeof raw === "string" ? raw.replace(/[^A-Za-z0-9]/g, "") : "";
    const used = (this.usedIds ??= new Set());
    if (!id || used.has(id)) id = newCallId();
    used.add(id);
    return id;
  }

  /** Next output index, or undefined (and the cap flag set) when the cap is reached. */
  private claimIndex(name: string | undefined): number | undefined {
    if (this.nextIndex >= this.maxToolCalls) {
      this.droppedCalls++;
      if (!this.capReached)
        this.logger?.warn(
          { max: this.maxToolCalls, name },
          "tool-call cap reached: dropping further calls and stopping the upstream",
        );
      this.capReached = true;
      return undefined;
    }
    return this.nextIndex++;
  }

  private nativeCall(tc: UpstreamToolCallDelta, pos: number, out: BackendEvent[], byPosition: boolean): void {
    if (this.capReached) return;
    const key = !byPosition && typeof tc.index === "number" ? tc.index : pos;
    const upstreamId = typeof tc.id === "string" && tc.id ? tc.id : undefined;
    const name = typeof tc.function?.name === "string" && tc.function.name ? tc.function.name : undefined;
    const args = argsText(tc.function?.arguments);

    const byKey = (this.byKey ??= new Map());
    let call = byKey.get(key);
    // A server that reuses index 0 for every call (seen with Ollama) marks a new call by a new id.
    if (call && upstreamId && call.upstreamId && upstreamId !== call.upstreamId) call = undefined;
    if (!call) {
      call = { upstreamId, pending: "", args: "", state: "buffered", order: this.calls.length };
      this.calls.push(call);
      byKey.set(key, call);
    }
    if (upstreamId && !call.upstreamId) call.upstreamId = upstreamId;
    if (name && !call.name) call.name = name;
    call.args += args;

    switch (call.state) {
      case "dropped":
        return;
      case "closed":
        // A late chunk for a call we already moved past. Whitespace is harmless to drop; anything
        // else is emitted (out of order) rather than lost.
        if (args.trim()) {
          this.logger?.warn({ index: call.outIndex }, "upstream sent a tool-call chunk after another call started");
          out.push({ type: "tool_call", index: call.outIndex!, argumentsDelta: args });
        }
        return;
      case "live":
        if (args) out.push({ type: "tool_call", index: call.outIndex!, argumentsDelta: args });
        return;
      case "buffered":
        call.pending += args;
        if (!this.live || this.live === call || (this.live.name !== undefined && looksComplete(this.live.args)))
          this.promote(call, out);
        return;
    }
  }

  /** Make `call` the live call (closing the previous one) once its name is known. */
  private promote(call: NativeCall, out: BackendEvent[]): void {
    if (this.live && this.live !== call) this.live.state = "closed";
    this.live = call;
    if (call.name === undefined) return; // started once the name arrives; other calls wait
    this.start(call, out);
  }

  private start(call: NativeCall, out: BackendEvent[]): void {
    const index = this.claimIndex(call.name);
    if (index === undefined) {
      call.state = "dropped";
      return;
    }
    this.flushText(out);
    call.outIndex = index;
    call.state = "live";
    call.id = this.cleanId(call.upstreamId);
    out.push({ type: "tool_call", index, id: call.id, name: call.name, argumentsDelta: call.pending });
    call.pending = "";
  }

  private flushBufferedCalls(out: BackendEvent[]): void {
    for (const call of [...this.calls].sort((a, b) => a.order - b.order)) {
      if (call.state !== "buffered") continue;
      if (call.name === undefined) {
        this.logger?.warn("upstream tool call without a name dropped");
        call.state = "dropped";
        continue;
      }
      this.start(call, out);
      call.state = "closed";
      if (this.capReached) break;
    }
  }
}
