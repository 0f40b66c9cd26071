/**
 * `clawbridge init`: find the installed coding-agent CLIs, ask which to serve, write a commented
 * config, offer `openclaw install` and `service install`. Registered on the main program by
 * src/ops/commands/main.ts; the work is in src/ops/init/ (loaded when the command runs, so
 * `clawbridge --help` stays fast). Exit codes as in src/ops/commands/common.ts.
 */
import type { Command } from "commander";
import { fail } from "./common.js";

export function addInitCommand(program: Command): void {
  program
    .command("init")
    .description(
      "find the installed coding-agent CLIs and their logins, ask which to serve, write a commented config; offer openclaw install and service install",
    )
    .option(
      "-c, --config <file>",
      "YAML config to write or update (default: $CLAWBRIDGE_CONFIG, else ~/.config/clawbridge/config.yaml)",
    )
    .option(
      "-y, --yes",
      "take every default without asking (openclaw install runs when OpenClaw is found; service install does not)",
    )
    .option("--dry-run", "print the config (or the diff) and what would be done; write nothing")
    .addHelpText(
      "after",
      `
Run again after installing or logging in to another CLI: the CLIs the config lacks are added, and
everything you wrote there (edits, comments) stays; the diff is shown before anything is written.`,
    )
    .action(async (opts: { config?: string; yes?: boolean; dryRun?: boolean }) => {
      try {
        const { runInit } = await import("../init/run.js");
        const r = await runInit({ config: opts.config, yes: opts.yes, dryRun: opts.dryRun });
        if (r.exitCode) process.exitCode = r.exitCode;
      } catch (e) {
        // Bad input (an existing file that cannot be merged, a result that would fail `config check`): 2.
        // The input ending before an answer: 1. Told by name: their modules load only when init runs.
        const name = e instanceof Error ? e.name : "";
        if (name === "ConfigError" || name === "NoAnswerError") {
          // A question may be waiting on its line: the message starts on its own.
          process.stderr.write(`${name === "NoAnswerError" ? "\n" : ""}clawbridge: ${(e as Error).message}\n`);
          process.exitCode = name === "ConfigError" ? 2 : 1;
        } else fail(e);
      }
    });
}
