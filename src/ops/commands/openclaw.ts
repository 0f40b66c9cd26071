/**
 * `clawbridge openclaw install|uninstall|status`. Registered on the main program by src/ops/commands/main.ts;
 * exit codes as described in src/ops/commands/common.ts.
 */
import type { Command } from "commander";
import type { Config } from "../../core/config/schema.js";
import type { InstallResult } from "../openclaw/install.js";
import type { UninstallResult } from "../openclaw/uninstall.js";
import {
  buildProviderEntry,
  DEFAULT_API_KIND,
  DEFAULT_PROVIDER_ID,
  isApiKind,
  OPENCLAW_API_KINDS,
  resolveOpenClawPaths,
} from "../openclaw/provider.js";
import { fail, loadConfig, makeValidator, out, type OpenClawOpts } from "./common.js";

function printModelsJson(r: InstallResult | UninstallResult): void {
  for (const m of r.modelsJson) {
    if (m.action === "removed-entry")
      out(`models.json: removed the stale "${r.providerId}" entry from ${m.file} (${m.reason}); backup ${m.backup}`);
    else if (m.action === "would-remove-entry")
      out(`models.json: would remove the stale "${r.providerId}" entry from ${m.file} (${m.reason})`);
    else if (m.action === "left-unreadable")
      out(`models.json: ${m.file} is not valid JSON; left alone (OpenClaw regenerates it)`);
  }
}

function printChange(r: InstallResult | UninstallResult, what: string): void {
  if (r.diff) out(r.diff);
  if (r.dryRun)
    out(r.changed ? `dry run: ${r.configPath} was NOT changed` : `dry run: ${r.configPath} is already up to date`);
  else if (!r.ok) out(`${r.configPath} was NOT changed`);
  else if (r.changed) out(`${what} ${r.configPath}${r.backupPath ? ` (backup: ${r.backupPath})` : ""}`);
  else out(`${r.configPath} is already up to date`);
  printModelsJson(r);
  if (r.validation?.ran) out(r.validation.detail);
  for (const n of r.notes) out(`note: ${n}`);
}

export function registerOpenClawCommands(program: Command): void {
  const oc = program
    .command("openclaw")
    .description("connect OpenClaw to this bridge (its provider entry in ~/.openclaw/openclaw.json)");
  const common = (c: Command) =>
    c
      .option(
        "--openclaw-home <dir>",
        "OpenClaw's directory (default: $OPENCLAW_STATE_DIR or ~/.openclaw; $OPENCLAW_CONFIG_PATH names the file)",
      )
      .option("--provider-id <id>", `provider id in models.providers (default: ${DEFAULT_PROVIDER_ID})`)
      .option("--json", "print JSON");

  common(
    oc
      .command("install")
      .description(
        "add or update the bridge's provider entry (only that key; comments and other settings stay); backup + diff",
      )
      .option("-c, --config <file>", "bridge config (default: $CLAWBRIDGE_CONFIG, else embedded defaults)")
      .option("--set-default", "also make the bridge the default model (agents.defaults.model.primary)")
      .option("--agent <id>", "with --set-default: set this agent's model (agents.list) instead of the default")
      .option("--model <id>", "with --set-default: which bridge model (default: the first)")
      .option(
        "--api <kind>",
        `which API OpenClaw speaks to the bridge: ${OPENCLAW_API_KINDS.join(" | ")} (default: ${DEFAULT_API_KIND})`,
      )
      .option("--api-key <key>", "key OpenClaw sends (default: the first server.apiKeys entry, else a placeholder)")
      .option(
        "--base-url <url>",
        "the bridge's URL as OpenClaw reaches it (default: http://<server.host>:<server.port>/v1; without /v1 for anthropic-messages)",
      )
      .option("--dry-run", "print the diff, write nothing")
      .option("--openclaw-bin <path>", "openclaw CLI used to validate the result (default: openclaw on PATH)")
      .option("--no-validate", "do not run openclaw config validate"),
  ).action(
    async (
      opts: OpenClawOpts & {
        setDefault?: boolean;
        agent?: string;
        model?: string;
        apiKey?: string;
        baseUrl?: string;
        api?: string;
      },
    ) => {
      try {
        if (opts.agent && !opts.setDefault) {
          const { OpenClawSetupError } = await import("../openclaw/edit-steps.js");
          throw new OpenClawSetupError("--agent only makes sense with --set-default");
        }
        if (opts.api !== undefined && !isApiKind(opts.api)) {
          const { OpenClawSetupError } = await import("../openclaw/edit-steps.js");
          throw new OpenClawSetupError(`--api ${opts.api}: use one of ${OPENCLAW_API_KINDS.join(", ")}`);
        }
        const config = await loadConfig({ configPath: opts.config });
        const { installOpenClaw } = await import("../openclaw/install.js");
        const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome });
        const r = await installOpenClaw({
          config,
          paths,
          providerId: opts.providerId,
          entry: {
            ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
            ...(opts.baseUrl ? { baseUrl: opts.baseUrl } : {}),
            ...(isApiKind(opts.api) ? { api: opts.api } : {}),
          },
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
            out(
              `OpenClaw can now use ${r.entry.models.map((m) => `${r.providerId}/${m.id}`).join(", ")}${r.defaultModel ? ` (default: ${r.defaultModel})` : ""} through ${r.entry.api}.`,
            );
            out("Restart a running OpenClaw gateway so it reads the change; check with: clawbridge openclaw status");
          }
        }
        if (!r.ok) process.exitCode = 1;
      } catch (e) {
        fail(e);
      }
    },
  );

  common(
    oc
      .command("uninstall")
      .description(
        "remove exactly what install added (the provider entry, and the default model if it still points at the bridge)",
      )
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
        const config = await loadConfig({ configPath: opts.config });
        expectedEntry = OPENCLAW_API_KINDS.map((api) => buildProviderEntry(config, { api }));
      } catch {
        expectedEntry = undefined; // only needed without an install record
      }
      const { uninstallOpenClaw } = await import("../openclaw/uninstall.js");
      const r = await uninstallOpenClaw({
        paths,
        providerId: opts.providerId,
        dryRun: opts.dryRun,
        force: opts.force,
        validate: await makeValidator(opts),
        ...(expectedEntry ? { expectedEntry } : {}),
      });
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
      const config: Config | undefined = opts.config ? await loadConfig({ configPath: opts.config }) : undefined;
      const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome });
      const [{ openclawStatus }, { renderFindings }] = await Promise.all([
        import("../openclaw/status.js"),
        import("../report/findings.js"),
      ]);
      const r = await openclawStatus({
        paths,
        providerId: opts.providerId,
        timeoutMs: opts.timeout,
        ...(config ? { config } : {}),
      });
      if (opts.json) out(JSON.stringify(r, null, 2));
      else
        out(
          renderFindings(
            r.findings,
            `OpenClaw (${r.configPath}) -> provider "${r.providerId}"${r.baseUrl ? ` at ${r.baseUrl}` : ""}`,
          ),
        );
      if (!r.ok) process.exitCode = 1;
    } catch (e) {
      fail(e);
    }
  });
}
