/**
 * Standbys and the memory budget of the warm pool (src/backends/warm/pool.ts, memory.ts), with real
 * long-lived `cat` processes as workers and a memory reader that counts each process as 200 MB (so
 * the budget's arithmetic is exact). What they promise: a new conversation takes a standby of its
 * kind (never one of another kind, never one it cannot adopt, never one another conversation
 * took), the standby is replaced once the turn ends; a kind gets standbys only after a turn of it
 * came; past the budget standbys go first, then the least recently used idle worker; a standby
 * never ends a conversation's worker to fit; a new worker that cannot fit (everything busy) gives
 * no lease (the turn runs cold). And the pieces: a standby's folder becoming a conversation's, the
 * `warm:` settings' checks, and a process group's memory counting a fork before its exec once.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { createLogger } from "../../src/core/log/logger.js";
import { defaultWarmMemoryBytes, WarmMemory, type MemoryItem } from "../../src/backends/warm/memory.js";
import { groupRss, pidRss, treeRss } from "../../src/backends/warm/rss.js";
import { standbyDir } from "../../src/backends/warm/standby-dir.js";
import { WarmPool, type StandbyKind } from "../../src/backends/warm/pool.js";
import { WarmProcess } from "../../src/backends/warm/warm-process.js";

const logger = createLogger("silent");
const MB = 1024 * 1024;

class Cat extends WarmProcess {
  /** The conversation a standby was given (adopt). */
  owner: string | undefined;
  constructor(readonly tag: string) {
    super({
      label: "cat",
      command: "/bin/cat",
      args: [],
      env: process.env,
      cwd: process.cwd(),
      killGraceMs: 500,
      logger,
    });
  }
}

const gone = (pid: number | undefined) => {
  try {
    process.kill(pid!, 0);
    return false;
  } catch {
    return true;
  }
};

