/**
 * `clawbridge openclaw uninstall`: remove what install added to OpenClaw's config, as recorded in
 * `<stateDir>/.clawbridge-install.json` (without a record, only an entry exactly as install writes
 * it, or with --force), put default models back where they still point at ours, and name the
 * places that still refer to our provider (the user's to edit). Checked with OpenClaw and backed
 * up before the write, as install does.
 */
import { deepEqual, formatJsonPath, type JsonPath } from "./json5-doc.js";
import { inspectAllModelsJson } from "./models-json.js";
import { DEFAULT_PROVIDER_ID, type OpenClawPaths, type OpenClawProviderEntry } from "./provider.js";
import { unifiedDiff } from "./config-diff.js";
import {
  applyWrite,
  checkWithOpenClaw,
  defaultModelTarget,
  fixModelsJson,
  type ModelsJsonAction,
  parseDoc,
  providerPath,
  readConfigText,
} from "./edit-steps.js";
import { entryHash, readMarker, writeMarker } from "./install-record.js";
import type { ValidationResult, Validator } from "./validate.js";

export interface UninstallOptions {
  paths: OpenClawPaths;
  providerId?: string;
  dryRun?: boolean;
  /** Remove the provider entry even without an install record. */
  force?: boolean;
  validate?: Validator | null;
  now?: Date;
  /** Without an install record: the entry install would write; an equal entry is removed. */
  /** What install would write (one per api kind), to recognise an entry when there is no record. */
  expectedEntry?: OpenClawProviderEntry | OpenClawProviderEntry[];
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
    } else if ([opts.expectedEntry ?? []].flat().some((e) => deepEqual(existing, e))) {
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
