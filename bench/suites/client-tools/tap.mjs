/**
 * A transparent tap between the bridge and the real `claude` (bench suite "client-tools" only):
 * the bridge starts this instead of claude (through a one-line `exec node tap.mjs` wrapper, so the
 * pid the bridge holds is this process), and this starts claude with the same arguments, relays
 * stdin and stdout byte for byte, and notes on CLOCK_MONOTONIC (process.hrtime, the same clock as
 * the bench process) when
 *   - a chunk from the bridge arrives on stdin ("in": the bridge handed claude a message), and
 *   - a chunk from claude on stdout holds a `text_delta` ("text": claude streams text to the bridge),
 *   - a chunk from claude completes an `assistant` line with a tool_use ("tooluse": the line on
 *     which the bridge counts the calls of the reply).
 * It also points claude's MCP server for the client's tools (`--mcp-config <file>`) at the bench's
 * TCP relay (CB_TAP_MCP, `host:port`), which forwards every byte to the bridge and notes when the
 * tool call and its result pass.
 * stderr is inherited (not relayed). Signals are forwarded; the tap exits with claude.
 *
 * Environment: CB_TAP_TARGET (the real claude), CB_TAP_LOG (file the notes are appended to),
 * CB_TAP_MCP (optional relay address).
 */
import { spawn } from "node:child_process";
import { openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import path from "node:path";

const target = process.env.CB_TAP_TARGET;
const logFile = process.env.CB_TAP_LOG;
if (!target || !logFile) {
  process.stderr.write("tap: CB_TAP_TARGET and CB_TAP_LOG are required\n");
  process.exit(2);
}
const now = () => Number(process.hrtime.bigint()) / 1e6;
const log = openSync(logFile, "a");
const note = (what, t = now()) => writeSync(log, `${t.toFixed(3)} ${process.pid} ${what}\n`);

const args = process.argv.slice(2);
const relay = process.env.CB_TAP_MCP;
const at = args.indexOf("--mcp-config");
if (relay && at >= 0 && args[at + 1]) {
  const config = JSON.parse(readFileSync(args[at + 1], "utf8"));
  for (const server of Object.values(config.mcpServers ?? {})) {
    if (typeof server.url !== "string") continue;
    const u = new URL(server.url);
    u.host = relay;
    server.url = u.toString();
  }
  const file = path.join(path.dirname(logFile), `mcp-${process.pid}.json`);
  writeFileSync(file, JSON.stringify(config), { mode: 0o600 });
  args[at + 1] = file;
}

const child = spawn(target, args, { stdio: ["pipe", "pipe", "inherit"] });
note(`start ${child.pid}`);
// The time is taken before the bytes are passed on; the note is written after.
process.stdin.on("data", (d) => {
  const t = now();
  child.stdin.write(d);
  note("in", t);
});
process.stdin.on("end", () => child.stdin.end());
child.stdin.on("error", () => {});
process.stdout.on("error", () => {});
let partial = "";
child.stdout.on("data", (d) => {
  const t = now();
  process.stdout.write(d);
  if (d.includes('"text_delta"')) note("text", t);
  // The complete `assistant` line that holds a tool_use (the bridge counts the reply's calls on it).
  const lines = (partial + d.toString("utf8")).split("\n");
  partial = lines.pop() ?? "";
  for (const line of lines) {
    if (!line.includes('"assistant"') || !line.includes('"tool_use"')) continue;
    try {
      const m = JSON.parse(line);
      if (m.type === "assistant" && m.message?.content?.some?.((b) => b?.type === "tool_use")) note("tooluse", t);
    } catch {
      /* not a JSON line */
    }
  }
});
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => child.kill(sig));
child.on("error", (err) => {
  process.stderr.write(`tap: ${err.message}\n`);
  process.exit(127);
});
child.on("close", (code, signal) => {
  note(`exit ${code ?? signal}`);
  process.exit(code ?? 1);
});
