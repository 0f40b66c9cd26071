#!/usr/bin/env node
/**
 * The `clawbridge` command line.
 *
 * Only commander, the version and the command files (which import nothing heavy at their top, see
 * src/ops/commands/common.ts) are loaded for every command; each action imports what it runs when
 * it runs, so `--help`, `config check` or `runs list` do not load the HTTP server, the logger or
 * every backend. bench/suites/cli.ts measures each command as a whole process.
 */
import { Command, InvalidArgumentError } from "commander";
import type { SessionStore } from "../../core/store/types.js";
import { VERSION } from "../../core/version.js";
import type { Bridge } from "../../request/http/start.js";
import { loadConfig, systemctl } from "./common.js";
import { registerDoctorCommand } from "./doctor.js";
import { addInitCommand } from "./init.js";
import { registerMcpCommand } from "./mcp-stdio.js";
import { registerOpenClawCommands } from "./openclaw.js";
import { registerServiceCommands } from "./service.js";
import { registerStoreCommands } from "./store.js";
import { registerSystemsCommands } from "./systems.js";
import { addUsageCommand } from "./usage.js";

function portArg(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError("a port is a whole number from 0 to 65535");
  return n;
}

/** Errors of bad input or set-up, told by name so that their modules need not be loaded to check. */
const EXIT_2 = new Set(["ConfigError", "PortInUseError", "SystemsConfigError"]);

