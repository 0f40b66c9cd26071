/** Process groups a test starts (CLIs, their children, bridges run as child processes): checking and ending them. */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { procStat } from "../../src/core/util/run-records.js";
import { pidsWithEnv } from "./bridge.js";

/** Is anything of group `pgid` still running? (`kill -0` first; zombies only waiting for init to reap them are dead.) */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
  }
  return readdirSync("/proc").some((n) => {
    if (!/^\d+$/.test(n)) return false;
    const s = procStat(Number(n));
    return !!s && s.pgrp === pgid && s.state !== "Z";
  });
}

/** Process `pid` has exited: it is gone, or a zombie waiting to be reaped. */
export const exited = (pid: number): boolean => procStat(pid) === undefined || procStat(pid)!.state === "Z";

/** SIGKILL every group in `groups` (those already gone, as they should be, are skipped). */
export function killGroups(groups: Iterable<number>): void {
  for (const g of groups) {
    try {
      process.kill(-g, "SIGKILL");
    } catch {
      /* gone, as it should be */
    }
  }
}

/** SIGKILL every process whose environment contains `mark` (see `pidsWithEnv`). */
export function killMarked(mark: string): void {
  for (const pid of pidsWithEnv(mark)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
}

/**
 * The URL a bridge run as a child process prints once it listens (`listening on <url>` on its
 * stderr, which must be piped); rejects when it exits first or does not listen within 60 s.
 * `stderr()` is the last 20,000 characters it wrote there.
 */
export function bridgeListening(proc: ChildProcess): { url: Promise<string>; stderr: () => string } {
  let err = "";
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the bridge did not start within 60 s:\n${err}`)), 60_000);
    proc.stderr!.on("data", (d: Buffer) => {
      err = (err + d.toString()).slice(-20_000);
      const m = /listening on (http:\/\/[^\s]+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the bridge exited (${code ?? signal}) before listening:\n${err}`));
    });
  });
  return { url, stderr: () => err };
}

/**
 * `clawbridge serve --config <configFile>` as a child process in a group of its own (SIGKILL
 * `-proc.pid` to end it whole), with `home` as its HOME and no CLAWBRIDGE_CONFIG /
 * CLAWBRIDGE_STORE_URL of the caller's; resolves once it listens, with its URL (a bridge that does
 * not listen is ended, group and all, before the rejection).
 */
export async function serveBridge(configFile: string, home: string): Promise<{ proc: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  delete env.CLAWBRIDGE_CONFIG;
  delete env.CLAWBRIDGE_STORE_URL;
  const proc = spawn(process.execPath, [path.resolve("bin/clawbridge.js"), "serve", "--config", configFile], {
    env,
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  try {
    return { proc, url: await bridgeListening(proc).url };
  } catch (err) {
    killGroups([proc.pid!]);
    throw err;
  }
}
