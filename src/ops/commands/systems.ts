/**
 * `clawbridge systems list|show|validate|run|hook|versions|rollback` and `clawbridge runs list|show|pause|resume|cancel|approve|reject`.
 * Listing and validating read the config and `<dataDir>/systems/` directly; runs are read from
 * `<dataDir>/systems.db` (the bridge may be stopped). Starting, pausing, resuming and cancelling
 * a run ask the running bridge over its HTTP API (`/v1/systems/:id/runs`, `/v1/runs/:id/…`), with
 * the config's first API key, since the run executes there; so do a system's versions (`run id@n`
 * runs version n, `versions id [--diff 1..2]`, `rollback id n`: src/workflows/systems/versions.ts). `systems hook <id>` shows (or, with
 * `--rotate`, replaces) a system's inbound hook secret in `<dataDir>/hooks/` with a signed curl example.
 * `clawbridge systems export|import` move a system as a bundle (src/workflows/builder/bundle.ts) through the
 * builder room over `<dataDir>/systems.db`: export works with the bridge stopped or running,
 * import writes a draft canvas and its sandbox files (or a system file) into `<dataDir>`.
 */
import type { Command } from "commander";
import type { BuilderRoom } from "../../workflows/builder/service.js";
import type { SystemsHost } from "../../workflows/builder/deploy.js";
import type { Config } from "../../core/config/schema.js";
import type { RunStore } from "../../workflows/systems/db.js";
import { fail, loadConfig, out } from "./common.js";
import type { RunRow, SystemVersionRow } from "../../wire/runs.js";

const err = (s: string) => void process.stderr.write(s.endsWith("\n") ? s : `${s}\n`);

function bridgeUrl(config: Config, url?: string): string {
  if (url) return url.replace(/\/+$/, "");
  const host = config.server.host === "0.0.0.0" || config.server.host === "::" ? "127.0.0.1" : config.server.host;
  return `http://${host.includes(":") ? `[${host}]` : host}:${config.server.port}`;
}

/** Call the running bridge; a clear message when it is not there. */
async function callBridge(
  config: Config,
  url: string | undefined,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const base = bridgeUrl(config, url);
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  const key = config.server.apiKeys[0];
  if (key) headers.authorization = `Bearer ${key}`;
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new CliProblem(`no bridge answers at ${base}; start it with \`clawbridge serve\` (or pass --url)`);
  }
  const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  return { status: res.status, json };
}

class CliProblem extends Error {}

function apiMessage(json: Record<string, unknown>): string {
  const e = json.error as { message?: string } | undefined;
  return e?.message ?? JSON.stringify(json);
}

/** `k=v` pairs; a value that is JSON (a number, true, a list) is taken as such. */
export function parsePairs(pairs: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const p of pairs) {
    const eq = p.indexOf("=");
    if (eq <= 0) throw new CliProblem(`"${p}" is not key=value`);
    const k = p.slice(0, eq);
    const v = p.slice(eq + 1);
    out[k] = v;
  }
  return out;
}

const when = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "-");

function handle(e: unknown): void {
  if (e instanceof CliProblem) {
    err(`clawbridge: ${e.message}`);
    process.exitCode = 2;
    return;
  }
  fail(e);
}

/** A run as `runJson` makes it, or as the HTTP API sent it. */
function printRun(r: RunRow | Record<string, unknown>): void {
  out(
    `run ${r.id}  ${r.system}${r.version ? ` v${r.version}` : ""}${r.test ? " (test)" : ""}  ${r.status}${r.failed_step ? ` at ${r.failed_step}` : ""}  created ${when(r.created_at as number)}`,
  );
  for (const s of (r.steps as Array<Record<string, unknown>>) ?? []) {
    const ms =
      s.started_at && s.ended_at ? ` ${(((s.ended_at as number) - (s.started_at as number)) / 1000).toFixed(1)} s` : "";
    out(
      `  step ${s.id}: ${s.status}${Number(s.attempts) > 1 ? ` (${s.attempts} attempts)` : ""}${ms}${s.error ? ` — ${s.error}` : ""}`,
    );
  }
  if (r.error) out(`error: ${r.error}`);
  if (r.output !== null && r.output !== undefined)
    out(typeof r.output === "string" ? r.output : JSON.stringify(r.output, null, 2));
}

const SYSTEM_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** A refused export or import (no such system, a bad bundle, a file that cannot be read or written): one line, exit 1. */
class BundleProblem extends Error {}

