/**
 * `clawbridge serve` and its signals: the first SIGTERM/SIGINT shuts down gracefully (running turns
 * finish, up to `server.shutdownGraceSeconds`); a second one does not wait for the turns, but the
 * CLI process groups are still ended (SIGTERM, then SIGKILL after their grace) before the process
 * exits — exiting at once would leave them running, burning the user's quota, until the next start
 * reaps them. A third exits at once.
 */
import { terminateAll } from "../../core/util/process.js";
import type { Bridge } from "./start.js";

/** How long a second signal waits for the CLI process groups to end before it exits anyway. */
const KILL_BOUND_MS = 15_000;

export interface SignalOptions {
  /** Where the signals come from (default: `process`; tests pass an emitter). */
  source?: Pick<NodeJS.Process, "on" | "off">;
  signals?: readonly NodeJS.Signals[];
  write?: (line: string) => void;
  exit?: (code: number) => never | void;
  /** A failed graceful shutdown (default: report it and exit 1). */
  onError?: (err: unknown) => void;
  /** End every CLI process group now (default: `terminateAll` in src/core/util/process.ts). */
  killAll?: () => Promise<void>;
}

/** Stop `bridge` on SIGTERM/SIGINT as described above. Returns the function that stops listening. */
export function stopOnSignals(bridge: Pick<Bridge, "close">, opts: SignalOptions = {}): () => void {
  const source = opts.source ?? process;
  const signals = opts.signals ?? (["SIGTERM", "SIGINT"] as const);
  const write = opts.write ?? ((line: string) => void process.stderr.write(line));
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  const killAll = opts.killAll ?? terminateAll;
  let received = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    received++;
    if (received === 1) {
      write(`clawbridge: ${sig} received, finishing running turns...\n`);
      bridge.close().then(
        () => {
          if (received === 1) exit(0);
        },
        (err) => {
          if (opts.onError) return opts.onError(err);
          write(`clawbridge: shutdown failed: ${(err as Error).message}\n`);
          exit(1);
        },
      );
    } else if (received === 2) {
      write(`clawbridge: ${sig} again, ending the CLI processes and exiting now\n`);
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((r) => (timer = setTimeout(r, KILL_BOUND_MS)));
      void Promise.race([killAll().catch(() => undefined), bound]).then(() => {
        clearTimeout(timer);
        exit(130);
      });
    } else {
      exit(130);
    }
  };
  const handlers = signals.map((sig) => [sig, () => onSignal(sig)] as const);
  for (const [sig, fn] of handlers) source.on(sig, fn);
  return () => {
    for (const [sig, fn] of handlers) source.off(sig, fn);
  };
}
