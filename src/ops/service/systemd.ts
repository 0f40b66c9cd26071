/**
 * `clawbridge service install | uninstall | status`: run the bridge as a systemd USER service
 * (`~/.config/systemd/user/clawbridge.service`), started at login (or at boot with lingering),
 * restarted when it fails, logging to the journal.
 *
 * systemctl is reached through an injectable runner. Without systemctl or without a user bus
 * (containers, CI, ssh without a session), install still writes the unit and prints the commands to
 * run; that is not an error.
 */
import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const DEFAULT_SERVICE_NAME = "clawbridge";

export interface SystemctlResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Spawn failure (e.g. ENOENT: no systemctl). */
  error?: string;
}

/** Runs `systemctl --user <args>`. */
export type SystemctlRunner = (args: string[]) => Promise<SystemctlResult>;

export function defaultSystemctlRunner(bin = "systemctl"): SystemctlRunner {
  return (args) =>
    new Promise((resolve) => {
      execFile(bin, ["--user", ...args], { timeout: 30_000, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: unknown }) | null;
        if (e && typeof e.code === "string")
          return resolve({ code: null, stdout: "", stderr: "", error: `${bin}: ${e.code}` });
        resolve({
          code: e ? (typeof e.code === "number" ? e.code : 1) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        });
      });
    });
}

/** systemctl missing or no user manager to talk to: write the unit, tell the user what to run. */
export function systemdUnavailable(r: SystemctlResult): string | undefined {
  if (r.error) return r.error.includes("ENOENT") ? "systemctl is not installed" : r.error;
  const text = `${r.stderr}\n${r.stdout}`;
  if (
    /Failed to connect to (the )?bus|No medium found|DBUS_SESSION_BUS_ADDRESS|XDG_RUNTIME_DIR|not been booted with systemd|System has not been booted|Host is down/i.test(
      text,
    )
  ) {
    return `no systemd user session here (${text.trim().split("\n")[0]})`;
  }
  return undefined;
}

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

export interface UnitOptions {
  name?: string;
  /** Absolute node binary (default: this process's). */
  nodePath?: string;
  /** Absolute path of the clawbridge entry script (default: this package's bin/clawbridge.js). */
  binPath?: string;
  /** Absolute bridge config path; omitted: the embedded defaults. */
  configPath?: string;
  /** Extra `serve` arguments (e.g. --port 4100). */
  serveArgs?: string[];
  /** Environment= lines (values are written to the unit, never printed). */
  env?: Record<string, string>;
  /** Seconds systemd waits after SIGTERM (the bridge finishes running turns first). */
  stopTimeoutSeconds?: number;
}

export interface ServiceOptions extends UnitOptions {
  /** Directory for the unit (default: $XDG_CONFIG_HOME/systemd/user or ~/.config/systemd/user). */
  unitDir?: string;
  runner?: SystemctlRunner;
  /** false: enable only, do not start now. */
  start?: boolean;
  envVars?: NodeJS.ProcessEnv;
}

export function unitFileName(name = DEFAULT_SERVICE_NAME): string {
  if (!/^[A-Za-z0-9:_.@-]+$/.test(name))
    throw new Error(`service name "${name}" may use letters, digits and : _ . @ -`);
  return `${name}.service`;
}

export function defaultUnitDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME?.trim() || path.join(env.HOME?.trim() || homedir(), ".config");
  return path.join(base, "systemd", "user");
}

export function unitPath(opts: { name?: string; unitDir?: string; envVars?: NodeJS.ProcessEnv } = {}): string {
  return path.join(opts.unitDir ?? defaultUnitDir(opts.envVars), unitFileName(opts.name));
}

/** Quote one ExecStart word for systemd: `%` and `$` are specifiers/variables there. */
export function quoteExecArg(arg: string): string {
  if (/[\n\r]/.test(arg)) throw new Error("service arguments cannot contain line breaks");
  const escaped = arg.replace(/%/g, "%%").replace(/\$/g, "$$$$");
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped;
  return `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** One `Environment=` assignment, quoted (systemd expands `%` specifiers there; `$` is literal). */
export function environmentLine(key: string, value: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`environment variable name "${key}" is not valid`);
  if (/[\n\r]/.test(value)) throw new Error(`the value of ${key} contains a line break`);
  return `Environment="${`${key}=${value}`.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%")}"`;
}

