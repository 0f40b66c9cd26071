import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  DEFAULT_SANDBOX_LIMITS,
  Sandbox,
  SandboxError,
  sandboxDir,
  type SandboxErrorCode,
  type SandboxLimits,
} from "../../src/workflows/builder/sandbox.js";

interface Env {
  tmp: string;
  root: string;
  outside: string;
  sb: Sandbox;
}

/** A fresh temp dir per test: `<tmp>/sb` is the sandbox root, `<tmp>/outside` holds a secret file. */
function withEnv(fn: (env: Env) => void, limits?: Partial<SandboxLimits>): void {
  const tmp = fs.mkdtempSync(path.join(tmpdir(), "clawbridge-sandbox-"));
  try {
    const root = path.join(tmp, "sb");
    const outside = path.join(tmp, "outside");
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, "secret.txt"), "top secret");
    const sb = new Sandbox(root, limits);
    fn({ tmp, root, outside, sb });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function throwsCode(fn: () => unknown, code: SandboxErrorCode, message?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof SandboxError, `expected a SandboxError, got ${String(e)}`);
    assert.equal(e.name, "SandboxError");
    assert.equal(e.code, code, `code for: ${e.message}`);
    if (message) assert.match(e.message, message);
    return true;
  });
}

/** Everything under `dir`, not following links: path → "dir" | "link:<target>" | file content. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string): void => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) out[r] = `link:${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = "dir";
        walk(p, r);
      } else out[r] = fs.readFileSync(p, "latin1");
    }
  };
  walk(dir, "");
  return out;
}

function tempFiles(dir: string): string[] {
  return Object.keys(snapshot(dir)).filter((p) => /\.tmp$/.test(p) || path.basename(p).startsWith(".sandbox-"));
}

test("sandboxDir, forSystem and the default limits", () => {
  assert.equal(sandboxDir("/data", "my-system"), path.join("/data", "sandboxes", "my-system"));
  assert.equal(Sandbox.forSystem("/data", "abc_1").root, path.join("/data", "sandboxes", "abc_1"));
  for (const bad of ["..", ".", "", "a/b", "a\\b", "../x", "A", "x\0"]) {
    throwsCode(() => sandboxDir("/data", bad), "invalid_path");
  }
  assert.deepEqual(
    { ...DEFAULT_SANDBOX_LIMITS },
    { maxFileBytes: 1024 * 1024, maxTotalBytes: 20 * 1024 * 1024, maxFiles: 1000, maxDepth: 16 },
  );
});

test("write / read / list / delete round trip with nested directories", () => {
  withEnv(({ root, sb }) => {
    assert.deepEqual(sb.list(), [], "a missing root lists as []");
    assert.deepEqual(sb.files(), []);
    assert.deepEqual(sb.usage(), { files: 0, bytes: 0 });
    throwsCode(() => sb.read("nope.txt"), "not_found");

    assert.equal(sb.ensure(), root);
    assert.ok(fs.statSync(root).isDirectory());

    assert.deepEqual(sb.write("a/b/c.txt", "hello"), { path: "a/b/c.txt", bytes: 5 });
    assert.deepEqual(sb.write("./a//d.txt", Buffer.from("xyz")), { path: "a/d.txt", bytes: 3 });
    assert.deepEqual(sb.write("top.md", "é"), { path: "top.md", bytes: 2 });
    assert.equal(fs.readFileSync(path.join(root, "a", "b", "c.txt"), "utf8"), "hello");

    assert.deepEqual(sb.read("a/b/c.txt"), { path: "a/b/c.txt", content: "hello", bytes: 5 });
    assert.deepEqual(sb.read("a/./b/c.txt/"), { path: "a/b/c.txt", content: "hello", bytes: 5 });
    assert.deepEqual(sb.readBytes("a/d.txt"), Buffer.from("xyz"));

    assert.deepEqual(sb.list(), [
      { path: "a", type: "directory", bytes: 0 },
      { path: "top.md", type: "file", bytes: 2 },
    ]);
    assert.deepEqual(sb.list(".", { recursive: true }), [
      { path: "a", type: "directory", bytes: 0 },
      { path: "a/b", type: "directory", bytes: 0 },
      { path: "a/b/c.txt", type: "file", bytes: 5 },
      { path: "a/d.txt", type: "file", bytes: 3 },
      { path: "top.md", type: "file", bytes: 2 },
    ]);
    assert.deepEqual(sb.list("a"), [
      { path: "a/b", type: "directory", bytes: 0 },
      { path: "a/d.txt", type: "file", bytes: 3 },
    ]);
    assert.deepEqual(
      sb.files().map((e) => e.path),
      ["a/b/c.txt", "a/d.txt", "top.md"],
    );
    assert.deepEqual(sb.usage(), { files: 3, bytes: 10 });
    throwsCode(() => sb.list("top.md"), "not_directory");
    throwsCode(() => sb.list("missing"), "not_found");

    assert.deepEqual(sb.delete("a/d.txt"), { path: "a/d.txt", type: "file" });
    assert.equal(fs.existsSync(path.join(root, "a", "d.txt")), false);
    assert.deepEqual(sb.delete("a"), { path: "a", type: "directory" });
    assert.equal(fs.existsSync(path.join(root, "a")), false);
    assert.deepEqual(sb.list(".", { recursive: true }), [{ path: "top.md", type: "file", bytes: 2 }]);
    throwsCode(() => sb.delete("a"), "not_found");
    throwsCode(() => sb.delete("."), "invalid_path");

    sb.destroy();
    assert.equal(fs.existsSync(root), false);
    assert.deepEqual(sb.list(), []);
  });
});

test("bad paths are refused with the right code and nothing is created anywhere", () => {
  withEnv(({ tmp, outside, sb }) => {
    sb.ensure();
    const before = snapshot(tmp);
    const cases: Array<[string, SandboxErrorCode, RegExp?]> = [
      ["../x", "escape"],
      ["a/../../x", "escape"],
      ["a/../b", "escape"],
      ["..", "escape"],
      ["a\\..\\..\\x", "escape"],
      ["/etc/passwd", "invalid_path", /use a path relative to the sandbox/],
      ["\\x", "invalid_path", /use a path relative to the sandbox/],
      ["C:\\x", "invalid_path", /use a path relative to the sandbox/],
      ["c:/x", "invalid_path", /use a path relative to the sandbox/],
      ["a\\b", "invalid_path", /backslash/],
      ["a\0b", "invalid_path", /NUL/],
      ["", "invalid_path"],
      ["a\nb", "invalid_path"],
      [`${"x".repeat(256)}`, "invalid_path", /255 bytes/],
    ];
    for (const [rel, code, message] of cases) {
      throwsCode(() => sb.write(rel, "pwned"), code, message);
      throwsCode(() => sb.read(rel), code, message);
      throwsCode(() => sb.readBytes(rel), code, message);
      throwsCode(() => sb.delete(rel), code, message);
      throwsCode(() => sb.list(rel), code, message);
      if (rel !== "") {
        assert.throws(
          () => sb.write(rel, "pwned"),
          (e: unknown) => e instanceof Error && e.message.includes(JSON.stringify(rel)),
          `the message names the path ${JSON.stringify(rel)}`,
        );
      }
    }
    throwsCode(() => sb.write(".", "x"), "invalid_path");
    throwsCode(() => sb.write("a/b", 42 as unknown as string), "invalid_path");
    assert.deepEqual(snapshot(tmp), before, "nothing created or changed in or outside the sandbox");
    assert.equal(fs.readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    assert.equal(fs.existsSync(path.join(tmp, "x")), false);
  });
});

test("a symlink to a directory outside: read, write through it, write to it, list, delete are refused", () => {
  withEnv(({ tmp, root, outside, sb }) => {
    sb.ensure();
    fs.symlinkSync(outside, path.join(root, "evil"));
    fs.symlinkSync("../outside", path.join(root, "rel-evil"));
    fs.mkdirSync(path.join(root, "d"));
    fs.symlinkSync("../..", path.join(root, "d", "up"));
    const before = snapshot(outside);

    for (const link of ["evil", "rel-evil", "d/up/outside"]) {
      throwsCode(() => sb.read(`${link}/secret.txt`), "escape", /outside the sandbox/);
      throwsCode(() => sb.readBytes(`${link}/secret.txt`), "escape");
      throwsCode(() => sb.write(`${link}/secret.txt`, "overwritten"), "escape");
      throwsCode(() => sb.write(`${link}/new.txt`, "planted"), "escape");
      throwsCode(() => sb.write(`${link}/deep/er/new.txt`, "planted"), "escape");
      throwsCode(() => sb.list(link), "escape");
      throwsCode(() => sb.list(link, { recursive: true }), "escape");
      throwsCode(() => sb.delete(`${link}/secret.txt`), "escape");
    }
    throwsCode(() => sb.write("evil", "replace the link?"), "escape");
    throwsCode(() => sb.write("d/up", "x"), "escape");
    throwsCode(() => sb.read("d/up"), "escape");

    const all = sb.list(".", { recursive: true });
    assert.deepEqual(all, [
      { path: "d", type: "directory", bytes: 0 },
      { path: "d/up", type: "file", bytes: 0 },
      { path: "evil", type: "file", bytes: 0 },
      { path: "rel-evil", type: "file", bytes: 0 },
    ]);
    assert.deepEqual(sb.files(), [], "links are not files of an export bundle");
    assert.deepEqual(sb.usage(), { files: 0, bytes: 0 });

    assert.deepEqual(snapshot(outside), before, "the outside directory is unchanged");
    assert.equal(fs.existsSync(path.join(tmp, "new.txt")), false);
    assert.equal(fs.lstatSync(path.join(root, "evil")).isSymbolicLink(), true, "the link itself is unchanged");

    // Deleting a directory that holds a link to the outside removes the link only.
    assert.deepEqual(sb.delete("d"), { path: "d", type: "directory" });
    assert.deepEqual(sb.delete("evil"), { path: "evil", type: "file" });
    assert.equal(fs.existsSync(path.join(root, "evil")), false);
    assert.deepEqual(snapshot(outside), before, "deleting links leaves the outside intact");
    assert.ok(fs.existsSync(tmp));
  });
});

test("a symlink to a file outside: read, write to it and delete never touch the target", () => {
  withEnv(({ root, outside, sb }) => {
    sb.ensure();
    const secret = path.join(outside, "secret.txt");
    fs.symlinkSync(secret, path.join(root, "leak"));
    fs.symlinkSync(path.join(outside, "not-yet.txt"), path.join(root, "dangling"));

    throwsCode(() => sb.read("leak"), "escape");
    throwsCode(() => sb.readBytes("leak"), "escape");
    throwsCode(() => sb.write("leak", "overwritten"), "escape");
    throwsCode(() => sb.write("leak", "overwritten", { overwrite: false }), "escape");
    throwsCode(() => sb.write("leak/x", "x"), "escape");
    throwsCode(() => sb.write("dangling", "created?"), "escape");
    throwsCode(() => sb.write("dangling/x", "created?"), "escape");
    throwsCode(() => sb.read("dangling"), "escape");
    assert.equal(fs.readFileSync(secret, "utf8"), "top secret");
    assert.equal(fs.existsSync(path.join(outside, "not-yet.txt")), false, "a dangling link is never followed");

    assert.deepEqual(sb.list(), [
      { path: "dangling", type: "file", bytes: 0 },
      { path: "leak", type: "file", bytes: 0 },
    ]);
    assert.deepEqual(sb.delete("leak"), { path: "leak", type: "file" });
    assert.deepEqual(sb.delete("dangling"), { path: "dangling", type: "file" });
    assert.equal(fs.readFileSync(secret, "utf8"), "top secret", "deleting the link keeps the target");
    assert.deepEqual(fs.readdirSync(root), []);
  });
});

test("symlinks pointing inside the sandbox: read follows them, writes never follow the final link, delete keeps the target", () => {
  withEnv(({ root, sb }) => {
    sb.write("real/f.txt", "inside");
    fs.symlinkSync("real", path.join(root, "alias"));
    fs.symlinkSync("real/f.txt", path.join(root, "flink"));
    fs.symlinkSync("nowhere.txt", path.join(root, "broken"));

    assert.deepEqual(sb.read("flink"), { path: "flink", content: "inside", bytes: 6 });
    assert.deepEqual(sb.read("alias/f.txt"), { path: "alias/f.txt", content: "inside", bytes: 6 });
    throwsCode(() => sb.read("alias"), "is_directory");
    throwsCode(() => sb.read("broken"), "not_found");

    throwsCode(() => sb.write("flink", "changed"), "invalid_path", /symbolic link/);
    throwsCode(() => sb.write("broken", "changed"), "invalid_path", /symbolic link/);
    assert.equal(fs.existsSync(path.join(root, "nowhere.txt")), false);
    assert.equal(fs.readFileSync(path.join(root, "real", "f.txt"), "utf8"), "inside");

    // An intermediate link inside the root is followed to the real directory.
    sb.write("alias/g.txt", "via alias");
    assert.equal(fs.readFileSync(path.join(root, "real", "g.txt"), "utf8"), "via alias");
    assert.deepEqual(sb.list("alias"), [
      { path: "alias/f.txt", type: "file", bytes: 6 },
      { path: "alias/g.txt", type: "file", bytes: 9 },
    ]);
    // The recursive listing does not descend into the linked directory.
    assert.deepEqual(
      sb.list(".", { recursive: true }).map((e) => `${e.path}:${e.type}:${e.bytes}`),
      ["alias:file:0", "broken:file:0", "flink:file:0", "real:directory:0", "real/f.txt:file:6", "real/g.txt:file:9"],
    );
    assert.deepEqual(sb.usage(), { files: 2, bytes: 15 }, "files behind links are counted once");

    sb.delete("flink");
    sb.delete("alias");
    assert.equal(
      fs.readFileSync(path.join(root, "real", "f.txt"), "utf8"),
      "inside",
      "deleting a link keeps its target",
    );
    assert.ok(fs.statSync(path.join(root, "real")).isDirectory());
  });
});

test("size limits: file too large, total bytes quota, file count quota, replacing counts the difference", () => {
  withEnv(
    ({ root, sb }) => {
      throwsCode(() => sb.write("big.txt", "x".repeat(11)), "too_large", /at most 10 bytes/);
      throwsCode(() => sb.write("big.txt", "é".repeat(6)), "too_large", /12 bytes/);
      assert.equal(fs.existsSync(path.join(root, "big.txt")), false);
      sb.write("a.txt", "x".repeat(10));
      sb.write("b.txt", "y".repeat(10));
      throwsCode(() => sb.write("c.txt", "z"), "quota", /at most 20/);
      assert.equal(fs.existsSync(path.join(root, "c.txt")), false);

      // Replacing a.txt: 20 - 10 + 5 = 15.
      sb.write("a.txt", "x".repeat(5));
      assert.deepEqual(sb.usage(), { files: 2, bytes: 15 });
      throwsCode(() => sb.write("b.txt", "y".repeat(16)), "too_large");
      throwsCode(() => sb.write("c.txt", "z".repeat(6)), "quota");
      sb.write("c.txt", "z".repeat(5));
      assert.deepEqual(sb.usage(), { files: 3, bytes: 20 });
      throwsCode(() => sb.write("a.txt", "x".repeat(6)), "quota");
      assert.equal(sb.read("a.txt").content, "xxxxx", "a refused replace keeps the old content");
      sb.write("a.txt", "w".repeat(5));
      assert.equal(sb.read("a.txt").content, "wwwww");
      sb.delete("c.txt");
      sb.write("c.txt", "z".repeat(5));
    },
    { maxFileBytes: 10, maxTotalBytes: 20 },
  );

  withEnv(
    ({ root, sb }) => {
      sb.write("a.txt", "1");
      sb.write("d/b.txt", "2");
      throwsCode(() => sb.write("c.txt", "3"), "quota", /at most 2/);
      throwsCode(() => sb.write("e/c.txt", "3"), "quota");
      assert.equal(fs.existsSync(path.join(root, "e")), false, "a refused write creates no directories");
      sb.write("a.txt", "replaced");
      sb.write("d/b.txt", "also", { overwrite: true });
      assert.deepEqual(sb.usage(), { files: 2, bytes: 12 });
      // Files that appeared some other way (an agent step) count too.
      sb.delete("a.txt");
      fs.writeFileSync(path.join(root, "agent.out"), "from an agent");
      throwsCode(() => sb.write("a.txt", "1"), "quota");
    },
    { maxFiles: 2 },
  );
});

test("overwrite:false, is_directory, not_directory, not_found", () => {
  withEnv(({ root, sb }) => {
    sb.write("a.txt", "first");
    throwsCode(() => sb.write("a.txt", "second", { overwrite: false }), "exists", /"a\.txt" already exists/);
    assert.equal(sb.read("a.txt").content, "first");
    assert.deepEqual(sb.write("b.txt", "new", { overwrite: false }), { path: "b.txt", bytes: 3 });
    assert.equal(sb.read("b.txt").content, "new");
    sb.write("a.txt", "second");
    assert.equal(sb.read("a.txt").content, "second");

    sb.write("dir/x.txt", "x");
    throwsCode(() => sb.write("dir", "x"), "is_directory");
    throwsCode(() => sb.write("dir", "x", { overwrite: false }), "is_directory");
    throwsCode(() => sb.read("dir"), "is_directory");
    throwsCode(() => sb.read("."), "is_directory");
    throwsCode(() => sb.write("a.txt/child.txt", "x"), "not_directory");
    throwsCode(() => sb.write("a.txt/deeper/child.txt", "x"), "not_directory");
    throwsCode(() => sb.read("a.txt/child.txt"), "not_directory");
    throwsCode(() => sb.delete("a.txt/child.txt"), "not_directory");
    throwsCode(() => sb.read("dir/missing.txt"), "not_found");
    throwsCode(() => sb.read("nodir/missing.txt"), "not_found");
    throwsCode(() => sb.delete("missing.txt"), "not_found");
    assert.ok(fs.statSync(path.join(root, "a.txt")).isFile());
    assert.deepEqual(tempFiles(root), []);
  });
});

test("content is written byte for byte, ${HOME} included", () => {
  withEnv(({ root, sb }) => {
    const text = "echo ${HOME} $${HOME} $HOME `id` $(whoami) %USERPROFILE% {{topic}}\r\n\ttail";
    sb.write("run.sh", text);
    assert.equal(fs.readFileSync(path.join(root, "run.sh"), "utf8"), text);
    assert.equal(sb.read("run.sh").content, text);
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x24, 0x7b, 0x7d]);
    sb.write("bin.dat", bytes);
    assert.deepEqual(fs.readFileSync(path.join(root, "bin.dat")), bytes);
    assert.deepEqual(sb.readBytes("bin.dat"), bytes);
    sb.write("empty.txt", "");
    assert.deepEqual(sb.read("empty.txt"), { path: "empty.txt", content: "", bytes: 0 });
  });
});

test("files are 0o600 and directories 0o700, whatever the umask and the old file's mode", () => {
  withEnv(({ root, sb }) => {
    const old = process.umask(0o277);
    try {
      sb.write("a/b/file.txt", "x");
      fs.writeFileSync(path.join(root, "old.txt"), "old", { mode: 0o666 });
      fs.chmodSync(path.join(root, "old.txt"), 0o666);
      sb.write("old.txt", "new");
    } finally {
      process.umask(old);
    }
    assert.equal(fs.statSync(root).mode & 0o777, 0o700);
    assert.equal(fs.statSync(path.join(root, "a")).mode & 0o777, 0o700);
    assert.equal(fs.statSync(path.join(root, "a", "b")).mode & 0o777, 0o700);
    assert.equal(fs.statSync(path.join(root, "a", "b", "file.txt")).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.join(root, "old.txt")).mode & 0o777, 0o600);
    assert.equal(fs.readFileSync(path.join(root, "old.txt"), "utf8"), "new");
  });
});

test("no temp file remains after a refused or failed write", () => {
  withEnv(
    ({ root, sb }) => {
      sb.write("keep.txt", "keep");
      sb.write("dir/x", "x");
      for (const attempt of [
        () => sb.write("big.txt", "x".repeat(100)),
        () => sb.write("keep.txt", "y", { overwrite: false }),
        () => sb.write("dir", "y"),
        () => sb.write("keep.txt/x", "y"),
        () => sb.write("../x", "y"),
        () => sb.write("q.txt", "x".repeat(60)),
      ]) {
        assert.throws(attempt, SandboxError);
        assert.deepEqual(tempFiles(root), []);
      }

      // A failure after the temp file exists (rename / link fails): the temp file is removed.
      const realRename = fs.renameSync;
      const realLink = fs.linkSync;
      let calls = 0;
      try {
        fs.renameSync = ((..._args: unknown[]) => {
          calls++;
          throw Object.assign(new Error("EIO: simulated"), { code: "EIO" });
        }) as typeof fs.renameSync;
        assert.throws(() => sb.write("keep.txt", "replacement"), /simulated/);
        assert.throws(() => sb.write("dir/new.txt", "new"), /simulated/);
        fs.linkSync = ((..._args: unknown[]) => {
          calls++;
          throw Object.assign(new Error("EIO: simulated link"), { code: "EIO" });
        }) as typeof fs.linkSync;
        assert.throws(() => sb.write("fresh.txt", "new", { overwrite: false }), /simulated link/);
      } finally {
        fs.renameSync = realRename;
        fs.linkSync = realLink;
      }
      assert.equal(calls, 3, "the failures happened after the temp file was written");
      assert.deepEqual(tempFiles(root), []);
      assert.equal(sb.read("keep.txt").content, "keep");
      assert.equal(fs.existsSync(path.join(root, "dir", "new.txt")), false);
      assert.equal(fs.existsSync(path.join(root, "fresh.txt")), false);
      // And a successful write leaves none either.
      sb.write("fresh.txt", "ok", { overwrite: false });
      sb.write("keep.txt", "again");
      assert.deepEqual(tempFiles(root), []);
      assert.deepEqual(fs.readdirSync(root).sort(), ["dir", "fresh.txt", "keep.txt"]);
    },
    { maxFileBytes: 64, maxTotalBytes: 64 },
  );
});

test("depth and component length limits", () => {
  withEnv(
    ({ root, sb }) => {
      sb.write("a/b/c", "3 levels");
      sb.write("./a/./b/./d", "dots do not count");
      throwsCode(() => sb.write("a/b/c2/d", "4 levels"), "invalid_path", /at most 3/);
      throwsCode(() => sb.read("a/b/c/d"), "invalid_path");
      throwsCode(() => sb.list("a/b/c/d"), "invalid_path");
      assert.equal(fs.existsSync(path.join(root, "a", "b", "c2")), false);
    },
    { maxDepth: 3 },
  );
  withEnv(({ sb }) => {
    const sixteen = Array.from({ length: 16 }, (_, i) => `d${i}`).join("/");
    sb.write(sixteen, "ok");
    assert.equal(sb.read(sixteen).content, "ok");
    throwsCode(() => sb.write(`${sixteen}/x`, "no"), "invalid_path");
    const name255 = "n".repeat(255);
    sb.write(name255, "ok");
    throwsCode(() => sb.write("é".repeat(128), "256 bytes"), "invalid_path", /255 bytes/);
  });
});

test("destroy removes the sandbox and never what links point at", () => {
  withEnv(({ root, outside, sb }) => {
    sb.write("a/b.txt", "x");
    fs.symlinkSync(outside, path.join(root, "a", "out"));
    sb.destroy();
    assert.equal(fs.existsSync(root), false);
    assert.equal(fs.readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    sb.destroy();
    assert.deepEqual(sb.write("again.txt", "y"), { path: "again.txt", bytes: 1 });
  });
});
