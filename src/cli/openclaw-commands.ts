/**
 * `clawbridge openclaw install|uninstall|status`, `clawbridge service install|uninstall|status` and
 * `clawbridge doctor`. Registered on the main program by src/cli/main.ts.
 *
 * Exit codes: 0 fine; 1 something is wrong (status/doctor found a failure, OpenClaw rejected the
 * change, systemctl failed); 2 bad input (invalid bridge config, unparsable OpenClaw config, ...).
 */
import path from "node:path";
import { Command, Option } from "commander";
import { ConfigError, loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { runDoctor } from "../doctor/doctor.js";
import { renderFindings } from "../doctor/report.js";
import { installOpenClaw, OpenClawSetupError, uninstallOpenClaw, type InstallResult, type UninstallResult } from "../openclaw/install.js";
import { buildProviderEntry, DEFAULT_PROVIDER_ID, resolveOpenClawPaths } from "../openclaw/provider.js";
import { openclawStatus } from "../openclaw/status.js";
import { findOpenClawBin, validateWithOpenClaw, type Validator } from "../openclaw/validate.js";
import { canListen, findListeningPid } from "../doctor/probes.js";
import { defaultSystemctlRunner, installService, parseEnvAssignments, serviceStatus, uninstallService, type ServiceResult } from "../service/systemd.js";

/** systemctl to run (CLAWBRIDGE_SYSTEMCTL: another binary, e.g. a wrapper). */
const systemctl = () => defaultSystemctlRunner(process.env.CLAWBRIDGE_SYSTEMCTL || "systemctl");

const out = (s: string) => void process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
const err = (s: string) => void process.stderr.write(s.endsWith("\n") ? s : `${s}\n`);

/** Bad input: print and exit 2. Anything else is a bug: print the stack, exit 1. */
function fail(e: unknown): void {
  if (e instanceof ConfigError || e instanceof OpenClawSetupError) {
    err(`clawbridge: ${e.message}`);
    process.exitCode = 2;
    return;
  }
  if (e instanceof Error && /^(--env|service name|environment variable|service arguments)/.test(e.message)) {
    err(`clawbridge: ${e.message}`);
    process.exitCode = 2;
    return;
  }
  err(`clawbridge: ${(e as Error)?.stack ?? String(e)}`);
  process.exitCode = 1;
}

function collect(v: string, prev: string[]): string[] {
  return [...prev, v];
}

interface OpenClawOpts {
  config?: string;
  openclawHome?: string;
  providerId?: string;
  openclawBin?: string;
  validate?: boolean;
  json?: boolean;
  dryRun?: boolean;
}

async function makeValidator(opts: OpenClawOpts): Promise<Validator | null> {
  if (opts.validate === false) return null;
  const bin = await findOpenClawBin(opts.openclawBin);
  if (!bin) return null;
  return (paths) => validateWithOpenClaw(bin, paths);
}

function printModelsJson(r: InstallResult | UninstallResult): void {
  for (const m of r.modelsJson) {
    if (m.action === "removed-entry") out(`models.json: removed the stale "${r.providerId}" entry from ${m.file} (${m.reason}); backup ${m.backup}`);
    else if (m.action === "would-remove-entry") out(`models.json: would remove the stale "${r.providerId}" entry from ${m.file} (${m.reason})`);
    else if (m.action === "left-unreadable") out(`models.json: ${m.file} is not valid JSON; left alone (OpenClaw regenerates it)`);
  }
}

function printChange(r: InstallResult | UninstallResult, what: string): void {
  if (r.diff) out(r.diff);
  if (r.dryRun) out(r.changed ? `dry run: ${r.configPath} was NOT changed` : `dry run: ${r.configPath} is already up to date`);
  else if (!r.ok) out(`${r.configPath} was NOT changed`);
  else if (r.changed) out(`${what} ${r.configPath}${r.backupPath ? ` (backup: ${r.backupPath})` : ""}`);
  else out(`${r.configPath} is already up to date`);
  printModelsJson(r);
  if (r.validation?.ran) out(r.validation.detail);
  for (const n of r.notes) out(`note: ${n}`);
}

export function registerOpenClawCommands(program: Command): void {
  const oc = program.command("openclaw").description("connect OpenClaw to this bridge (its provider entry in ~/.openclaw/openclaw.json)");
  const common = (c: Command) =>
    c
      .option("--openclaw-home <dir>", "OpenClaw's directory (default: $OPENCLAW_STATE_DIR or ~/.openclaw; $OPENCLAW_CONFIG_PATH names the file)")
      .option("--provider-id <id>", `provider id in models.providers (default: ${DEFAULT_PROVIDER_ID})`)
      .option("--json", "print JSON");

  common(
    oc
      .command("install")
      .description("add or update the bridge's provider entry (only that key; comments and other settings stay); backup + diff")
      .option("-c, --config <file>", "bridge config (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
      .option("--set-default", "also make the bridge the default model (agents.defaults.model.primary)")
      .option("--agent <id>", "with --set-default: set this agent's model (agents.list) instead of the default")
      .option("--model <id>", "with --set-default: which bridge model (default: the first)")
      .option("--api-key <key>", "key OpenClaw sends (default: the first server.apiKeys entry, else a placeholder)")
      .option("--base-url <url>", "URL OpenClaw calls (default: http://<server.host>:<server.port>/v1)")
      .option("--dry-run", "print the diff, write nothing")
      .option("--openclaw-bin <path>", "openclaw CLI used to validate the result (default: openclaw on PATH)")
      .option("--no-validate", "do not run openclaw config validate"),
  ).action(async (opts: OpenClawOpts & { setDefault?: boolean; agent?: string; model?: string; apiKey?: string; baseUrl?: string }) => {
    try {
      if (opts.agent && !opts.setDefault) throw new OpenClawSetupError("--agent only makes sense with --set-default");
      const config = loadConfig({ configPath: opts.config });
      const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome });
      const r = await installOpenClaw({
        config,
        paths,
        providerId: opts.providerId,
        entry: { ...(opts.apiKey ? { apiKey: opts.apiKey } : {}), ...(opts.baseUrl ? { baseUrl: opts.baseUrl } : {}) },
        setDefault: opts.setDefault,
        agent: opts.agent,
        model: opts.model,
        dryRun: opts.dryRun,
        validate: await makeValidator(opts),
      });
      if (opts.json) out(JSON.stringify(r, null, 2));
      else {
        printChange(r, "updated");
        if (r.ok && r.changed && !r.dryRun) {
          out(`OpenClaw can now use ${r.entry.models.map((m) => `${r.providerId}/${m.id}`).join(", ")}${r.defaultModel ? ` (default: ${r.defaultModel})` : ""}.`);
          out("Restart a running OpenClaw gateway so it reads the change; check with: clawbridge openclaw status");
        }
      }
      if (!r.ok) process.exitCode = 1;
    } catch (e) {
      fail(e);
    }
  });

  common(
    oc
      .command("uninstall")
      .description("remove exactly what install added (the provider entry, and the default model if it still points at the bridge)")
      .option("-c, --config <file>", "bridge config (only used when install left no record)")
      .option("--dry-run", "print the diff, write nothing")
      .option("--force", "remove the provider entry even if clawbridge did not add it")
      .option("--openclaw-bin <path>", "openclaw CLI used to validate the result (default: openclaw on PATH)")
      .option("--no-validate", "do not run openclaw config validate"),
  ).action(async (opts: OpenClawOpts & { force?: boolean }) => {
    try {
      const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome });
      let expectedEntry;
      try {
        expectedEntry = buildProviderEntry(loadConfig({ configPath: opts.config }));
      } catch {
        expectedEntry = undefined; // only needed without an install record
      }
      const r = await uninstallOpenClaw({ paths, providerId: opts.providerId, dryRun: opts.dryRun, force: opts.force, validate: await makeValidator(opts), ...(expectedEntry ? { expectedEntry } : {}) });
      if (opts.json) out(JSON.stringify(r, null, 2));
      else {
        printChange(r, "updated");
        for (const d of r.restoredDefaults) out(`${d.path} restored to ${d.to === null ? "(unset)" : d.to}`);
      }
      if (!r.ok) process.exitCode = 1;
    } catch (e) {
      fail(e);
    }
  });

  common(
    oc
      .command("status")
      .description("does OpenClaw point at a running bridge, with the same models and API key? (exit 1 when not)")
      .option("-c, --config <file>", "also compare with this bridge config (URL, models, compat flags)")
      .option("--timeout <ms>", "per HTTP probe", (v) => Number(v), 3000),
  ).action(async (opts: OpenClawOpts & { timeout: number }) => {
    try {
      const config: Config | undefined = opts.config ? loadConfig({ configPath: opts.config }) : undefined;
      const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome });
      const r = await openclawStatus({ paths, providerId: opts.providerId, timeoutMs: opts.timeout, ...(config ? { config } : {}) });
      if (opts.json) out(JSON.stringify(r, null, 2));
      else out(renderFindings(r.findings, `OpenClaw (${r.configPath}) -> provider "${r.providerId}"${r.baseUrl ? ` at ${r.baseUrl}` : ""}`));
      if (!r.ok) process.exitCode = 1;
    } catch (e) {
      fail(e);
    }
  });
}

