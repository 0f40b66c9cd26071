/**
 * `clawbridge openclaw install | uninstall`: add, update and remove the bridge's provider entry in
 * OpenClaw's config, touching only the keys we own:
 *
 *   models.providers.<id>                          (the provider entry; key by key on update)
 *   agents.defaults.model(.primary)                (only with --set-default)
 *   agents.list[id=<agent>].model(.primary)        (only with --set-default --agent <agent>)
 *
 * The file is edited as text through a lossless JSON5 tree (comments, formatting and every other
 * key keep their exact bytes). Before a write: the new text is checked with OpenClaw's own
 * `openclaw config validate --json` (when the CLI is available) on a candidate file next to the
 * config, so an invalid config never replaces a good one; the old file is copied to
 * `openclaw.json.bak-<time>`. What install added (and what it replaced) is recorded in
 * `<stateDir>/.clawbridge-install.json`, so uninstall removes exactly that and nothing else.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import type { Config } from "../../core/config/schema.js";
import { copyFileKeepMode, fileMode, writeFileAtomic } from "./fsutil.js";
import { deepEqual, formatJsonPath, Json5Doc, Json5SyntaxError, type JsonPath } from "./json5-doc.js";
import { inspectAllModelsJson, removeProviderFromModelsJson, type ModelsJsonFinding } from "./models-json.js";
import {
  buildProviderEntry,
  DEFAULT_PROVIDER_ID,
  modelRef,
  type OpenClawPaths,
  type OpenClawProviderEntry,
  type ProviderEntryOptions,
} from "./provider.js";
import { backupName, unifiedDiff } from "./config-diff.js";
import type { ValidationResult, Validator } from "./validate.js";

/** A problem the user must fix (bad file, unknown agent...): the CLI prints the message, exit 2. */
export class OpenClawSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OpenClawSetupError";
  }
}

export interface DefaultModelRecord {
  /** Agent id in agents.list; absent = agents.defaults. */
  agent?: string;
  /** `primary`: we set `<model>.primary`; `string`: `model` was a plain string and we replaced it. */
  form: "primary" | "string";
  /** The ref we wrote (`<provider>/<model>`). */
  value: string;
  /** What was there before (null: nothing). Restored by uninstall if our value is still in place. */
  previous: string | null;
  /** Objects created to hold it (removed again when empty). */
  createdParents: JsonPath[];
}

export interface InstallRecord {
  providerId: string;
  configPath: string;
  installedAt: string;
  updatedAt: string;
  /** sha256 of the provider entry as written (canonical JSON), to notice later hand edits. */
  entrySha256: string;
  baseUrl: string;
  models: string[];
  /** Objects install created (e.g. `models`, `models.providers`), removed by uninstall when empty. */
  createdParents: JsonPath[];
  /** Default models install set (one per target). */
  defaultModels?: DefaultModelRecord[];
  /** The bridge config the entry was built from. */
  bridgeConfig?: string;
}

export interface InstallMarker {
  version: 1;
  installs: Record<string, InstallRecord>;
}

export function readMarker(paths: OpenClawPaths): InstallMarker {
  try {
    const data = JSON.parse(readFileSync(paths.markerPath, "utf8")) as InstallMarker;
    if (data && data.version === 1 && data.installs && typeof data.installs === "object") return data;
  } catch {
    /* none or unreadable: treated as none */
  }
  return { version: 1, installs: {} };
}

