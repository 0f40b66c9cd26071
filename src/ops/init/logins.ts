/**
 * Whether each coding-agent CLI is logged in, for `clawbridge init`: read from the CLI's own
 * credentials file, settings or environment, and reported only as "logged in / not, and how".
 *
 * A secret is never returned, printed or kept: a credentials file is parsed only to see which keys
 * it has (a token's value is looked at for being a non-empty string, nothing more), an environment
 * variable only for being set. What each CLI keeps where (checked in the installed packages, 2026-11):
 *
 * - Claude Code: `$CLAUDE_CONFIG_DIR/.credentials.json` (default `~/.claude/.credentials.json`,
 *   `claudeAiOauth` after `/login` with a subscription), `primaryApiKey` in `~/.claude.json` (a
 *   Console key), or ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN.
 * - Codex: `$CODEX_HOME/auth.json` (default `~/.codex/auth.json`): `tokens` after a ChatGPT
 *   sign-in, `OPENAI_API_KEY` after `codex login --with-api-key`; or OPENAI_API_KEY / CODEX_API_KEY.
 * - Gemini CLI: `~/.gemini/oauth_creds.json` (or `gemini-credentials.json`, its encrypted store;
 *   `~` is `$GEMINI_CLI_HOME` when set) after a Google sign-in; GEMINI_API_KEY / GOOGLE_API_KEY, in the
 *   environment or `~/.gemini/.env`; Vertex AI (GOOGLE_GENAI_USE_VERTEXAI); `settings.json`'s
 *   `security.auth.selectedType` (older: `selectedAuthType`) says which one it uses.
 * - Qwen Code: `$QWEN_HOME/oauth_creds.json` (default `~/.qwen`) after Qwen OAuth; OPENAI_API_KEY
 *   (environment, `~/.qwen/.env`) or `security.auth.apiKey` in its settings.json for an
 *   OpenAI-compatible provider.
 * - OpenCode: its free models need no login; `$XDG_DATA_HOME/opencode/auth.json` (default
 *   `~/.local/share/opencode/auth.json`) names the providers logged in (`opencode auth login`).
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

export interface LoginStatus {
  /** The CLI can answer now without a login step (OpenCode always can: its free models). */
  loggedIn: boolean;
  /** How, or why not, in a few words; never a secret. */
  how: string;
  /** How to log in, when not. */
  hint?: string;
}

type Env = NodeJS.ProcessEnv;

const set = (env: Env, name: string) => typeof env[name] === "string" && env[name]!.trim() !== "";

function homeOf(env: Env): string {
  return env.HOME?.trim() || homedir();
}

/** `p` with the home directory written as `~` (for display). */
export function tildify(p: string, env: Env = process.env): string {
  const home = homeOf(env);
  return p === home ? "~" : p.startsWith(`${home}/`) ? `~/${p.slice(home.length + 1)}` : p;
}

/** A JSON file's top-level object, or why not; its values stay in this module. */
function readJson(file: string): { found: false } | { found: true; data?: Record<string, unknown> } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return { found: false };
  }
  try {
    const data = JSON.parse(text) as unknown;
    return {
      found: true,
      ...(data && typeof data === "object" && !Array.isArray(data) ? { data: data as Record<string, unknown> } : {}),
    };
  } catch {
    return { found: true };
  }
}

const nonEmpty = (v: unknown) => typeof v === "string" && v.trim() !== "";
const object = (v: unknown) =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** Whether a dotenv file sets `name` to something (its value is not kept). */
function dotenvSets(file: string, name: string): boolean {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return false;
  }
  const re = new RegExp(`^\\s*(?:export\\s+)?${name}\\s*=\\s*["']?[^\\s"'#]`, "m");
  return re.test(text);
}

function firstEnv(env: Env, names: string[]): string | undefined {
  return names.find((n) => set(env, n));
}

