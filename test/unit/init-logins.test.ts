/**
 * `clawbridge init`'s login detection (src/ops/init/logins.ts): each CLI's own credentials file,
 * settings and environment, in a temp HOME; a secret in them never reaches what is returned or
 * printed.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { KNOWN_CLIS } from "../../src/backends/cli/resolve.js";
import { describeFound, type FoundCli } from "../../src/ops/init/detect.js";
import {
  claudeLogin,
  codexLogin,
  geminiLogin,
  loginStatus,
  opencodeLogin,
  qwenLogin,
} from "../../src/ops/init/logins.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const SECRET = "sk-SECRET-do-not-print-7f3a9c";
const dirs: string[] = [];
after(() => dirs.forEach(cleanup));

function home(): { home: string; env: NodeJS.ProcessEnv } {
  const h = tempDir("cb-init-login-");
  dirs.push(h);
  // Only what the test sets: the developer's own keys and dirs must not count.
  return { home: h, env: { HOME: h } };
}

function put(file: string, content: unknown): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
}

function noSecret(value: unknown): void {
  assert.ok(!JSON.stringify(value).includes(SECRET), `a secret leaked: ${JSON.stringify(value)}`);
  assert.ok(!JSON.stringify(value).includes("SECRET"), `a secret leaked: ${JSON.stringify(value)}`);
}

describe("init: login detection", () => {
  it("Claude Code: OAuth credentials file (HOME and CLAUDE_CONFIG_DIR), API key, nothing", () => {
    const a = home();
    assert.equal(claudeLogin(a.env).loggedIn, false);
    assert.match(claudeLogin(a.env).hint ?? "", /login/);
    put(path.join(a.home, ".claude", ".credentials.json"), {
      claudeAiOauth: { accessToken: SECRET, refreshToken: SECRET, expiresAt: 1 },
    });
    const s = claudeLogin(a.env);
    assert.equal(s.loggedIn, true);
    assert.match(s.how, /OAuth, ~\/\.claude\/\.credentials\.json/);
    noSecret(s);

    const b = home();
    const cfg = path.join(b.home, "elsewhere");
    put(path.join(cfg, ".credentials.json"), { claudeAiOauth: { accessToken: SECRET } });
    assert.equal(claudeLogin(b.env).loggedIn, false, "not under ~/.claude");
    const viaDir = claudeLogin({ ...b.env, CLAUDE_CONFIG_DIR: cfg });
    assert.equal(viaDir.loggedIn, true);
    noSecret(viaDir);

    const c = home();
    put(path.join(c.home, ".claude", ".credentials.json"), { claudeAiOauth: {} });
    assert.equal(claudeLogin(c.env).loggedIn, false, "an empty login is none");
    const key = claudeLogin({ ...c.env, ANTHROPIC_API_KEY: SECRET });
    assert.deepEqual([key.loggedIn, key.how], [true, "ANTHROPIC_API_KEY is set"]);
    noSecret(key);
  });

  it("Codex: auth.json with a ChatGPT sign-in or an API key (CODEX_HOME too), OPENAI_API_KEY", () => {
    const a = home();
    assert.equal(codexLogin(a.env).loggedIn, false);
    put(path.join(a.home, ".codex", "auth.json"), {
      OPENAI_API_KEY: null,
      tokens: { id_token: SECRET, access_token: SECRET, refresh_token: SECRET, account_id: "acc" },
    });
    const s = codexLogin(a.env);
    assert.deepEqual([s.loggedIn, s.how], [true, "ChatGPT sign-in (~/.codex/auth.json)"]);
    noSecret(s);

    const b = home();
    const ch = path.join(b.home, "codex-home");
    put(path.join(ch, "auth.json"), { OPENAI_API_KEY: SECRET });
    const k = codexLogin({ ...b.env, CODEX_HOME: ch });
    assert.deepEqual([k.loggedIn, k.how], [true, "OpenAI API key (~/codex-home/auth.json)"]);
    noSecret(k);
    assert.equal(codexLogin({ ...b.env, OPENAI_API_KEY: SECRET }).how, "OPENAI_API_KEY is set");
  });

  it("Gemini CLI: OAuth file, API key (env or ~/.gemini/.env), the auth type its settings choose", () => {
    const a = home();
    assert.equal(geminiLogin(a.env).loggedIn, false);
    put(path.join(a.home, ".gemini", "oauth_creds.json"), { access_token: SECRET, refresh_token: SECRET });
    const s = geminiLogin(a.env);
    assert.deepEqual([s.loggedIn, s.how], [true, "Google account (~/.gemini/oauth_creds.json)"]);
    noSecret(s);
    // Settings that choose an API key: the OAuth file does not count, the key does.
    put(path.join(a.home, ".gemini", "settings.json"), { security: { auth: { selectedType: "gemini-api-key" } } });
    assert.equal(geminiLogin(a.env).loggedIn, false);
    const k = geminiLogin({ ...a.env, GEMINI_API_KEY: SECRET });
    assert.deepEqual([k.loggedIn, k.how], [true, "API key (GEMINI_API_KEY is set)"]);
    put(path.join(a.home, ".gemini", ".env"), `# mine\nGEMINI_API_KEY="${SECRET}"\n`);
    const d = geminiLogin(a.env);
    assert.deepEqual([d.loggedIn, d.how], [true, "API key (in ~/.gemini/.env)"]);
    noSecret(d);

    const b = home();
    const gh = path.join(b.home, "gh");
    put(path.join(gh, ".gemini", "oauth_creds.json"), { access_token: SECRET });
    assert.equal(geminiLogin({ ...b.env, GEMINI_CLI_HOME: gh }).loggedIn, true, "GEMINI_CLI_HOME");
  });

  it("Qwen Code: OAuth file, an OpenAI-compatible key (env, .env, settings), QWEN_HOME", () => {
    const a = home();
    assert.equal(qwenLogin(a.env).loggedIn, false);
    put(path.join(a.home, ".qwen", "oauth_creds.json"), { access_token: SECRET, refresh_token: SECRET });
    const s = qwenLogin(a.env);
    assert.deepEqual([s.loggedIn, s.how], [true, "Qwen OAuth (~/.qwen/oauth_creds.json)"]);
    noSecret(s);

    const b = home();
    put(path.join(b.home, ".qwen", "settings.json"), {
      security: { auth: { selectedType: "openai", apiKey: SECRET, baseUrl: "http://127.0.0.1:1/v1" } },
    });
    const k = qwenLogin(b.env);
    assert.equal(k.loggedIn, true);
    assert.match(k.how, /API key in ~\/\.qwen\/settings\.json/);
    noSecret(k);
    const qh = path.join(b.home, "qh");
    put(path.join(qh, ".env"), `OPENAI_API_KEY=${SECRET}\n`);
    const e = qwenLogin({ ...b.env, QWEN_HOME: qh });
    assert.equal(e.loggedIn, true);
    noSecret(e);
  });

  it("OpenCode: always usable (free models); auth.json names its providers, not their keys", () => {
    const a = home();
    assert.deepEqual(opencodeLogin(a.env), { loggedIn: true, how: "free models need no login" });
    put(path.join(a.home, ".local", "share", "opencode", "auth.json"), {
      anthropic: { type: "oauth", access: SECRET, refresh: SECRET },
      openrouter: { type: "api", key: SECRET },
    });
    const s = opencodeLogin(a.env);
    assert.match(s.how, /logged in to anthropic, openrouter/);
    noSecret(s);
    const xdg = path.join(a.home, "xdg");
    put(path.join(xdg, "opencode", "auth.json"), { openai: { type: "api", key: SECRET } });
    assert.match(opencodeLogin({ ...a.env, XDG_DATA_HOME: xdg }).how, /logged in to openai/);
  });

  it("unreadable or odd files count as no login, and what init prints holds no secret", () => {
    const a = home();
    put(path.join(a.home, ".claude", ".credentials.json"), `{not json ${SECRET}`);
    put(path.join(a.home, ".codex", "auth.json"), `[${JSON.stringify(SECRET)}]`);
    put(path.join(a.home, ".gemini", "oauth_creds.json"), `${SECRET}`);
    assert.equal(claudeLogin(a.env).loggedIn, false);
    assert.equal(codexLogin(a.env).loggedIn, false);
    const lines: string[] = [];
    for (const cli of KNOWN_CLIS) {
      const login = loginStatus(cli.backendType, a.env);
      noSecret(login);
      const f: FoundCli = {
        cli,
        label: cli.name,
        path: path.join(a.home, "bin", cli.name),
        tried: [],
        login,
        models: [{ id: "m", free: true }],
      };
      lines.push(describeFound(f, a.env), describeFound({ ...f, path: undefined }, a.env));
    }
    noSecret(lines);
    assert.match(lines.join("\n"), /not installed \(npm install -g @openai\/codex\)/);
    assert.equal(loginStatus("nope", a.env).loggedIn, false);
  });
});