/** Parse `--env KEY=VALUE` options. */
export function parseEnvAssignments(list: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of list) {
    const i = item.indexOf("=");
    if (i <= 0) throw new Error(`--env ${item.split("=")[0]}: expected KEY=VALUE`);
    const key = item.slice(0, i);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`--env ${key}: not a valid variable name`);
    out[key] = item.slice(i + 1);
  }
  return out;
}

export function renderUnit(opts: UnitOptions = {}): string {
  const node = opts.nodePath ?? process.execPath;
  const bin = opts.binPath ?? path.join(packageRoot, "bin", "clawbridge.js");
  const args = [
    node,
    bin,
    "serve",
    ...(opts.configPath ? ["--config", opts.configPath] : []),
    ...(opts.serveArgs ?? []),
  ];
  const envLines = Object.entries(opts.env ?? {}).map(([k, v]) => environmentLine(k, v));
  return [
    `# Written by \`clawbridge service install\`; \`clawbridge service uninstall\` removes it.`,
    `[Unit]`,
    `Description=clawbridge: OpenAI-compatible bridge to coding-agent CLIs and local models (for OpenClaw)`,
    `StartLimitIntervalSec=300`,
    `StartLimitBurst=10`,
    ``,
    `[Service]`,
    `Type=simple`,
    `ExecStart=${args.map(quoteExecArg).join(" ")}`,
    ...envLines,
    `Restart=on-failure`,
    `RestartSec=5`,
    // SIGTERM to the bridge only: it finishes running turns and stops its CLI children itself.
    `KillMode=mixed`,
    `TimeoutStopSec=${opts.stopTimeoutSeconds ?? 30}`,
    `UMask=0077`,
    `StandardOutput=journal`,
    `StandardError=journal`,
    `SyslogIdentifier=${opts.name ?? DEFAULT_SERVICE_NAME}`,
    ``,
    `[Install]`,
    `WantedBy=default.target`,
    ``,
  ].join("\n");
}

export interface ServiceStep {
  command: string;
  ok: boolean;
  output?: string;
}

export interface ServiceResult {
  ok: boolean;
  unitPath: string;
  /** The unit file changed (install) / was removed (uninstall). */
  changed: boolean;
  /** systemctl --user was usable. */
  systemd: boolean;
  /** Why systemctl could not be used. */
  systemdNote?: string;
  steps: ServiceStep[];
  /** Commands the user should run themselves (no systemd here, or a step failed). */
  todo: string[];
  /** Names of the Environment= variables written (values are never reported). */
  envKeys: string[];
  notes: string[];
}

const sh = (unit: string, ...args: string[]) => `systemctl --user ${args.join(" ")}${unit ? ` ${unit}` : ""}`;

async function runSteps(runner: SystemctlRunner, plan: string[][], result: ServiceResult): Promise<boolean> {
  for (const args of plan) {
    const r = await runner(args);
    const why = systemdUnavailable(r);
    if (why) {
      result.systemd = false;
      result.systemdNote = why;
      return false;
    }
    const step: ServiceStep = { command: `systemctl --user ${args.join(" ")}`, ok: r.code === 0 };
    const out = `${r.stdout}${r.stderr}`.trim();
    if (out) step.output = out.slice(-1000);
    result.steps.push(step);
    if (!step.ok) {
      result.ok = false;
      return false;
    }
  }
  return true;
}

export async function installService(opts: ServiceOptions = {}): Promise<ServiceResult> {
  const name = opts.name ?? DEFAULT_SERVICE_NAME;
  const file = unitPath({ name, unitDir: opts.unitDir, envVars: opts.envVars });
  const unit = unitFileName(name);
  const text = renderUnit({ ...opts, name });
  const old = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  // 0600: Environment= lines may hold API keys.
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
  const result: ServiceResult = {
    ok: true,
    unitPath: file,
    changed: old !== text,
    systemd: true,
    steps: [],
    todo: [],
    envKeys: Object.keys(opts.env ?? {}),
    notes: [],
  };
  const start = opts.start ?? true;
  const plan = [["daemon-reload"], start ? ["enable", "--now", unit] : ["enable", unit]];
  if (start && old !== undefined && old !== text) plan.push(["restart", unit]); // pick up the new unit
  const ran = await runSteps(opts.runner ?? defaultSystemctlRunner(), plan, result);
  if (!ran) {
    result.todo = [
      sh("", "daemon-reload"),
      sh(unit, start ? "enable --now" : "enable"),
      ...(start && old !== undefined ? [sh(unit, "restart")] : []),
    ];
  }
  result.notes.push(`logs: journalctl --user -u ${unit} -f`);
  result.notes.push(
    `to keep it running while you are logged out: loginctl enable-linger ${process.env.USER ?? "$USER"}`,
  );
  return result;
}

