/**
 * `clawbridge doctor`. Registered on the main program by src/ops/commands/main.ts; exit codes as described
 * in src/ops/commands/common.ts.
 */
import { Option, type Command } from "commander";
import { DEFAULT_PROVIDER_ID } from "../openclaw/provider.js";
import { fail, makeValidator, out, systemctl, type OpenClawOpts } from "./common.js";

export function registerDoctorCommand(program: Command): void {
  program
    .command("doctor")
    .description(
      "check the set-up (config, CLIs, port, OpenClaw, locks, disk, service, store) and explain each problem with its fix",
    )
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
        const [{ runDoctor }, { renderFindings }] = await Promise.all([
          import("../doctor/doctor.js"),
          import("../report/findings.js"),
        ]);
        const r = await runDoctor({
          configPath: opts.config,
          openclawHome: opts.openclawHome,
          providerId: opts.providerId,
          validate: await makeValidator(opts),
          scanClis: opts.cliScan,
          fix: opts.fix,
          systemctl: await systemctl(),
        });
        if (opts.json) out(JSON.stringify(r, null, 2));
        else out(renderFindings(r.findings, "clawbridge doctor"));
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    });
}
