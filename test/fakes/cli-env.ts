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