export async function uninstallService(opts: ServiceOptions = {}): Promise<ServiceResult> {
  const name = opts.name ?? DEFAULT_SERVICE_NAME;
  const file = unitPath({ name, unitDir: opts.unitDir, envVars: opts.envVars });
  const unit = unitFileName(name);
  const present = existsSync(file);
  const result: ServiceResult = {
    ok: true,
    unitPath: file,
    changed: false,
    systemd: true,
    steps: [],
    todo: [],
    envKeys: [],
    notes: [],
  };
  const runner = opts.runner ?? defaultSystemctlRunner();
  // disable --now stops it too; a unit systemd does not know is not an error here.
  const r = await runner(["disable", "--now", unit]);
  const why = systemdUnavailable(r);
  if (why) {
    result.systemd = false;
    result.systemdNote = why;
    result.todo.push(sh(unit, "disable --now"));
  } else {
    const out = `${r.stdout}${r.stderr}`.trim();
    const unknown = /not (be )?found|does not exist|No such file/i.test(out);
    result.steps.push({
      command: `systemctl --user disable --now ${unit}`,
      ok: r.code === 0 || unknown,
      ...(out ? { output: out.slice(-1000) } : {}),
    });
    if (r.code !== 0 && !unknown) result.ok = false;
  }
  if (present) {
    rmSync(file, { force: true });
    result.changed = true;
  } else {
    result.notes.push(`no unit file at ${file}`);
  }
  if (result.systemd) {
    await runSteps(runner, [["daemon-reload"]], result);
    if (!result.systemd) result.todo.push(sh("", "daemon-reload"));
  } else {
    result.todo.push(sh("", "daemon-reload"));
  }
  return result;
}

export interface ServiceStatus {
  unitPath: string;
  installed: boolean;
  systemd: boolean;
  systemdNote?: string;
  /** From `systemctl --user show`: ActiveState, SubState, UnitFileState, MainPID, ... */
  properties: Record<string, string>;
  active: boolean;
  enabled: boolean;
  /** Names of the Environment= variables in the unit file. */
  envKeys: string[];
  execStart?: string;
}

export async function serviceStatus(opts: ServiceOptions = {}): Promise<ServiceStatus> {
  const name = opts.name ?? DEFAULT_SERVICE_NAME;
  const file = unitPath({ name, unitDir: opts.unitDir, envVars: opts.envVars });
  const unit = unitFileName(name);
  const installed = existsSync(file);
  const text = installed ? readFileSync(file, "utf8") : "";
  const status: ServiceStatus = {
    unitPath: file,
    installed,
    systemd: true,
    properties: {},
    active: false,
    enabled: false,
    envKeys: [...text.matchAll(/^Environment="?([A-Za-z_][A-Za-z0-9_]*)=/gm)].map((m) => m[1]!),
    ...(installed ? { execStart: /^ExecStart=(.*)$/m.exec(text)?.[1] } : {}),
  };
  const r = await (opts.runner ?? defaultSystemctlRunner())([
    "show",
    unit,
    "--property=LoadState,ActiveState,SubState,UnitFileState,MainPID,ExecMainStatus,ActiveEnterTimestamp,NRestarts",
  ]);
  const why = systemdUnavailable(r);
  if (why) {
    status.systemd = false;
    status.systemdNote = why;
    return status;
  }
  for (const line of r.stdout.split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) status.properties[line.slice(0, i)] = line.slice(i + 1);
  }
  status.active = status.properties.ActiveState === "active";
  status.enabled = status.properties.UnitFileState === "enabled";
  return status;
}
