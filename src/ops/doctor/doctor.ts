/**
 * `clawbridge doctor`: one command that checks the set-up and explains each finding with its fix:
 * configuration, backends and the coding-agent CLIs, the port, OpenClaw's config (provider entry,
 * models, compat flags, stale models.json, OpenClaw's own validation), lock files of dead
 * processes, disk space and the systemd user service. The backends' and CLIs' checks are in
 * backend-checks.ts.
 */
import { checkDatabase } from "./database.js";
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { KNOWN_CLIS, type KnownCli } from "../../backends/cli/resolve.js";
import type { Backend } from "../../backends/contract/backend.js";
import { ConfigError, loadConfig } from "../../core/config/load.js";
import type { Config } from "../../core/config/schema.js";
import { bridgeBaseUrl, bridgeOrigin, resolveOpenClawPaths } from "../openclaw/provider.js";
import { openclawStatus } from "../openclaw/status.js";
import type { Validator } from "../openclaw/validate.js";
import { serviceStatus, type SystemctlRunner } from "../service/systemd.js";
import { wantsSystems } from "../../workflows/systems/paths.js";
import {
  canListen,
  findListeningPid,
  findLockFiles,
  formatBytes,
  freeBytes,
  processCommand,
  readLock,
  writable,
} from "./probes.js";
import { summarize } from "../report/findings.js";
import { checkBackends, scanClis } from "./backend-checks.js";
import type { Finding, Summary } from "../../wire/admin.js";

/** The coding-agent CLIs a backend can drive (src/backends/cli/resolve.ts, where the dashboard finds them too). */
export { KNOWN_CLIS, type KnownCli } from "../../backends/cli/resolve.js";

export interface DoctorOptions {
  configPath?: string;
  /** An already-loaded configuration (the running bridge's, for the dashboard) instead of loading `configPath`. */
  config?: Config;
  /** The running bridge's backends (with `config`): checked as they are, not created anew (a router or builder backend needs the bridge's rooms). */
  backends?: ReadonlyMap<string, Backend>;
  env?: NodeJS.ProcessEnv;
  openclawHome?: string;
  providerId?: string;
  /** OpenClaw's own validation (null: skipped). */
  validate?: Validator | null;
  /** Where `clawbridge-*.lock` files are looked for (default: the OS temp dir). */
  tmpDir?: string;
  /** Remove lock files whose PID is dead. */
  fix?: boolean;
  /** Run `--version` of installed CLIs that no backend uses (default true). */
  scanClis?: boolean;
  knownClis?: readonly KnownCli[];
  systemctl?: SystemctlRunner;
  unitDir?: string;
  serviceName?: string;
  /** Per HTTP probe. */
  timeoutMs?: number;
  /** Below this much free space in the data directory: failure (default 200 MB); below 5x: warning. */
  minFreeBytes?: number;
}

export interface DoctorReport {
  ok: boolean;
  summary: Summary;
  config?: string;
  findings: Finding[];
}

/**
 * The systems (config `systems:` and `<dataDir>/systems/`), loaded as `serve` would load them but
 * without starting MCP servers: a problem of the config's own systems stops the start (fail); a bad
 * file only leaves its system out (warn, each file named with its problems).
 */
async function checkSystems(config: Config, findings: Finding[]): Promise<void> {
  if (!wantsSystems(config)) return; // the systems runtime (undici, ajv, SQLite) is loaded only when there are systems
  const { loadLibrary, formatProblem } = await import("../../workflows/router/runtime.js");
  // Without MCP servers a `fromTool` input schema cannot be read: not a problem of the file.
  const noMcp = (p: { message: string }) => !/needs the MCP server at start-up/.test(p.message);
  let res: Awaited<ReturnType<typeof loadLibrary>>;
  try {
    res = await loadLibrary(config, { askMcp: false });
  } catch (err) {
    findings.push({ id: "systems", status: "fail", title: `systems cannot be loaded: ${(err as Error).message}` });
    return;
  }
  const fatal = res.problems.filter(noMcp);
  const leftOut = res.library.leftOut
    .map((l) => ({ ...l, problems: l.problems.filter(noMcp) }))
    .filter((l) => l.problems.length);
  const loaded = `${res.library.systems.length} system${res.library.systems.length === 1 ? "" : "s"} loaded`;
  if (fatal.length)
    findings.push({
      id: "systems:config",
      status: "fail",
      title: `systems: the config's systems have ${fatal.length} problem${fatal.length === 1 ? "" : "s"}; the bridge will not start`,
      detail: fatal.map(formatProblem).join("\n"),
      fix: "fix the keys named in the config file (clawbridge systems validate shows the same)",
    });
  if (leftOut.length)
    findings.push({
      id: "systems:files",
      status: "warn",
      title: `systems: ${loaded}, ${leftOut.length} file${leftOut.length === 1 ? "" : "s"} left out`,
      detail: leftOut
        .map(
          (l) =>
            `${l.file}${l.id ? ` (system ${l.id})` : ""}:\n${l.problems.map((p) => `  ${p.key}: ${p.message}`).join("\n")}`,
        )
        .join("\n"),
      fix: "fix or remove each file named (clawbridge systems validate names every problem); the bridge serves the other systems without them",
    });
  if (!fatal.length && !leftOut.length) findings.push({ id: "systems", status: "ok", title: `systems: ${loaded}` });
}

