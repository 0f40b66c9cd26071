/**
 * The sandbox's own disk operations, on paths sandbox-links.ts has already checked: the atomic write
 * of one file, the bounded read of one regular file, and the walk of a directory that never follows
 * a link. Only node:fs and node:path: no shell, no child process, content written byte for byte.
 *
 * Writes: the content is written to a fresh temp file (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0o600)
 * in the target's own directory, then renamed over the target (rename replaces a directory entry and
 * never follows a link in the final component, so it cannot write into a file outside through a link
 * or hard link). With `overwrite: false` the temp file is hard-linked to the target instead (fails
 * atomically when anything exists there) and unlinked. On any failure the temp file is removed.
 * Written files are 0o600, directories 0o700 (set explicitly, whatever the umask).
 *
 * Reads open with O_NOFOLLOW and O_NONBLOCK (a FIFO would block) and refuse anything but a regular
 * file or one over the cap. The walk reports a symlink, FIFO, socket or device as
 * `{type: "file", bytes: 0}`, not regular, and never descends into it.
 */
import fs from "node:fs";
import path from "node:path";
import { errCode, q, SandboxError, type SandboxEntry } from "./sandbox-rules.js";

export const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
const O_NOFOLLOW = fs.constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = fs.constants.O_NONBLOCK ?? 0;

/**
 * Reads `real` (a checked path inside the root, not a link) whole; `rel` names it in messages.
 * Refuses anything but a regular file, and a file over `maxBytes` (`too_large`).
 */
export function readRegular(rel: string, real: string, maxBytes: number): Buffer {
  // O_NOFOLLOW: `real` is not a link (checked); refuse if it was swapped for one. O_NONBLOCK: never hang on a FIFO.
  const fd = fs.openSync(real, fs.constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const fst = fs.fstatSync(fd);
    if (!fst.isFile())
      throw new SandboxError("invalid_path", `${q(rel)} is not a regular file: only regular files can be read`);
    if (fst.size > maxBytes) {
      throw new SandboxError(
        "too_large",
        `${q(rel)} is ${fst.size} bytes: files over ${maxBytes} bytes cannot be read`,
      );
    }
    const buf = Buffer.alloc(fst.size);
    let off = 0;
    while (off < buf.length) {
      const n = fs.readSync(fd, buf, off, buf.length - off, off);
      if (n === 0) break;
      off += n;
    }
    return off === buf.length ? buf : buf.subarray(0, off);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Writes `data` to `target` in the real directory `dir` through a temp file (see the header);
 * `nextSeq` numbers the temp files. `rel` names the target in messages.
 */
export function writeAtomic(
  rel: string,
  dir: string,
  target: string,
  data: Buffer,
  overwrite: boolean,
  nextSeq: () => number,
): void {
  let tmp = "";
  let fd = -1;
  for (let attempt = 0; ; attempt++) {
    tmp = path.join(
      dir,
      `.sandbox-${process.pid}-${Date.now().toString(36)}-${nextSeq()}-${Math.random().toString(36).slice(2, 10)}.tmp`,
    );
    try {
      fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | O_NOFOLLOW, FILE_MODE);
      break;
    } catch (e) {
      if (errCode(e) !== "EEXIST" || attempt >= 5) throw e;
    }
  }
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
    } else {
      // link() fails atomically when anything (file, directory, link) already exists at the target.
      try {
        fs.linkSync(tmp, target);
      } catch (e) {
        if (errCode(e) === "EEXIST")
          throw new SandboxError("exists", `file ${q(rel)} already exists: choose another name or allow overwriting`);
        throw e;
      }
    }
  } finally {
    // Gone after the rename; the link's temp name, or whatever a failure left, is removed.
    fs.rmSync(tmp, { force: true });
  }
}

/** Entries under `dirReal` (a real directory inside the root), not following links. */
export function walk(
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

export function sortEntries(entries: SandboxEntry[]): SandboxEntry[] {
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
