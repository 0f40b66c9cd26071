/**
 * `clawbridge service install|uninstall|status`. Registered on the main program by src/ops/commands/main.ts;
 * exit codes as described in src/ops/commands/common.ts.
 */
import path from "node:path";
import type { Command } from "commander";
import type { ServiceResult } from "../service/systemd.js";
import { fail, loadConfig, out, systemctl } from "./common.js";

function collect(v: string, prev: string[]): string[] {
  return [...prev, v];
}

function printService(r: ServiceResult, verb: string): void {
  out(`${verb} ${r.unitPath}${r.envKeys.length ? ` (Environment: ${r.envKeys.join(", ")}; values not shown)` : ""}`);
  for (const s of r.steps)
    out(
      `${s.ok ? "ok  " : "FAIL"} ${s.command}${s.output && !s.ok ? `\n     ${s.output.split("\n").join("\n     ")}` : ""}`,
    );
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
    .description(
      "write and enable the unit (ExecStart: this node + clawbridge serve --config <abs path>), then start it",
    )
    .option(
      "-c, --config <file>",
      "bridge config the service serves (default: $CLAWBRIDGE_CONFIG, else embedded defaults)",
    )
    .option(
      "-e, --env <KEY=VALUE>",
      "Environment= line for the service (repeatable; values are never printed)",
      collect,
      [],
    )
    .option("--no-path", "do not copy this shell's PATH into the unit (the CLIs must then be found without it)")
    .option("--no-start", "enable only; do not start now")
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(
      async (opts: { config?: string; env: string[]; path: boolean; start: boolean; name: string; json?: boolean }) => {
        try {
          const { installService, parseEnvAssignments } = await import("../service/systemd.js");
          const env = parseEnvAssignments(opts.env);
          const configPath = opts.config ?? process.env.CLAWBRIDGE_CONFIG;
          // Validate now: a broken config would only show as a restart loop in the journal.
          const config = await loadConfig({ configPath });
          if (opts.path && !("PATH" in env) && process.env.PATH) env.PATH = process.env.PATH;
          if (configPath === undefined) {
            // Embedded defaults read these at start-up; carry the ones set now into the unit.
            for (const k of ["ROUTER_MODEL", "OPENCODE_BIN", "ROUTER_TIMEOUT", "ROUTER_PORT", "CLAWBRIDGE_DATA_DIR"])
              if (process.env[k] && !(k in env)) env[k] = process.env[k]!;
          }
          const notes: string[] = [];
          if (opts.start) {
            const { canListen, findListeningPid } = await import("../doctor/probes.js");
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
            runner: await systemctl(),
            stopTimeoutSeconds: Math.ceil(config.server.shutdownGraceSeconds + 20),
          });
          r.notes.unshift(...notes);
          if (opts.json) out(JSON.stringify(r, null, 2));
          else printService(r, r.changed ? "wrote" : "unchanged:");
          if (!r.ok) process.exitCode = 1;
        } catch (e) {
          fail(e);
        }
      },
    );
  svc
    .command("uninstall")
    .description("stop, disable and remove the unit")
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(async (opts: { name: string; json?: boolean }) => {
      try {
        const { uninstallService } = await import("../service/systemd.js");
        const r = await uninstallService({ name: opts.name, runner: await systemctl() });
        if (opts.json) out(JSON.stringify(r, null, 2));
        else printService(r, r.changed ? "removed" : "nothing to remove at");
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
  svc
    .command("status")
    .description(
      "systemctl's view of the service, or whether the unit file exists (exit 1 when installed but not running)",
    )
    .option("--name <name>", "unit name", "clawbridge")
    .option("--json", "print JSON")
    .action(async (opts: { name: string; json?: boolean }) => {
      try {
        const { serviceStatus } = await import("../service/systemd.js");
        const s = await serviceStatus({ name: opts.name, runner: await systemctl() });
        if (opts.json) out(JSON.stringify(s, null, 2));
        else {
          out(`unit: ${s.unitPath} (${s.installed ? "installed" : "not installed"})`);
          if (s.execStart) out(`ExecStart=${s.execStart}`);
          if (s.envKeys.length) out(`Environment: ${s.envKeys.join(", ")} (values not shown)`);
          if (!s.systemd) out(`systemd: unavailable here (${s.systemdNote}); state unknown`);
          else
            out(
              `state: ${s.properties.ActiveState ?? "?"}/${s.properties.SubState ?? "?"}, ${s.properties.UnitFileState ?? "?"}${s.properties.MainPID && s.properties.MainPID !== "0" ? `, pid ${s.properties.MainPID}` : ""}${s.properties.NRestarts ? `, restarts ${s.properties.NRestarts}` : ""}`,
            );
          if (s.installed) out(`logs: journalctl --user -u ${opts.name}.service -e`);
        }
        if (s.installed && s.systemd && !s.active) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
}
