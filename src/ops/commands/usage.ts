/**
 * `clawbridge usage [--days N] [--json] [--url URL] [--key KEY] [-c FILE]`: what each backend did
 * over the last days (turns, tokens in and out, limit hits, the next reset in local time, the last
 * limit message), read from the running bridge's `GET /v1/admin/usage` (src/ops/usage keeps it in
 * `<dataDir>/usage.db`). The address and key come from the options, else `CLAWBRIDGE_URL` /
 * `CLAWBRIDGE_API_KEY`, else the config (its host and port, its first API key).
 *
 * Like every command file, only commander's and the wire's types are imported at the top: the
 * config is loaded when the command runs, and only when the address or the key is not given.
 * Exit codes: 0 fine; 1 the bridge is not there or answered an error; 2 bad input (--days).
 */
import type { Command } from "commander";
import type { Usage, UsageBackendState } from "../../wire/admin.js";

const MAX_DAYS = 30;

export interface UsageCommandOptions {
  days?: string;
  json?: boolean;
  url?: string;
  key?: string;
  config?: string;
}

const write = (s: string) => void process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
const writeErr = (s: string) => void process.stderr.write(s.endsWith("\n") ? s : `${s}\n`);

class UsageProblem extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** The bridge's address and key: options, then the environment, then the config. */
async function target(opts: UsageCommandOptions): Promise<{ url: string; key?: string }> {
  let url = opts.url ?? process.env.CLAWBRIDGE_URL;
  let key = opts.key ?? process.env.CLAWBRIDGE_API_KEY;
  if (!url || key === undefined) {
    const { loadConfig } = await import("./common.js");
    const config = await loadConfig({ configPath: opts.config });
    if (!url) {
      const h = config.server.host;
      const host = h === "0.0.0.0" || h === "::" ? "127.0.0.1" : h;
      url = `http://${host.includes(":") ? `[${host}]` : host}:${config.server.port}`;
    }
    key ??= config.server.apiKeys[0];
  }
  return { url: url.replace(/\/+$/, ""), ...(key ? { key } : {}) };
}

/** `GET /v1/admin/usage?days=N` of the running bridge. */
export async function fetchUsage(url: string, days: number, key?: string): Promise<Usage> {
  let res: Response;
  try {
    res = await fetch(`${url}/v1/admin/usage?days=${days}`, {
      headers: { accept: "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      signal: AbortSignal.timeout(10_000),
    });
  } catch {
    throw new UsageProblem(`no bridge answers at ${url}; start it with \`clawbridge serve\` (or pass --url)`, 1);
  }
  const body = (await res.json().catch(() => ({}))) as Usage & { error?: { message?: string } };
  if (res.status === 401)
    throw new UsageProblem(`${url} refused the key (401); pass --key or set CLAWBRIDGE_API_KEY`, 1);
  if (!res.ok || body.object !== "usage")
    throw new UsageProblem(`${url} answered ${res.status}: ${body.error?.message ?? JSON.stringify(body)}`, 1);
  return body;
}

/** A time in local time: `HH:MM` today, else `YYYY-MM-DD HH:MM`. */
export function localTime(ms: number, now = Date.now()): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const n = new Date(now);
  const sameDay = d.getFullYear() === n.getFullYear() && d.getMonth() === n.getMonth() && d.getDate() === n.getDate();
  return sameDay ? hm : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
}

/** The table `clawbridge usage` prints: one line per backend, then the total, then the last limit messages. */
export function usageTable(u: Usage): string {
  const head = ["backend", "turns", "failed", "tokens in", "tokens out", "limit hits", "fallbacks", "next reset"];
  const line = (name: string, t: UsageBackendState["total"], reset: string) => [
    name,
    String(t.turns),
    String(t.failed),
    String(t.tokens_in),
    String(t.tokens_out),
    String(t.limit_hits),
    String(t.fallbacks),
    reset,
  ];
  const rows = u.backends.map((b) =>
    line(b.backend, b.total, b.next_reset_at !== null ? localTime(b.next_reset_at, u.now) : "-"),
  );
  rows.push(line("total", u.totals, ""));
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === 0 || i === r.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  const out = [
    `usage over ${u.days} day${u.days === 1 ? "" : "s"} (${u.from} to ${u.to}, UTC days; resets in local time)`,
    fmt(head),
    ...rows.map(fmt),
  ];
  const limited = u.backends.filter((b) => b.last_limit_message !== null);
  if (limited.length) {
    out.push("", "last limit messages:");
    for (const b of limited)
      out.push(
        `  ${b.backend} (${b.last_limit_at !== null ? localTime(b.last_limit_at, u.now) : "?"}): ${b.last_limit_message}`,
      );
  }
  return out.join("\n");
}

/** Where the command writes (tests pass their own). */
export interface UsageIo {
  out(s: string): void;
  err(s: string): void;
}
const STDIO: UsageIo = { out: write, err: writeErr };

/** The command's work, without commander: prints, and returns the exit code (0, 1 or 2). */
export async function runUsage(opts: UsageCommandOptions, io: UsageIo = STDIO): Promise<number> {
  try {
    const days = opts.days === undefined ? 7 : Number(opts.days);
    if (!Number.isInteger(days) || days < 1 || days > MAX_DAYS)
      throw new UsageProblem(`--days must be an integer from 1 to ${MAX_DAYS}, got "${opts.days}"`, 2);
    const { url, key } = await target(opts);
    const usage = await fetchUsage(url, days, key);
    io.out(opts.json ? JSON.stringify(usage, null, 2) : usageTable(usage));
    return 0;
  } catch (e) {
    if (e instanceof UsageProblem) {
      io.err(`clawbridge: ${e.message}`);
      return e.exitCode;
    }
    const { fail } = await import("./common.js");
    fail(e);
    return Number(process.exitCode ?? 1);
  }
}

/** Register `clawbridge usage` (main.ts calls this); `io` is for tests. */
export function addUsageCommand(program: Command, io: UsageIo = STDIO): void {
  program
    .command("usage")
    .description(
      "turns, tokens, limit hits and the next reset of each backend, from the running bridge (GET /v1/admin/usage)",
    )
    .option("--days <n>", `days back, today included (1-${MAX_DAYS})`, "7")
    .option("--json", "print the bridge's answer as JSON")
    .option("--url <url>", "the bridge's address (default: CLAWBRIDGE_URL, else from the config)")
    .option("--key <key>", "an API key of the bridge (default: CLAWBRIDGE_API_KEY, else the config's first)")
    .option("-c, --config <file>", "config file (for the address and key when not given)")
    .action(async (opts: UsageCommandOptions) => {
      const code = await runUsage(opts, io);
      if (code) process.exitCode = code;
    });
}
