/**
 * Where an untrusted sandbox path leads on disk: every EXISTING component, from the real root down,
 * is inspected with lstat, and symbolic links are checked against the root (the Builder cannot
 * create links, but agent steps running in the sandbox can). Used by the Sandbox (sandbox.ts) before
 * it reads, writes, lists or deletes anything.
 *
 * - a symlink is resolved with realpath (or, when dangling, its target is resolved lexically) and a
 *   target outside realpath(root) is `escape`;
 * - an intermediate symlink whose target is inside the root is followed (the operation then works on
 *   the real, resolved directory);
 * - the final component is never followed here: its lstat is reported, and for a symlink the real
 *   path of its target (inside the root) and whether it exists. What to do with it is the caller's
 *   rule: `read`/`readBytes` follow a link whose target is inside the root; `write` never follows
 *   it — a link inside is refused with `invalid_path` ("delete it first"), a link outside with
 *   `escape`; `delete` removes the link itself, never its target.
 */
import fs from "node:fs";
import path from "node:path";
import { errCode, q, SandboxError } from "./sandbox-rules.js";

/** Where a path leads, after checking every existing component. */
export interface Resolved {
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

/** realpath(root), or null when the root does not exist yet; a root that is not a directory is refused. */
export function rootRealOrNull(root: string): string | null {
  try {
    const real = fs.realpathSync(root);
    if (!fs.statSync(real).isDirectory())
      throw new SandboxError("not_directory", `sandbox root ${root} is not a directory: remove it`);
    return real;
  } catch (e) {
    if (errCode(e) === "ENOENT") return null;
    throw e;
  }
}

function inside(rootReal: string, real: string): boolean {
  if (real === rootReal) return true;
  const prefix = rootReal.endsWith(path.sep) ? rootReal : rootReal + path.sep;
  return real.startsWith(prefix);
}

/** The path relative to the root, for messages (`p` must be under the real root). */
export function relOf(root: string, p: string): string {
  const real = rootRealOrNull(root) ?? root;
  const r = path.relative(real, p);
  return r === "" ? "." : r.split(path.sep).join("/");
}

/** A symlink's target, resolved; a dangling link's first hop is resolved lexically. */
function linkTarget(rel: string, p: string, rootReal: string): { real: string; exists: boolean } {
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
  if (!inside(rootReal, target.real)) {
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
export function resolveRel(
  root: string,
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
        throw new SandboxError("not_directory", `path ${q(rel)}: ${q(relOf(root, dir))} is not a directory`);
      throw e;
    }
    const last = i === parts.length - 1;
    if (last) {
      const out: Resolved = { rel: norm, parts, dirReal: dir, missing: parts.length, finalPath: p, finalLstat: st };
      if (st.isSymbolicLink()) {
        try {
          out.linkTarget = linkTarget(rel, p, rootReal);
        } catch (e) {
          // A dangling or looping link can still be deleted; an escaping one too (the link is inside).
          if (!opts.allowDanglingFinal) throw e;
        }
      }
      return out;
    }
    if (st.isSymbolicLink()) {
      const t = linkTarget(rel, p, rootReal);
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
