/**
 * `clawbridge openclaw status`: does OpenClaw's config point at a RUNNING bridge, do they agree on
 * models and on the API key, and is a stale models.json in the way? Also used by `clawbridge doctor`
 * (with the bridge config, it also compares URL, models and compat flags with what install writes).
 */
import { readFileSync } from "node:fs";
import type { Config } from "../../core/config/schema.js";
import type { Finding } from "../../wire/admin.js";
import { Json5Doc, Json5SyntaxError } from "./json5-doc.js";
import { readMarker } from "./install-record.js";
import { inspectAllModelsJson } from "./models-json.js";
import {
  API_KIND_PATH,
  bridgeOrigin,
  buildProviderEntry,
  DEFAULT_API_KIND,
  DEFAULT_PROVIDER_ID,
  isApiKind,
  OPENCLAW_API_KINDS,
  type OpenClawPaths,
} from "./provider.js";

export interface StatusOptions {
  paths: OpenClawPaths;
  /** Default: the one provider id recorded by install, else `clawbridge`. */
  providerId?: string;
  env?: NodeJS.ProcessEnv;
  /** HTTP timeout for each probe. */
  timeoutMs?: number;
  /** The bridge configuration, when known: compared with OpenClaw's entry. */
  config?: Config;
  /** A missing OpenClaw config or provider entry is a failure (status) or only a warning (doctor). */
  notSetUpIs?: "fail" | "warn";
}

export interface BridgeProbe {
  running: boolean;
  /** It answered /health as a clawbridge. */
  isClawbridge: boolean;
  version?: string;
  status?: string;
  /** Model ids from GET /v1/models (with OpenClaw's key). */
  models?: string[];
  /** HTTP status of GET /v1/models. */
  modelsStatus?: number;
  error?: string;
}

