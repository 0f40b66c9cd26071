/**
 * The per-CLI half of the "warm" suite (bench/suites/warm.ts): for each CLI backend, its fake model
 * API (testkit/fakes) answering at once with a multi-token reply, its offline environment, and its
 * backend type and session mode.
 */
import path from "node:path";
import { startFakeAnthropic } from "../../../testkit/fakes/anthropic-api.js";
import { claudeEnv, codexEnv, geminiEnv, qwenEnv } from "../../../testkit/fakes/cli-env.js";
import { startFakeGemini } from "../../../testkit/fakes/gemini-api.js";
import { startFakeOpenAI } from "../../../testkit/fakes/openai-api.js";
import { opencodeEnv } from "../../../testkit/fakes/opencode-env.js";
import { startFakeResponses } from "../../../testkit/fakes/responses-api.js";

/** The reply every fake streams: several chunks, no delay (an instant model). */
export const CHUNKS = ["The ", "warm ", "answer ", "comes ", "in ", "pieces."];

export interface WarmCli {
  /** Short id used in model names (`claude/warm`). */
  id: string;
  name: string;
  type: string;
  bin: string;
  /** resume for CLIs with sessions, stateless for opencode. */
  mode: "resume" | "stateless";
  /**
   * Start the fake; returns the backend's `env` for a CLI with `home` as HOME, `close`, and when the
   * last model turn reached the fake (`performance.now()`): the CLI's own share of the wait.
   */
  start(home: string): Promise<{ env: Record<string, string>; close(): Promise<void>; lastModelRequestAt(): number }>;
}

/** A clock the fakes' scripts stamp when a model turn arrives. */
function stamp() {
  let at = 0;
  return { mark: () => void (at = performance.now()), at: () => at };
}

export function warmClis(root: string): WarmCli[] {
  const bin = (name: string) => path.join(root, "node_modules/.bin", name);
  return [
    {
      id: "claude",
      name: "Claude Code",
      type: "claude-code",
      bin: bin("claude"),
      mode: "resume",
      async start(home) {
        const t = stamp();
        const fake = await startFakeAnthropic(() => (t.mark(), { kind: "text", chunks: CHUNKS }));
        return { env: claudeEnv({ baseUrl: fake.baseUrl, home }), close: () => fake.close(), lastModelRequestAt: t.at };
      },
    },
    {
      id: "opencode",
      name: "OpenCode",
      type: "opencode",
      bin: bin("opencode"),
      mode: "stateless",
      async start(home) {
        const t = stamp();
        const fake = await startFakeOpenAI(() => (t.mark(), { kind: "text", chunks: CHUNKS }));
        return { env: opencodeEnv(fake.url, home), close: () => fake.close(), lastModelRequestAt: t.at };
      },
    },
    {
      id: "gemini",
      name: "Gemini CLI",
      type: "gemini-cli",
      bin: bin("gemini"),
      mode: "resume",
      async start(home) {
        const t = stamp();
        const fake = await startFakeGemini((r) => {
          // Model routing side calls carry the same text: only the streamed turn is the model turn.
          if (r.action === "streamGenerateContent") t.mark();
          return { kind: "text", chunks: CHUNKS };
        });
        return { env: geminiEnv({ baseUrl: fake.baseUrl, home }), close: () => fake.close(), lastModelRequestAt: t.at };
      },
    },
    {
      id: "codex",
      name: "Codex",
      type: "codex",
      bin: bin("codex"),
      mode: "resume",
      async start(home) {
        const t = stamp();
        const fake = await startFakeResponses(() => (t.mark(), { kind: "text", chunks: CHUNKS }));
        return { env: codexEnv({ baseUrl: fake.url, home }), close: () => fake.close(), lastModelRequestAt: t.at };
      },
    },
    {
      id: "qwen",
      name: "Qwen Code",
      type: "qwen-code",
      bin: bin("qwen"),
      mode: "resume",
      async start(home) {
        const t = stamp();
        const fake = await startFakeOpenAI(() => (t.mark(), { kind: "text", chunks: CHUNKS }));
        return { env: qwenEnv({ baseUrl: fake.url, home }), close: () => fake.close(), lastModelRequestAt: t.at };
      },
    },
  ];
}
