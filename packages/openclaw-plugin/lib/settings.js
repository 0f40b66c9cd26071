/**
 * The plugin's settings: `plugins.entries.clawbridge.config` from OpenClaw, with secrets that
 * reached us redacted read back from the RAW config file, defaults filled in, and the clawbridge
 * installation found. No network access in this file.
 */
import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const PLUGIN_ID = "clawbridge";
export const DEFAULT_PROVIDER_ID = "clawbridge";
/** What OpenClaw puts in place of a secret in the plugin config it hands out. */
export const REDACTED = "__OPENCLAW_REDACTED__";

const PLUGIN_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/**
 * @typedef {object} Settings
 * @property {boolean} autoStart
 * @property {boolean} sessionHeaders
 * @property {string | undefined} configPath
 * @property {string | undefined} host
 * @property {number | undefined} port
 * @property {string | undefined} apiKey
 * @property {string} dataDir
 * @property {string | undefined} root        clawbridge installation (undefined: not found)
 * @property {string} rootHint                how the root was found, or why not
 * @property {number} startTimeoutMs
 * @property {number} stopTimeoutMs
 * @property {Record<string, string>} env
 * @property {string[]} warnings
 */

/** `~/x` → `<home>/x`. */
export function expandHome(p, home = homedir()) {
  if (typeof p !== "string") return p;
  return p === "~" ? home : p.startsWith("~/") ? path.join(home, p.slice(2)) : p;
}

/** OpenClaw's config file, as OpenClaw finds it (OPENCLAW_CONFIG_PATH, OPENCLAW_STATE_DIR, OPENCLAW_HOME, HOME). */
export function openclawConfigPath(env = process.env) {
  if (env.OPENCLAW_CONFIG_PATH?.trim()) return path.resolve(expandHome(env.OPENCLAW_CONFIG_PATH.trim()));
  const home = env.OPENCLAW_HOME?.trim() || env.HOME?.trim() || homedir();
  const stateDir = env.OPENCLAW_STATE_DIR?.trim()
    ? expandHome(env.OPENCLAW_STATE_DIR.trim(), home)
    : path.join(home, ".openclaw");
  return path.resolve(stateDir, "openclaw.json");
}

/**
 * Parse OpenClaw's config text. It is JSON5: comments, trailing commas, unquoted keys and
 * single-quoted strings are turned into JSON first (strings are copied untouched).
 */
export function parseJson5(text) {
  try {
    return JSON.parse(text);
  } catch {
    /* fall through to the lenient path */
  }
  let out = "";
  const n = text.length;
  for (let i = 0; i < n && i < 50_000_000; ) {
    const c = text[i];
    if (c === '"' || c === "'") {
      let j = i + 1;
      let s = "";
      while (j < n && text[j] !== c) {
        if (text[j] === "\\" && j + 1 < n) {
          const next = text[j + 1];
          if (next === "'") s += "'";
          else if (next === "\n") s += "";
          else s += "\\" + next;
          j += 2;
          continue;
        }
        s += text[j] === '"' ? '\\"' : text[j];
        j++;
      }
      out += `"${s}"`;
      i = j + 1;
      continue;
    }
    if (c === "/" && text[i + 1] === "/") {
      while (i < n && text[i] !== "\n") i++;
      continue;
    }
    if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? n : end + 2;
      continue;
    }
    const ident = /^[A-Za-z_$][\w$]*/.exec(text.slice(i, i + 200));
    if (ident) {
      const word = ident[0];
      let k = i + word.length;
      while (k < n && /\s/.test(text[k])) k++;
      const isKey = text[k] === ":" && !["true", "false", "null"].includes(word);
      out += isKey ? `"${word}"` : word === "Infinity" || word === "NaN" ? "null" : word;
      i += word.length;
      continue;
    }
    out += c;
    i++;
  }
  // Trailing commas before } or ] (strings are already JSON-quoted, so a plain scan is safe enough
  // once string contents are skipped).
  let clean = "";
  for (let i = 0; i < out.length; i++) {
    const c = out[i];
    if (c === '"') {
      let j = i + 1;
      while (j < out.length && out[j] !== '"') j += out[j] === "\\" ? 2 : 1;
      clean += out.slice(i, j + 1);
      i = j;
      continue;
    }
    if (c === ",") {
      let k = i + 1;
      while (k < out.length && /\s/.test(out[k])) k++;
      if (out[k] === "}" || out[k] === "]") continue;
    }
    clean += c;
  }
  return JSON.parse(clean);
}

