/**
 * The per-CLI half of the "resume" suite (bench/suites/resume.ts): for Claude Code and Gemini CLI,
 * the fake model API each one talks to (testkit/fakes), its offline environment
 * (testkit/fakes/cli-env.ts), where the bridge's bootstrap and the new message show up in the
 * request the CLI sent, the argv of a direct run, and how to read its stream-json output.
 */
import path from "node:path";
import { claudeArgs, claudeCodeOptionsSchema } from "../../../src/backends/claude-code/backend.js";
import { geminiArgs, geminiCliOptionsSchema } from "../../../src/backends/gemini-cli/backend.js";
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from "../../../testkit/fakes/anthropic-api.js";
import { claudeEnv, geminiEnv } from "../../../testkit/fakes/cli-env.js";
import { startFakeGemini, type FakeGemini, type RecordedGeminiRequest } from "../../../testkit/fakes/gemini-api.js";

const bytes = (s: string) => Buffer.byteLength(s, "utf8");

/** What the CLI's request to the fake model API carried, in bytes. */
export interface Observed {
  bootstrapBytes: number;
  newMessageBytes: number;
  modelRequestBytes: number;
}

/** A started fake model API for one backend. */
export interface FakeModelApi {
  baseUrl: string;
  close(): Promise<void>;
  /** Model requests recorded so far. */
  count(): number;
  /** `bootstrap` is the text the bridge passed as system text (to find it inside the CLI's own system prompt). */
  observe(since: number, key: string, bootstrap: string): Observed | undefined;
}

export interface Adapter {
  name: string;
  type: "claude-code" | "gemini-cli";
  bin: string;
  start(): Promise<FakeModelApi>;
  /** The CLI's offline environment against the fake at `baseUrl`, with `home` as HOME. */
  env(baseUrl: string, home: string): Record<string, string>;
  /** argv and extra env for one direct turn. */
  direct(
    prompt: { system: string; text: string },
    sessionId: string | undefined,
    systemFile: string,
  ): { args: string[]; env: Record<string, string> };
  /** Parse one stdout line of a direct run. */
  line(ev: any): { session?: string; text?: boolean };
}

function claudeBlocks(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.filter((b: any) => b?.type === "text" && typeof b.text === "string").map((b: any) => b.text as string);
}

const claudeAdapter = (root: string): Adapter => ({
  name: "Claude Code",
  type: "claude-code",
  bin: path.join(root, "node_modules/.bin/claude"),
  env: (baseUrl, home) => claudeEnv({ baseUrl, home }),
  async start() {
    const fake: FakeAnthropic = await startFakeAnthropic(() => ({
      kind: "text",
      chunks: ["Sure. ", "Here is ", "what I have."],
    }));
    return {
      baseUrl: fake.baseUrl,
      close: () => fake.close(),
      count: () => fake.messageCalls().length,
      observe(since, key, bootstrap) {
        const call = fake
          .messageCalls()
          .slice(since)
          .find((c: RecordedRequest) => JSON.stringify(c.body?.system ?? "").includes(`Conversation: ${key}`));
        if (!call) return undefined;
        const system: any[] = Array.isArray(call.body.system) ? call.body.system : [];
        // Claude Code appends --append-system-prompt text to its own last system block: count from where ours starts.
        const block = system.map((b) => String(b?.text ?? "")).find((t) => t.includes(`Conversation: ${key}`)) ?? "";
        const at = block.indexOf(bootstrap.slice(0, 80));
        const boot = at >= 0 ? block.slice(at) : block;
        const msgs: any[] = call.body.messages ?? [];
        const lastUser = [...msgs].reverse().find((m) => m.role === "user");
        const newText = claudeBlocks(lastUser?.content)
          .filter((t) => !t.trimStart().startsWith("<system-reminder>"))
          .join("");
        return {
          bootstrapBytes: bytes(boot),
          newMessageBytes: bytes(newText),
          modelRequestBytes: bytes(JSON.stringify(call.body)),
        };
      },
    };
  },
  direct(prompt, sessionId, systemFile) {
    const opts = claudeCodeOptionsSchema.parse({});
    return {
      args: claudeArgs(
        opts,
        { model: "default", prompt, session: { key: "direct", backendSessionId: sessionId, turn: 0 } },
        systemFile,
      ),
      env: {},
    };
  },
  line(ev) {
    if (ev?.type === "system" && ev.subtype === "init") return { session: ev.session_id };
    if (
      ev?.type === "stream_event" &&
      ev.event?.type === "content_block_delta" &&
      ev.event.delta?.type === "text_delta" &&
      ev.event.delta.text
    )
      return { text: true };
    return {};
  },
});

const geminiAdapter = (root: string): Adapter => ({
  name: "Gemini CLI",
  type: "gemini-cli",
  bin: path.join(root, "node_modules/.bin/gemini"),
  env: (baseUrl, home) => geminiEnv({ baseUrl, home }),
  async start() {
    const fake: FakeGemini = await startFakeGemini(() => ({
      kind: "text",
      chunks: ["Sure. ", "Here is ", "what I have."],
    }));
    return {
      baseUrl: fake.baseUrl,
      close: () => fake.close(),
      count: () => fake.turnCalls().length,
      observe(since, key) {
        const call = fake
          .turnCalls()
          .slice(since)
          .find((c: RecordedGeminiRequest) => c.systemText.includes(`Conversation: ${key}`));
        if (!call) return undefined;
        const contents: any[] = call.body.contents ?? [];
        const last = contents.at(-1);
        const newText = (Array.isArray(last?.parts) ? last.parts : [])
          .filter(
            (p: any) =>
              typeof p?.text === "string" && !p.thought && !p.text.trimStart().startsWith("<session_context>"),
          )
          .map((p: any) => p.text as string)
          .join("");
        return {
          bootstrapBytes: bytes(call.systemText),
          newMessageBytes: bytes(newText),
          modelRequestBytes: bytes(JSON.stringify(call.body)),
        };
      },
    };
  },
  direct(_prompt, sessionId, systemFile) {
    const opts = geminiCliOptionsSchema.parse({});
    return {
      args: geminiArgs(opts, { model: "default", session: { key: "direct", backendSessionId: sessionId, turn: 0 } }),
      env: { GEMINI_SYSTEM_MD: systemFile },
    };
  },
  line(ev) {
    if (ev?.type === "init") return { session: ev.session_id };
    if (ev?.type === "message" && ev.role === "assistant" && ev.delta && ev.content) return { text: true };
    return {};
  },
});

/** The backends the suite measures, in report order. */
export const ADAPTERS: ReadonlyArray<(root: string) => Adapter> = [claudeAdapter, geminiAdapter];
