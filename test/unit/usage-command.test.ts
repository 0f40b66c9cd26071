/**
 * src/ops/commands/usage.ts: `clawbridge usage` registered on a commander program and run against a
 * local HTTP server that answers `GET /v1/admin/usage` (the key checked, `days` passed on); the
 * table, `--json`, a bad `--days`, no bridge at the address, a refused key.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { Command } from "commander";
import { addUsageCommand, localTime, usageTable } from "../../src/ops/commands/usage.js";
import type { Usage } from "../../src/wire/admin.js";

const NOW = Date.UTC(2026, 10, 28, 12, 0, 0);
const totals = (turns: number, tin: number, tout: number, hits: number) => ({
  turns,
  failed: 0,
  tokens_in: tin,
  tokens_out: tout,
  limit_hits: hits,
  fallbacks: 0,
});
const USAGE: Usage = {
  object: "usage",
  days: 3,
  from: "2026-11-26",
  to: "2026-11-28",
  now: NOW,
  data: [],
  totals: totals(5, 300, 30, 1),
  backends: [
    {
      backend: "claude",
      today: totals(2, 200, 20, 1),
      total: totals(3, 200, 20, 1),
      last_limit_message: "5-hour limit reached",
      last_limit_at: NOW - 60_000,
      next_reset_at: NOW + 3_600_000,
    },
    {
      backend: "gemini",
      today: totals(2, 100, 10, 0),
      total: totals(2, 100, 10, 0),
      last_limit_message: null,
      last_limit_at: null,
      next_reset_at: null,
    },
  ],
  recent: [],
};

async function serve(): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? "");
    if (req.headers.authorization !== "Bearer k1") {
      res.writeHead(401, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { message: "bad key" } }));
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(USAGE));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Run `clawbridge usage ...args` through commander; what it printed and its exit code. */
async function run(args: string[]): Promise<{ out: string; err: string; code: number | undefined }> {
  let out = "";
  let err = "";
  const program = new Command().exitOverride();
  addUsageCommand(program, { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) });
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    await program.parseAsync(["node", "clawbridge", "usage", ...args]);
    return { out, err, code: process.exitCode === undefined ? undefined : Number(process.exitCode) };
  } finally {
    process.exitCode = before;
  }
}

test("clawbridge usage prints a table, or --json the bridge's answer", async () => {
  const s = await serve();
  try {
    const table = await run(["--url", s.url, "--key", "k1", "--days", "3"]);
    assert.equal(table.code, undefined, table.err);
    assert.equal(s.seen.at(-1), "/v1/admin/usage?days=3");
    const lines = table.out.trim().split("\n");
    assert.match(lines[0]!, /usage over 3 days \(2026-11-26 to 2026-11-28/);
    assert.match(
      lines[1]!,
      /^backend\s+turns\s+failed\s+tokens in\s+tokens out\s+limit hits\s+fallbacks\s+next reset$/,
    );
    assert.match(
      lines[2]!,
      new RegExp(`^claude\\s+3\\s+0\\s+200\\s+20\\s+1\\s+0\\s+${localTime(NOW + 3_600_000, NOW)}$`),
    );
    assert.match(lines[3]!, /^gemini\s+2\s+0\s+100\s+10\s+0\s+0\s+-$/);
    assert.match(lines[4]!, /^total\s+5\s+0\s+300\s+30\s+1\s+0$/);
    assert.match(table.out, /claude \(.+\): 5-hour limit reached/);

    const json = await run(["--url", `${s.url}/`, "--key", "k1", "--json"]);
    assert.equal(s.seen.at(-1), "/v1/admin/usage?days=7", "7 days by default");
    assert.deepEqual(JSON.parse(json.out), USAGE);
  } finally {
    await s.close();
  }
});

test("clawbridge usage: bad --days is exit 2; no bridge or a refused key is exit 1", async () => {
  const s = await serve();
  try {
    const bad = await run(["--url", s.url, "--key", "k1", "--days", "31"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--days must be an integer from 1 to 30/);
    const refused = await run(["--url", s.url, "--key", "wrong"]);
    assert.equal(refused.code, 1);
    assert.match(refused.err, /refused the key/);
  } finally {
    await s.close();
  }
  const gone = await run(["--url", s.url, "--key", "k1"]);
  assert.equal(gone.code, 1);
  assert.match(gone.err, /no bridge answers at/);
});

test("the table's times are local: HH:MM today, the date otherwise", () => {
  const now = new Date(2026, 10, 28, 9, 0).getTime();
  assert.equal(localTime(new Date(2026, 10, 28, 4, 20).getTime(), now), "04:20");
  assert.equal(localTime(new Date(2026, 10, 29, 4, 5).getTime(), now), "2026-11-29 04:05");
  assert.doesNotMatch(usageTable({ ...USAGE, backends: [] }), /last limit messages/);
});
