/**
 * `clawbridge init`: a newcomer's first five minutes.
 *
 * 1. finds the coding-agent CLIs, whether each is logged in, and the models each offers (detect.ts);
 * 2. asks which to serve and with which model (every logged-in CLI and OpenCode by default, in
 *    resume mode, warm; Claude Code `sonnet`, OpenCode a free model with `expose: all` and
 *    `remap.onMissing: best-free`, the others their first listed model);
 * 3. writes a commented YAML config (config-writer.ts), checked with the bridge's own
 *    `resolveConfig` first; an existing file keeps everything the person wrote, gets only the CLIs
 *    it lacks, and is rewritten only after its diff is shown and agreed to (a backup is kept);
 * 4. offers `openclaw install` (only when OpenClaw's config is found) and `service install`.
 *
 * `--yes` takes every default (openclaw install runs when OpenClaw is found; service install is not
 * run, its command is printed); `--dry-run` prints what it would write and do, and writes nothing.
 */
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import type { Logger } from "pino";
import { ConfigError, resolveConfig, userConfigPath } from "../../core/config/load.js";
import type { Config } from "../../core/config/schema.js";
import { createLogger } from "../../core/log/logger.js";
// Private to the user (0600): a config may hold keys.
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import { backupName } from "../openclaw/config-diff.js";
import { installOpenClaw } from "../openclaw/install.js";
import { resolveOpenClawPaths } from "../openclaw/provider.js";
import { findOpenClawBin, validateWithOpenClaw } from "../openclaw/validate.js";
import { defaultSystemctlRunner, installService, type SystemctlRunner } from "../service/systemd.js";
import { type Asker, type Choice, defaultsAsker, readlineAsker } from "./ask.js";
import {
  configDiff,
  configuredBackends,
  InitConfigError,
  mergeConfig,
  renderConfig,
  type ServedCli,
} from "./config-writer.js";
import { defaultModel, describeFound, detectClis, type FoundCli, servedByDefault } from "./detect.js";
import { tildify } from "./logins.js";

export interface InitOptions {
  /** `--config`: the file to write (default: $CLAWBRIDGE_CONFIG, else ~/.config/clawbridge/config.yaml). */
  config?: string;
  /** `--yes`: every default, no question. */
  yes?: boolean;
  /** `--dry-run`: print, write nothing. */
  dryRun?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Where the output goes (default: stdout). */
  write?: (s: string) => void;
  /** Who answers (default: the terminal, or the defaults with `yes`). */
  asker?: Asker;
  /** What is found (default: `detectClis`); tests give their own. */
  detect?: () => Promise<FoundCli[]>;
  /** systemctl for `service install` (default: $CLAWBRIDGE_SYSTEMCTL or systemctl). */
  systemctl?: SystemctlRunner;
  logger?: Logger;
}

export interface InitResult {
  /** 0 fine, 1 nothing to serve or a step failed, 2 bad input (an existing config that cannot be merged). */
  exitCode: number;
  configPath: string;
  /** The config text written (or that would be, in a dry run); undefined when nothing was. */
  text?: string;
  written: boolean;
  openclaw: "installed" | "failed" | "declined" | "not-found" | "dry-run" | "skipped";
  service: "installed" | "failed" | "declined" | "not-run" | "dry-run" | "skipped";
}

/** The config file init writes when neither `--config` nor $CLAWBRIDGE_CONFIG names one: the one `serve` then reads by itself. */
export const defaultConfigPath = userConfigPath;

function expandHome(p: string, env: NodeJS.ProcessEnv): string {
  const home = env.HOME?.trim() || homedir();
  return p === "~" ? home : p.startsWith("~/") ? path.join(home, p.slice(2)) : p;
}

function modelChoice(m: { id: string; name?: string; free?: boolean; contextWindow?: number }): Choice {
  const extra = [
    m.name && m.name !== m.id ? m.name : "",
    m.free ? "free" : "",
    m.contextWindow ? `${Math.round(m.contextWindow / 1000)}k context` : "",
  ].filter(Boolean);
  return { value: m.id, label: extra.length ? `${m.id}  (${extra.join(", ")})` : m.id };
}