function handleBundle(e: unknown, what: string): void {
  const name = (e as Error | undefined)?.name;
  if (e instanceof BundleProblem) err(`clawbridge: ${e.message}`);
  else if (name === "BundleError" || name === "SandboxError" || name === "CanvasOpError")
    err(`clawbridge: ${what}: ${(e as Error).message}`);
  else if (e instanceof Error && e.constructor === Error) {
    // tar-stream and zlib say what is wrong with the archive in a plain Error.
    err(`clawbridge: ${what}: ${e.message}`);
  } else return fail(e);
  process.exitCode = 1;
}

/**
 * The builder room over `<dataDir>/systems.db` (and the canvases in the PostgreSQL of `store: {
 * kind: postgres }`), closed after `fn`. For an export of a system with
 * no canvas and no file in `<dataDir>/systems/` (one declared in the config), the room gets the
 * loaded library so it can find it; nothing is checked or reloaded.
 */
async function withRoom<T>(
  config: Config,
  exportOf: string | undefined,
  fn: (room: BuilderRoom) => Promise<T>,
): Promise<T> {
  const [{ openSystemsDb, systemsDbPath }, { openBuilderRoom }, { existsSync }, path, { systemsDir }] =
    await Promise.all([
      import("../../workflows/systems/db.js"),
      import("../../workflows/builder/service.js"),
      import("node:fs"),
      import("node:path"),
      import("../../workflows/systems/paths.js"),
    ]);
  if (exportOf !== undefined) {
    // The secrets' values, so the bundle is written with each as `[secret NAME]` (a refused file: none are known).
    const { SecretStore } = await import("../../core/secrets/store.js");
    SecretStore.load(config.dataDir);
  }
  const [{ SqliteSql }, { openBacking, closeBacking }] = await Promise.all([
    import("../../core/db/sql.js"),
    import("../../core/db/backing.js"),
  ]);
  const backing = await openBacking(config);
  const db = openSystemsDb(systemsDbPath(config.dataDir));
  const sql = backing.kind === "postgres" ? backing.db : new SqliteSql(db);
  try {
    let host: SystemsHost | undefined;
    if (exportOf !== undefined && !existsSync(path.join(systemsDir(config.dataDir), `${exportOf}.yaml`))) {
      const { CanvasStore } = await import("../../workflows/builder/canvas-store.js");
      if (!(await new CanvasStore(sql).get(exportOf))) {
        const { loadLibrary } = await import("../../workflows/router/runtime.js");
        const { library } = await loadLibrary(config, { askMcp: false });
        host = { library, check: async () => [], reload: async () => [] };
      }
    }
    return await fn(openBuilderRoom({ sql, db, dataDir: config.dataDir, host }));
  } finally {
    db.close();
    await closeBacking(backing);
  }
}

/** The run store of the config's store (systems.db, or the PostgreSQL of `store: { kind: postgres }`), for `fn`. */
async function withRunStore<T>(config: Config, fn: (store: RunStore) => Promise<T>): Promise<T> {
  const [{ openSystemsDb, RunStore, systemsDbPath }, { sqliteSqlOf }, { openBacking, closeBacking }] =
    await Promise.all([
      import("../../workflows/systems/db.js"),
      import("../../core/db/sql.js"),
      import("../../core/db/backing.js"),
    ]);
  const backing = await openBacking(config);
  const db = backing.kind === "sqlite" ? openSystemsDb(systemsDbPath(config.dataDir)) : undefined;
  try {
    return await fn(new RunStore(backing.kind === "postgres" ? backing.db : sqliteSqlOf(db!)));
  } finally {
    db?.close();
    await closeBacking(backing);
  }
}

