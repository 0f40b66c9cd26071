/**
 * Environment for running the REAL `claude` and `gemini` CLIs offline against the fakes in this
 * folder: a private HOME (and config dirs), dummy keys, base URLs on 127.0.0.1, no telemetry, no
 * update checks. Verified with strace: with these settings both CLIs connect only to the fake.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";

export const CLAUDE_BIN = path.resolve("node_modules/.bin/claude");
export const GEMINI_BIN = path.resolve("node_modules/.bin/gemini");

export interface CliEnvInput {
  /** The fake API's base URL (`http://127.0.0.1:<port>`). */
  baseUrl: string;
  /** A private, writable directory used as HOME. */
  home: string;
}

/** Env for `claude`. Sessions land in `<home>/.claude/projects/<cwd with non-alphanumerics as '-'>/<id>.jsonl`. */
export function claudeEnv({ baseUrl, home }: CliEnvInput): Record<string, string> {
  const configDir = path.join(home, ".claude");
  const tmp = path.join(home, "tmp");
  mkdirSync(configDir, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  return {
    HOME: home,
    CLAUDE_CONFIG_DIR: configDir,
    TMPDIR: tmp,
    ANTHROPIC_BASE_URL: baseUrl,
    ANTHROPIC_API_KEY: "dummy",
    // An OAuth token or other provider from the developer's own environment must not win.
    ANTHROPIC_AUTH_TOKEN: "",
    CLAUDE_CODE_USE_BEDROCK: "",
    CLAUDE_CODE_USE_VERTEX: "",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: "1",
  };
}

/**
 * Env for `gemini`, and `<home>/.gemini/settings.json` (API-key auth, telemetry and usage
 * statistics off, no update checks). Sessions land in
 * `<home>/.gemini/tmp/<project name>/chats/session-<time>-<first 8 of id>.jsonl`, the project name
 * being recorded in `<home>/.gemini/projects.json` (normally the cwd's basename).
 */
export function geminiEnv({ baseUrl, home }: CliEnvInput): Record<string, string> {
  const dir = path.join(home, ".gemini");
  const tmp = path.join(home, "tmp");
  mkdirSync(dir, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(
    path.join(dir, "settings.json"),
    JSON.stringify(
      {
        security: { auth: { selectedType: "gemini-api-key" } },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false },
        general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      },
      null,
      2,
    ),
  );
  return {
    HOME: home,
    // gemini writes error reports (gemini-client-error-*.json) to the temp dir.
    TMPDIR: tmp,
    GEMINI_API_KEY: "dummy",
    GOOGLE_API_KEY: "",
    GOOGLE_GENAI_USE_VERTEXAI: "",
    GOOGLE_GEMINI_BASE_URL: baseUrl,
    GEMINI_CLI_TRUST_WORKSPACE: "true",
    NO_COLOR: "1",
  };
}

export const QWEN_BIN = path.resolve("node_modules/.bin/qwen");
export const CODEX_BIN = path.resolve("node_modules/.bin/codex");

/**
 * Env for `qwen` against a fake OpenAI chat-completions API (`testkit/fakes/openai-api.ts`; pass its
 * `url`, which ends in `/v1`), and `<home>/.qwen/settings.json`: OpenAI auth, telemetry, usage
 * statistics, update checks and the managed auto-memory side call (a second model call after every
 * turn) off. Sessions land in `<home>/.qwen/projects/<cwd with non-alphanumerics as '-'>/chats/<id>.jsonl`.
 */
export function qwenEnv({
  baseUrl,
  home,
  model = "fake-model",
}: CliEnvInput & { model?: string }): Record<string, string> {
  const dir = path.join(home, ".qwen");
  const tmp = path.join(home, "tmp");
  mkdirSync(dir, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(
    path.join(dir, "settings.json"),
    JSON.stringify(
      {
        security: { auth: { selectedType: "openai" } },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false },
        general: { enableAutoUpdate: false },
        memory: { enableManagedAutoMemory: false },
      },
      null,
      2,
    ),
  );
  return {
    HOME: home,
    TMPDIR: tmp,
    OPENAI_API_KEY: "dummy",
    OPENAI_BASE_URL: baseUrl,
    OPENAI_MODEL: model,
    // Other providers or a Qwen OAuth login from the developer's own environment must not win.
    QWEN_DEFAULT_AUTH_TYPE: "",
    QWEN_SYSTEM_MD: "",
    DASHSCOPE_API_KEY: "",
    NO_COLOR: "1",
  };
}

/**
 * Env for `codex` against a fake Responses API (`testkit/fakes/responses-api.ts`; pass its `url`,
 * which ends in `/v1`): `CODEX_HOME=<home>/.codex` with a config.toml naming a custom provider
 * `fake` (wire_api "responses", key from env FAKE_CODEX_API_KEY, no retries), update checks,
 * analytics and plugins off (plugin sync otherwise looks up api.github.com and chatgpt.com).
 * Sessions land in `<home>/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`.
 */
export function codexEnv({
  baseUrl,
  home,
  model = "fake-model",
}: CliEnvInput & { model?: string }): Record<string, string> {
  const dir = path.join(home, ".codex");
  const tmp = path.join(home, "tmp");
  mkdirSync(dir, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(
    path.join(dir, "config.toml"),
    [
      `model = ${JSON.stringify(model)}`,
      `model_provider = "fake"`,
      `check_for_update_on_startup = false`,
      ``,
      `[model_providers.fake]`,
      `name = "Fake"`,
      `base_url = ${JSON.stringify(baseUrl)}`,
      `wire_api = "responses"`,
      `env_key = "FAKE_CODEX_API_KEY"`,
      `request_max_retries = 0`,
      `stream_max_retries = 0`,
      ``,
      `[analytics]`,
      `enabled = false`,
      ``,
      `[features]`,
      `plugins = false`,
      ``,
    ].join("\n"),
  );
  return {
    HOME: home,
    TMPDIR: tmp,
    CODEX_HOME: dir,
    FAKE_CODEX_API_KEY: "dummy",
    // A real key or login from the developer's own environment must not be used.
    OPENAI_API_KEY: "",
    CODEX_API_KEY: "",
    NO_COLOR: "1",
  };
}
