/**
 * The steps install and uninstall share on OpenClaw's config: read and parse it (a problem the
 * user must fix is an `OpenClawSetupError`), refuse `$include` on the keys we own, find where a
 * default model lives, check the new text with OpenClaw on a candidate file next to the config,
 * back up and write, and remove stale entries of our provider from models.json files.
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { backupName } from "./config-diff.js";
import { copyFileKeepMode, fileMode, writeFileAtomic } from "./fsutil.js";
import { formatJsonPath, Json5Doc, Json5SyntaxError, type JsonPath } from "./json5-doc.js";
import { removeProviderFromModelsJson, type ModelsJsonFinding } from "./models-json.js";
import type { OpenClawPaths } from "./provider.js";
import type { ValidationResult, Validator } from "./validate.js";

/** A problem the user must fix (bad file, unknown agent...): the CLI prints the message, exit 2. */
export class OpenClawSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OpenClawSetupError";
  }
}

export const providerPath = (id: string): JsonPath => ["models", "providers", id];

export function readConfigText(paths: OpenClawPaths): { text: string; existed: boolean } {
  try {
    return { text: readFileSync(paths.configPath, "utf8"), existed: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { text: "", existed: false };
    throw new OpenClawSetupError(`cannot read ${paths.configPath}: ${(err as Error).message}`);
  }
}

export function parseDoc(paths: OpenClawPaths, text: string): Json5Doc {
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
export function assertNoIncludeOnPath(doc: Json5Doc, paths: OpenClawPaths, p: JsonPath): void {
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
export function defaultModelTarget(
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

export interface ModelsJsonAction extends ModelsJsonFinding {
  action: "none" | "removed-entry" | "would-remove-entry" | "left-unreadable";
  backup?: string;
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

export async function checkWithOpenClaw(
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

export function applyWrite(paths: OpenClawPaths, existed: boolean, after: string, now: Date): string | undefined {
  mkdirSync(path.dirname(paths.configPath), { recursive: true, mode: 0o700 });
  let backup: string | undefined;
  if (existed) {
    backup = backupName(paths.configPath, now);
    copyFileKeepMode(paths.configPath, backup);
  }
  writeFileAtomic(paths.configPath, after, existed ? fileMode(paths.configPath) : 0o600);
  return backup;
}

export function fixModelsJson(
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
