/**
 * A built system's sandbox: the directory `<dataDir>/sandboxes/<systemId>/` that its agent steps run
 * in, and where the chat-driven Builder creates files through MCP tools (CREATE_FILE,
 * REGISTER_CAPABILITY). Every path given to this module is UNTRUSTED (it comes out of a model), so
 * the whole point of this file is that no call can read, write, list or delete anything outside the
 * sandbox root. Only node:fs and node:path are used: no shell, no child process, no substitution of
 * anything in file content (`${HOME}` is written byte for byte).
 *
 * Path rules (checked before the disk is touched; see `normalizeRel`):
 * - a path must be a non-empty string, relative to the sandbox, with `/` as separator;
 * - refused with `invalid_path`: absolute paths (`/x`, `\x`, `C:\x`, `C:x` — the message says "use a
 *   path relative to the sandbox"), NUL and other control characters, backslashes, a component longer
 *   than 255 bytes, more than `maxDepth` components;
 * - refused with `escape`: any `..` component (after splitting on both `/` and `\`), even one that
 *   would stay inside (`a/../b`): there is no reason for a model to write it;
 * - `.` and empty components (`./a//b/`) are dropped; a path that names the root itself (`.`) is
 *   accepted by `list` only.
 *
 * Symbolic links (the Builder cannot create them, but agent steps running in the sandbox can):
 * - every EXISTING component is inspected with lstat; a symlink is resolved with realpath (or, when
 *   dangling, its target is resolved lexically) and a target outside realpath(root) is `escape`;
 * - an intermediate symlink whose target is inside the root is followed (the operation then works on
 *   the real, resolved directory);
 * - the final component: `read`/`readBytes` follow a link whose target is inside the root; `write`
 *   never follows it — a link inside is refused with `invalid_path` ("delete it first"), a link
 *   outside with `escape`; `delete` removes the link itself, never its target (and removing a
 *   directory removes the links in it, not what they point at — fs.rm does not follow links);
 * - `list` reports a symlink as `{type: "file", bytes: 0}` and never descends into it (so a link to a
 *   directory, inside or outside, is never walked); FIFOs, sockets and devices are reported the same
 *   way. `files()` and `usage()` count regular files only (an export bundle holds real content), and
 *   reading anything that is not a regular file is refused (a FIFO would block).
 *
 * Writes: the content is written to a fresh temp file (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0o600)
 * in the target's own directory, then renamed over the target (rename replaces a directory entry and
 * never follows a link in the final component, so it cannot write into a file outside through a link
 * or hard link). With `overwrite: false` the temp file is hard-linked to the target instead (fails
 * atomically when anything exists there) and unlinked. On any failure the temp file is removed.
 * Missing parent directories are created one at a time (mode 0o700) under the already-resolved real
 * parent, so a link can never be followed while creating them. Written files are 0o600, directories
 * 0o700 (set explicitly, whatever the umask).
 *
 * Limits (SandboxLimits): a write over `maxFileBytes` is `too_large`; a write that would take the
 * sandbox over `maxTotalBytes` or `maxFiles` (regular files, counted on disk, the replaced file's
 * size subtracted) is `quota`. Reads are capped at `maxTotalBytes` (`too_large`) so a huge file an
 * agent produced cannot exhaust memory.
 *
 * Residual risk, accepted: Node has no openat()/O_BENEATH, so a process that swaps a checked
 * directory for a symlink between the check and the use could race a single operation. The only such
 * processes are the system's own agent steps, which do not run while the Builder edits that system;
 * the final open/rename cannot be raced into following a link. Hard links to outside files can only
 * be made by something that can already read those files.
 */
import fs from "node:fs";
import path from "node:path";
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

