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
 *
 * Here: install. Uninstall is in uninstall.ts, the steps both take in edit-steps.ts, the record in
 * install-record.ts.
 */
import type { Config } from "../../core/config/schema.js";
import { deepEqual, formatJsonPath, type JsonPath } from "./json5-doc.js";
import { inspectAllModelsJson } from "./models-json.js";
import {
  buildProviderEntry,
  DEFAULT_PROVIDER_ID,
  modelRef,
  type OpenClawPaths,
  type OpenClawProviderEntry,
  type ProviderEntryOptions,
} from "./provider.js";
import { unifiedDiff } from "./config-diff.js";
import {
  applyWrite,
  assertNoIncludeOnPath,
  checkWithOpenClaw,
  defaultModelTarget,
  fixModelsJson,
  type ModelsJsonAction,
  OpenClawSetupError,
  parseDoc,
  providerPath,
  readConfigText,
} from "./edit-steps.js";
import { type DefaultModelRecord, entryHash, type InstallRecord, readMarker, writeMarker } from "./install-record.js";
import { openclawVersionOf, type ValidationResult, type Validator } from "./validate.js";

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
      const apiIssue = validation.issues.find((i) => i.path === [...pPath, "api"].join("."));
      if (apiIssue) {
        const version = openclawVersionOf(validation.bin);
        notes.push(
          `OpenClaw ${version ?? "(this version)"} does not accept api "${entry.api}" (${apiIssue.message}); OpenClaw 2026.5.x and 2026.9.x accept openai-completions, openai-responses and anthropic-messages: update OpenClaw, or install with --api openai-completions`,
        );
      }
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
