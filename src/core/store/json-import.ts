/**
 * Import of older JSON session maps (e.g. the seed's `data/sessions.json`) and an atomic JSON export.
 *
 * Accepted shapes (all tolerant; a malformed entry is skipped with a reason, never fatal):
 * - empty file, `{}`, `{"sessions": []}`, `{"sessions": null}` → nothing to import
 * - `{"sessions": [entry, ...]}` or a bare `[entry, ...]`
 * - `{"sessions": {"<key>": entry}}` or a bare map `{"<key>": entry, ...}`
 * Entry field names: key ← key | openclawSessionKey | sessionKey | conversationKey | (map key);
 * backendSessionId ← backendSessionId | claudeSessionId | geminiSessionId | sessionId |
 * backend_session_id | session_id; cwd ← cwd | workspace | workspaceDir | workspacePath | workdir;
 * plus backend, model, turns | turnCount, createdAt | created_at | created, updatedAt | updated_at |
 * lastUsedAt | lastActivityAt, lastError. Timestamps may be epoch ms, epoch seconds (numbers below
 * 1e11) or ISO strings; in our own export (format "clawbridge-sessions") numbers are exact ms.
 *
 * A file that is not JSON, or JSON of the wrong top-level type, is a SessionImportError.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { SessionStoreError, validateBinding, type SessionBinding, type SessionStore } from "./types.js";

export interface ImportOptions {
  /** Backend name for entries that do not name one (e.g. "claude" for claudeSessionId entries). */
  backend?: string;
  /** cwd for entries that have none. Without it such entries are skipped (resume is tied to cwd). */
  defaultCwd?: string;
  /** Replace bindings that already exist in the store (default false: keep them, count as existing). */
  overwrite?: boolean;
  /** Clock for missing timestamps; default Date.now. */
  now?: () => number;
}

export interface ImportSkip {
  /** Where in the file: `sessions[3]`, `"agent:main:main"`, ... */
  entry: string;
  reason: string;
}

export interface ParsedSessions {
  /** Entries found (including the skipped ones). */
  total: number;
  bindings: SessionBinding[];
  skipped: ImportSkip[];
}

export interface ImportResult {
  total: number;
  imported: number;
  /** Valid entries whose key was already bound in the store (left untouched; overwrite=false). */
  existing: number;
  skipped: ImportSkip[];
}

export type SessionImportErrorCode = "ENOENT" | "READ" | "PARSE" | "SHAPE";

export class SessionImportError extends Error {
  constructor(
    message: string,
    readonly code: SessionImportErrorCode,
    readonly file?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "SessionImportError";
  }
}

/** `format` of files written by exportSessionsJson (their timestamps are read as exact ms). */
export const EXPORT_FORMAT = "clawbridge-sessions";

/** Top-level fields of a map-shaped file that describe the file, not a session. */
const META_FIELDS = new Set(["version", "schemaVersion", "format", "exportedAt", "updatedAt", "createdAt"]);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function pick(o: Obj, names: readonly string[]): unknown {
  for (const n of names) if (o[n] !== undefined && o[n] !== null && o[n] !== "") return o[n];
  return undefined;
}

function pickString(o: Obj, names: readonly string[], field: string): string | undefined {
  const v = pick(o, names);
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw new SessionStoreError(`${field} (${names.find((n) => o[n] === v)}) is not a string`);
  return v;
}

/**
 * Epoch ms from ms, seconds or an ISO string; undefined when absent or unusable. `exact`: numbers
 * are milliseconds as they are (our own export).
 */
function toEpochMs(v: unknown, exact: boolean): number | undefined {
  let n: number;
  if (typeof v === "number") n = v;
  else if (typeof v === "string" && v.trim() !== "") n = /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : Date.parse(v);
  else return undefined;
  if (!Number.isFinite(n) || n < 0) return undefined;
  if (!exact && n < 1e11) n *= 1000; // seconds (1e11 ms is 1973; 1e11 s is the year 5138)
  return Math.floor(n);
}

const KEY_FIELDS = ["key", "openclawSessionKey", "sessionKey", "conversationKey"] as const;
const ID_FIELDS = [
  "backendSessionId",
  "claudeSessionId",
  "geminiSessionId",
  "sessionId",
  "backend_session_id",
  "session_id",
] as const;
const CWD_FIELDS = ["cwd", "workspace", "workspaceDir", "workspacePath", "workdir"] as const;

function entryToBinding(
  raw: unknown,
  mapKey: string | undefined,
  opts: ImportOptions,
  now: number,
  exact: boolean,
): SessionBinding {
  if (!isObj(raw))
    throw new SessionStoreError(
      `entry is ${Array.isArray(raw) ? "an array" : raw === null ? "null" : `a ${typeof raw}`}, not an object`,
    );
  const key = pickString(raw, KEY_FIELDS, "key") ?? mapKey;
  if (key === undefined) throw new SessionStoreError(`no session key (${KEY_FIELDS.join(" / ")})`);
  const backendSessionId = pickString(raw, ID_FIELDS, "backendSessionId");
  if (backendSessionId === undefined) throw new SessionStoreError(`no backend session id (${ID_FIELDS.join(" / ")})`);
  const backend = pickString(raw, ["backend"], "backend") ?? opts.backend;
  if (backend === undefined)
    throw new SessionStoreError("no backend (the entry names none and no default backend was given)");
  const cwd = pickString(raw, CWD_FIELDS, "cwd") ?? opts.defaultCwd;
  if (cwd === undefined)
    throw new SessionStoreError(`no working directory (${CWD_FIELDS.join(" / ")}) and no defaultCwd`);
  const created = toEpochMs(pick(raw, ["createdAt", "created_at", "created"]), exact);
  const updated = toEpochMs(pick(raw, ["updatedAt", "updated_at", "lastUsedAt", "lastUsed", "lastActivityAt"]), exact);
  const turnsRaw = pick(raw, ["turns", "turnCount", "turn_count"]);
  const turns = typeof turnsRaw === "number" && Number.isSafeInteger(turnsRaw) && turnsRaw >= 0 ? turnsRaw : 0;
  const model = pick(raw, ["model"]);
  const lastError = pick(raw, ["lastError", "last_error"]);
  return validateBinding({
    key,
    backend,
    backendSessionId,
    cwd,
    turns,
    createdAt: created ?? updated ?? now,
    updatedAt: updated ?? created ?? now,
    model: typeof model === "string" ? model : null,
    lastError: typeof lastError === "string" ? lastError : null,
  });
}

