/**
 * clawbridge plugin for OpenClaw (2026.5.x and 2026.9.x).
 *
 * - Runs the bridge for as long as the gateway runs: started by the gateway's plugin service
 *   (`api.registerService`), which only `openclaw gateway` starts; register() itself starts
 *   nothing, because it also runs in every other openclaw command (`doctor`, `config ...`,
 *   `agent --local`...). One bridge per process (globalThis flag) and per data directory
 *   (`<dataDir>/plugin.lock` with the gateway's PID; a dead PID is stale). A port already served by
 *   a clawbridge is reused; a port held by another program is reported in the gateway log.
 * - Stops it on gateway shutdown (service stop and `gateway_stop`): running turns finish within the
 *   bridge's grace period, its CLI processes are reaped, the lock is removed.
 * - Sends OpenClaw's session id as `x-session-id` with every model call to the `clawbridge`
 *   provider (provider stream wrapper), so resume mode keeps one backend session per conversation.
 *
 * The bridge runs in a worker thread of the gateway process (see lib/worker.js).
 */
import { SeenSessions, wrapStreamWithSessionHeaders } from "./lib/headers.js";
import { DEFAULT_PROVIDER_ID, PLUGIN_ID, resolveSettings } from "./lib/settings.js";
import { startSidecar, stopSidecar } from "./lib/sidecar.js";

const plugin = {
  id: PLUGIN_ID,
  name: "clawbridge",
  description:
    "Runs clawbridge inside the OpenClaw gateway and sends OpenClaw's session id with every model call to it.",

  register(api) {
    const mode = api.registrationMode;
    // Metadata-only loads: nothing to register here.
    if (mode === "cli-metadata" || mode === "setup-only") return;
    const logger = api.logger ?? console;
    const pluginId = api.id || PLUGIN_ID;
    const settingsFor = (openclawConfig) =>
      resolveSettings(api.pluginConfig, { openclawConfig: openclawConfig ?? api.config, pluginId });
    const initial = settingsFor(api.config);

    if (initial.sessionHeaders && typeof api.registerProvider === "function") {
      api.registerProvider({
        id: DEFAULT_PROVIDER_ID,
        label: "clawbridge",
        auth: [],
        wrapStreamFn: wrapStreamWithSessionHeaders,
      });
    }

    // Discovery loads must not start anything (no services, no workers).
    if (mode !== undefined && mode !== "full") return;

    // Which OpenClaw chat is which bridge conversation: one line per session id.
    const seen = new SeenSessions();
    api.on?.("model_call_started", (event) => {
      if (event?.provider !== DEFAULT_PROVIDER_ID || typeof event.sessionId !== "string") return;
      if (seen.add(event.sessionId))
        logger.debug?.(
          `clawbridge: OpenClaw session ${event.sessionKey ?? "?"} is bridge conversation ${event.sessionId}`,
        );
    });

    if (!initial.autoStart) return;
    let current = initial;
    api.registerService({
      id: "clawbridge",
      async start(ctx) {
        current = settingsFor(ctx?.config);
        for (const w of current.warnings) logger.warn(`clawbridge: ${w}`);
        await startSidecar(current, ctx?.logger ?? logger);
      },
      async stop(ctx) {
        await stopSidecar(current, ctx?.logger ?? logger);
      },
    });
    // Older gateways, or a stop path that skips services: stopping twice is harmless.
    api.on?.("gateway_stop", () => stopSidecar(current, logger));
  },
};

export default plugin;