/** A system id as src/workflows/systems/schema.ts accepts it: it becomes a directory name under `sandboxes/`. */
const SYSTEM_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** `<dataDir>/sandboxes/<id>` (src/workflows/systems/paths.ts, where the runner finds it); refuses a system id that is not a plain name. */
export function sandboxDir(dataDir: string, systemId: string): string {
  if (typeof systemId !== "string" || !SYSTEM_ID.test(systemId)) {
    throw new SandboxError(
      "invalid_path",
      `system id ${JSON.stringify(systemId)} cannot name a sandbox: use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)`,
    );
  }
  return systemSandboxDir(dataDir, systemId);
}

const MAX_COMPONENT_BYTES = 255;
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
const O_NOFOLLOW = fs.constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = fs.constants.O_NONBLOCK ?? 0;

function q(rel: unknown): string {
  return JSON.stringify(rel);
}

function errCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

function mergeLimits(limits: Partial<SandboxLimits> | undefined): SandboxLimits {
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
function normalizeRel(rel: unknown, maxDepth: number): string[] {
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

/** Where a path leads, after checking every existing component. */
interface Resolved {
  /** Normalized relative path ("" for the root). */
  rel: string;
  parts: string[];
  /** Real path of the deepest existing directory on the way (the parent when `missing` is parts.length - 1 or more). */
  dirReal: string;
  /** Index of the first component that does not exist (parts.length when all exist). */
  missing: number;
  /** When everything exists: the final entry's path (under real directories, link not followed) and its lstat. */
  finalPath?: string;
  finalLstat?: fs.Stats;
  /** When the final entry is a symlink: the real path of its target (inside the root) and whether it exists. */
  linkTarget?: { real: string; exists: boolean };
}

export class Sandbox {
  readonly root: string;
  private readonly limits: SandboxLimits;
  private tmpSeq = 0;

  constructor(root: string, limits?: Partial<SandboxLimits>) {
    if (typeof root !== "string" || root.length === 0) throw new TypeError("sandbox root must be a non-empty path");
    this.root = path.resolve(root);
    this.limits = mergeLimits(limits);
  }

  static forSystem(dataDir: string, systemId: string, limits?: Partial<SandboxLimits>): Sandbox {
    return new Sandbox(sandboxDir(dataDir, systemId), limits);
  }

  /** mkdir -p the root (mode 0o700); returns the root. */
  ensure(): string {
    let existed = false;
    try {
      existed = fs.statSync(this.root).isDirectory();
    } catch (e) {
      if (errCode(e) !== "ENOENT") throw e;
    }
    if (!existed) {
      try {
        fs.mkdirSync(this.root, { recursive: true, mode: DIR_MODE });
        fs.chmodSync(this.root, DIR_MODE);
      } catch (e) {
        if (errCode(e) === "EEXIST" || errCode(e) === "ENOTDIR") {
          throw new SandboxError("not_directory", `sandbox root ${this.root} exists and is not a directory: remove it`);
        }
        throw e;
      }
    }
    return this.root;
  }

  write(rel: string, content: string | Buffer, opts: { overwrite?: boolean } = {}): { path: string; bytes: number } {
    const parts = normalizeRel(rel, this.limits.maxDepth);
    if (parts.length === 0)
      throw new SandboxError("invalid_path", `path ${q(rel)} names the sandbox itself: name a file inside it`);
    if (typeof content !== "string" && !Buffer.isBuffer(content))
      throw new SandboxError("invalid_path", `content for ${q(rel)} must be a string or bytes`);
    // Byte for byte: a string is encoded as UTF-8 and nothing in it is interpreted.
    const data = typeof content === "string" ? Buffer.from(content, "utf8") : content;
    if (data.length > this.limits.maxFileBytes) {
      throw new SandboxError(
        "too_large",
        `file ${q(rel)} is ${data.length} bytes: a file may hold at most ${this.limits.maxFileBytes} bytes, write less`,
      );
    }
    const overwrite = opts.overwrite ?? true;

    this.ensure();
    const r = this.resolve(rel, parts, this.rootReal(rel));
    let replacedBytes = 0;
    let replacing = false;
    if (r.missing === parts.length) {
      const st = r.finalLstat!;
      if (st.isSymbolicLink()) {
        throw new SandboxError(
          "invalid_path",
          `path ${q(rel)} is a symbolic link: writes never follow links, delete it first or write to ${q(this.relOf(r.linkTarget!.real))}`,
        );
      }
      if (st.isDirectory())
        throw new SandboxError(
          "is_directory",
          `path ${q(rel)} is a directory: write to a file inside it or choose another name`,
        );
      if (!st.isFile()) throw new SandboxError("invalid_path", `path ${q(rel)} is not a regular file: delete it first`);
      if (!overwrite)
        throw new SandboxError("exists", `file ${q(rel)} already exists: choose another name or allow overwriting`);
      replacing = true;
      replacedBytes = st.size;
    }

    const use = this.usage();
    const files = use.files + (replacing ? 0 : 1);
    const bytes = use.bytes - replacedBytes + data.length;
    if (files > this.limits.maxFiles) {
      throw new SandboxError(
        "quota",
        `writing ${q(rel)} would make ${files} files: the sandbox holds at most ${this.limits.maxFiles}, delete some first`,
      );
    }
    if (bytes > this.limits.maxTotalBytes) {
      throw new SandboxError(
        "quota",
        `writing ${q(rel)} would make the sandbox ${bytes} bytes: it holds at most ${this.limits.maxTotalBytes}, delete something or write less`,
      );
    }

    // Create missing parents one at a time under the resolved real directory: mkdir never follows a link.
    let dir = r.dirReal;
    for (let i = r.missing; i < parts.length - 1; i++) {
      const p = path.join(dir, parts[i]!);
      try {
        fs.mkdirSync(p, { mode: DIR_MODE });
        fs.chmodSync(p, DIR_MODE);
      } catch (e) {
        if (errCode(e) !== "EEXIST") throw e;
        // Appeared meanwhile: accept a real directory only.
        const st = fs.lstatSync(p);
        if (!st.isDirectory())
          throw new SandboxError(
            "not_directory",
            `cannot create directory for ${q(rel)}: ${q(this.relOf(p))} exists and is not a directory`,
          );
      }
      dir = p;
    }
    const target = path.join(dir, parts[parts.length - 1]!);
    this.writeAtomic(rel, dir, target, data, overwrite);
    return { path: r.rel, bytes: data.length };
  }

  read(rel: string): { path: string; content: string; bytes: number } {
    const { rel: norm, data } = this.readFile(rel);
    return { path: norm, content: data.toString("utf8"), bytes: data.length };
  }

  readBytes(rel: string): Buffer {
    return this.readFile(rel).data;
  }

  /**
   * Entries under `rel` (default the root), sorted by path; paths are relative to the sandbox root
   * (so they can be passed back to read/delete). Symlinks and special files are reported as
   * `{type: "file", bytes: 0}` and never descended into. A missing root lists as [].
   */
  list(rel = ".", opts: { recursive?: boolean } = {}): SandboxEntry[] {
    const parts = normalizeRel(rel, this.limits.maxDepth);
    const rootReal = this.rootRealOrNull();
    if (rootReal === null) return [];
    let dirReal: string;
    if (parts.length === 0) {
      dirReal = rootReal;
    } else {
      const r = this.resolve(rel, parts, rootReal);
      if (r.missing < parts.length)
        throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox: list "." to see what does`);
      const st = r.finalLstat!;
      if (st.isSymbolicLink()) {
        const t = r.linkTarget!;
        if (!t.exists)
          throw new SandboxError("not_found", `${q(rel)} is a symbolic link to something that does not exist`);
        if (!fs.statSync(t.real).isDirectory())
          throw new SandboxError("not_directory", `${q(rel)} is not a directory: read it instead`);
        dirReal = t.real;
      } else if (st.isDirectory()) {
        dirReal = r.finalPath!;
      } else {
        throw new SandboxError("not_directory", `${q(rel)} is not a directory: read it instead`);
      }
    }
    const out = this.walk(dirReal, parts.join("/"), opts.recursive === true).map((w) => w.entry);
    return sortEntries(out);
  }

  delete(rel: string): { path: string; type: "file" | "directory" } {
    const parts = normalizeRel(rel, this.limits.maxDepth);
    if (parts.length === 0)
      throw new SandboxError(
        "invalid_path",
        `path ${q(rel)} names the sandbox itself: delete the files in it one by one`,
      );
    const rootReal = this.rootRealOrNull();
    if (rootReal === null)
      throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox (the sandbox is empty)`);
    const r = this.resolve(rel, parts, rootReal, { allowDanglingFinal: true });
    if (r.missing < parts.length)
      throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox: list "." to see what does`);
    const st = r.finalLstat!;
    const p = r.finalPath!;
    if (st.isDirectory()) {
      // fs.rm removes links inside the directory, never what they point at.
      fs.rmSync(p, { recursive: true, force: false });
      return { path: r.rel, type: "directory" };
    }
    // A file, or a symlink (the link itself goes, the target stays), or a special file.
    fs.unlinkSync(p);
    return { path: r.rel, type: "file" };
  }

  /** Every regular file, recursively, sorted (for export bundles). Symlinks and special files are left out. */
  files(): SandboxEntry[] {
    const rootReal = this.rootRealOrNull();
    if (rootReal === null) return [];
    return sortEntries(
      this.walk(rootReal, "", true)
        .filter((w) => w.regular)
        .map((w) => w.entry),
    );
  }

  /** Regular files and their total size, counted on disk (agent steps' files included). */
  usage(): { files: number; bytes: number } {
    const rootReal = this.rootRealOrNull();
    if (rootReal === null) return { files: 0, bytes: 0 };
    let files = 0;
    let bytes = 0;
    for (const w of this.walk(rootReal, "", true)) {
      if (!w.regular) continue;
      files++;
      bytes += w.entry.bytes;
    }
    return { files, bytes };
  }

  /** Remove the whole sandbox (system deleted). A root that is itself a symlink loses the link only. */
  destroy(): void {
    fs.rmSync(this.root, { recursive: true, force: true });
  }

  // ---------------------------------------------------------------------------------------------

  private rootRealOrNull(): string | null {
    try {
      const real = fs.realpathSync(this.root);
      if (!fs.statSync(real).isDirectory())
        throw new SandboxError("not_directory", `sandbox root ${this.root} is not a directory: remove it`);
      return real;
    } catch (e) {
      if (errCode(e) === "ENOENT") return null;
      throw e;
    }
  }

  private rootReal(rel: string): string {
    const real = this.rootRealOrNull();
    if (real === null)
      throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox (the sandbox is empty)`);
    return real;
  }

  private inside(rootReal: string, real: string): boolean {
    if (real === rootReal) return true;
    const prefix = rootReal.endsWith(path.sep) ? rootReal : rootReal + path.sep;
    return real.startsWith(prefix);
  }

  /** The path relative to the root, for messages (`p` must be under the real root). */
  private relOf(p: string): string {
    const real = this.rootRealOrNull() ?? this.root;
    const r = path.relative(real, p);
    return r === "" ? "." : r.split(path.sep).join("/");
  }

  /** A symlink's target, resolved; a dangling link's first hop is resolved lexically. */
  private linkTarget(rel: string, p: string, rootReal: string): { real: string; exists: boolean } {
    let target: { real: string; exists: boolean };
    try {
      target = { real: fs.realpathSync(p), exists: true };
    } catch (e) {
      const code = errCode(e);
      if (code === "ELOOP")
        throw new SandboxError("invalid_path", `path ${q(rel)} goes through a symbolic link loop: delete the link`);
      if (code !== "ENOENT" && code !== "ENOTDIR") throw e;
      target = { real: path.resolve(path.dirname(p), fs.readlinkSync(p)), exists: false };
    }
    if (!this.inside(rootReal, target.real)) {
      throw new SandboxError(
        "escape",
        `path ${q(rel)} goes through a symbolic link that points outside the sandbox: use a path inside it`,
      );
    }
    return target;
  }

  /**
   * Walks the components from the real root with lstat. Intermediate symlinks must resolve to a
   * directory inside the root (followed via their real path); a final symlink's target is checked and
   * reported, not followed. Throws `escape`, `not_directory`, `not_found` (a dangling intermediate link).
   */
  private resolve(
    rel: string,
    parts: string[],
    rootReal: string,
    opts: { allowDanglingFinal?: boolean } = {},
  ): Resolved {
    let dir = rootReal;
    const norm = parts.join("/");
    for (let i = 0; i < parts.length; i++) {
      const p = path.join(dir, parts[i]!);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(p);
      } catch (e) {
        const code = errCode(e);
        if (code === "ENOENT") return { rel: norm, parts, dirReal: dir, missing: i };
        if (code === "ENOTDIR")
          throw new SandboxError("not_directory", `path ${q(rel)}: ${q(this.relOf(dir))} is not a directory`);
        throw e;
      }
      const last = i === parts.length - 1;
      if (last) {
        const out: Resolved = { rel: norm, parts, dirReal: dir, missing: parts.length, finalPath: p, finalLstat: st };
        if (st.isSymbolicLink()) {
          try {
            out.linkTarget = this.linkTarget(rel, p, rootReal);
          } catch (e) {
            // A dangling or looping link can still be deleted; an escaping one too (the link is inside).
            if (!opts.allowDanglingFinal) throw e;
          }
        }
        return out;
      }
      if (st.isSymbolicLink()) {
        const t = this.linkTarget(rel, p, rootReal);
        if (!t.exists)
          throw new SandboxError(
            "not_found",
            `path ${q(rel)} goes through ${q(parts.slice(0, i + 1).join("/"))}, a symbolic link to something that does not exist: delete it first`,
          );
        if (!fs.statSync(t.real).isDirectory()) {
          throw new SandboxError(
            "not_directory",
            `path ${q(rel)}: ${q(parts.slice(0, i + 1).join("/"))} is not a directory`,
          );
        }
        dir = t.real;
      } else if (st.isDirectory()) {
        dir = p;
      } else {
        throw new SandboxError(
          "not_directory",
          `path ${q(rel)}: ${q(parts.slice(0, i + 1).join("/"))} is a file, not a directory`,
        );
      }
    }
    return { rel: norm, parts, dirReal: dir, missing: parts.length };
  }

  private readFile(rel: string): { rel: string; data: Buffer } {
    const parts = normalizeRel(rel, this.limits.maxDepth);
    if (parts.length === 0)
      throw new SandboxError("is_directory", `path ${q(rel)} is the sandbox directory: name a file inside it`);
    const r = this.resolve(rel, parts, this.rootReal(rel));
    if (r.missing < parts.length)
      throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox: list "." to see what does`);
    let real = r.finalPath!;
    if (r.finalLstat!.isSymbolicLink()) {
      const t = r.linkTarget!;
      if (!t.exists)
        throw new SandboxError("not_found", `${q(rel)} is a symbolic link to something that does not exist`);
      real = t.real;
    }
    const st = fs.lstatSync(real);
    if (st.isDirectory()) throw new SandboxError("is_directory", `${q(rel)} is a directory: list it instead`);
    if (!st.isFile())
      throw new SandboxError("invalid_path", `${q(rel)} is not a regular file: only regular files can be read`);
    // O_NOFOLLOW: `real` is not a link (checked); refuse if it was swapped for one. O_NONBLOCK: never hang on a FIFO.
    const fd = fs.openSync(real, fs.constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    try {
      const fst = fs.fstatSync(fd);
      if (!fst.isFile())
        throw new SandboxError("invalid_path", `${q(rel)} is not a regular file: only regular files can be read`);
      if (fst.size > this.limits.maxTotalBytes) {
        throw new SandboxError(
          "too_large",
          `${q(rel)} is ${fst.size} bytes: files over ${this.limits.maxTotalBytes} bytes cannot be read`,
        );
      }
      const buf = Buffer.alloc(fst.size);
      let off = 0;
      while (off < buf.length) {
        const n = fs.readSync(fd, buf, off, buf.length - off, off);
        if (n === 0) break;
        off += n;
      }
      return { rel: r.rel, data: off === buf.length ? buf : buf.subarray(0, off) };
    } finally {
      fs.closeSync(fd);
    }
  }

  private writeAtomic(rel: string, dir: string, target: string, data: Buffer, overwrite: boolean): void {
    let tmp = "";
    let fd = -1;
    for (let attempt = 0; ; attempt++) {
      tmp = path.join(
        dir,
        `.sandbox-${process.pid}-${Date.now().toString(36)}-${++this.tmpSeq}-${Math.random().toString(36).slice(2, 10)}.tmp`,
      );
      try {
        fd = fs.openSync(
          tmp,
          fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | O_NOFOLLOW,
          FILE_MODE,
        );
        break;
      } catch (e) {
        if (errCode(e) !== "EEXIST" || attempt >= 5) throw e;
      }
    }
    let done = false;
    try {
      try {
        fs.fchmodSync(fd, FILE_MODE);
        let off = 0;
        while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      if (overwrite) {
        try {
          fs.renameSync(tmp, target);
        } catch (e) {
          const code = errCode(e);
          if (code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST") {
            throw new SandboxError(
              "is_directory",
              `path ${q(rel)} is a directory: write to a file inside it or choose another name`,
            );
          }
          throw e;
        }
        done = true;
      } else {
        // link() fails atomically when anything (file, directory, link) already exists at the target.
        try {
          fs.linkSync(tmp, target);
        } catch (e) {
          if (errCode(e) === "EEXIST")
            throw new SandboxError("exists", `file ${q(rel)} already exists: choose another name or allow overwriting`);
          throw e;
        }
        done = true;
        fs.unlinkSync(tmp);
      }
    } finally {
      if (!done || fs.existsSync(tmp)) {
        try {
          fs.unlinkSync(tmp);
        } catch {
          // already gone
        }
      }
    }
  }

  /** Entries under `dirReal` (a real directory inside the root), not following links. */
  private walk(
    dirReal: string,
    relPrefix: string,
    recursive: boolean,
  ): Array<{ entry: SandboxEntry; regular: boolean }> {
    const out: Array<{ entry: SandboxEntry; regular: boolean }> = [];
    const stack: Array<{ dir: string; rel: string }> = [{ dir: dirReal, rel: relPrefix }];
    while (stack.length > 0) {
      const { dir, rel } = stack.pop()!;
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch (e) {
        if (errCode(e) === "ENOENT" || errCode(e) === "ENOTDIR") continue;
        throw e;
      }
      for (const name of names) {
        const p = path.join(dir, name);
        const r = rel === "" ? name : `${rel}/${name}`;
        let st: fs.Stats;
        try {
          st = fs.lstatSync(p);
        } catch (e) {
          if (errCode(e) === "ENOENT") continue;
          throw e;
        }
        if (st.isDirectory()) {
          out.push({ entry: { path: r, type: "directory", bytes: 0 }, regular: false });
          if (recursive) stack.push({ dir: p, rel: r });
        } else if (st.isFile()) {
          out.push({ entry: { path: r, type: "file", bytes: st.size }, regular: true });
        } else {
          // Symlink, FIFO, socket, device: visible (so it can be deleted), never followed.
          out.push({ entry: { path: r, type: "file", bytes: 0 }, regular: false });
        }
      }
    }
    return out;
  }
}

function sortEntries(entries: SandboxEntry[]): SandboxEntry[] {
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
