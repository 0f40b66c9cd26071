#!/usr/bin/env node
/** The `clawbridge` command line. */
import { Command, InvalidArgumentError } from "commander";
import { ConfigError, loadConfig } from "../config/load.js";
import { createLogger } from "../log/logger.js";
import { PortInUseError, startBridge } from "../server/start.js";
import { VERSION } from "../version.js";

function portArg(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("a port is a whole number from 0 to 65535");
  return n;
}

function fail(err: unknown): never {
  if (err instanceof ConfigError || err instanceof PortInUseError) {
    process.stderr.write(`clawbridge: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`clawbridge: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}

const program = new Command()
  .name("clawbridge")
  .description(
    "An OpenAI-compatible bridge that lets OpenClaw and any OpenAI SDK client use coding-agent CLIs\n" +
      "(OpenCode, Claude Code, Gemini CLI), local model servers and workflows as one model.",
  )
  .version(VERSION, "-v, --version")
  .addHelpText(
    "after",
    `
Environment:
  CLAWBRIDGE_CONFIG    config file to use when --config is not given
  CLAWBRIDGE_DATA_DIR  data directory (default ~/.clawbridge)
  Without a config file the embedded defaults serve the OpenCode CLI, tuned by:
  ROUTER_MODEL         default model (opencode/minimax-m2.5-free)
  OPENCODE_BIN         opencode binary (default: found on PATH)
  ROUTER_TIMEOUT       seconds a turn may take (300)
  ROUTER_PORT          port to listen on (4097)

Examples:
  clawbridge serve
  clawbridge serve --config ~/.config/clawbridge.yaml --port 4100
  clawbridge config check --config clawbridge.yaml`,
  );

program
  .command("serve")
  .description("run the bridge (127.0.0.1:4097 by default) until SIGTERM/SIGINT")
  .option("-c, --config <file>", "YAML or JSON config file (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
  .option("-p, --port <n>", "port to listen on (overrides the config)", portArg)
  .option("-H, --host <host>", "address to listen on (overrides the config; non-loopback needs server.apiKeys)")
  .action(async (opts: { config?: string; port?: number; host?: string }) => {
    let config;
    try {
      config = loadConfig({ configPath: opts.config, overrides: { port: opts.port, host: opts.host } });
    } catch (err) {
      fail(err);
    }
    const logger = createLogger(config.logging.level);
    let bridge;
    try {
      bridge = await startBridge(config, { logger });
    } catch (err) {
      fail(err);
    }
    process.stderr.write(`clawbridge ${VERSION} listening on ${bridge.url} (config: ${config.source})\n`);
    let stopping = false;
    const stop = (sig: string) => {
      if (stopping) {
        process.stderr.write(`clawbridge: ${sig} again, exiting now\n`);
        process.exit(130);
      }
      stopping = true;
      process.stderr.write(`clawbridge: ${sig} received, finishing running turns...\n`);
      bridge.close().then(
        () => process.exit(0),
        (err) => fail(err),
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });

const configCmd = program.command("config").description("inspect configuration");
configCmd
  .command("check")
  .description("validate a config file (or the embedded defaults) and print the resolved models")
  .option("-c, --config <file>", "YAML or JSON config file")
  .action((opts: { config?: string }) => {
    try {
      const config = loadConfig({ configPath: opts.config });
      process.stdout.write(`configuration OK (${config.source})\n`);
      process.stdout.write(`listen: ${config.server.host}:${config.server.port}  data: ${config.dataDir}\n`);
      for (const m of config.models) process.stdout.write(`model ${m.id} -> backend ${m.backend} (${config.backends[m.backend]?.type}), model "${m.backendModel}", mode ${m.sessionMode}\n`);
      for (const r of config.remap) process.stdout.write(`remap *${r.match}* -> ${r.to}\n`);
    } catch (err) {
      fail(err);
    }
  });

program.parseAsync(process.argv).catch(fail);
