/**
 * Worker thread that runs clawbridge inside the gateway process: its compiled build (dist/) when
 * that is current, else its TypeScript sources through tsx — tsx's loader is then registered in
 * THIS thread only, so the gateway's own module loading is untouched. Messages to the parent:
 * {type:"ready"|"reuse"|"error"|"stopped"}; from the parent: {type:"stop"}.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parentPort, workerData } from "node:worker_threads";
import { probePort } from "./probe.js";

const { root, configPath, host, port, apiKey } = workerData;
const reply = (msg) => parentPort?.postMessage(msg);

function fail(err, code = "start_failed") {
  reply({ type: "error", code, name: err?.name, message: err?.message ?? String(err) });
  // Give the message a moment to leave, then end this thread (not the process).
  setTimeout(() => process.exit(1), 50);
}

/** tsx's ESM API entry as installed for clawbridge (the package's `import` export of ./esm/api). */
function tsxEsmApi(root) {
  const req = createRequire(path.join(root, "package.json"));
  const pkgFile = req.resolve("tsx/package.json");
  const exp = JSON.parse(readFileSync(pkgFile, "utf8")).exports?.["./esm/api"];
  const rel = typeof exp === "string" ? exp : (exp?.import?.default ?? exp?.import ?? exp?.default);
  return typeof rel === "string" ? path.join(path.dirname(pkgFile), rel) : req.resolve("tsx/esm/api");
}

async function main() {
  // The compiled build (dist/) when it is current with the sources; else the sources through tsx.
  const { buildState, entryFile } = await import(pathToFileURL(path.join(root, "scripts", "build-state.mjs")).href);
  const state = buildState(root);
  if (!state.fresh) {
    let tsxApi;
    try {
      tsxApi = await import(pathToFileURL(tsxEsmApi(root)).href);
    } catch (err) {
      throw new Error(`cannot load tsx from ${root} (is clawbridge installed with its dependencies?): ${err.message}`);
    }
    tsxApi.register();
  }
  const mod = (rel) => import(pathToFileURL(entryFile(root, rel, state)).href);
  const [{ loadConfig }, { startBridge }, { createLogger }, { VERSION }] = await Promise.all([
    mod("core/config/load"),
    mod("request/http/start"),
    mod("core/log/logger"),
    mod("core/version"),
  ]);

  const config = loadConfig({ configPath, overrides: { host, port } });
  if (apiKey) {
    if (apiKey.length < 8) throw new Error("plugins.entries.clawbridge.config.apiKey must be at least 8 characters");
    if (!config.server.apiKeys.includes(apiKey)) config.server.apiKeys = [...config.server.apiKeys, apiKey];
  }
  const owner = await probePort(config.server.host, config.server.port, { apiKey });
  if (owner.state === "clawbridge") {
    reply({ type: "reuse", host: config.server.host, port: config.server.port, version: owner.version });
    setTimeout(() => process.exit(0), 50);
    return;
  }
  if (owner.state === "other") {
    reply({
      type: "error",
      code: "port_in_use",
      message: `${config.server.host}:${config.server.port} is already in use by another program (${owner.detail}); the bridge was not started. Free the port, or set plugins.entries.clawbridge.config.port (and the provider's baseUrl) to another one.`,
    });
    setTimeout(() => process.exit(1), 50);
    return;
  }

  // Logs go to this thread's stdout, which the plugin forwards to the gateway's log.
  const logger = createLogger(config.logging.level, process.stdout);
  const bridge = await startBridge(config, { logger });
  reply({
    type: "ready",
    url: bridge.url,
    host: bridge.host,
    port: bridge.port,
    version: VERSION,
    config: config.source,
    models: config.models.map((m) => m.id),
  });

  let stopping = false;
  parentPort?.on("message", (msg) => {
    if (msg?.type !== "stop" || stopping) return;
    stopping = true;
    bridge.close(typeof msg.graceMs === "number" ? msg.graceMs : undefined).then(
      () => {
        reply({ type: "stopped" });
        setTimeout(() => process.exit(0), 20);
      },
      (err) => fail(err, "stop_failed"),
    );
  });
}

main().catch((err) => fail(err));