export async function runInit(opts: InitOptions = {}): Promise<InitResult> {
  const env = opts.env ?? process.env;
  const write = opts.write ?? ((s: string) => void process.stdout.write(s));
  const say = (s = "") => write(`${s}\n`);
  const configPath = path.resolve(
    expandHome(opts.config ?? (env.CLAWBRIDGE_CONFIG?.trim() || defaultConfigPath(env)), env),
  );
  const shown = tildify(configPath, env);
  const result: InitResult = { exitCode: 0, configPath, written: false, openclaw: "skipped", service: "skipped" };
  if (configPath.endsWith(".json"))
    throw new InitConfigError(`${shown}: init writes YAML (with comments); give a .yaml file with --config`);

  const existing = existsSync(configPath) ? readFileSync(configPath, "utf8") : undefined;
  if (existing !== undefined) mergeConfig(existing, { clis: [] }, shown); // a file that cannot take additions: say so first
  // What is there.
  say("Looking for coding-agent CLIs (PATH, their usual homes, this package's node_modules)...");
  const logger = opts.logger ?? createLogger("silent");
  const found = await (opts.detect ?? (() => detectClis({ logger, env })))();
  for (const f of found) say(`  ${describeFound(f, env)}`);
  const installed = found.filter((f) => f.path);
  say();

  const present = existing === undefined ? new Map<string, string>() : configuredBackends(existing);
  if (existing !== undefined)
    say(`${shown} exists: what you wrote there stays; only CLIs it does not have yet are added.`);

  if (!installed.length) {
    say("No coding-agent CLI found. The quickest start is OpenCode (its free models need no login):");
    say("  npm install -g opencode-ai     then run: clawbridge init");
    result.exitCode = 1;
    return result;
  }

  // What to serve.
  const asker = opts.asker ?? (opts.yes ? defaultsAsker(write) : readlineAsker());
  const chosen: ServedCli[] = [];
  try {
    for (const f of installed) {
      const type = f.cli.backendType;
      const already = present.get(type);
      if (already) {
        say(`${f.label}: already in the config as backend "${already}" (kept as it is)`);
        continue;
      }
      const def = servedByDefault(f);
      if (!(await asker.confirm(`Serve ${f.label}${f.login.loggedIn ? "" : " (not logged in)"}?`, def))) continue;
      const dm = defaultModel(type, f.models);
      const list = f.models.some((m) => m.id === dm.id) ? f.models : [dm, ...f.models];
      const pick = await asker.choose(`Default model for ${f.label}:`, list.map(modelChoice), dm.id);
      const model = list.find((m) => m.id === pick) ?? { id: pick };
      chosen.push({
        backend: type,
        type,
        label: f.label,
        pkg: f.cli.pkg,
        foundAt: f.path ? tildify(f.path, env) : undefined,
        login:
          type === "opencode"
            ? f.login.how
            : f.login.loggedIn
              ? `logged in: ${f.login.how}`
              : `not logged in yet (${f.login.hint ?? f.login.how})`,
        model: { id: model.id, ...(model.name ? { name: model.name } : {}), ...(model.free ? { free: true } : {}) },
        ...(type === "opencode" ? { exposeAll: true } : {}),
      });
    }

    // The text.
    let text: string;
    if (existing === undefined) {
      if (!chosen.length) {
        say("Nothing chosen to serve: no config written.");
        result.exitCode = 1;
        return result;
      }
      text = renderConfig({ clis: chosen });
    } else {
      text = mergeConfig(existing, { clis: chosen }, shown).text;
    }
    const config = checkConfig(text, configPath, env);

    if (existing === undefined) {
      say();
      say(`${opts.dryRun ? "Would write" : "Writing"} ${shown}:`);
      say();
      write(text.endsWith("\n") ? text : `${text}\n`);
    } else if (text === existing) {
      say(`${shown} is up to date: nothing to add.`);
    } else {
      say();
      say(`Changes to ${shown}:`);
      write(configDiff(shown, existing, text));
    }
    say();

    const changed = text !== existing;
    if (opts.dryRun) {
      say(changed ? `dry run: ${shown} was NOT written` : `dry run: nothing to write`);
    } else if (changed) {
      const ok = existing === undefined || (await asker.confirm(`Write these changes to ${shown}?`, true));
      if (ok) {
        if (existing !== undefined) {
          const backup = backupName(configPath, new Date());
          copyFileSync(configPath, backup);
          say(`backup of the old file: ${tildify(backup, env)}`);
        }
        writeFileAtomic(configPath, text);
        result.written = true;
        say(`wrote ${shown}`);
      } else say(`${shown} was NOT changed`);
    }
    result.text = text;
    const usable = result.written || !changed || opts.dryRun;

    // OpenClaw.
    const ocPaths = resolveOpenClawPaths({ env });
    const serveCmd = `clawbridge serve --config ${shown}`;
    say();
    if (!existsSync(ocPaths.configPath)) {
      result.openclaw = "not-found";
      say(`OpenClaw: no config at ${tildify(ocPaths.configPath, env)}; once OpenClaw is set up:`);
      say(`  clawbridge openclaw install --config ${shown}`);
    } else if (opts.dryRun) {
      result.openclaw = "dry-run";
      say(
        `OpenClaw found (${tildify(ocPaths.configPath, env)}): would offer clawbridge openclaw install --config ${shown}`,
      );
    } else if (!usable) {
      say(`OpenClaw: skipped (the config was not written)`);
    } else if (
      await asker.confirm(
        `OpenClaw found (${tildify(ocPaths.configPath, env)}). Add the bridge's models to it (openclaw install)?`,
        true,
      )
    ) {
      result.openclaw = await openclawInstall(config, ocPaths, env, say);
      if (result.openclaw === "failed") result.exitCode = 1;
    } else {
      result.openclaw = "declined";
      say(`  later: clawbridge openclaw install --config ${shown}`);
    }

    // The service.
    const serviceCmd = `clawbridge service install --config ${shown}`;
    say();
    if (opts.dryRun) {
      result.service = "dry-run";
      say(`Service: would offer ${serviceCmd}`);
    } else if (opts.yes) {
      result.service = "not-run";
      say(
        `Service: not installed with --yes (it starts a background process). To run the bridge as a systemd user service:`,
      );
      say(`  ${serviceCmd}`);
    } else if (!usable) {
      say("Service: skipped (the config was not written)");
    } else if (await asker.confirm("Run the bridge as a systemd user service now (service install)?", false)) {
      result.service = await serviceInstall(configPath, config, env, opts.systemctl, say);
      if (result.service === "failed") result.exitCode = 1;
    } else {
      result.service = "declined";
      say(`  later: ${serviceCmd}`);
    }

    say();
    if (usable) {
      say(`Next: ${serveCmd}`);
      say(`  then: curl -s http://${config.server.host}:${config.server.port}/v1/models`);
      const ids = config.models.map((m) => m.id);
      if (ids.length) say(`  models: ${ids.join(", ")}`);
    }
    return result;
  } finally {
    asker.close();
  }
}