function fail(err: unknown): never {
  if (err instanceof Error && EXIT_2.has(err.name)) {
    process.stderr.write(`clawbridge: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`clawbridge: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}

const program = new Command()
  .name("clawbridge")
  .description(
    "An OpenAI-compatible bridge that lets OpenClaw and any OpenAI SDK client use\n" +
      "coding-agent CLIs (OpenCode, Claude Code, Gemini CLI, Codex, Qwen Code), local\n" +
      "model servers and workflows as one model.",
  )
  .version(VERSION, "-v, --version")
  .addHelpText(
    "after",
    `
Environment:
  CLAWBRIDGE_CONFIG    config file to use when --config is not given (else
                       ~/.config/clawbridge/config.yaml if it exists: clawbridge init writes it)
  CLAWBRIDGE_DATA_DIR  data directory (default ~/.clawbridge)
  Without a config file the embedded defaults serve the models the OpenCode CLI offers:
  ROUTER_MODEL         a model name to serve too (opencode/minimax-m2.5-free: the seed's name,
                       served by a free model OpenCode really has)
  OPENCODE_BIN         opencode binary (default: found on PATH)
  ROUTER_TIMEOUT       seconds a turn may take (300)
  ROUTER_PORT          port to listen on (4097)

Examples:
  clawbridge serve
  clawbridge init
  clawbridge serve --config ~/clawbridge.yaml --port 4100
  clawbridge config check --config clawbridge.yaml`,
  );

program
  .command("serve")
  .description("run the bridge (127.0.0.1:4097 by default) until SIGTERM/SIGINT")
  .option("-c, --config <file>", "YAML or JSON config file (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
  .option("-p, --port <n>", "port to listen on (overrides the config)", portArg)
  .option("-H, --host <host>", "address to listen on (overrides the config; non-loopback needs server.apiKeys)")
  .action(async (opts: { config?: string; port?: number; host?: string }) => {
    // The server's modules load while the config is read.
    const modules = Promise.all([
      import("../../core/log/logger.js"),
      import("../../request/http/start.js"),
      import("../../request/http/signals.js"),
    ]);
    modules.catch(() => {}); // a config error is the one reported
    let config;
    try {
      config = await loadConfig({ configPath: opts.config, overrides: { port: opts.port, host: opts.host } });
    } catch (err) {
      fail(err);
    }
    const [{ createLogger }, { startBridge }, { stopOnSignals }] = await modules.catch(fail);
    const logger = createLogger(config.logging.level);
    let bridge: Bridge | undefined;
    try {
      // The dashboard's doctor (Backends view) checks the running bridge's own configuration; loaded when first asked for.
      const doctor = async () =>
        (await import("../doctor/doctor.js")).runDoctor({
          config,
          backends: bridge?.backends,
          validate: null,
          systemctl: await systemctl(),
        });
      bridge = await startBridge(config, { logger, doctor });
    } catch (err) {
      fail(err);
    }
    process.stderr.write(`clawbridge ${VERSION} listening on ${bridge.url} (config: ${config.source})\n`);
    // First signal: graceful; second: end the CLI process groups, then exit; third: exit at once.
    stopOnSignals(bridge, { onError: fail });
  });

const configCmd = program.command("config").description("inspect configuration");
configCmd
  .command("check")
  .description("validate a config file (or the embedded defaults) and print the resolved models")
  .option("-c, --config <file>", "YAML or JSON config file")
  .action(async (opts: { config?: string }) => {
    try {
      const config = await loadConfig({ configPath: opts.config });
      process.stdout.write(`configuration OK (${config.source})\n`);
      process.stdout.write(`listen: ${config.server.host}:${config.server.port}  data: ${config.dataDir}\n`);
      for (const m of config.models)
        process.stdout.write(
          `model ${m.id} -> backend ${m.backend} (${config.backends[m.backend]?.type}), model "${m.backendModel}", mode ${m.sessionMode}\n`,
        );
      for (const r of config.remap) process.stdout.write(`remap *${r.match}* -> ${r.to}\n`);
    } catch (err) {
      fail(err);
    }
  });

/** The configured session store (`store:` — `<dataDir>/sessions.db`, or the PostgreSQL every instance shares). */
async function withStore<T>(opts: { config?: string }, fn: (store: SessionStore) => Promise<T>): Promise<T> {
  const config = await loadConfig({ configPath: opts.config });
  const { closeBacking, openBacking } = await import("../../core/db/backing.js");
  const { openSessionStore, sessionStoreOn } = await import("../../core/store/index.js");
  const backing = await openBacking(config);
  try {
    const store = await openSessionStore(sessionStoreOn(backing));
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  } finally {
    await closeBacking(backing);
  }
}

const when = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);

const sessions = program
  .command("sessions")
  .description(
    "conversations bound to backend sessions (resume mode), kept in <dataDir>/sessions.db or the configured PostgreSQL (store:)",
  );
sessions
  .command("list")
  .description("list conversations, most recently used first")
  .option("-c, --config <file>", "config file (for the data directory)")
  .option("-n, --limit <n>", "how many to show", (v) => Number(v), 50)
  .option("--json", "print JSON")
  .action((opts: { config?: string; limit: number; json?: boolean }) =>
    withStore(opts, async (store) => {
      const list = await store.list({ limit: opts.limit });
      if (opts.json) return void process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
      if (!list.length) return void process.stdout.write("no conversations yet\n");
      for (const b of list) {
        process.stdout.write(
          `${when(b.updatedAt)}  ${b.key}  ${b.backend}:${b.backendSessionId}  turns=${b.turns}${b.lastError ? `  last error: ${b.lastError.slice(0, 80)}` : ""}\n`,
        );
      }
    }).catch(fail),
  );
sessions
  .command("show <key>")
  .description("show one conversation's binding and its recent events")
  .option("-c, --config <file>", "config file (for the data directory)")
  .action((key: string, opts: { config?: string }) =>
    withStore(opts, async (store) => {
      const b = await store.get(key);
      const events = await store.listEvents(key, { limit: 20 });
      if (!b && !events.length) {
        process.stderr.write(`clawbridge: no conversation "${key}" (see: clawbridge sessions list)\n`);
        process.exitCode = 1;
        return;
      }
      process.stdout.write(`${JSON.stringify({ binding: b ?? null, events }, null, 2)}\n`);
    }).catch(fail),
  );
sessions
  .command("forget <key>")
  .description("drop a conversation's binding: its next turn starts a new backend session")
  .option("-c, --config <file>", "config file (for the data directory)")
  .action((key: string, opts: { config?: string }) =>
    withStore(opts, async (store) => {
      const removed = await store.delete(key);
      process.stdout.write(removed ? `forgot ${key}\n` : `no conversation "${key}"\n`);
      if (!removed) process.exitCode = 1;
    }).catch(fail),
  );
sessions
  .command("import <file>")
  .description("import a seed-era sessions.json (tolerates a bare {})")
  .option("-c, --config <file>", "config file (for the data directory)")
  .requiredOption("-b, --backend <name>", "backend the imported sessions belong to")
  .action((file: string, opts: { config?: string; backend: string }) =>
    withStore(opts, async (store) => {
      const { importSessionsJson } = await import("../../core/store/index.js");
      const res = await importSessionsJson(store, file, { backend: opts.backend });
      process.stdout.write(
        `imported ${res.imported} of ${res.total} (${res.existing} already known, ${res.skipped.length} skipped)\n`,
      );
      for (const s of res.skipped) process.stdout.write(`  skipped ${s.entry}: ${s.reason}\n`);
    }).catch(fail),
  );

addInitCommand(program);
registerOpenClawCommands(program);
registerServiceCommands(program);
registerDoctorCommand(program);
registerSystemsCommands(program);
registerStoreCommands(program);
registerMcpCommand(program);
addUsageCommand(program);

program.parseAsync(process.argv).catch(fail);
