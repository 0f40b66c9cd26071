/**
 * Starting and stopping the bridge in a worker thread of the gateway process, at most once per
 * process (a globalThis flag) and once per data directory across processes (plugin.lock).
 */
import { createInterface } from "node:readline";
import { Worker } from "node:worker_threads";
import { acquireLock, releaseLock, updateLock } from "./lock.js";

const STATE_KEY = Symbol.for("clawbridge.openclaw-plugin.sidecar");

/**
 * Process-wide state: register() runs several times per process (full and discovery loads, hot
 * reloads), every copy of this module must see the same bridge.
 * @returns {{ phase: "idle" | "starting" | "running" | "stopping", worker?: Worker, dataDir?: string, url?: string, pending?: Promise<void>, exitHandler?: () => void }}
 */
export function sidecarState() {
  const g = /** @type {any} */ (globalThis);
  g[STATE_KEY] ??= { phase: "idle" };
  return g[STATE_KEY];
}

const PINO_LEVELS = { 10: "debug", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "error" };

/** Forward the bridge's pino lines to the gateway's logger, one short line each. */
function forwardLogs(stream, logger) {
  if (!stream) return;
  const rl = createInterface({ input: stream, crlfDelay: Infinity });
  rl.on("line", (line) => {
    if (!line.trim()) return;
    let level = "info";
    let text = line;
    try {
      const rec = JSON.parse(line);
      level = PINO_LEVELS[rec.level] ?? "info";
      const { level: _l, time: _t, pid: _p, hostname: _h, name: _n, msg, ...rest } = rec;
      const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest).slice(0, 500)}` : "";
      text = `${msg ?? ""}${extra}`;
    } catch {
      /* plain text */
    }
    const fn = logger[level] ?? logger.info;
    fn.call(logger, `clawbridge: ${text.slice(0, 2000)}`);
  });
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), ms)))]).finally(
    () => clearTimeout(timer),
  );
}

/**
 * Start the bridge unless it already runs in this process or another process holds the lock.
 * Never throws: problems are logged (the gateway keeps running either way).
 * @param {import("./settings.js").Settings} settings
 * @param {{ info: Function, warn: Function, error: Function, debug?: Function }} logger
 */
export async function startSidecar(settings, logger, { workerUrl = new URL("./worker.js", import.meta.url) } = {}) {
  const state = sidecarState();
  if (state.phase === "starting" || state.phase === "running") {
    logger.debug?.("clawbridge: already started in this process");
    return state.pending;
  }
  if (state.phase === "stopping") await state.pending;
  if (!settings.root) {
    logger.error(`clawbridge: not started: ${settings.rootHint}`);
    return;
  }
  let lock;
  try {
    lock = acquireLock(settings.dataDir, { port: settings.port ?? null, host: settings.host ?? null });
  } catch (err) {
    logger.error(`clawbridge: not started: cannot write ${settings.dataDir}/plugin.lock: ${err.message}`);
    return;
  }
  if (!lock.ok) {
    logger.warn(
      `clawbridge: not started here: another process (pid ${lock.holder.pid ?? "?"}${lock.holder.url ? `, ${lock.holder.url}` : ""}) runs it for ${settings.dataDir} (see ${settings.dataDir}/plugin.lock)`,
    );
    return;
  }
  if (lock.replaced) logger.info(`clawbridge: replaced a stale plugin.lock (pid ${lock.replaced.pid ?? "?"} is gone)`);

  state.phase = "starting";
  state.dataDir = settings.dataDir;
  state.pending = (async () => {
    const worker = new Worker(workerUrl, {
      name: "clawbridge",
      workerData: {
        root: settings.root,
        configPath: settings.configPath,
        host: settings.host,
        port: settings.port,
        apiKey: settings.apiKey,
      },
      env: {
        ...process.env,
        ...settings.env,
        CLAWBRIDGE_DATA_DIR: process.env.CLAWBRIDGE_DATA_DIR || settings.dataDir,
      },
      // Not the gateway's own Node flags (--import hooks and the like): a clean thread.
      execArgv: [],
      stdout: true,
      stderr: true,
    });
    state.worker = worker;
    forwardLogs(worker.stdout, logger);
    forwardLogs(worker.stderr, logger);
    const exited = new Promise((resolve) => worker.once("exit", (code) => resolve({ type: "exit", code })));
    worker.on("error", (err) => logger.error(`clawbridge: the bridge failed: ${err?.stack ?? err}`));
    const first = new Promise((resolve) => {
      worker.on("message", (msg) => {
        if (msg?.type === "ready" || msg?.type === "reuse" || msg?.type === "error") resolve(msg);
      });
    });
    const outcome = await withTimeout(Promise.race([first, exited]), settings.startTimeoutMs);

    if (outcome?.type === "ready") {
      state.phase = "running";
      state.url = outcome.url;
      updateLock(settings.dataDir, {
        url: outcome.url,
        host: outcome.host,
        port: outcome.port,
        version: outcome.version,
      });
      // The gateway may end without gateway_stop (a crash, process.exit): leave no lock behind.
      if (!state.exitHandler) {
        state.exitHandler = () => releaseLock(settings.dataDir);
        process.once("exit", state.exitHandler);
      }
      logger.info(
        `clawbridge: ${outcome.version} listening on ${outcome.url} inside the gateway (config: ${outcome.config}; models: ${outcome.models.join(", ")})`,
      );
      // Unexpected end of the worker while the gateway runs: say so, free the lock.
      exited.then(({ code }) => {
        if (state.worker !== worker || state.phase === "stopping") return;
        logger.error(
          `clawbridge: the bridge stopped unexpectedly (worker exit ${code}); restart the gateway to start it again`,
        );
        state.phase = "idle";
        state.worker = undefined;
        releaseLock(settings.dataDir);
      });
      return;
    }
    // Not running: clean up whatever happened.
    if (outcome === "timeout") {
      logger.error(`clawbridge: not started: no answer within ${settings.startTimeoutMs / 1000} s`);
      await worker.terminate().catch(() => undefined);
    } else if (outcome?.type === "reuse") {
      logger.info(
        `clawbridge: a clawbridge ${outcome.version ?? ""} already serves ${outcome.host}:${outcome.port}; using it, not starting another`,
      );
    } else if (outcome?.type === "error") {
      logger.error(`clawbridge: not started: ${outcome.message}`);
    } else {
      logger.error(`clawbridge: not started: the bridge ended during start-up (exit ${outcome?.code})`);
    }
    await withTimeout(exited, 5000);
    if (outcome !== "timeout") await worker.terminate().catch(() => undefined);
    state.phase = "idle";
    state.worker = undefined;
    releaseLock(settings.dataDir);
  })().catch((err) => {
    logger.error(`clawbridge: not started: ${err?.stack ?? err}`);
    state.phase = "idle";
    state.worker = undefined;
    releaseLock(settings.dataDir);
  });
  return state.pending;
}

/**
 * Stop the bridge this process started: running turns get the bridge's grace period, then the
 * worker is ended; the lock is removed. Safe to call more than once and when nothing runs.
 */
export async function stopSidecar(settings, logger) {
  const state = sidecarState();
  if (state.phase === "starting") await state.pending;
  if (state.phase === "stopping") return state.pending;
  if (state.phase !== "running" || !state.worker) return;
  const worker = state.worker;
  const dataDir = state.dataDir ?? settings.dataDir;
  state.phase = "stopping";
  state.pending = (async () => {
    const exited = new Promise((resolve) => worker.once("exit", () => resolve("exit")));
    worker.postMessage({ type: "stop" });
    const r = await withTimeout(exited, settings.stopTimeoutMs);
    if (r === "timeout") {
      logger.warn(`clawbridge: still stopping after ${settings.stopTimeoutMs / 1000} s; ending it`);
      await worker.terminate().catch(() => undefined);
    }
    releaseLock(dataDir);
    if (state.exitHandler) process.removeListener("exit", state.exitHandler);
    state.exitHandler = undefined;
    state.phase = "idle";
    state.worker = undefined;
    state.url = undefined;
    logger.info("clawbridge: stopped");
  })();
  return state.pending;
}