/** The bridge's own check of the text (what `clawbridge config check` runs). */
function checkConfig(text: string, file: string, env: NodeJS.ProcessEnv): Config {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new InitConfigError(`${file}: not valid YAML: ${(err as Error).message}`);
  }
  try {
    return resolveConfig(raw, file, env);
  } catch (err) {
    if (err instanceof ConfigError)
      throw new InitConfigError(
        `the config would not pass \`clawbridge config check\`; nothing written.\n${err.message}`,
      );
    throw err;
  }
}

async function openclawInstall(
  config: Config,
  paths: ReturnType<typeof resolveOpenClawPaths>,
  env: NodeJS.ProcessEnv,
  say: (s?: string) => void,
): Promise<InitResult["openclaw"]> {
  try {
    const bin = await findOpenClawBin(undefined, env);
    const r = await installOpenClaw({
      config,
      paths,
      validate: bin ? (p) => validateWithOpenClaw(bin, p, env) : null,
    });
    if (r.diff) say(r.diff.trimEnd());
    if (!r.ok) say(`${tildify(r.configPath, env)} was NOT changed`);
    else if (r.changed)
      say(`updated ${tildify(r.configPath, env)}${r.backupPath ? ` (backup: ${tildify(r.backupPath, env)})` : ""}`);
    else say(`${tildify(r.configPath, env)} is already up to date`);
    if (r.validation?.ran) say(r.validation.detail);
    for (const n of r.notes) say(`note: ${n}`);
    if (r.ok) {
      say(`OpenClaw can use ${r.entry.models.map((m) => `${r.providerId}/${m.id}`).join(", ")}.`);
      say(
        "To make one OpenClaw's default model: clawbridge openclaw install --set-default --model <id> --config <this config>",
      );
      say("Restart a running OpenClaw gateway so it reads the change; check with: clawbridge openclaw status");
    }
    return r.ok ? "installed" : "failed";
  } catch (err) {
    say(`openclaw install failed: ${(err as Error).message}`);
    return "failed";
  }
}

async function serviceInstall(
  configPath: string,
  config: Config,
  env: NodeJS.ProcessEnv,
  runner: SystemctlRunner | undefined,
  say: (s?: string) => void,
): Promise<InitResult["service"]> {
  try {
    const r = await installService({
      configPath,
      env: env.PATH ? { PATH: env.PATH } : {},
      start: true,
      runner: runner ?? defaultSystemctlRunner(env.CLAWBRIDGE_SYSTEMCTL || "systemctl"),
      stopTimeoutSeconds: Math.ceil(config.server.shutdownGraceSeconds + 20),
      envVars: env,
    });
    say(`${r.changed ? "wrote" : "unchanged:"} ${tildify(r.unitPath, env)}`);
    for (const s of r.steps)
      say(`${s.ok ? "ok  " : "FAIL"} ${s.command}${s.output && !s.ok ? `\n     ${s.output}` : ""}`);
    if (!r.systemd)
      say(
        `note: systemctl --user cannot be used here: ${r.systemdNote}. Run these in a session with a systemd user manager:`,
      );
    else if (r.todo.length) say("Then run:");
    for (const t of r.todo) say(`  ${t}`);
    for (const n of r.notes) say(`note: ${n}`);
    return r.ok ? "installed" : "failed";
  } catch (err) {
    say(`service install failed: ${(err as Error).message}`);
    return "failed";
  }
}
