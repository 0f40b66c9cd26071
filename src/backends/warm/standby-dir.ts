/**
 * The working directory of a standby whose CLI fixes its directory at start (Claude Code, Qwen
 * Code: their sessions live under a folder named after the process's working directory, and
 * their tools work in it), when every conversation has a directory of its own
 * (`<dataDir>/work/<hash of the key>`, src/core/util/workdir.ts).
 *
 * A standby starts in a fresh private directory, `<dataDir>/work/standby-<time>-<random>`. The
 * conversation that takes it gets that directory as its own: its path becomes a symbolic link to
 * it (relative, so the data directory may move). Every later process of the conversation — warm
 * or cold, `--resume` included — is started at the conversation's path and lands in the same
 * real directory, which is what both CLIs go by (Claude Code keeps `realpath(cwd)`, Qwen Code
 * `process.cwd()`, which the kernel reports without links), so the session the standby began is
 * found there. Only a conversation with no directory yet, or an empty one, can take it: one whose
 * directory already holds files (an earlier session's, a turn's images) starts a process of its
 * own there. A standby that ends without being taken removes its directory.
 */
import { lstatSync, mkdirSync, readlinkSync, rmdirSync, rmSync, symlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";

export interface StandbyDir {
  /** The real directory the standby runs in. */
  readonly dir: string;
  /** Taken: the directory is a conversation's now and is never removed by the standby. */
  adopted: boolean;
  /** Make `conversationDir` this directory (see the top of this file). False when it cannot be. */
  adoptAs(conversationDir: string): boolean;
  /** Remove the directory unless a conversation took it. */
  remove(): void;
}

/** A fresh directory for a standby next to the conversations' (`<dataDir>/work`). */
export function standbyDir(dataDir: string): StandbyDir {
  const base = path.join(dataDir, "work");
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const dir = path.join(base, `standby-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`);
  mkdirSync(dir, { mode: 0o700 });
  const sd: StandbyDir = {
    dir,
    adopted: false,
    adoptAs(conversationDir: string): boolean {
      if (sd.adopted) return false;
      if (!linkDir(conversationDir, dir)) return false;
      sd.adopted = true;
      return true;
    },
    remove(): void {
      if (!sd.adopted) rmSync(dir, { recursive: true, force: true });
    },
  };
  return sd;
}

/** Put a link to `target` at `at` when `at` is missing or an empty directory. */
export function linkDir(at: string, target: string): boolean {
  const rel = path.relative(path.dirname(at), target);
  try {
    const st = lstatSync(at, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) return path.resolve(path.dirname(at), readlinkSync(at)) === path.resolve(target);
    // An empty directory goes (rmdir fails on one that holds anything); anything else stays.
    if (st?.isDirectory()) rmdirSync(at);
    else if (st) return false;
    mkdirSync(path.dirname(at), { recursive: true, mode: 0o700 });
    symlinkSync(rel, at, "dir");
    return true;
  } catch {
    // Whatever happened, the conversation keeps a directory to start its own process in.
    try {
      mkdirSync(at, { recursive: true, mode: 0o700 });
    } catch {
      /* it exists */
    }
    return false;
  }
}