export function registerSystemsCommands(program: Command): void {
  const systems = program
    .command("systems")
    .description("the systems a router can run (config `systems:` and <dataDir>/systems/*.yaml)");

  systems
    .command("list")
    .description("list the systems")
    .option("-c, --config <file>", "config file")
    .option("--json", "print JSON")
    .action(async (opts: { config?: string; json?: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { loadLibrary } = await import("../../workflows/router/runtime.js");
        const { library, problems } = await loadLibrary(config);
        if (opts.json) return out(JSON.stringify(library.systems, null, 2));
        if (!library.systems.length) out("no systems configured");
        for (const s of library.systems)
          out(
            `${s.id}  (${s.run.kind}${s.sideEffects ? ", side effects" : ""})  ${s.name}${s.description ? ` — ${s.description}` : ""}`,
          );
        const files = library.leftOut.length;
        const n = problems.length + library.leftOut.reduce((k, l) => k + l.problems.length, 0);
        if (n)
          err(
            `${n} problem${n === 1 ? "" : "s"} left systems out${files ? ` (${files} file${files === 1 ? "" : "s"} of the systems folder)` : ""}: see clawbridge systems validate`,
          );
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("show <id>")
    .description("show one system as loaded (inputs, run, side effects)")
    .option("-c, --config <file>", "config file")
    .action(async (id: string, opts: { config?: string }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { loadLibrary } = await import("../../workflows/router/runtime.js");
        const { library } = await loadLibrary(config);
        const s = library.get(id);
        if (!s) throw new CliProblem(`no system "${id}" (see: clawbridge systems list)`);
        out(JSON.stringify(s, null, 2));
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("validate")
    .description("check every system and name the offending key of each problem (exit 1 when there is one)")
    .option("-c, --config <file>", "config file")
    .option("--no-mcp", "do not start MCP servers to read tool schemas")
    .action(async (opts: { config?: string; mcp: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { loadLibrary, routerProblems, formatProblem } = await import("../../workflows/router/runtime.js");
        const { leftOutLines } = await import("../../workflows/systems/system-files.js");
        const { library, problems } = await loadLibrary(config, { askMcp: opts.mcp });
        // The config's problems stop `serve`; a file's only leave that file's system out.
        const all = [...routerProblems(config), ...problems.map(formatProblem), ...leftOutLines(library.leftOut)];
        for (const p of all) out(`problem: ${p}`);
        for (const l of library.leftOut) out(`left out: ${l.file}${l.id ? ` (system ${l.id})` : ""}`);
        out(
          `${library.systems.length} system${library.systems.length === 1 ? "" : "s"} OK${all.length ? `, ${all.length} problem${all.length === 1 ? "" : "s"}` : ""}`,
        );
        if (all.length) process.exitCode = 1;
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("hook <id>")
    .description("show a system's inbound hook: its URL, its secret and a signed curl example (--rotate: a new secret)")
    .option("-c, --config <file>", "config file")
    .option("--url <url>", "the bridge's address as senders reach it (default: from the config)")
    .option("--rotate", "replace the secret (requests signed with the old one are refused from now on)")
    .action(async (id: string, opts: { config?: string; url?: string; rotate?: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { loadLibrary } = await import("../../workflows/router/runtime.js");
        const { ensureHookSecret, hookSecretPath } = await import("../../workflows/triggers/hook-secret.js");
        const s = (await loadLibrary(config, { askMcp: false })).library.get(id);
        if (!s) throw new CliProblem(`no system "${id}" (see: clawbridge systems list)`);
        if (!s.hook)
          throw new CliProblem(`system "${id}" has no hook: set \`hook: true\` on it (docs/SYSTEMS.md#triggers)`);
        const secret = ensureHookSecret(config.dataDir, id, opts.rotate === true);
        const url = `${bridgeUrl(config, opts.url)}/v1/hooks/${encodeURIComponent(id)}`;
        const example = Object.fromEntries((s.inputs.required ?? []).map((name) => [name, "…"]));
        out(`POST ${url}  (at most ${s.hook.perMinute} requests a minute)`);
        out(`secret: ${secret}${opts.rotate ? "  (new)" : ""}`);
        out(`        kept in ${hookSecretPath(config.dataDir, id)} (0600); --rotate replaces it`);
        out("");
        out("Sign each request: x-clawbridge-timestamp: <unix seconds> (within 5 minutes) and");
        out('x-clawbridge-signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" keyed by the secret>.');
        out("The body is the system's inputs as JSON. For example:");
        out("");
        out(`BODY='${JSON.stringify(example)}'`);
        out("TS=$(date +%s)");
        out(`SIG=$(printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac '${secret}' | sed 's/^.* //')`);
        out(
          `curl -X POST '${url}' -H 'content-type: application/json' -H "x-clawbridge-timestamp: $TS" -H "x-clawbridge-signature: sha256=$SIG" -d "$BODY"`,
        );
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("run <id> [inputs...]")
    .description("run a system on the running bridge with inputs key=value, and wait for it (<id>@<n>: its version n)")
    .option("-c, --config <file>", "config file")
    .option("--url <url>", "the bridge's address (default: from the config)")
    .option("--no-wait", "print the run id and return at once")
    .option("--test", "a test run: model steps run, webhooks, commands and destructive MCP tools are only shown")
    .action(
      async (id: string, pairs: string[], opts: { config?: string; url?: string; wait: boolean; test?: boolean }) => {
        try {
          const config = await loadConfig({ configPath: opts.config });
          const at = /^(.+)@(\d+)$/.exec(id);
          const system = at ? at[1]! : id;
          const res = await callBridge(config, opts.url, "POST", `/v1/systems/${encodeURIComponent(system)}/runs`, {
            inputs: parsePairs(pairs),
            wait: opts.wait,
            ...(at ? { version: Number(at[2]) } : {}),
            ...(opts.test ? { dryRun: true } : {}),
          });
          if (res.status >= 400) throw new CliProblem(apiMessage(res.json));
          printRun(res.json);
          if (res.json.status === "failed" || res.json.status === "cancelled" || res.json.status === "interrupted")
            process.exitCode = 1;
        } catch (e) {
          handle(e);
        }
      },
    );

  systems
    .command("versions <id>")
    .description("a system's versions on the running bridge (--diff 1..2: what changed between two)")
    .option("-c, --config <file>", "config file")
    .option("--url <url>", "the bridge's address (default: from the config)")
    .option("--diff <from..to>", "what changed from one version to another")
    .action(async (id: string, opts: { config?: string; url?: string; diff?: string }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const sys = encodeURIComponent(id);
        if (opts.diff !== undefined) {
          const m = /^(\d+)\.\.(\d+)$/.exec(opts.diff);
          if (!m)
            throw new CliProblem(`--diff takes two version numbers as <from>..<to> (e.g. 1..2), not "${opts.diff}"`);
          const res = await callBridge(
            config,
            opts.url,
            "GET",
            `/v1/systems/${sys}/versions/diff?from=${m[1]}&to=${m[2]}`,
          );
          if (res.status >= 400) throw new CliProblem(apiMessage(res.json));
          const { diffText } = await import("../../workflows/systems/versions.js");
          out(diffText(res.json.changes as Parameters<typeof diffText>[0]).replaceAll("`", ""));
          return;
        }
        const res = await callBridge(config, opts.url, "GET", `/v1/systems/${sys}/versions`);
        if (res.status >= 400) throw new CliProblem(apiMessage(res.json));
        for (const v of res.json.data as SystemVersionRow[])
          out(`v${v.number}  ${when(v.created_at)}  ${v.by}${v.note ? ` (${v.note})` : ""}  ${v.hash.slice(0, 12)}`);
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("rollback <id> <version>")
    .description("put a system back to one of its versions on the running bridge (recorded as a new version)")
    .option("-c, --config <file>", "config file")
    .option("--url <url>", "the bridge's address (default: from the config)")
    .action(async (id: string, version: string, opts: { config?: string; url?: string }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        if (!/^\d+$/.test(version))
          throw new CliProblem(`<version> is a version number (see: clawbridge systems versions ${id})`);
        const res = await callBridge(config, opts.url, "POST", `/v1/systems/${encodeURIComponent(id)}/rollback`, {
          version: Number(version),
        });
        if (res.status >= 400) throw new CliProblem(apiMessage(res.json));
        out(`${id} is back at version ${version}'s definition, as version ${res.json.number}`);
      } catch (e) {
        handle(e);
      }
    });

  systems
    .command("export <id>")
    .description("write a system as a bundle (.tar.gz: system.yaml, canvas.json, sandbox files)")
    .option("-c, --config <file>", "config file")
    .option("-o, --output <file>", "the bundle's file, - for stdout (default: <id>.tar.gz here)")
    .action(async (id: string, opts: { config?: string; output?: string }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        if (!SYSTEM_ID.test(id))
          throw new BundleProblem(`"${id}" is not a system id (lower-case letters, digits, - and _)`);
        const data = await withRoom(config, id, (room) => room.exportBundle(id));
        const target = opts.output ?? `${id}.tar.gz`;
        if (target === "-") {
          await new Promise<void>((resolve, reject) => process.stdout.write(data, (e) => (e ? reject(e) : resolve())));
          return;
        }
        const { writeFileSync } = await import("node:fs");
        try {
          writeFileSync(target, data, { mode: 0o600 });
        } catch (e) {
          throw new BundleProblem(`cannot write ${target}: ${(e as Error).message}`);
        }
        out(`wrote ${target} (${data.length} bytes)`);
      } catch (e) {
        handleBundle(e, `cannot export ${id}`);
      }
    });

  systems
    .command("import <file>")
    .description("read a bundle back into <dataDir>: a draft canvas and its sandbox files, or a system file")
    .option("-c, --config <file>", "config file")
    .option("--replace", "replace a canvas, system file or sandbox of the same id")
    .option("--no-mcp", "do not start MCP servers to read tool schemas while checking the system")
    .action(async (file: string, opts: { config?: string; replace?: boolean; mcp: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { readFileSync } = await import("node:fs");
        let data: Buffer;
        try {
          data = readFileSync(file === "-" ? 0 : file);
        } catch (e) {
          throw new BundleProblem(`cannot read ${file}: ${(e as Error).message}`);
        }
        const { readBundle } = await import("../../workflows/builder/bundle.js");
        const bundle = await readBundle(data);
        const system = bundle.system;
        // The config's own systems are not the room's to replace: the library would hold the id twice.
        if (config.systems.some((s) => (s as { id?: unknown } | null)?.id === system))
          throw new BundleProblem(
            `the config file declares a system "${system}"; remove it there before importing one of the same id`,
          );
        // A system file is checked as `systems validate` would check it, before anything is written.
        const { loadLibrary } = await import("../../workflows/router/runtime.js");
        const check = async (candidates: Array<{ where: string; value: unknown }>) =>
          (await loadLibrary(config, { askMcp: opts.mcp, candidates })).problems;
        const r = await withRoom(config, undefined, (room) =>
          room.importBundle(data, { replace: opts.replace === true, check }),
        );
        const [path, { sandboxDir, systemsDir }] = await Promise.all([
          import("node:path"),
          import("../../workflows/systems/paths.js"),
        ]);
        const files = `${r.files} file${r.files === 1 ? "" : "s"}`;
        const sandbox = sandboxDir(config.dataDir, r.system);
        if (r.canvas)
          out(
            `imported ${r.system}: a draft canvas and ${files} in ${sandbox}; deploy it from a chat with the builder ("deploy ${r.system}")`,
          );
        else
          out(
            `imported ${r.system}: the system file ${path.join(systemsDir(config.dataDir), `${r.system}.yaml`)}${r.files ? ` and ${files} in ${sandbox}` : ""}`,
          );
      } catch (e) {
        handleBundle(e, `cannot import ${file}`);
      }
    });

  const runs = program.command("runs").description("runs of systems, kept in <dataDir>/systems.db");

  runs
    .command("list")
    .description("list runs, newest first")
    .option("-c, --config <file>", "config file")
    .option("--status <status>", "only runs with this status")
    .option("--system <id>", "only runs of this system")
    .option("-n, --limit <n>", "how many", (v) => Number(v), 50)
    .option("--json", "print JSON")
    .action(async (opts: { config?: string; status?: string; system?: string; limit: number; json?: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const list = await withRunStore(config, (store) =>
          store.list({ status: opts.status as never, system: opts.system, limit: opts.limit }),
        );
        if (opts.json) return out(JSON.stringify(list, null, 2));
        if (!list.length) out("no runs yet");
        for (const r of list)
          out(
            `${when(r.createdAt)}  ${r.id}  ${r.system}${r.test ? " (test)" : ""}  ${r.status}${r.failedStep ? ` at ${r.failedStep}` : ""}${r.conversation ? `  (${r.conversation})` : ""}`,
          );
      } catch (e) {
        handle(e);
      }
    });

  runs
    .command("show <id>")
    .description("one run: status, inputs, each step, output")
    .option("-c, --config <file>", "config file")
    .option("--json", "print JSON")
    .action(async (id: string, opts: { config?: string; json?: boolean }) => {
      try {
        const config = await loadConfig({ configPath: opts.config });
        const { runJson } = await import("../../request/http/systems-routes.js");
        const r = await withRunStore(config, (store) => store.get(id));
        if (!r) throw new CliProblem(`no run "${id}" (see: clawbridge runs list)`);
        if (opts.json) return out(JSON.stringify(runJson(r), null, 2));
        out(`inputs: ${JSON.stringify(r.inputs)}`);
        printRun(runJson(r));
      } catch (e) {
        handle(e);
      }
    });

  for (const action of ["pause", "resume", "cancel", "approve", "reject"] as const) {
    runs
      .command(`${action} <id>`)
      .description(`${action} a run on the running bridge`)
      .option("-c, --config <file>", "config file")
      .option("--url <url>", "the bridge's address (default: from the config)")
      .action(async (id: string, opts: { config?: string; url?: string }) => {
        try {
          const config = await loadConfig({ configPath: opts.config });
          const res = await callBridge(config, opts.url, "POST", `/v1/runs/${encodeURIComponent(id)}/${action}`);
          if (res.status >= 400) throw new CliProblem(apiMessage(res.json));
          printRun(res.json);
        } catch (e) {
          handle(e);
        }
      });
  }
}