export function claudeLogin(env: Env): LoginStatus {
  const dir = env.CLAUDE_CONFIG_DIR?.trim() || path.join(homeOf(env), ".claude");
  const file = path.join(dir, ".credentials.json");
  const creds = readJson(file);
  if (creds.found) {
    const oauth = object(creds.data?.claudeAiOauth);
    if (oauth && (nonEmpty(oauth.accessToken) || nonEmpty(oauth.refreshToken)))
      return { loggedIn: true, how: `Claude account (OAuth, ${tildify(file, env)})` };
  }
  const token = firstEnv(env, ["CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]);
  if (token) return { loggedIn: true, how: `${token} is set` };
  const legacy = readJson(
    env.CLAUDE_CONFIG_DIR?.trim() ? path.join(dir, ".claude.json") : path.join(homeOf(env), ".claude.json"),
  );
  if (legacy.found && nonEmpty(legacy.data?.primaryApiKey))
    return { loggedIn: true, how: "Anthropic Console API key (~/.claude.json)" };
  if (creds.found)
    return { loggedIn: false, how: `${tildify(file, env)} holds no login`, hint: "run `claude` and type /login" };
  return { loggedIn: false, how: "no credentials", hint: "run `claude` and type /login, or set ANTHROPIC_API_KEY" };
}

export function codexLogin(env: Env): LoginStatus {
  const dir = env.CODEX_HOME?.trim() || path.join(homeOf(env), ".codex");
  const file = path.join(dir, "auth.json");
  const auth = readJson(file);
  if (auth.found) {
    const tokens = object(auth.data?.tokens);
    if (tokens && (nonEmpty(tokens.access_token) || nonEmpty(tokens.refresh_token) || nonEmpty(tokens.id_token)))
      return { loggedIn: true, how: `ChatGPT sign-in (${tildify(file, env)})` };
    if (nonEmpty(auth.data?.OPENAI_API_KEY)) return { loggedIn: true, how: `OpenAI API key (${tildify(file, env)})` };
  }
  const key = firstEnv(env, ["CODEX_API_KEY", "OPENAI_API_KEY"]);
  if (key) return { loggedIn: true, how: `${key} is set` };
  if (auth.found) return { loggedIn: false, how: `${tildify(file, env)} holds no login`, hint: "run `codex login`" };
  return { loggedIn: false, how: "no credentials", hint: "run `codex login`, or set OPENAI_API_KEY" };
}

export function geminiLogin(env: Env): LoginStatus {
  const dir = path.join(env.GEMINI_CLI_HOME?.trim() || homeOf(env), ".gemini");
  const settings = readJson(path.join(dir, "settings.json"));
  const auth = object(object(settings.found ? settings.data?.security : undefined)?.auth);
  const selected =
    (typeof auth?.selectedType === "string" ? auth.selectedType : undefined) ??
    (settings.found && typeof settings.data?.selectedAuthType === "string"
      ? settings.data.selectedAuthType
      : undefined);
  const oauthFile = ["oauth_creds.json", "gemini-credentials.json"]
    .map((f) => path.join(dir, f))
    .find((f) => readJson(f).found);
  const key =
    firstEnv(env, ["GEMINI_API_KEY", "GOOGLE_API_KEY"]) ??
    (["GEMINI_API_KEY", "GOOGLE_API_KEY"].find((n) => dotenvSets(path.join(dir, ".env"), n)) && "~/.gemini/.env");
  const vertex = set(env, "GOOGLE_GENAI_USE_VERTEXAI") && env.GOOGLE_GENAI_USE_VERTEXAI !== "false";
  const viaKey = key
    ? { loggedIn: true, how: `API key (${key.startsWith("~") ? `in ${key}` : `${key} is set`})` }
    : undefined;
  const viaOauth = oauthFile ? { loggedIn: true, how: `Google account (${tildify(oauthFile, env)})` } : undefined;
  const viaVertex = vertex ? { loggedIn: true, how: "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI is set)" } : undefined;
  const hint = "run `gemini` and choose a sign-in, or set GEMINI_API_KEY";
  // The CLI uses the kind its settings name; without one, whichever it finds.
  if (selected === "oauth-personal")
    return viaOauth ?? { loggedIn: false, how: "Google sign-in chosen, no credentials yet", hint };
  if (selected === "gemini-api-key")
    return viaKey ?? { loggedIn: false, how: "API key chosen, GEMINI_API_KEY not set", hint };
  if (selected === "vertex-ai") return viaVertex ?? { loggedIn: false, how: "Vertex AI chosen, not configured", hint };
  if (selected === "compute-default-credentials")
    return { loggedIn: true, how: "Google Cloud default credentials (settings.json)" };
  return viaOauth ?? viaKey ?? viaVertex ?? { loggedIn: false, how: "no credentials", hint };
}

export function qwenLogin(env: Env): LoginStatus {
  const dir = env.QWEN_HOME?.trim() ? path.resolve(env.QWEN_HOME.trim()) : path.join(homeOf(env), ".qwen");
  const oauth = path.join(dir, "oauth_creds.json");
  const creds = readJson(oauth);
  const settings = readJson(path.join(dir, "settings.json"));
  const auth = object(object(settings.found ? settings.data?.security : undefined)?.auth);
  const selected = typeof auth?.selectedType === "string" ? auth.selectedType : undefined;
  const viaOauth =
    creds.found && (nonEmpty(creds.data?.access_token) || nonEmpty(creds.data?.refresh_token))
      ? { loggedIn: true, how: `Qwen OAuth (${tildify(oauth, env)})` }
      : undefined;
  const keyWhere = set(env, "OPENAI_API_KEY")
    ? "OPENAI_API_KEY is set"
    : dotenvSets(path.join(dir, ".env"), "OPENAI_API_KEY")
      ? `OPENAI_API_KEY in ${tildify(path.join(dir, ".env"), env)}`
      : nonEmpty(auth?.apiKey)
        ? `an API key in ${tildify(path.join(dir, "settings.json"), env)}`
        : undefined;
  const viaKey = keyWhere ? { loggedIn: true, how: `OpenAI-compatible API key (${keyWhere})` } : undefined;
  const hint = "run `qwen` and sign in with Qwen OAuth, or set OPENAI_API_KEY";
  if (selected === "qwen-oauth")
    return viaOauth ?? { loggedIn: false, how: "Qwen OAuth chosen, no credentials yet", hint };
  if (selected === "openai") return viaKey ?? { loggedIn: false, how: "OpenAI-compatible key chosen, none set", hint };
  return viaOauth ?? viaKey ?? { loggedIn: false, how: "no credentials", hint };
}

export function opencodeLogin(env: Env): LoginStatus {
  const data = env.XDG_DATA_HOME?.trim() || path.join(homeOf(env), ".local", "share");
  const file = path.join(data, "opencode", "auth.json");
  const auth = readJson(file);
  const providers = auth.found && auth.data ? Object.keys(auth.data).filter((k) => /^[\w.@/-]{1,64}$/.test(k)) : [];
  return {
    loggedIn: true,
    how: providers.length
      ? `free models need no login; also logged in to ${providers.join(", ")} (${tildify(file, env)})`
      : "free models need no login",
  };
}

const BY_TYPE: Record<string, (env: Env) => LoginStatus> = {
  "claude-code": claudeLogin,
  codex: codexLogin,
  "gemini-cli": geminiLogin,
  "qwen-code": qwenLogin,
  opencode: opencodeLogin,
};

/** The login of the CLI a backend `type` drives (unknown types: not logged in). */
export function loginStatus(backendType: string, env: Env = process.env): LoginStatus {
  const check = BY_TYPE[backendType];
  return check ? check(env) : { loggedIn: false, how: "unknown CLI" };
}
