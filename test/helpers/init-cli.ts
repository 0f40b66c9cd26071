/**
 * `clawbridge init` as its own process, for the tests: a commander program with only the init
 * command (src/ops/commands/init.ts), as bin/clawbridge.js would run it once main.ts registers it.
 * Usage: node --import tsx test/helpers/init-cli.ts init [--yes] [--dry-run] [--config FILE]
 */
import { Command } from "commander";
import { addInitCommand } from "../../src/ops/commands/init.js";

const program = new Command().name("clawbridge");
addInitCommand(program);
await program.parseAsync(process.argv);