export interface OpenClawStatusReport {
  ok: boolean;
  providerId: string;
  configPath: string;
  baseUrl?: string;
  bridge?: BridgeProbe;
  findings: Finding[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The key OpenClaw would send: a plain string, `${ENV}`, or an env SecretRef. */
export function resolveApiKey(apiKey: unknown, env: NodeJS.ProcessEnv): { key?: string; how: string } {
  if (typeof apiKey === "string") {
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(apiKey);
    if (m) return env[m[1]!] ? { key: env[m[1]!], how: `from $${m[1]}` } : { how: `$${m[1]} is not set here` };
    return { key: apiKey, how: "from openclaw.json" };
  }
  if (isObject(apiKey) && apiKey.source === "env" && typeof apiKey.id === "string") {
    return env[apiKey.id]
      ? { key: env[apiKey.id], how: `from $${apiKey.id}` }
      : { how: `$${apiKey.id} is not set here` };
  }
  if (apiKey === undefined) return { how: "no apiKey configured" };
  return { how: "a secret reference this command cannot resolve" };
}

async function getJson(
  url: string,
  timeoutMs: number,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  return { status: res.status, body };
}

function describeFetchError(err: unknown): string {
  const e = err as { cause?: { code?: string; message?: string }; name?: string; message?: string };
  const code = e.cause?.code;
  if (code === "ECONNREFUSED") return "connection refused (nothing listens there)";
  if (e.name === "TimeoutError" || e.name === "AbortError") return "no answer in time";
  return code ? `${code}: ${e.cause?.message ?? ""}`.trim() : (e.message ?? String(err));
}

/** Probe a bridge: GET <origin>/health, then GET <origin>/v1/models with the key (any api kind's baseUrl). */
export async function probeBridge(baseUrl: string, apiKey: string | undefined, timeoutMs = 3000): Promise<BridgeProbe> {
  const origin = bridgeOrigin(baseUrl);
  let health: { status: number; body: unknown };
  try {
    health = await getJson(`${origin}/health`, timeoutMs);
  } catch (err) {
    return { running: false, isClawbridge: false, error: describeFetchError(err) };
  }
  const body = isObject(health.body) ? health.body : {};
  const probe: BridgeProbe = {
    running: true,
    isClawbridge: body.name === "clawbridge",
    ...(typeof body.version === "string" ? { version: body.version } : {}),
    ...(typeof body.status === "string" ? { status: body.status } : {}),
  };
  if (!probe.isClawbridge) {
    probe.error = `GET ${origin}/health answered HTTP ${health.status} but not as a clawbridge`;
    return probe;
  }
  const modelsUrl = `${origin}/v1/models`;
  try {
    const models = await getJson(modelsUrl, timeoutMs, apiKey ? { authorization: `Bearer ${apiKey}` } : {});
    probe.modelsStatus = models.status;
    const data = isObject(models.body) && Array.isArray(models.body.data) ? models.body.data : undefined;
    if (models.status === 200 && data) probe.models = data.map((m) => String((m as { id?: unknown }).id));
  } catch (err) {
    probe.error = `GET ${modelsUrl} failed: ${describeFetchError(err)}`;
  }
  return probe;
}

function pickProviderId(paths: OpenClawPaths, explicit?: string): string {
  if (explicit) return explicit;
  const ids = Object.keys(readMarker(paths).installs);
  return ids.length === 1 ? ids[0]! : DEFAULT_PROVIDER_ID;
}

export async function openclawStatus(opts: StatusOptions): Promise<OpenClawStatusReport> {
  const { paths } = opts;
  const env = opts.env ?? process.env;
  const providerId = pickProviderId(paths, opts.providerId);
  const timeoutMs = opts.timeoutMs ?? 3000;
  const findings: Finding[] = [];
  const report: OpenClawStatusReport = { ok: true, providerId, configPath: paths.configPath, findings };
  const done = () => {
    report.ok = !findings.some((f) => f.status === "fail");
    return report;
  };
  let apiFlag = "";
  const installFix = () =>
    `clawbridge openclaw install${opts.config && opts.config.source !== "embedded defaults" ? ` --config ${opts.config.source}` : ""}${providerId !== DEFAULT_PROVIDER_ID ? ` --provider-id ${providerId}` : ""}${apiFlag}`;

  let text: string;
  try {
    text = readFileSync(paths.configPath, "utf8");
  } catch {
    findings.push({
      id: "openclaw:config",
      status: opts.notSetUpIs ?? "fail",
      title: `OpenClaw config: not found at ${paths.configPath}`,
      detail: "looked at --openclaw-home, else $OPENCLAW_CONFIG_PATH / $OPENCLAW_STATE_DIR / ~/.openclaw",
      fix: `${installFix()} (creates it), or point --openclaw-home at OpenClaw's directory`,
    });
    return done();
  }
  let cfg: Record<string, unknown>;
  try {
    cfg = Json5Doc.parse(text).toJSON();
  } catch (err) {
    findings.push({
      id: "openclaw:config",
      status: "fail",
      title: `OpenClaw config: cannot be parsed`,
      detail: `${paths.configPath}: ${err instanceof Json5SyntaxError ? err.message : String(err)}`,
      fix: "fix the syntax error (openclaw config validate shows it)",
    });
    return done();
  }
  const providers = isObject(cfg.models) && isObject(cfg.models.providers) ? cfg.models.providers : {};
  const entry = providers[providerId];
  if (!isObject(entry)) {
    const others = Object.keys(providers);
    findings.push({
      id: "openclaw:provider",
      status: opts.notSetUpIs ?? "fail",
      title: `OpenClaw provider "${providerId}": not configured`,
      detail: `${paths.configPath} has no models.providers.${providerId}${others.length ? ` (providers: ${others.join(", ")})` : ""}`,
      fix: installFix(),
    });
    return done();
  }
  const baseUrl = typeof entry.baseUrl === "string" ? entry.baseUrl : "";
  report.baseUrl = baseUrl;
  const providerModels = Array.isArray(entry.models) ? entry.models.filter(isObject) : [];
  const providerModelIds = providerModels.map((m) => String(m.id));
  // The door OpenClaw calls: one of the bridge's three kinds (unset means OpenClaw's default).
  const api = isApiKind(entry.api) ? entry.api : DEFAULT_API_KIND;
  if (api !== DEFAULT_API_KIND) apiFlag = ` --api ${api}`;
  findings.push({
    id: "openclaw:provider",
    status: baseUrl ? "ok" : "fail",
    title: `OpenClaw provider "${providerId}": ${baseUrl || "no baseUrl"}`,
    detail: `${paths.configPath}: ${providerModelIds.length} model${providerModelIds.length === 1 ? "" : "s"} (${providerModelIds.join(", ") || "none"}), api ${String(entry.api ?? "(unset)")}, timeoutSeconds ${String(entry.timeoutSeconds ?? "(unset)")}`,
    ...(baseUrl ? {} : { fix: installFix() }),
  });
  if (entry.api !== undefined && !isApiKind(entry.api)) {
    findings.push({
      id: "openclaw:api",
      status: "fail",
      title: `OpenClaw provider "${providerId}": api is "${String(entry.api)}"`,
      detail: `the bridge answers ${OPENCLAW_API_KINDS.map((k) => `${k} (${API_KIND_PATH[k]})`).join(", ")}`,
      fix: `set api: "openai-completions" (or ${installFix()})`,
    });
  }
  if (!baseUrl) return done();

  // Against the bridge configuration (doctor, or status with --config).
  if (opts.config) {
    const expected = buildProviderEntry(opts.config, { api });
    if (baseUrl.replace(/\/+$/, "") !== expected.baseUrl) {
      findings.push({
        id: "openclaw:base-url",
        status: "fail",
        title: `OpenClaw calls ${baseUrl}, but this bridge's config listens on ${expected.baseUrl}`,
        detail: `bridge config: ${opts.config.source}`,
        fix: installFix(),
      });
    }
    if (opts.config.server.apiKeys.length) {
      const { key, how } = resolveApiKey(entry.apiKey, env);
      if (key !== undefined && !opts.config.server.apiKeys.includes(key)) {
        findings.push({
          id: "openclaw:api-key-config",
          status: "fail",
          title: "OpenClaw's apiKey is not one of the bridge's server.apiKeys",
          detail: `key ${how}`,
          fix: installFix(),
        });
      }
    }
    const expectedIds = expected.models.map((m) => m.id);
    const missing = expectedIds.filter((id) => !providerModelIds.includes(id));
    const unknown = providerModelIds.filter((id) => !expectedIds.includes(id));
    if (missing.length || unknown.length) {
      findings.push({
        id: "openclaw:models-config",
        status: unknown.length ? "fail" : "warn",
        title: "OpenClaw's model list differs from the bridge config",
        detail: [
          missing.length ? `not offered to OpenClaw: ${missing.join(", ")}` : "",
          unknown.length ? `not served by this bridge config: ${unknown.join(", ")}` : "",
        ]
          .filter(Boolean)
          .join("\n"),
        fix: installFix(),
      });
    }
    const compatIssues: string[] = [];
    const inputIssues: string[] = [];
    for (const em of expected.models) {
      const pm = providerModels.find((m) => m.id === em.id);
      if (!pm) continue;
      const compat = isObject(pm.compat) ? pm.compat : {};
      for (const [k, v] of Object.entries(em.compat ?? {})) {
        if (compat[k] !== v)
          compatIssues.push(
            `${em.id}: compat.${k} is ${JSON.stringify(compat[k] ?? null)}, should be ${JSON.stringify(v)}`,
          );
      }
      // Images: OpenClaw sends a person's photo only to a model whose input lists "image".
      const seesImages = Array.isArray(pm.input) && pm.input.includes("image");
      if (seesImages !== em.input.includes("image"))
        inputIssues.push(
          `${em.id}: input is ${JSON.stringify(pm.input ?? null)}, should be ${JSON.stringify(em.input)}${seesImages ? "" : " (OpenClaw does not send it images)"}`,
        );
    }
    if (inputIssues.length)
      findings.push({
        id: "openclaw:input",
        status: "warn",
        title: "OpenClaw's idea of which bridge models see images differs from the bridge config",
        detail: inputIssues.slice(0, 8).join("\n"),
        fix: installFix(),
      });
    findings.push(
      compatIssues.length
        ? {
            id: "openclaw:compat",
            status: "warn",
            title: "OpenClaw's compat flags for the bridge models differ from what the bridge needs",
            detail: `${compatIssues.slice(0, 8).join("\n")}${compatIssues.length > 8 ? `\n(${compatIssues.length - 8} more)` : ""}\nOpenClaw then sends fields the bridge must rewrite or drop (store, developer role, max_completion_tokens, strict)`,
            fix: installFix(),
          }
        : {
            id: "openclaw:compat",
            status: "ok",
            title: "OpenClaw's model entries and compat flags match the bridge config",
          },
    );
  }

  // The running bridge.
  const { key, how } = resolveApiKey(entry.apiKey, env);
  const probe = await probeBridge(baseUrl, key, timeoutMs);
  report.bridge = probe;
  const origin = bridgeOrigin(baseUrl);
  if (!probe.running) {
    findings.push({
      id: "bridge:running",
      status: "fail",
      title: `bridge at ${origin}: not running`,
      detail: `GET ${origin}/health: ${probe.error}`,
      fix: "start it: clawbridge serve (or run it as a service: clawbridge service install)",
    });
  } else if (!probe.isClawbridge) {
    findings.push({
      id: "bridge:running",
      status: "fail",
      title: `${origin} is not a clawbridge`,
      detail: probe.error,
      fix: `stop the other program or change the port (then ${installFix()})`,
    });
  } else {
    findings.push({
      id: "bridge:running",
      status: "ok",
      title: `bridge at ${origin}: running (clawbridge ${probe.version ?? "?"}, ${probe.status ?? "?"})`,
    });
    if (probe.modelsStatus === 401) {
      findings.push({
        id: "bridge:api-key",
        status: "fail",
        title: "the bridge rejects OpenClaw's apiKey (HTTP 401)",
        detail: `key ${how}`,
        fix: installFix(),
      });
    } else if (probe.models) {
      findings.push({ id: "bridge:api-key", status: "ok", title: `the bridge accepts OpenClaw's apiKey (${how})` });
      const notServed = providerModelIds.filter((id) => !probe.models!.includes(id));
      const notListed = probe.models.filter((id) => !providerModelIds.includes(id));
      findings.push(
        notServed.length || notListed.length
          ? {
              id: "bridge:models",
              status: notServed.length ? "fail" : "warn",
              title: "OpenClaw and the running bridge disagree on models",
              detail: [
                notServed.length ? `OpenClaw lists, the bridge does not serve: ${notServed.join(", ")}` : "",
                notListed.length ? `the bridge serves, OpenClaw does not list: ${notListed.join(", ")}` : "",
              ]
                .filter(Boolean)
                .join("\n"),
              fix: `${installFix()} (with the config the bridge runs), then restart the OpenClaw gateway`,
            }
          : { id: "bridge:models", status: "ok", title: `models agree (${providerModelIds.join(", ")})` },
      );
    } else {
      findings.push({
        id: "bridge:api-key",
        status: "warn",
        title: `GET ${origin}/v1/models answered HTTP ${probe.modelsStatus ?? "?"}`,
        detail: probe.error,
      });
    }
  }

  // The default model.
  const agents = isObject(cfg.agents) ? cfg.agents : {};
  const defaults = isObject(agents.defaults) ? agents.defaults : {};
  const primary =
    typeof defaults.model === "string"
      ? defaults.model
      : isObject(defaults.model) && typeof defaults.model.primary === "string"
        ? defaults.model.primary
        : undefined;
  const refs: Array<{ where: string; ref: string }> = [];
  if (primary) refs.push({ where: "agents.defaults", ref: primary });
  if (Array.isArray(agents.list)) {
    for (const a of agents.list) {
      if (!isObject(a)) continue;
      const r =
        typeof a.model === "string"
          ? a.model
          : isObject(a.model) && typeof a.model.primary === "string"
            ? a.model.primary
            : undefined;
      if (r) refs.push({ where: `agent ${String(a.id)}`, ref: r });
    }
  }
  const ours = refs.filter((r) => r.ref.startsWith(`${providerId}/`));
  for (const r of ours) {
    const model = r.ref.slice(providerId.length + 1);
    findings.push(
      providerModelIds.includes(model)
        ? { id: `openclaw:default:${r.where}`, status: "ok", title: `${r.where} uses ${r.ref}` }
        : {
            id: `openclaw:default:${r.where}`,
            status: "fail",
            title: `${r.where} uses ${r.ref}, which provider "${providerId}" does not list`,
            fix: `clawbridge openclaw install --set-default${r.where.startsWith("agent ") ? ` --agent ${r.where.slice(6)}` : ""}`,
          },
    );
  }
  if (!ours.length) {
    findings.push({
      id: "openclaw:default",
      status: "info",
      title: `no agent uses the bridge by default (default model: ${primary ?? "OpenClaw's built-in default"})`,
      detail: `pick it per session with /model ${providerId}/<model>, or: clawbridge openclaw install --set-default`,
    });
  }

  // Stale models.json.
  for (const f of inspectAllModelsJson(paths.stateDir, providerId, { baseUrl, apiKey: entry.apiKey }, cfg)) {
    if (f.state === "stale") {
      findings.push({
        id: `openclaw:models-json:${f.agent}`,
        status: "fail",
        title: `stale ${f.file}`,
        detail: `${f.reason}; in merge mode OpenClaw keeps that over openclaw.json`,
        fix: `${installFix()} (removes the stale entry, keeps a backup), or delete the file (OpenClaw regenerates it)`,
      });
    } else if (f.state === "unreadable") {
      findings.push({
        id: `openclaw:models-json:${f.agent}`,
        status: "warn",
        title: `unreadable ${f.file}`,
        detail: f.reason,
        fix: "delete it; OpenClaw regenerates it",
      });
    }
  }
  return done();
}