/** Parses the text of a sessions JSON file into valid bindings and reasons for the rest. */
export function parseSessionsJson(text: string, opts: ImportOptions = {}, file?: string): ParsedSessions {
  const where = file ? `${file}: ` : "";
  const body = text.replace(/^\uFEFF/, "");
  if (body.trim() === "") return { total: 0, bindings: [], skipped: [] };
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (err) {
    throw new SessionImportError(`${where}not valid JSON (${(err as Error).message})`, "PARSE", file, { cause: err });
  }

  const entries: Array<{ label: string; mapKey?: string; value: unknown }> = [];
  const fromArray = (arr: unknown[], prefix: string): void => {
    arr.forEach((value, i) => entries.push({ label: `${prefix}[${i}]`, value }));
  };
  const fromMap = (map: Obj, topLevel: boolean): void => {
    for (const [k, value] of Object.entries(map)) {
      if (topLevel && META_FIELDS.has(k) && !isObj(value)) continue;
      entries.push({ label: JSON.stringify(k), mapKey: k, value });
    }
  };
  if (Array.isArray(doc)) fromArray(doc, "");
  else if (isObj(doc)) {
    if ("sessions" in doc) {
      const s = doc.sessions;
      if (Array.isArray(s)) fromArray(s, "sessions");
      else if (isObj(s)) fromMap(s, false);
      else if (s !== null && s !== undefined) {
        throw new SessionImportError(
          `${where}"sessions" must be an array or an object, got ${typeof s}`,
          "SHAPE",
          file,
        );
      }
    } else fromMap(doc, true);
  } else {
    throw new SessionImportError(
      `${where}expected a JSON object or array, got ${doc === null ? "null" : typeof doc}`,
      "SHAPE",
      file,
    );
  }

  const now = (opts.now ?? Date.now)();
  const exact = isObj(doc) && doc.format === EXPORT_FORMAT;
  const byKey = new Map<string, { b: SessionBinding; label: string }>();
  const skipped: ImportSkip[] = [];
  for (const e of entries) {
    let b: SessionBinding;
    try {
      b = entryToBinding(e.value, e.mapKey, opts, now, exact);
    } catch (err) {
      if (!(err instanceof SessionStoreError)) throw err;
      skipped.push({ entry: e.label, reason: err.message });
      continue;
    }
    const prev = byKey.get(b.key);
    if (prev && prev.b.updatedAt > b.updatedAt) {
      skipped.push({ entry: e.label, reason: `duplicate key "${b.key}"; kept the newer ${prev.label}` });
    } else {
      if (prev) skipped.push({ entry: prev.label, reason: `duplicate key "${b.key}"; kept the newer ${e.label}` });
      byKey.set(b.key, { b, label: e.label });
    }
  }
  return { total: entries.length, bindings: [...byKey.values()].map((v) => v.b), skipped };
}

/** Reads a sessions JSON file and writes its valid entries into the store. */
export async function importSessionsJson(
  store: SessionStore,
  file: string,
  opts: ImportOptions = {},
): Promise<ImportResult> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code === "ENOENT" ? "ENOENT" : "READ";
    throw new SessionImportError(`${file}: cannot read (${(err as Error).message})`, code, file, { cause: err });
  }
  const parsed = parseSessionsJson(text, opts, file);
  const result: ImportResult = { total: parsed.total, imported: 0, existing: 0, skipped: parsed.skipped };
  for (const b of parsed.bindings) {
    if (!opts.overwrite && (await store.get(b.key))) {
      result.existing++;
      continue;
    }
    await store.put(b);
    await store.appendEvent(b.key, "imported", `from ${file}`);
    result.imported++;
  }
  return result;
}

/**
 * Writes a file so that readers see the old or the new content, never a mix, also across a crash:
 * temp file in the same directory (mode 0600 unless given), fsync, rename over, fsync the directory.
 */
export async function writeFileAtomic(
  file: string,
  data: string | Uint8Array,
  opts: { mode?: number } = {},
): Promise<void> {
  const target = path.resolve(file);
  const dir = path.dirname(target);
  const tmp = path.join(dir, `.${path.basename(target)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
  const fh = await open(tmp, "wx", opts.mode ?? 0o600);
  try {
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, target);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  // Make the rename itself durable. Not every platform lets a directory be opened/fsynced.
  try {
    const d = await open(dir, "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    /* best effort */
  }
}

/** Writes every binding (most recently updated first) as JSON that importSessionsJson reads back. */
export async function exportSessionsJson(store: SessionStore, file: string): Promise<{ count: number }> {
  const sessions = await store.list();
  const doc = { format: EXPORT_FORMAT, version: 1, exportedAt: new Date().toISOString(), sessions };
  await mkdir(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
  await writeFileAtomic(file, `${JSON.stringify(doc, null, 2)}\n`);
  return { count: sessions.length };
}
