/**
 * A built system's sandbox: the directory `<dataDir>/sandboxes/<systemId>/` that its agent steps run
 * in, and where the chat-driven Builder creates files through MCP tools (CREATE_FILE,
 * REGISTER_CAPABILITY). Every path given to this module is UNTRUSTED (it comes out of a model), so
 * the whole point of the Sandbox is that no call can read, write, list or delete anything outside the
 * sandbox root. Only node:fs and node:path are used: no shell, no child process, no substitution of
 * anything in file content (`${HOME}` is written byte for byte).
 *
 * This file holds the Sandbox's operations; the rest is beside it: sandbox-rules.ts (what a path may
 * be, the limits, the errors), sandbox-links.ts (where a path leads: each existing component checked,
 * symbolic links held inside the root), sandbox-disk.ts (the atomic write, the bounded read, the walk).
 *
 * What the operations do with what they find (the Builder cannot create symbolic links, but agent
 * steps running in the sandbox can):
 * - a link as the final component: `read`/`readBytes` follow it when its target is inside the root;
 *   `write` never follows it — a link inside is refused with `invalid_path` ("delete it first"), a
 *   link outside with `escape`; `delete` removes the link itself, never its target (and removing a
 *   directory removes the links in it, not what they point at — fs.rm does not follow links);
 * - `list` reports a symlink as `{type: "file", bytes: 0}` and never descends into it (so a link to a
 *   directory, inside or outside, is never walked); FIFOs, sockets and devices are reported the same
 *   way. `files()` and `usage()` count regular files only (an export bundle holds real content), and
 *   reading anything that is not a regular file is refused (a FIFO would block).
 * - missing parent directories of a write are created one at a time (mode 0o700) under the
 *   already-resolved real parent, so a link can never be followed while creating them.
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
import { DIR_MODE, readRegular, sortEntries, walk, writeAtomic } from "./sandbox-disk.js";
import { relOf, type Resolved, resolveRel, rootRealOrNull } from "./sandbox-links.js";
import {
  errCode,
  mergeLimits,
  normalizeRel,
  q,
  SandboxError,
  type SandboxEntry,
  type SandboxLimits,
  sandboxDir,
} from "./sandbox-rules.js";

export {
  DEFAULT_SANDBOX_LIMITS,
  SandboxError,
  sandboxDir,
  type SandboxEntry,
  type SandboxErrorCode,
  type SandboxLimits,
} from "./sandbox-rules.js";

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
          `path ${q(rel)} is a symbolic link: writes never follow links, delete it first or write to ${q(relOf(this.root, r.linkTarget!.real))}`,
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
            `cannot create directory for ${q(rel)}: ${q(relOf(this.root, p))} exists and is not a directory`,
          );
      }
      dir = p;
    }
    const target = path.join(dir, parts[parts.length - 1]!);
    writeAtomic(rel, dir, target, data, overwrite, () => ++this.tmpSeq);
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
    const rootReal = rootRealOrNull(this.root);
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
    const out = walk(dirReal, parts.join("/"), opts.recursive === true).map((w) => w.entry);
    return sortEntries(out);
  }

  delete(rel: string): { path: string; type: "file" | "directory" } {
    const parts = normalizeRel(rel, this.limits.maxDepth);
    if (parts.length === 0)
      throw new SandboxError(
        "invalid_path",
        `path ${q(rel)} names the sandbox itself: delete the files in it one by one`,
      );
    const r = this.resolve(rel, parts, this.rootReal(rel), { allowDanglingFinal: true });
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
    const rootReal = rootRealOrNull(this.root);
    if (rootReal === null) return [];
    return sortEntries(
      walk(rootReal, "", true)
        .filter((w) => w.regular)
        .map((w) => w.entry),
    );
  }

  /** Regular files and their total size, counted on disk (agent steps' files included). */
  usage(): { files: number; bytes: number } {
    const rootReal = rootRealOrNull(this.root);
    if (rootReal === null) return { files: 0, bytes: 0 };
    const regular = walk(rootReal, "", true).filter((w) => w.regular);
    return { files: regular.length, bytes: regular.reduce((n, w) => n + w.entry.bytes, 0) };
  }

  /** Remove the whole sandbox (system deleted). A root that is itself a symlink loses the link only. */
  destroy(): void {
    fs.rmSync(this.root, { recursive: true, force: true });
  }

  // ---------------------------------------------------------------------------------------------

  private rootReal(rel: string): string {
    const real = rootRealOrNull(this.root);
    if (real === null)
      throw new SandboxError("not_found", `${q(rel)} does not exist in the sandbox (the sandbox is empty)`);
    return real;
  }

  private resolve(
    rel: string,
    parts: string[],
    rootReal: string,
    opts: { allowDanglingFinal?: boolean } = {},
  ): Resolved {
    return resolveRel(this.root, rel, parts, rootReal, opts);
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
    return { rel: r.rel, data: readRegular(rel, real, this.limits.maxTotalBytes) };
  }
}
