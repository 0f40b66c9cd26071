/**
 * What a sandbox path may be, before the disk is touched, and the sandbox's limits and errors (the
 * Sandbox itself is in sandbox.ts). Every path given here is UNTRUSTED: it comes out of a model.
 *
 * Path rules (see `normalizeRel`):
 * - a path must be a non-empty string, relative to the sandbox, with `/` as separator;
 * - refused with `invalid_path`: absolute paths (`/x`, `\x`, `C:\x`, `C:x` — the message says "use a
 *   path relative to the sandbox"), NUL and other control characters, backslashes, a component longer
 *   than 255 bytes, more than `maxDepth` components;
 * - refused with `escape`: any `..` component (after splitting on both `/` and `\`), even one that
 *   would stay inside (`a/../b`): there is no reason for a model to write it;
 * - `.` and empty components (`./a//b/`) are dropped; a path that names the root itself (`.`) is
 *   accepted by `list` only.
 *
 * Limits (SandboxLimits): a write over `maxFileBytes` is `too_large`; a write that would take the
 * sandbox over `maxTotalBytes` or `maxFiles` is `quota`; reads are capped at `maxTotalBytes`.
 */
import { isValidId } from "./canvas-ops.js";
import { sandboxDir as systemSandboxDir } from "../systems/paths.js";

export interface SandboxLimits {
  /** Largest single file `write` accepts. */
  maxFileBytes: number;
  /** Total bytes of regular files in the sandbox after a write. */
  maxTotalBytes: number;
  /** Regular files in the sandbox after a write. */
  maxFiles: number;
  /** Components in a path (`a/b/c.txt` is 3). */
  maxDepth: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = Object.freeze({
  maxFileBytes: 1024 * 1024,
  maxTotalBytes: 20 * 1024 * 1024,
  maxFiles: 1000,
  maxDepth: 16,
});

export type SandboxErrorCode =
  | "invalid_path"
  | "escape"
  | "not_found"
  | "too_large"
  | "quota"
  | "is_directory"
  | "not_directory"
  | "exists";

export class SandboxError extends Error {
  override name = "SandboxError";
  readonly code: SandboxErrorCode;
  constructor(code: SandboxErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

export interface SandboxEntry {
  /** Relative to the sandbox root, forward slashes. */
  path: string;
  type: "file" | "directory";
  /** A regular file's size; 0 for directories, symlinks and other special files. */
  bytes: number;
}

/**
 * `<dataDir>/sandboxes/<id>` (src/workflows/systems/paths.ts, where the runner finds it); refuses a system id that is not
 * a plain name (as src/workflows/systems/schema.ts accepts it: it becomes a directory name under `sandboxes/`).
 */
export function sandboxDir(dataDir: string, systemId: string): string {
  if (!isValidId(systemId)) {
    throw new SandboxError(
      "invalid_path",
      `system id ${JSON.stringify(systemId)} cannot name a sandbox: use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)`,
    );
  }
  return systemSandboxDir(dataDir, systemId);
}

const MAX_COMPONENT_BYTES = 255;

/** A path quoted for a message. */
export function q(rel: unknown): string {
  return JSON.stringify(rel);
}

/** The errno code of a thrown error (`ENOENT`, …), if any. */
export function errCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

export function mergeLimits(limits: Partial<SandboxLimits> | undefined): SandboxLimits {
  const out: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS };
  for (const key of Object.keys(DEFAULT_SANDBOX_LIMITS) as Array<keyof SandboxLimits>) {
    const v = limits?.[key];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
      throw new TypeError(`sandbox limit ${key} must be a number >= 0, got ${String(v)}`);
    out[key] = Math.floor(v);
  }
  return out;
}

/**
 * Checks an untrusted relative path and returns its components (empty for the root itself).
 * Throws `invalid_path` or `escape`; see the header for the rules.
 */
export function normalizeRel(rel: unknown, maxDepth: number): string[] {
  if (typeof rel !== "string") throw new SandboxError("invalid_path", `the path must be a string, got ${typeof rel}`);
  if (rel.length === 0)
    throw new SandboxError("invalid_path", "the path is empty: name a file or directory relative to the sandbox");
  if (rel.includes("\0")) throw new SandboxError("invalid_path", `path ${q(rel)} contains a NUL byte: remove it`);
  if (rel.startsWith("/") || rel.startsWith("\\") || /^[A-Za-z]:/.test(rel)) {
    throw new SandboxError(
      "invalid_path",
      `path ${q(rel)} is absolute: use a path relative to the sandbox (e.g. "notes/readme.md")`,
    );
  }
  const raw = rel.split(/[/\\]/);
  if (raw.includes(".."))
    throw new SandboxError(
      "escape",
      `path ${q(rel)} contains "..": use a path inside the sandbox without ".." components`,
    );
  if (rel.includes("\\"))
    throw new SandboxError("invalid_path", `path ${q(rel)} contains a backslash: separate directories with "/"`);
  if (/[\x00-\x1f\x7f]/.test(rel))
    throw new SandboxError("invalid_path", `path ${q(rel)} contains a control character: remove it`);
  const parts = raw.filter((p) => p !== "" && p !== ".");
  for (const p of parts) {
    if (Buffer.byteLength(p, "utf8") > MAX_COMPONENT_BYTES) {
      throw new SandboxError(
        "invalid_path",
        `path ${q(rel)} has a component longer than ${MAX_COMPONENT_BYTES} bytes: shorten it`,
      );
    }
  }
  if (parts.length > maxDepth) {
    throw new SandboxError("invalid_path", `path ${q(rel)} is ${parts.length} levels deep: use at most ${maxDepth}`);
  }
  return parts;
}