async function until(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

/**
 * A pool whose budget counts every process as `eachMB` (200) MB, starting or started, `budgetMB`
 * in all (a first start, before any was measured, needs room for 384 MB).
 */
function poolWith(budgetMB: number, opts: { standby?: number; maxProcesses?: number; eachMB?: number } = {}) {
  const each = (opts.eachMB ?? 200) * MB;
  const pools: Array<WarmPool<Cat>> = [];
  const memory = new WarmMemory(
    () => pools.flatMap((p): MemoryItem[] => p.memoryItems()),
    (pids) => new Map(pids.map((p) => [p, each])),
    budgetMB * MB,
    () => each,
  );
  const pool = new WarmPool<Cat>(
    "b",
    { idleSeconds: 60, maxProcesses: opts.maxProcesses ?? 8, standby: opts.standby ?? 1 },
    logger,
    memory,
  );
  pools.push(pool);
  return { pool, memory };
}

/** Standbys of `kind`; `adopt` records which conversation took each (and may refuse). */
function kindOf(kind: string, key: string, started: Cat[], refuse = false): StandbyKind<Cat> {
  return {
    kind,
    start: async () => {
      const c = new Cat(`standby-${kind}-${started.length}`);
      started.push(c);
      return c;
    },
    adopt: (w) => {
      if (refuse || w.owner !== undefined) return false;
      w.owner = key;
      return true;
    },
  };
}

const fresh = (tag: string) => async () => new Cat(tag);

test("a new conversation takes a ready standby of its kind, which is replaced once its turn ends", async () => {
  const { pool } = poolWith(100_000);
  const standbys: Cat[] = [];
  try {
    // The first turn of a kind: no standby yet (lazily started), a process of its own.
    const a = (await pool.acquire("a", () => true, fresh("a"), undefined, kindOf("k1", "a", standbys)))!;
    assert.equal(a.fresh, true);
    assert.equal(a.worker.tag, "a");
    assert.equal(pool.standbySize, 0, "no standby before the first turn of its kind ended");
    a.release(true);
    await pool.settled();
    assert.equal(standbys.length, 1, "one standby started after that turn");
    const s1 = standbys[0]!;
    const listed = pool.list(false);
    assert.ok(listed.some((w) => w.pid === s1.pid && w.standby && !w.busy));

    // A new conversation of the same kind takes it: not fresh (a loss before output runs cold).
    const b = (await pool.acquire("b", () => true, fresh("never"), undefined, kindOf("k1", "b", standbys)))!;
    assert.equal(b.worker, s1, "the standby serves the new conversation");
    assert.equal(b.fresh, false);
    assert.equal(s1.owner, "b", "given its conversation");
    assert.equal(pool.stats.standbyTaken, 1);
    assert.equal(pool.standbySize, 0, "taken: no longer a standby");
    assert.equal(standbys.length, 1, "the replacement waits for the turn (no CPU taken from it)");
    b.release(true);
    await pool.settled();
    assert.equal(standbys.length, 2, "replaced once the turn ended");
    const s2 = standbys[1]!;
    assert.notEqual(s2.pid, s1.pid);
    assert.equal(s2.owner, undefined, "the new standby belongs to nobody");

    // The conversation keeps its process; the standby is never offered to it again.
    const b2 = (await pool.acquire(
      "b",
      (w) => w.owner === "b",
      fresh("never"),
      undefined,
      kindOf("k1", "b", standbys),
    ))!;
    assert.equal(b2.worker, s1);
    b2.release(true);
    assert.equal(pool.stats.standbyStarted, 2);
  } finally {
    await pool.close();
  }
  assert.ok(
    standbys.every((s) => gone(s.pid)),
    "close() ended the standbys too",
  );
});

test("a standby serves only its own kind, and one it cannot adopt stays a standby", async () => {
  const { pool } = poolWith(100_000);
  const standbys: Cat[] = [];
  try {
    (await pool.acquire("a", () => true, fresh("a"), undefined, kindOf("k1", "a", standbys)))!.release(true);
    await pool.settled();
    const s1 = standbys[0]!;
    // Another kind (another model, other options): its own process, the k1 standby untouched.
    const other = (await pool.acquire("c", () => true, fresh("c"), undefined, kindOf("k2", "c", standbys)))!;
    assert.equal(other.worker.tag, "c");
    assert.equal(s1.owner, undefined);
    other.release(true);
    await pool.settled();
    assert.equal(pool.standbySize, 2, "each recent kind has its standby");
    // A turn that cannot adopt it (e.g. its folder already holds files): a process of its own.
    const d = (await pool.acquire("d", () => true, fresh("d"), undefined, kindOf("k1", "d", standbys, true)))!;
    assert.equal(d.worker.tag, "d");
    assert.equal(s1.owner, undefined);
    assert.ok(
      pool.list(false).some((w) => w.pid === s1.pid && w.standby),
      "still a standby",
    );
    d.release(true);
    // Without a kind (a resumed session, client tools): never a standby.
    const e = (await pool.acquire("e", () => true, fresh("e")))!;
    assert.equal(e.worker.tag, "e");
    e.release(true);
    assert.equal(s1.owner, undefined);
  } finally {
    await pool.close();
  }
});

test("a conversation that comes while its kind's standby is still starting waits for it rather than starting another", async () => {
  const { pool } = poolWith(100_000);
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const started: Cat[] = [];
  const slow: StandbyKind<Cat> = {
    kind: "k1",
    start: async () => {
      await gate;
      const c = new Cat("slow");
      started.push(c);
      return c;
    },
    adopt: (w) => ((w.owner = "b"), true),
  };
  try {
    (await pool.acquire("a", () => true, fresh("a"), undefined, slow))!.release(true);
    await until(() => pool.standbySize === 1);
    const pending = pool.acquire("b", () => true, fresh("never"), undefined, slow);
    setTimeout(release, 50);
    const b = (await pending)!;
    assert.equal(b.worker.tag, "slow");
    assert.equal(b.worker.owner, "b");
    b.release(true);
  } finally {
    release();
    await pool.close();
  }
});

test("past the memory budget the standbys go first; a standby never ends a conversation's process to fit", async () => {
  // 500 MB: two processes of 200 MB fit, three do not.
  const { pool, memory } = poolWith(500);
  const standbys: Cat[] = [];
  try {
    const a = (await pool.acquire("a", () => true, fresh("a"), undefined, kindOf("k1", "a", standbys)))!;
    a.release(true);
    await pool.settled();
    assert.equal(standbys.length, 1, "a + its standby: 400 MB");
    const s1 = standbys[0]!;
    // A conversation that cannot start on the standby (a resumed session): room is made, standby first.
    const b = (await pool.acquire("b", () => true, fresh("b")))!;
    assert.ok(gone(s1.pid), "the standby was ended for the new process");
    assert.ok(!gone(a.worker.pid), "the conversation's idle process stays");
    assert.equal(pool.stats.memoryEvicted, 1);
    b.release(true);
    await pool.settled();
    assert.equal(pool.standbySize, 0, "no new standby: it would not fit without ending a conversation's process");
    assert.ok(!gone(a.worker.pid) && !gone(b.worker.pid));

    // Another new process: the least recently used idle worker (a) goes.
    const c = (await pool.acquire("c", () => true, fresh("c")))!;
    assert.ok(gone(a.worker.pid), "a, least recently used, ended");
    assert.ok(!gone(b.worker.pid));
    // Everything busy (b leased again, c leased): no room can be made, the turn runs cold.
    const b2 = (await pool.acquire("b", () => true, fresh("never")))!;
    assert.equal(await pool.acquire("d", () => true, fresh("d")), undefined, "no lease: the turn runs cold");
    assert.equal(pool.stats.memoryOverflow, 1);
    assert.equal(pool.size, 2, "the busy processes were not touched");
    b2.release(true);
    c.release(true);

    // Processes grow: the periodic check ends idle ones, least recently used first, until it holds.
    memory.maxBytes = 300 * MB;
    await memory.enforce();
    assert.ok(gone(b2.worker.pid), "b, least recently used, ended");
    assert.ok(!gone(c.worker.pid), "c kept: the budget holds again");
    assert.deepEqual(memory.state(), { maxBytes: 300 * MB, usedBytes: 200 * MB, configured: false });
  } finally {
    await pool.close();
  }
});

test("at maxProcesses a standby goes before any conversation's process", async () => {
  const { pool } = poolWith(100_000, { maxProcesses: 2 });
  const standbys: Cat[] = [];
  try {
    const a = (await pool.acquire("a", () => true, fresh("a"), undefined, kindOf("k1", "a", standbys)))!;
    a.release(true);
    await pool.settled();
    assert.equal(pool.standbySize, 1);
    const b = (await pool.acquire("b", () => true, fresh("b")))!;
    assert.ok(gone(standbys[0]!.pid), "the standby made room");
    assert.ok(!gone(a.worker.pid));
    b.release(true);
  } finally {
    await pool.close();
  }
});

test("a standby's directory becomes a new conversation's: a link at the conversation's path, only where it is missing or empty", () => {
  const data = mkdtempSync(path.join(tmpdir(), "cb-sbdir-"));
  try {
    const sd = standbyDir(data);
    assert.match(path.basename(sd.dir), /^standby-/);
    const conv = path.join(data, "work", "conv1");
    mkdirSync(conv); // made empty by conversationCwd before the turn
    assert.equal(sd.adoptAs(conv), true);
    assert.equal(realpathSync(conv), sd.dir, "the conversation's path leads to the standby's directory");
    assert.equal(readlinkSync(conv), path.basename(sd.dir), "a relative link (the data directory may move)");
    assert.equal(sd.adoptAs(path.join(data, "work", "conv2")), false, "taken once only");
    sd.remove();
    assert.ok(existsSync(sd.dir), "an adopted directory is the conversation's: never removed");
    // A conversation whose folder holds files keeps it (its process starts there).
    const other = standbyDir(data);
    const busy = path.join(data, "work", "conv3");
    mkdirSync(busy);
    writeFileSync(path.join(busy, "image.png"), "x");
    assert.equal(other.adoptAs(busy), false);
    assert.ok(lstatSync(busy).isDirectory() && existsSync(path.join(busy, "image.png")));
    other.remove();
    assert.ok(!existsSync(other.dir), "an untaken standby's directory is removed");
  } finally {
    rmSync(data, { recursive: true, force: true });
  }
});

test("warm: settings are checked with messages that name the key; the default budget is 40% of memory", () => {
  const base = { backends: { b: { type: "claude-code" } }, models: [{ id: "m", backend: "b" }] };
  assert.throws(() => resolveConfig({ ...base, warm: { maxMemoryMB: 0 } }, "t"), /warm\.maxMemoryMB/);
  assert.throws(() => resolveConfig({ ...base, warm: { standby: 9 } }, "t"), /warm\.standby/);
  assert.throws(() => resolveConfig({ ...base, warm: { maxMemory: 800 } }, "t"), /warm.*maxMemory/);
  assert.throws(
    () => resolveConfig({ ...base, backends: { b: { type: "claude-code", warm: { standby: -1 } } } }, "t"),
    /backends\.b\.warm\.standby/,
  );
  const cfg = resolveConfig({ ...base, warm: { maxMemoryMB: 800 } }, "t");
  assert.deepEqual(cfg.warm, { maxMemoryMB: 800, standby: 1 });
  assert.deepEqual(resolveConfig(base, "t").warm, { standby: 1 });
  const share = defaultWarmMemoryBytes() / os.totalmem();
  assert.ok(share > 0.39 && share <= 0.4, String(share));
});

test("a standby starts only when it fits the budget as things are", async () => {
  // 450 MB: one process of 300 MB fits, a standby beside it does not.
  const { pool } = poolWith(450, { eachMB: 300 });
  const standbys: Cat[] = [];
  try {
    const a = (await pool.acquire("a", () => true, fresh("a"), undefined, kindOf("k1", "a", standbys)))!;
    a.release(true);
    await pool.settled();
    assert.equal(standbys.length, 0, "no standby: it would need a's memory");
    assert.ok(!gone(a.worker.pid));
  } finally {
    await pool.close();
  }
});

test("a process group's memory counts a fork before its exec once (its pages are its parent's), a program it runs anew fully", async () => {
  // sh forks a subshell for `( … )` that never runs another program (a fork of sh: same name,
  // executable and command line), and runs sleep and another sh in it as new programs.
  const child = spawn("/bin/sh", ["-c", '(sleep 30; true) & /bin/sh -c "sleep 30; true" & wait'], {
    detached: true,
    stdio: "ignore",
  });
  const leader = child.pid!;
  try {
    const members = () =>
      readdirSync("/proc")
        .filter((n) => /^\d+$/.test(n))
        .flatMap((n) => {
          try {
            const stat = readFileSync(`/proc/${n}/stat`, "utf8");
            const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
            if (Number(f[2]) !== leader) return [];
            const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
            return [{ pid: Number(n), parent: Number(f[1]), name, rss: pidRss(Number(n)) ?? 0 }];
          } catch {
            return [];
          }
        });
    // The leader, its subshell, the inner sh and two sleeps.
    assert.ok(await until(() => members().length === 5), JSON.stringify(members()));
    const all = members();
    const subshell = all.find(
      (p) =>
        p.parent === leader &&
        p.name === "sh" &&
        readFileSync(`/proc/${p.pid}/cmdline`, "latin1") === readFileSync(`/proc/${leader}/cmdline`, "latin1"),
    );
    assert.ok(subshell, JSON.stringify(all));
    const sum = all.reduce((n, p) => n + p.rss, 0);
    const counted = groupRss([leader]).get(leader)!;
    // Sizes move a little between readings: the fork is left out, everything else is in.
    assert.ok(Math.abs(counted - (sum - subshell.rss)) < 64 * 1024, `${counted} vs ${sum} - ${subshell.rss}`);
    assert.ok(counted < sum, "the fork is not counted");
    assert.ok(treeRss(leader)! <= counted + 64 * 1024, "the tree walk leaves it out too");
  } finally {
    try {
      process.kill(-leader, "SIGKILL");
    } catch {
      /* gone */
    }
  }
});