function printService(r: ServiceResult, verb: string): void {
  out(`${verb} ${r.unitPath}${r.envKeys.length ? ` (Environment: ${r.envKeys.join(", ")}; values not shown)` : ""}`);
  for (const s of r.steps) out(`${s.ok ? "ok  " : "FAIL"} ${s.command}${s.output && !s.ok ? `\n     ${s.output.split("\n").join("\n     ")}` : ""}`);
  if (!r.systemd) {
    out(`note: systemctl --user cannot be used here: ${r.systemdNote}.`);
    out("Run these in a session with a systemd user manager:");
  } else if (r.todo.length) out("Then run:");
  for (const t of r.todo) out(`  ${t}`);
  for (const n of r.notes) out(`note: ${n}`);
}

export function registerServiceCommands(program: Command): void {
  const svc = program
    .command("service")
    .description("run the bridge as a systemd user service (~/.config/systemd/user/clawbridge.service)")
    .addHelpText(
      "after",
      `
Without systemctl or a systemd user session (containers, CI, ssh without a login session) install
still writes the unit and prints the systemctl commands to run. Logs: journalctl --user -u clawbridge.
Environment:
  CLAWBRIDGE_SYSTEMCTL  systemctl binary to run (default: systemctl on PATH)`,
    );
  svc
    .command("install")
    .description("write and enable the unit (ExecStart: this node + clawbridge serve --config <abs path>), then start it")
    .option("-c, --config <file>", "bridge config the service serves (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
    .option("-e, --env <KEY=VALUE>", "Environment= line for the service (repeatable; values are never printed)", collect, [])
    .option("--no-path", "do not copy this shell's PATH into the unit (the CLIs must then be found without it)")
    .option("--no-start", "enable only; do not start now")
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(async (opts: { config?: string; env: string[]; path: boolean; start: boolean; name: string; json?: boolean }) => {
      try {
        const env = parseEnvAssignments(opts.env);
        const configPath = opts.config ?? process.env.CLAWBRIDGE_CONFIG;
        // Validate now: a broken config would only show as a restart loop in the journal.
        const config = loadConfig({ configPath });
        if (opts.path && !("PATH" in env) && process.env.PATH) env.PATH = process.env.PATH;
        if (configPath === undefined) {
          // Embedded defaults read these at start-up; carry the ones set now into the unit.
          for (const k of ["ROUTER_MODEL", "OPENCODE_BIN", "ROUTER_TIMEOUT", "ROUTER_PORT", "CLAWBRIDGE_DATA_DIR"]) if (process.env[k] && !(k in env)) env[k] = process.env[k]!;
        }
        const notes: string[] = [];
        if (opts.start) {
          const free = await canListen(config.server.host, config.server.port);
          if (!free.free) {
            const pid = findListeningPid(config.server.port);
            notes.push(
              `${config.server.host}:${config.server.port} is in use${pid ? ` by pid ${pid}` : ""}: the service cannot listen until that process stops (an old clawbridge serve? stop it, then: systemctl --user restart ${opts.name}.service)`,
            );
          }
        }
        const r = await installService({
          name: opts.name,
          ...(configPath ? { configPath: path.resolve(configPath) } : {}),
          env,
          start: opts.start,
          runner: systemctl(),
          stopTimeoutSeconds: Math.ceil(config.server.shutdownGraceSeconds + 20),
        });
        r.notes.unshift(...notes);
        if (opts.json) out(JSON.stringify(r, null, 2));
        else printService(r, r.changed ? "wrote" : "unchanged:");
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
  svc
    .command("uninstall")
    .description("stop, disable and remove the unit")
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(async (opts: { name: string; json?: boolean }) => {
      try {
        const r = await uninstallService({ name: opts.name, runner: systemctl() });
        if (opts.json) out(JSON.stringify(r, null, 2));
        else printService(r, r.changed ? "removed" : "nothing to remove at");
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
  svc
    .command("status")
    .description("systemctl's view of the service, or whether the unit file exists (exit 1 when installed but not running)")
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(async (opts: { name: string; json?: boolean }) => {
      try {
        const s = await serviceStatus({ name: opts.name, runner: systemctl() });
        if (opts.json) out(JSON.stringify(s, null, 2));
        else {
          out(`unit: ${s.unitPath} (${s.installed ? "installed" : "not installed"})`);
          if (s.execStart) out(`ExecStart=${s.execStart}`);
          if (s.envKeys.length) out(`Environment: ${s.envKeys.join(", ")} (values not shown)`);
          if (!s.systemd) out(`systemd: unavailable here (${s.systemdNote}); state unknown`);
          else out(`state: ${s.properties.ActiveState ?? "?"}/${s.properties.SubState ?? "?"}, ${s.properties.UnitFileState ?? "?"}${s.properties.MainPID && s.properties.MainPID !== "0" ? `, pid ${s.properties.MainPID}` : ""}${s.properties.NRestarts ? `, restarts ${s.properties.NRestarts}` : ""}`);
          if (s.installed) out(`logs: journalctl --user -u ${opts.name}.service -e`);
        }
        if (s.installed && s.systemd && !s.active) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
}

export function registerDoctorCommand(program: Command): void {
  program
    .command("doctor")
    .description("check the set-up (config, CLIs, port, OpenClaw, locks, disk, service) and explain each problem with its fix")
    .option("-c, --config <file>", "bridge config (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
    .option("--openclaw-home <dir>", "OpenClaw's directory (default: ~/.openclaw)")
    .option("--provider-id <id>", `OpenClaw provider id of the bridge (default: ${DEFAULT_PROVIDER_ID})`)
    .option("--openclaw-bin <path>", "openclaw CLI for its own config validation (default: openclaw on PATH)")
    .option("--no-validate", "skip openclaw config validate (it takes a few seconds)")
    .addOption(new Option("--no-cli-scan", "do not look for CLIs the config does not use"))
    .option("--fix", "remove lock files left by dead processes")
    .option("--json", "print JSON")
    .action(async (opts: OpenClawOpts & { cliScan: boolean; fix?: boolean }) => {
      try {
        const r = await runDoctor({
          configPath: opts.config,
          openclawHome: opts.openclawHome,
          providerId: opts.providerId,
          validate: await makeValidator(opts),
          scanClis: opts.cliScan,
          fix: opts.fix,
          systemctl: systemctl(),
        });
        if (opts.json) out(JSON.stringify(r, null, 2));
        else out(renderFindings(r.findings, "clawbridge doctor"));
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
}