/** `plugins.entries.<id>.config` from the raw config file, or undefined. */
export function readRawPluginConfig(pluginId = PLUGIN_ID, env = process.env) {
  const file = openclawConfigPath(env);
  let doc;
  try {
    doc = parseJson5(readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
  const cfg = doc?.plugins?.entries?.[pluginId]?.config;
  return cfg && typeof cfg === "object" && !Array.isArray(cfg) ? cfg : undefined;
}

/** A secret as written in the config: a literal, `${ENV_NAME}`, or a SecretRef `{ source: "env", id }`. */
export function resolveSecretValue(value, env = process.env) {
  if (typeof value === "string") {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value.trim());
    if (m) return env[m[1]] || undefined;
    return value === REDACTED ? undefined : value;
  }
  if (value && typeof value === "object" && value.source === "env" && typeof value.id === "string")
    return env[value.id] || undefined;
  return undefined;
}

/** Replace redacted values in the plugin config with the raw file's values. */
export function unredact(
  pluginConfig,
  { pluginId = PLUGIN_ID, env = process.env, readRaw = readRawPluginConfig } = {},
) {
  const cfg = { ...(pluginConfig ?? {}) };
  const warnings = [];
  const redactedKeys = Object.keys(cfg).filter((k) => cfg[k] === REDACTED);
  if (!redactedKeys.length) {
    if (cfg.apiKey !== undefined) cfg.apiKey = resolveSecretValue(cfg.apiKey, env);
    return { config: cfg, warnings };
  }
  const raw = readRaw(pluginId, env);
  for (const k of redactedKeys) {
    const v = resolveSecretValue(raw?.[k], env);
    if (v === undefined) {
      delete cfg[k];
      warnings.push(
        `plugins.entries.${pluginId}.config.${k} arrived redacted and could not be read from ${openclawConfigPath(env)}; it is ignored`,
      );
    } else cfg[k] = v;
  }
  if (cfg.apiKey !== undefined) cfg.apiKey = resolveSecretValue(cfg.apiKey, env);
  return { config: cfg, warnings };
}

function isClawbridgeRoot(dir) {
  try {
    if (!existsSync(path.join(dir, "src", "request", "http", "start.ts"))) return false;
    const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
    return pkg?.name === "clawbridge";
  } catch {
    return false;
  }
}

/** `name` on PATH (first executable match), resolved through symlinks. */
function onPath(name, envPath) {
  for (const dir of (envPath ?? "").split(path.delimiter).slice(0, 200)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      if (statSync(p).isFile()) return realpathSync(p);
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/**
 * Where clawbridge is installed: the configured folder, $CLAWBRIDGE_ROOT, the repository this
 * plugin folder sits in (a linked install: `openclaw plugins install -l <repo>/packages/openclaw-plugin`),
 * or the installation behind the `clawbridge` command on PATH.
 */
export function findClawbridgeRoot(configured, env = process.env, pluginDir = PLUGIN_DIR) {
  if (configured) {
    const dir = path.resolve(expandHome(configured));
    return isClawbridgeRoot(dir)
      ? { root: dir, hint: `clawbridgeRoot ${dir}` }
      : {
          root: undefined,
          hint: `clawbridgeRoot ${dir} is not a clawbridge installation (no package.json named clawbridge with src/request/http/start.ts)`,
        };
  }
  if (env.CLAWBRIDGE_ROOT?.trim()) {
    const dir = path.resolve(expandHome(env.CLAWBRIDGE_ROOT.trim()));
    if (isClawbridgeRoot(dir)) return { root: dir, hint: `$CLAWBRIDGE_ROOT ${dir}` };
  }
  for (const dir of [path.resolve(pluginDir, "..", ".."), path.resolve(realpathOr(pluginDir), "..", "..")]) {
    if (isClawbridgeRoot(dir)) return { root: dir, hint: `the repository around the plugin folder (${dir})` };
  }
  const bin = onPath("clawbridge", env.PATH);
  if (bin) {
    const dir = path.resolve(path.dirname(bin), "..");
    if (isClawbridgeRoot(dir)) return { root: dir, hint: `the clawbridge command on PATH (${bin})` };
  }
  return {
    root: undefined,
    hint: "clawbridge was not found: set plugins.entries.clawbridge.config.clawbridgeRoot to its folder (the plugin folder was copied by `openclaw plugins install`, so the repository around it is unknown), or put the clawbridge command on PATH",
  };
}

function realpathOr(p) {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

function num(v, dflt, min) {
  return typeof v === "number" && Number.isFinite(v) && v >= min ? v : dflt;
}

/**
 * The port OpenClaw calls for `provider`: from `models.providers.<provider>.baseUrl` when it
 * points at this machine.
 */
export function providerPort(openclawConfig, providerId = DEFAULT_PROVIDER_ID) {
  const baseUrl = openclawConfig?.models?.providers?.[providerId]?.baseUrl;
  if (typeof baseUrl !== "string") return undefined;
  try {
    const u = new URL(baseUrl);
    const h = u.hostname.replace(/^\[|\]$/g, "");
    if (!(h === "localhost" || h === "::1" || /^127\./.test(h))) return undefined;
    const p = Number(u.port || (u.protocol === "https:" ? 443 : 80));
    return Number.isInteger(p) && p > 0 ? p : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Settings from the plugin config (as OpenClaw handed it over) and OpenClaw's own config.
 * @returns {Settings}
 */
export function resolveSettings(
  pluginConfig,
  { openclawConfig, env = process.env, pluginId = PLUGIN_ID, readRaw, pluginDir } = {},
) {
  const { config: cfg, warnings } = unredact(pluginConfig, { pluginId, env, readRaw });
  const home = env.HOME?.trim() || homedir();
  const dataDir = path.resolve(
    expandHome(
      typeof cfg.dataDir === "string" && cfg.dataDir
        ? cfg.dataDir
        : env.CLAWBRIDGE_DATA_DIR?.trim() || path.join(home, ".clawbridge"),
      home,
    ),
  );
  const found = findClawbridgeRoot(
    typeof cfg.clawbridgeRoot === "string" ? cfg.clawbridgeRoot : undefined,
    env,
    pluginDir,
  );
  const configPath =
    typeof cfg.configPath === "string" && cfg.configPath
      ? path.resolve(expandHome(cfg.configPath, home))
      : env.CLAWBRIDGE_CONFIG?.trim()
        ? path.resolve(expandHome(env.CLAWBRIDGE_CONFIG.trim(), home))
        : undefined;
  const extraEnv = {};
  if (cfg.env && typeof cfg.env === "object")
    for (const [k, v] of Object.entries(cfg.env)) if (typeof v === "string") extraEnv[k] = v;
  return {
    autoStart: cfg.autoStart !== false,
    sessionHeaders: cfg.sessionHeaders !== false,
    configPath,
    host: typeof cfg.host === "string" && cfg.host ? cfg.host : undefined,
    port: Number.isInteger(cfg.port) ? cfg.port : providerPort(openclawConfig),
    apiKey: typeof cfg.apiKey === "string" && cfg.apiKey ? cfg.apiKey : undefined,
    dataDir,
    root: found.root,
    rootHint: found.hint,
    startTimeoutMs: num(cfg.startTimeoutSeconds, 60, 1) * 1000,
    stopTimeoutMs: num(cfg.stopTimeoutSeconds, 20, 1) * 1000,
    env: extraEnv,
    warnings,
  };
}