/** The warm CLI processes a running bridge reports in /health, as one line (empty when none). */
function warmLine(warm: unknown): string {
  const w = warm as
    | {
        processes?: number;
        rssBytes?: number;
        byBackend?: Record<string, { processes: number; busy: number; standby?: number; rssBytes: number }>;
        memory?: { maxBytes: number };
      }
    | undefined;
  if (!w?.processes) return "";
  const mb = (n: number) => `${Math.round(n / 1048576)} MB`;
  const parts = Object.entries(w.byBackend ?? {}).map(
    ([name, b]) =>
      `${name} ${b.processes} (${b.busy} busy, ${b.standby ? `${b.standby} standby, ` : ""}${mb(b.rssBytes)})`,
  );
  const budget = w.memory ? `; budget ${mb(w.memory.maxBytes)} (warm.maxMemoryMB)` : "";
  return `\nwarm CLI processes: ${w.processes}, ${mb(w.rssBytes ?? 0)} in all — ${parts.join(", ")}${budget}`;
}

async function checkPort(config: Config, findings: Finding[], timeoutMs: number): Promise<void> {
  const { host, port } = config.server;
  const where = `${host}:${port}`;
  const origin = bridgeOrigin(bridgeBaseUrl(config));
  let body: Record<string, unknown> | undefined;
  let httpStatus: number | undefined;
  try {
    // With server.apiKeys the details (models) need a key; liveness does not.
    const key = config.server.apiKeys[0];
    const res = await fetch(`${origin}/health`, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    httpStatus = res.status;
    body = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  } catch {
    /* nothing answered over HTTP */
  }
  const owner = () => {
    const pid = findListeningPid(port);
    return pid ? ` (pid ${pid}${processCommand(pid) ? `: ${processCommand(pid)}` : ""})` : "";
  };
  if (body && body.name === "clawbridge") {
    const running = Array.isArray(body.models) ? body.models.map((m) => String((m as { id?: unknown }).id)) : undefined;
    const configured = config.models.map((m) => m.id);
    // Without its model list (another key) there is nothing to compare.
    const same = !running || (running.length === configured.length && configured.every((id) => running.includes(id)));
    findings.push({
      id: "port",
      status: same ? "ok" : "warn",
      title: `port ${where}: a clawbridge ${String(body.version ?? "")} answers${owner()}`.replace("  ", " "),
      detail: `GET ${origin}/health: status ${String(body.status ?? "?")}${warmLine(body.warm)}${same ? "" : `\nit serves ${running?.join(", ") || "no models"}; this config has ${configured.join(", ")}`}`,
      ...(same
        ? {}
        : {
            fix: "restart it to apply this config (systemctl --user restart clawbridge, or stop the old process and run clawbridge serve)",
          }),
    });
    return;
  }
  if (httpStatus !== undefined) {
    findings.push({
      id: "port",
      status: "fail",
      title: `port ${where}: used by another program${owner()}`,
      detail: `GET ${origin}/health answered HTTP ${httpStatus}, not as a clawbridge`,
      fix: "stop that program, or set server.port (then: clawbridge openclaw install)",
    });
    return;
  }
  const probe = await canListen(host, port);
  if (probe.free) {
    findings.push({
      id: "port",
      status: "ok",
      title: `port ${where}: free (the bridge is not running)`,
      detail: "start it: clawbridge serve, or clawbridge service install",
    });
  } else if (probe.code === "EADDRINUSE") {
    findings.push({
      id: "port",
      status: "fail",
      title: `port ${where}: used by another program${owner()}`,
      detail: "it does not answer HTTP on /health",
      fix: "stop that program, or set server.port (then: clawbridge openclaw install)",
    });
  } else {
    findings.push({
      id: "port",
      status: "fail",
      title: `port ${where}: cannot listen (${probe.code ?? "unknown error"})`,
      fix:
        probe.code === "EACCES"
          ? "ports below 1024 need privileges: pick a higher server.port"
          : probe.code === "EADDRNOTAVAIL"
            ? `${host} is not an address of this machine: fix server.host`
            : "check server.host / server.port",
    });
  }
}

function checkLocks(dataDir: string | undefined, tmpDir: string, fix: boolean, findings: Finding[]): void {
  const files = findLockFiles(dataDir, tmpDir);
  if (!files.length) {
    findings.push({
      id: "locks",
      status: "ok",
      title: "no lock files",
      detail: `looked in ${[dataDir, `${tmpDir}/clawbridge-*.lock`].filter(Boolean).join(" and ")}`,
    });
    return;
  }
  for (const file of files) {
    const l = readLock(file);
    if (l.problem) {
      findings.push({
        id: `lock:${file}`,
        status: "warn",
        title: `lock file ${file}: ${l.problem}`,
        fix: `if no clawbridge or OpenClaw gateway is running: rm ${file}`,
      });
    } else if (l.alive && !l.reused) {
      findings.push({
        id: `lock:${file}`,
        status: "ok",
        title: `lock file ${file}: held by running pid ${l.pid}`,
        ...(l.command ? { detail: l.command } : {}),
      });
    } else if (fix) {
      rmSync(file, { force: true });
      findings.push({
        id: `lock:${file}`,
        status: "ok",
        title: `lock file ${file}: pid ${l.pid} was ${l.reused ? "reused by another program" : "dead"}; removed (--fix)`,
      });
    } else {
      findings.push({
        id: `lock:${file}`,
        status: "warn",
        title: l.reused
          ? `stale lock file ${file}: pid ${l.pid} now belongs to another program (${l.command})`
          : `stale lock file ${file}: pid ${l.pid} is not running`,
        detail: "a crashed bridge or plugin left it; it can stop the plugin from starting the bridge",
        fix: `rm ${file} (or: clawbridge doctor --fix)`,
      });
    }
  }
}

function checkDisk(dataDir: string, minFree: number, findings: Finding[]): void {
  try {
    const { free, total, at } = freeBytes(dataDir);
    const canWrite = writable(dataDir);
    const status = !canWrite || free < minFree ? "fail" : free < minFree * 5 ? "warn" : "ok";
    findings.push({
      id: "disk",
      status,
      title: `data directory ${dataDir}: ${formatBytes(free)} free of ${formatBytes(total)}${canWrite ? "" : ", NOT writable"}`,
      detail: at === dataDir ? undefined : `does not exist yet (created at start-up); measured at ${at}`,
      ...(status === "ok"
        ? {}
        : {
            fix: canWrite
              ? "free some space (sessions, CLI work directories and logs live here), or set dataDir"
              : `fix the permissions of ${at}, or set dataDir / CLAWBRIDGE_DATA_DIR`,
          }),
    });
  } catch (err) {
    findings.push({
      id: "disk",
      status: "warn",
      title: `data directory ${dataDir}: cannot measure free space (${(err as Error).message})`,
    });
  }
}

export async function runDoctor(opts: DoctorOptions = {}): Promise<DoctorReport> {
  const env = opts.env ?? process.env;
  const findings: Finding[] = [];
  const timeoutMs = opts.timeoutMs ?? 2000;

  // 1. Configuration.
  let config: Config | undefined;
  try {
    config = opts.config ?? loadConfig({ configPath: opts.configPath, env });
    findings.push({
      id: "config",
      status: "ok",
      title: `configuration valid (${config.source})`,
      detail: `${config.models.length} model${config.models.length === 1 ? "" : "s"}: ${config.models.map((m) => `${m.id} -> ${m.backend}`).join(", ")}`,
    });
  } catch (err) {
    findings.push({
      id: "config",
      status: "fail",
      title: "configuration invalid",
      detail: err instanceof ConfigError ? err.message : String(err),
      fix: "fix the keys named above (clawbridge config check shows the same)",
    });
  }

  // 2. Backends and CLIs.
  const used = config ? await checkBackends(config, findings, opts.backends) : new Set<string>();
  if (opts.scanClis ?? true) await scanClis(opts.knownClis ?? KNOWN_CLIS, used, env, findings);

  // 3. Port, and the systems the bridge loads.
  if (config) await checkPort(config, findings, timeoutMs);
  if (config) await checkSystems(config, findings);
  if (config) await checkDatabase(config, findings, timeoutMs);

  // 4. OpenClaw.
  const paths = resolveOpenClawPaths({ openclawHome: opts.openclawHome, env });
  const oc = await openclawStatus({
    paths,
    providerId: opts.providerId,
    env,
    timeoutMs,
    ...(config ? { config } : {}),
    notSetUpIs: "warn",
  });
  // The port check already says whether the bridge runs; keep OpenClaw's view only when it differs.
  const portFinding = findings.find((f) => f.id === "port");
  for (const f of oc.findings) {
    if (
      f.id === "bridge:running" &&
      portFinding &&
      config &&
      // Compared as origins: an anthropic-messages entry's baseUrl has no /v1.
      oc.baseUrl !== undefined &&
      bridgeOrigin(oc.baseUrl.replace(/\/+$/, "")) === bridgeOrigin(bridgeBaseUrl(config))
    ) {
      if (f.status === "fail")
        findings.push({ ...f, title: `OpenClaw points at the bridge, but it is not running`, detail: f.detail });
      continue;
    }
    findings.push(f);
  }
  if (opts.validate && existsSync(paths.configPath)) {
    const v = await opts.validate(paths);
    if (!v.ran)
      findings.push({
        id: "openclaw:validate",
        status: "info",
        title: "OpenClaw's own validation could not run",
        detail: v.detail,
      });
    else
      findings.push(
        v.valid
          ? { id: "openclaw:validate", status: "ok", title: "openclaw config validate: valid" }
          : {
              id: "openclaw:validate",
              status: "fail",
              title: "openclaw config validate: INVALID",
              detail: v.issues.map((i) => `${i.path}: ${i.message}`).join("\n") || v.detail,
              fix: "fix or remove the keys named (a backup of each clawbridge edit is next to the file: openclaw.json.bak-*)",
            },
      );
  } else if (!opts.validate && existsSync(paths.configPath)) {
    findings.push({
      id: "openclaw:validate",
      status: "info",
      title: "OpenClaw's own validation skipped (openclaw CLI not found; --openclaw-bin <path> to use one)",
    });
  }

  // 5. Lock files, disk, service.
  const dataDir =
    config?.dataDir ?? path.resolve(env.CLAWBRIDGE_DATA_DIR ?? path.join(env.HOME ?? tmpdir(), ".clawbridge"));
  checkLocks(dataDir, opts.tmpDir ?? tmpdir(), !!opts.fix, findings);
  checkDisk(dataDir, opts.minFreeBytes ?? 200 * 1024 * 1024, findings);
  const svc = await serviceStatus({
    name: opts.serviceName,
    unitDir: opts.unitDir,
    envVars: env,
    ...(opts.systemctl ? { runner: opts.systemctl } : {}),
  });
  if (!svc.installed) {
    findings.push({
      id: "service",
      status: "info",
      title: "systemd user service: not installed",
      detail: "optional: clawbridge service install (starts the bridge at login, restarts it on failure)",
    });
  } else if (!svc.systemd) {
    findings.push({
      id: "service",
      status: "info",
      title: `systemd user service: unit at ${svc.unitPath}`,
      detail: `its state is unknown: ${svc.systemdNote}`,
    });
  } else {
    const state = `${svc.properties.ActiveState ?? "?"}/${svc.properties.SubState ?? "?"}, ${svc.properties.UnitFileState ?? "?"}`;
    findings.push(
      svc.active
        ? {
            id: "service",
            status: "ok",
            title: `systemd user service: ${state} (pid ${svc.properties.MainPID ?? "?"})`,
          }
        : {
            id: "service",
            status: "warn",
            title: `systemd user service: installed but ${state}`,
            fix: `systemctl --user start ${path.basename(svc.unitPath)}; logs: journalctl --user -u ${path.basename(svc.unitPath)} -e`,
          },
    );
  }

  const summary = summarize(findings);
  return { ok: summary.fail === 0, summary, ...(config ? { config: config.source } : {}), findings };
}