function writeMarker(paths: OpenClawPaths, marker: InstallMarker): void {
  if (!Object.keys(marker.installs).length) {
    rmSync(paths.markerPath, { force: true });
    return;
  }
  writeFileAtomic(paths.markerPath, `${JSON.stringify(marker, null, 2)}\n`, 0o600);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

export function entryHash(entry: unknown): string {
  return createHash("sha256").update(canonical(entry)).digest("hex");
}

const providerPath = (id: string): JsonPath => ["models", "providers", id];

function readConfigText(paths: OpenClawPaths): { text: string; existed: boolean } {
  try {
    return { text: readFileSync(paths.configPath, "utf8"), existed: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { text: "", existed: false };
    throw new OpenClawSetupError(`cannot read ${paths.configPath}: ${(err as Error).message}`);
  }
}

function parseDoc(paths: OpenClawPaths, text: string): Json5Doc {
  try {
    return Json5Doc.parse(text);
  } catch (err) {
    if (err instanceof Json5SyntaxError) {
      throw new OpenClawSetupError(
        `${paths.configPath} is not valid JSON5: ${err.message}. Fix it first (openclaw config validate shows the problem); nothing was changed.`,
      );
    }
    throw err;
  }
}

/** `$include` on our path would merge another file over what we write: refuse instead of guessing. */
function assertNoIncludeOnPath(doc: Json5Doc, paths: OpenClawPaths, p: JsonPath): void {
  for (let i = 1; i <= p.length; i++) {
    const v = doc.get(p.slice(0, i));
    if (v && typeof v === "object" && !Array.isArray(v) && "$include" in v) {
      throw new OpenClawSetupError(
        `${paths.configPath}: ${formatJsonPath(p.slice(0, i))} uses $include; clawbridge does not edit included files. Add the provider entry there by hand (see: clawbridge openclaw install --dry-run --json).`,
      );
    }
  }
}

/** Where the default model lives for `agent` (undefined: agents.defaults). */
function defaultModelTarget(
  doc: Json5Doc,
  agent: string | undefined,
): { path: JsonPath; form: "primary" | "string" } | { error: string } {
  let base: JsonPath;
  if (agent === undefined) base = ["agents", "defaults", "model"];
  else {
    const list = doc.get(["agents", "list"]);
    const ids = Array.isArray(list)
      ? list.map((a) => (a && typeof a === "object" ? (a as { id?: unknown }).id : undefined))
      : [];
    const i = ids.indexOf(agent);
    if (i < 0) {
      const known = ids.filter((x): x is string => typeof x === "string");
      return {
        error: `no agent "${agent}" in agents.list${known.length ? ` (agents: ${known.join(", ")})` : " (the config lists no agents)"}; leave out --agent to set agents.defaults.model`,
      };
    }
    base = ["agents", "list", i, "model"];
  }
  const cur = doc.get(base);
  if (typeof cur === "string") return { path: base, form: "string" };
  if (cur !== undefined && (typeof cur !== "object" || cur === null || Array.isArray(cur)))
    return { error: `${formatJsonPath(base)} is neither a string nor an object` };
  return { path: [...base, "primary"], form: "primary" };
}

export interface InstallOptions {
  config: Config;
  paths: OpenClawPaths;
  providerId?: string;
  entry?: ProviderEntryOptions;
  /** Set the default model: agents.defaults (or `agent`'s) model.primary. */
  setDefault?: boolean;
  agent?: string;
  /** Bridge model id for --set-default (default: the first configured model). */
  model?: string;
  dryRun?: boolean;
  /** null/undefined: not validated. */
  validate?: Validator | null;
  now?: Date;
}

export interface ModelsJsonAction extends ModelsJsonFinding {
  action: "none" | "removed-entry" | "would-remove-entry" | "left-unreadable";
  backup?: string;
}

export interface InstallResult {
  ok: boolean;
  dryRun: boolean;
  /** The config text changed (or would change, in a dry run). */
  changed: boolean;
  configPath: string;
  created: boolean;
  diff: string;
  backupPath?: string;
  providerId: string;
  /** The entry written, apiKey masked. */
  entry: OpenClawProviderEntry;
  defaultModel?: string;
  modelsJson: ModelsJsonAction[];
  validation?: ValidationResult;
  notes: string[];
}

function maskedEntry(entry: OpenClawProviderEntry): OpenClawProviderEntry {
  return { ...entry, apiKey: entry.apiKey === "clawbridge-local" ? entry.apiKey : "<redacted>" };
}

/**
 * Validate `text` as OpenClaw would read it at `paths.configPath`, using a candidate file in the
 * same directory (so relative `$include`s resolve the same). Returns undefined when not validated.
 */
async function validateCandidate(paths: OpenClawPaths, text: string, validate: Validator): Promise<ValidationResult> {
  const candidate = path.join(
    path.dirname(paths.configPath),
    `.${path.basename(paths.configPath)}.clawbridge-check-${process.pid}.json`,
  );
  writeFileAtomic(candidate, text, 0o600);
  try {
    return await validate({ ...paths, configPath: candidate });
  } finally {
    rmSync(candidate, { force: true });
  }
}

/** Issues that are not about keys we wrote (the config was already invalid there). */
function issuesOutside(result: ValidationResult, ours: JsonPath[]): boolean {
  const prefixes = ours.map((p) => p.map(String).join("."));
  return result.issues.every((i) => !prefixes.some((pre) => i.path === pre || i.path.startsWith(`${pre}.`)));
}

async function checkWithOpenClaw(
  paths: OpenClawPaths,
  before: string,
  after: string,
  validate: Validator,
  ours: JsonPath[],
  notes: string[],
): Promise<{ validation: ValidationResult; refuse: boolean }> {
  const validation = await validateCandidate(paths, after, validate);
  if (!validation.ran) {
    notes.push(`not validated: ${validation.detail}`);
    return { validation, refuse: false };
  }
  if (validation.valid) return { validation, refuse: false };
  // Was it already invalid before our change, for reasons that are not ours?
  if (before.trim() && issuesOutside(validation, ours)) {
    const old = await validateCandidate(paths, before, validate);
    if (old.ran && old.valid === false) {
      notes.push(
        `your OpenClaw config was already invalid before this change (${old.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}); fix that too`,
      );
      return { validation, refuse: false };
    }
  }
  return { validation, refuse: true };
}

function applyWrite(paths: OpenClawPaths, existed: boolean, after: string, now: Date): string | undefined {
  mkdirSync(path.dirname(paths.configPath), { recursive: true, mode: 0o700 });
  let backup: string | undefined;
  if (existed) {
    backup = backupName(paths.configPath, now);
    copyFileKeepMode(paths.configPath, backup);
  }
  writeFileAtomic(paths.configPath, after, existed ? fileMode(paths.configPath) : 0o600);
  return backup;
}

function fixModelsJson(
  findings: ModelsJsonFinding[],
  providerId: string,
  dryRun: boolean,
  now: Date,
): ModelsJsonAction[] {
  return findings.map((f) => {
    if (f.state === "stale") {
      if (dryRun) return { ...f, action: "would-remove-entry" as const };
      const backup = removeProviderFromModelsJson(f.file, providerId, now);
      return { ...f, action: "removed-entry" as const, backup };
    }
    if (f.state === "unreadable") return { ...f, action: "left-unreadable" as const };
    return { ...f, action: "none" as const };
  });
}

export async function installOpenClaw(opts: InstallOptions): Promise<InstallResult> {
  const { config, paths } = opts;
  const providerId = opts.providerId ?? DEFAULT_PROVIDER_ID;
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(providerId))
    throw new OpenClawSetupError(`provider id "${providerId}" must use letters, digits, . _ - (no slash)`);
  const now = opts.now ?? new Date();
  const notes: string[] = [];
  const { text: before, existed } = readConfigText(paths);
  const doc = parseDoc(paths, before);
  const pPath = providerPath(providerId);
  assertNoIncludeOnPath(doc, paths, pPath);

  const entry = buildProviderEntry(config, opts.entry);
  const marker = readMarker(paths);
  const prevRecord = marker.installs[providerId];
  const existing = doc.get(pPath);

  // The provider entry: whole when new, key by key when present (keys the user added stay).
  let createdParents: JsonPath[] = [];
  if (existing === undefined || typeof existing !== "object" || existing === null || Array.isArray(existing)) {
    if (existing !== undefined) notes.push(`${formatJsonPath(pPath)} was not an object; replaced`);
    createdParents = doc.set(pPath, entry).created;
  } else {
    if (!prevRecord)
      notes.push(
        `${formatJsonPath(pPath)} already existed (not added by clawbridge); updated its baseUrl, apiKey, api, timeoutSeconds and models`,
      );
    else if (entryHash(existing) !== prevRecord.entrySha256)
      notes.push(
        `${formatJsonPath(pPath)} was edited since the last install; clawbridge's keys were rewritten, other keys kept`,
      );
    for (const [k, v] of Object.entries(entry)) doc.set([...pPath, k], v);
  }
  const writtenEntry = doc.get(pPath);

  // The default model: one record per target (agents.defaults, or an agent of agents.list).
  const defaultRecords: DefaultModelRecord[] = [...(prevRecord?.defaultModels ?? [])];
  let defaultRef: string | undefined;
  let defaultPath: JsonPath | undefined;
  if (opts.setDefault) {
    const modelId = opts.model ?? config.models[0]!.id;
    if (!config.models.some((m) => m.id === modelId)) {
      throw new OpenClawSetupError(
        `--model ${modelId}: not a model of this bridge (models: ${config.models.map((m) => m.id).join(", ")})`,
      );
    }
    defaultRef = modelRef(providerId, modelId);
    const target = defaultModelTarget(doc, opts.agent);
    if ("error" in target) throw new OpenClawSetupError(target.error);
    assertNoIncludeOnPath(doc, paths, target.path.slice(0, -1));
    defaultPath = target.path;
    const cur = doc.get(target.path);
    const previous = typeof cur === "string" ? cur : null;
    const i = defaultRecords.findIndex((r) => r.agent === opts.agent);
    const old = i >= 0 ? defaultRecords[i] : undefined;
    const res = doc.set(target.path, defaultRef);
    const rec: DefaultModelRecord = {
      ...(opts.agent !== undefined ? { agent: opts.agent } : {}),
      form: target.form,
      value: defaultRef,
      // Re-setting over our own earlier value keeps what the user had before the first install.
      previous: old && previous === old.value ? old.previous : previous,
      createdParents: old && !res.created.length ? old.createdParents : res.created,
    };
    if (i >= 0) defaultRecords[i] = rec;
    else defaultRecords.push(rec);
    const allow = doc.get(["agents", "defaults", "models"]);
    if (
      allow &&
      typeof allow === "object" &&
      !Array.isArray(allow) &&
      Object.keys(allow).length &&
      !(defaultRef in allow)
    ) {
      notes.push(
        `agents.defaults.models is an allowlist without "${defaultRef}"; add it there to switch models with /model`,
      );
    }
  }

  const after = doc.toString();
  const changed = after !== before;
  const diff = unifiedDiff(paths.configPath, before, after);
  const modelsFindings = inspectAllModelsJson(
    paths.stateDir,
    providerId,
    { baseUrl: entry.baseUrl, apiKey: entry.apiKey },
    doc.toJSON(),
  );

  const result: InstallResult = {
    ok: true,
    dryRun: !!opts.dryRun,
    changed,
    configPath: paths.configPath,
    created: !existed,
    diff,
    providerId,
    entry: maskedEntry(entry),
    ...(defaultRef ? { defaultModel: defaultRef } : {}),
    modelsJson: [],
    notes,
  };

  if (opts.validate && (changed || opts.dryRun)) {
    const ours: JsonPath[] = [pPath, ...(defaultPath ? [defaultPath] : [])];
    const { validation, refuse } = await checkWithOpenClaw(paths, before, after, opts.validate, ours, notes);
    result.validation = validation;
    if (refuse) {
      result.ok = false;
      result.modelsJson = modelsFindings.map((f) => ({ ...f, action: "none" as const }));
      notes.push(`OpenClaw rejects the new config, so ${paths.configPath} was NOT changed: ${validation.detail}`);
      return result;
    }
  } else if (!opts.validate) {
    notes.push("not validated with OpenClaw (openclaw CLI not found; give --openclaw-bin to check)");
  }

  result.modelsJson = fixModelsJson(modelsFindings, providerId, !!opts.dryRun, now);
  if (opts.dryRun) return result;

  if (changed) result.backupPath = applyWrite(paths, existed, after, now);
  const record: InstallRecord = {
    providerId,
    configPath: paths.configPath,
    installedAt: prevRecord?.installedAt ?? now.toISOString(),
    updatedAt: changed || !prevRecord ? now.toISOString() : prevRecord.updatedAt,
    entrySha256: entryHash(writtenEntry),
    baseUrl: entry.baseUrl,
    models: entry.models.map((m) => m.id),
    createdParents: prevRecord && !createdParents.length ? prevRecord.createdParents : createdParents,
    ...(defaultRecords.length ? { defaultModels: defaultRecords } : {}),
    ...(config.source !== "embedded defaults" ? { bridgeConfig: config.source } : {}),
  };
  if (!prevRecord || !deepEqual(prevRecord, record)) {
    marker.installs[providerId] = record;
    writeMarker(paths, marker);
  }
  return result;
}

export interface UninstallOptions {
  paths: OpenClawPaths;
  providerId?: string;
  dryRun?: boolean;
  /** Remove the provider entry even without an install record. */
  force?: boolean;
  validate?: Validator | null;
  now?: Date;
  /** Without an install record: the entry install would write; an equal entry is removed. */
  expectedEntry?: OpenClawProviderEntry;
}

export interface UninstallResult {
  ok: boolean;
  dryRun: boolean;
  changed: boolean;
  configPath: string;
  diff: string;
  backupPath?: string;
  providerId: string;
  removedProvider: boolean;
  /** Default-model settings put back to what they were before install. */
  restoredDefaults: Array<{ path: string; to: string | null }>;
  modelsJson: ModelsJsonAction[];
  validation?: ValidationResult;
  notes: string[];
}

export async function uninstallOpenClaw(opts: UninstallOptions): Promise<UninstallResult> {
  const { paths } = opts;
  const providerId = opts.providerId ?? DEFAULT_PROVIDER_ID;
  const now = opts.now ?? new Date();
  const notes: string[] = [];
  const { text: before, existed } = readConfigText(paths);
  const marker = readMarker(paths);
  const record = marker.installs[providerId];
  const result: UninstallResult = {
    ok: true,
    dryRun: !!opts.dryRun,
    changed: false,
    configPath: paths.configPath,
    diff: "",
    providerId,
    removedProvider: false,
    restoredDefaults: [],
    modelsJson: [],
    notes,
  };
  if (!existed) notes.push(`${paths.configPath} does not exist`);
  const doc = parseDoc(paths, before);
  const pPath = providerPath(providerId);
  const existing = doc.get(pPath);

  if (existing !== undefined) {
    let remove = true;
    if (record) {
      if (entryHash(existing) !== record.entrySha256)
        notes.push(
          `${formatJsonPath(pPath)} was changed since clawbridge installed it; removing it anyway (only that key)`,
        );
    } else if (opts.expectedEntry && deepEqual(existing, opts.expectedEntry)) {
      notes.push(`no install record, but ${formatJsonPath(pPath)} is exactly what install writes; removing it`);
    } else if (opts.force) {
      notes.push(`no install record for "${providerId}"; removing ${formatJsonPath(pPath)} because of --force`);
    } else {
      remove = false;
      result.ok = false;
      notes.push(
        `${formatJsonPath(pPath)} was not added by clawbridge (no record in ${paths.markerPath}) and differs from what install writes; left alone (use --force to remove it)`,
      );
    }
    if (remove) {
      doc.delete(pPath);
      result.removedProvider = true;
      for (const p of [...(record?.createdParents ?? [])].reverse()) doc.deleteIfEmptyObject(p);
    }
  } else if (existed) {
    notes.push(`${formatJsonPath(pPath)} is not in the config (already removed?)`);
  }

  // Default models: each restored only when it still points where we set it.
  for (const dm of record?.defaultModels ?? []) {
    const target = defaultModelTarget(doc, dm.agent);
    const where = dm.agent ? `agent ${dm.agent}'s model` : "agents.defaults.model";
    if ("error" in target) notes.push(`${where}: ${target.error}; left as it is`);
    else if (doc.get(target.path) !== dm.value)
      notes.push(`${where} no longer points at ${dm.value} (you changed it); left as it is`);
    else {
      if (dm.previous === null && target.form === "primary") {
        doc.delete(target.path);
        for (const p of [...dm.createdParents].reverse()) doc.deleteIfEmptyObject(p);
      } else {
        doc.set(target.path, dm.previous);
      }
      result.restoredDefaults.push({ path: formatJsonPath(target.path), to: dm.previous });
    }
  }
  // Anything else that still names our provider is the user's; say so.
  const refs = collectModelRefs(doc.toJSON(), providerId);
  if (refs.length) notes.push(`still referring to provider "${providerId}" (edit these yourself): ${refs.join(", ")}`);

  const after = doc.toString();
  result.changed = after !== before;
  result.diff = unifiedDiff(paths.configPath, before, after);
  const findings = inspectAllModelsJson(paths.stateDir, providerId, undefined, doc.toJSON());

  if (opts.validate && result.changed) {
    const { validation, refuse } = await checkWithOpenClaw(paths, before, after, opts.validate, [pPath], notes);
    result.validation = validation;
    if (refuse) {
      result.ok = false;
      result.modelsJson = findings.map((f) => ({ ...f, action: "none" as const }));
      notes.push(
        `OpenClaw rejects the config without the provider, so ${paths.configPath} was NOT changed: ${validation.detail}`,
      );
      return result;
    }
  }
  result.modelsJson = fixModelsJson(findings, providerId, !!opts.dryRun, now);
  if (opts.dryRun) return result;
  if (result.changed) result.backupPath = applyWrite(paths, existed, after, now);
  if (record && (result.removedProvider || existing === undefined)) {
    delete marker.installs[providerId];
    writeMarker(paths, marker);
  }
  return result;
}

/** Places (other than the provider entry) whose model ref starts with `<providerId>/`. */
export function collectModelRefs(cfg: Record<string, unknown>, providerId: string): string[] {
  const out: string[] = [];
  const prefix = `${providerId}/`;
  const walk = (v: unknown, p: JsonPath) => {
    if (p.length >= 2 && p[0] === "models" && p[1] === "providers") return;
    if (typeof v === "string") {
      if (
        v.startsWith(prefix) &&
        p.some((s) => s === "model" || s === "primary" || s === "fallbacks" || s === "models")
      )
        out.push(formatJsonPath(p));
      return;
    }
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...p, i]));
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (p[p.length - 1] === "models" && k.startsWith(prefix)) out.push(formatJsonPath([...p, k]));
        walk(x, [...p, k]);
      }
    }
  };
  walk(cfg, []);
  return out;
}
