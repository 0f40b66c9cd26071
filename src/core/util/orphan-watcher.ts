/**
 * The orphan watcher: one tiny /bin/sh process per bridge that ends the bridge's CLI process groups
 * when the bridge dies without doing it itself (SIGKILL, OOM killer, a crash), so a CLI outlives a
 * killed bridge by about a second instead of until the next start.
 *
 * How it knows: the bridge holds the write end of the watcher's stdin (a socket pair created
 * close-on-exec, so no CLI inherits it). The kernel closes it when the bridge process dies,
 * however it dies; the watcher's `read` then sees end-of-file. It then ends every group recorded
 * in the run directory by ITS bridge (records carry the bridge's owner id, `run-records.ts`):
 * SIGTERM to all, one shared grace period, SIGKILL to what is left, records removed, and exits.
 * On a clean shutdown the bridge writes `stop` (after ending its CLIs itself) and it exits at once.
 *
 * Why it is never left behind and not stopped too early:
 * - it exits on `stop` or on end-of-file, and end-of-file comes whenever the bridge is gone;
 * - it runs in its own session (detached), so a terminal's Ctrl-C / hang-up, or a signal to the
 *   bridge's process group, does not reach it; it also ignores SIGINT, SIGTERM and SIGHUP, so a
 *   stray `kill` cannot take it away while the bridge still needs it. SIGKILL still works.
 * - a group is signalled only if its leader is gone or is still the process recorded (same start
 *   time). The watcher acts within milliseconds of the bridge's death, while the recorded groups
 *   were alive moments before: the kernel does not reuse a pid still in use as a group or session
 *   id, so a reused group id would need the whole group to end and the pid counter to wrap round
 *   inside that window. (The start-up reaper, which may run much later, checks more: boot id,
 *   session membership, start times.)
 *
 * /bin/sh (dash, busybox ash or bash) rather than node: about 1 MB resident instead of ~40 MB,
 * and it needs nothing but `kill`, `read` and `sleep`.
 */
import { spawn, type ChildProcess } from "node:child_process";

/** $1 run dir, $2 owner id, $3 grace in tenths of a second. Kept POSIX (dash, ash, bash). */
const SCRIPT = `
trap '' INT TERM HUP
while IFS= read -r line; do
  [ "$line" = stop ] && exit 0
done
dir=$1 owner=$2 tenths=$3
cd "$dir" 2>/dev/null || exit 0
groups=
for f in *.json; do
  rec=
  IFS= read -r rec 2>/dev/null <"$f"
  case $rec in *"\\"owner\\":\\"$owner\\""*) ;; *) continue ;; esac
  pid=\${f%.json}
  case $pid in ''|*[!0-9]*|0|1) continue ;; esac
  start=\${rec#*\\"start\\":\\"}
  start=\${start%%\\"*}
  stat=
  IFS= read -r stat 2>/dev/null </proc/$pid/stat
  if [ -n "$stat" ]; then
    set -- \${stat##*) }
    [ "\${20}" = "$start" ] || { rm -f "$f"; continue; }
  fi
  kill -s TERM -- "-$pid" 2>/dev/null
  groups="$groups $pid"
done
all=$groups
i=0
while [ -n "$groups" ] && [ "$i" -lt "$tenths" ]; do
  sleep 0.1
  i=$((i + 1))
  left=
  for g in $groups; do kill -s 0 -- "-$g" 2>/dev/null && left="$left $g"; done
  groups=$left
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
for g in $all; do rm -f "$g.json"; done
exit 0
`;

export interface OrphanWatcher {
  /** The watcher's pid (undefined if it could not be started: then only the start-up reaper remains). */
  readonly pid: number | undefined;
  /** Clean shutdown (the bridge has ended its CLIs): tell the watcher to exit; resolves once it has. */
  stop(): Promise<void>;
}

/** Start the watcher for the records `owner` writes under `runDir`. Never keeps the event loop alive. */
export function startOrphanWatcher(runDir: string, owner: string, graceMs = 2000): OrphanWatcher {
  let child: ChildProcess;
  try {
    child = spawn(
      "/bin/sh",
      ["-c", SCRIPT, "clawbridge-orphan-watcher", runDir, owner, String(Math.max(1, Math.round(graceMs / 100)))],
      {
        stdio: ["pipe", "ignore", "ignore"],
        detached: true,
        cwd: "/",
        env: { PATH: process.env.PATH || "/usr/bin:/bin" },
      },
    );
  } catch {
    return { pid: undefined, stop: async () => {} };
  }
  const exited = new Promise<void>((resolve) => {
    child.once("error", () => resolve());
    child.once("exit", () => resolve());
  });
  child.stdin?.on("error", () => {
    /* the watcher is gone: nothing to tell it */
  });
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  let stopping: Promise<void> | undefined;
  return {
    pid: child.pid,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
        child.stdin?.end("stop\n");
        let timer: NodeJS.Timeout | undefined;
        const done = await Promise.race([
          exited.then(() => true),
          new Promise<false>((r) => (timer = setTimeout(() => r(false), 2000))),
        ]);
        if (timer) clearTimeout(timer);
        if (!done) {
          child.kill("SIGKILL");
          await exited;
        }
      })();
      return stopping;
    },
  };
}
