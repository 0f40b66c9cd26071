/**
 * One `opencode serve` process and its HTTP API (OpenCode 1.18): started on a loopback port the
 * bridge picked, with a random Basic-auth password (the API can run the agent's tools, so no other
 * local user may drive it), ready once it printed `opencode server listening on http://…` and its
 * event stream is connected. ONE subscription to `GET /global/event` (every directory's events,
 * each `{directory, payload: {type, properties}}`) serves every turn: events are handed to the
 * listener of their session. Permission and question requests are rejected at once, as
 * `opencode run` does (no one is there to answer them) — except a permission asked for one of the
 * client's tools this server was given (`addMcp`), approved once: such a call is the client's to
 * run, the bridge only hands it over. The process is a `CliProcess` (own process group, recorded
 * for the orphan watcher and the start-up reaper, listed as warm).
 *
 * MCP servers added through the API (`POST /mcp?directory=`) live in that directory's instance
 * only, in memory: nothing is written to a config file, and an instance disposed (its
 * `server.instance.disposed` event, or `global.disposed`) forgets them, so they are added again.
 */
import { childLogger } from "../../core/log/logger.js";
import { randomBytes } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { createParser } from "eventsource-parser";
import type { Logger } from "pino";
import { CliProcess, type ProcessEnd } from "../../core/util/process.js";
import type { OcEvent } from "./events.js";
import type { WarmMessage } from "../warm/warm-process.js";

export interface OpencodeServerSpec {
  bin: string;
  env: NodeJS.ProcessEnv;
  /** The server's own directory (a turn may name another with `?directory=`). */
  cwd: string;
  killGraceMs: number;
  logger: Logger;
  /** How long start-up may take (process up, API answering, events connected). */
  startTimeoutMs?: number;
}

/** Ports tried when the one picked was taken in between. */
const START_ATTEMPTS = 3;
const REQUEST_TIMEOUT_MS = 15_000;

/** An HTTP answer of the API. */
export interface ApiReply {
  status: number;
  body: unknown;
  text: string;
}

/** A free loopback port (listen on 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error("no port"))));
    });
  });
}

export class OpencodeServer {
  /** Resolves once the process has ended (and been reaped), whatever ended it. */
  readonly ended: Promise<ProcessEnd>;
  readonly startedAt = Date.now();
  private readonly listeners = new Map<string, (m: WarmMessage) => void>();
  /** Last known status of each session (`busy` until the server said `idle`). */
  private readonly status = new Map<string, string>();
  private stream: http.ClientRequest | undefined;
  /** The event stream is connected (answered 200 and has not closed). */
  private streamUp = false;
  private endInfo: ProcessEnd | undefined;
  private closing = false;
  private readonly log: Logger;
  /** MCP servers added through the API: `directory \0 name` → the fingerprint of what was added. */
  private readonly mcp = new Map<string, string>();
  /** OpenCode's names of the tools whose permission requests are approved (the client's tools). */
  private approved: ReadonlySet<string> = new Set();

  private constructor(
    readonly proc: CliProcess,
    readonly url: string,
    private readonly auth: string,
    logger: Logger,
  ) {
    this.log = childLogger(logger, { cli: "opencode serve", pid: proc.pid, warm: true });
    this.ended = proc.wait().then((end) => {
      this.endInfo = end;
      this.stream?.destroy();
      if (!this.closing) this.log.warn({ code: end.code, signal: end.signal }, "opencode serve ended unexpectedly");
      for (const fn of [...this.listeners.values()]) fn({ kind: "end", end });
      return end;
    });
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** Running, with its event stream connected. */
  get usable(): boolean {
    return !this.closing && this.proc.running && this.streamUp;
  }

  /** How the process ended, once it has. */
  get end(): ProcessEnd | undefined {
    return this.endInfo;
  }

  /** Start a server (a few ports tried if one was taken in between); throws when it cannot. */
  static async start(spec: OpencodeServerSpec): Promise<OpencodeServer> {
    let lastError: Error | undefined;
    for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
      const port = await freePort();
      const password = randomBytes(24).toString("base64url");
      const proc = new CliProcess({
        command: spec.bin,
        args: ["serve", "--hostname", "127.0.0.1", "--port", String(port)],
        env: { ...spec.env, OPENCODE_SERVER_USERNAME: "opencode", OPENCODE_SERVER_PASSWORD: password },
        cwd: spec.cwd,
        killGraceMs: spec.killGraceMs,
        label: "opencode serve",
        warm: true,
      });
      const auth = `Basic ${Buffer.from(`opencode:${password}`).toString("base64")}`;
      let server: OpencodeServer | undefined;
      try {
        const url = await listening(proc, port, spec.startTimeoutMs ?? 30_000);
        server = new OpencodeServer(proc, url, auth, spec.logger);
        await server.connect(spec.startTimeoutMs ?? 30_000);
        server.log.debug({ url }, "opencode serve ready");
        return server;
      } catch (err) {
        lastError = err as Error;
        if (server) await server.close();
        else await proc.terminate("aborted");
        const end = await proc.wait();
        // Only a port taken in between is worth another try.
        if (!/ServeError|EADDRINUSE|address already in use|port .* in use/i.test(`${end.stderr}\n${lastError.message}`))
          break;
        spec.logger.debug({ port, attempt }, "opencode serve could not bind; another port");
      }
    }
    throw lastError ?? new Error("opencode serve did not start");
  }

  /** Route the events of `sessionId` (and the end of the process) to `fn`; returns the function that stops it. */
  listen(sessionId: string, fn: (m: WarmMessage) => void): () => void {
    this.listeners.set(sessionId, fn);
    if (this.endInfo) fn({ kind: "end", end: this.endInfo });
    return () => {
      if (this.listeners.get(sessionId) === fn) this.listeners.delete(sessionId);
    };
  }

  /** The session is still working on an earlier prompt (as far as its events told). */
  busy(sessionId: string): boolean {
    const s = this.status.get(sessionId);
    return s !== undefined && s !== "idle";
  }

  /** One API call; `query.directory` picks the project directory it applies to. Rejects on a connection failure or timeout. */
  request(
    method: string,
    path: string,
    opts: { query?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
  ): Promise<ApiReply> {
    const url = new URL(path, this.url);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    return new Promise<ApiReply>((resolve, reject) => {
      const req = http.request(
        url,
        {
          method,
          agent: false,
          headers: {
            authorization: this.auth,
            accept: "application/json",
            ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
          },
          timeout: opts.timeoutMs ?? REQUEST_TIMEOUT_MS,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size <= 4 << 20) chunks.push(c);
          });
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let body: unknown;
            try {
              body = text ? JSON.parse(text) : undefined;
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body, text });
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`opencode serve did not answer ${method} ${path} in time`)));
      req.on("error", reject);
      req.end(payload);
    });
  }

  /**
   * Give `directory`'s instance the MCP server `name` (OpenCode's `McpRemoteConfig`), unless the same
   * (`fingerprint`) was given already; `tools`: OpenCode's names of its tools, whose permission
   * requests are approved from now on. Resolves with why it failed, or undefined once connected.
   * The config (it carries a bearer token) is never logged.
   */
  async addMcp(
    directory: string,
    name: string,
    config: Record<string, unknown>,
    fingerprint: string,
    tools: ReadonlySet<string>,
  ): Promise<string | undefined> {
    const key = `${directory}\0${name}`;
    this.approved = tools;
    if (this.mcp.get(key) === fingerprint) return undefined;
    this.mcp.delete(key);
    let reply: ApiReply;
    try {
      reply = await this.request("POST", "/mcp", { query: { directory }, body: { name, config } });
    } catch (err) {
      return (err as Error).message;
    }
    const status = (reply.body as Record<string, { status?: string; error?: string } | undefined> | undefined)?.[name];
    if (reply.status !== 200 || status?.status !== "connected") {
      return `${reply.status} ${status ? `${status.status ?? "?"}${status.error ? `: ${status.error}` : ""}` : reply.text.slice(0, 200)}`;
    }
    this.mcp.set(key, fingerprint);
    return undefined;
  }

  /** Take the MCP server `name` added with `addMcp` away from `directory`'s instance (its tools are not offered any more). */
  async removeMcp(directory: string, name: string): Promise<void> {
    const key = `${directory}\0${name}`;
    if (!this.mcp.has(key)) return;
    this.mcp.delete(key);
    this.approved = new Set();
    await this.request("POST", `/mcp/${encodeURIComponent(name)}/disconnect`, {
      query: { directory },
      timeoutMs: 5000,
    }).catch(() => undefined);
  }

  /**
   * Whether the server has gone, after a request of a turn failed: a request refused or reset is
   * often the first sign of a crash, seen a moment before the process's end and the event stream's
   * close, so this waits (at most `ms`) for the end to show.
   */
  async gone(ms = 2000): Promise<boolean> {
    if (!this.usable) return true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
    return !this.usable;
  }

  /** Ask the server to stop the session's current prompt. False when it could not be asked. */
  async abort(sessionId: string, directory: string): Promise<boolean> {
    try {
      const r = await this.request("POST", `/session/${encodeURIComponent(sessionId)}/abort`, {
        query: { directory },
        timeoutMs: 5000,
      });
      return r.status >= 200 && r.status < 300;
    } catch {
      return false;
    }
  }

  /** End the process (politely, then its group); resolves once it is reaped. */
  async close(): Promise<void> {
    this.closing = true;
    this.stream?.destroy();
    await this.proc.terminate("aborted");
    await this.ended;
  }

  /** Subscribe to `/global/event`; resolves on `server.connected`. A lost stream ends the server. */
  private connect(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(
        () => settle(new Error("opencode serve's event stream did not connect in time")),
        timeoutMs,
      );
      const parser = createParser({
        onEvent: (msg) => {
          let wrapped: { directory?: string; payload?: OcEvent };
          try {
            wrapped = JSON.parse(msg.data) as typeof wrapped;
          } catch {
            return;
          }
          const ev = wrapped.payload;
          if (!ev || typeof ev.type !== "string") return;
          if (ev.type === "server.connected") settle();
          this.dispatch(ev, wrapped.directory);
        },
      });
      const req = http.request(
        new URL("/global/event", this.url),
        { method: "GET", agent: false, headers: { authorization: this.auth, accept: "text/event-stream" } },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            settle(new Error(`opencode serve's event stream answered ${res.statusCode}`));
            return;
          }
          this.streamUp = true;
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => parser.feed(chunk));
          res.on("close", () => this.streamLost());
          res.on("error", () => this.streamLost());
        },
      );
      req.on("error", (err) => {
        settle(err);
        this.streamLost();
      });
      req.end();
      this.stream = req;
    });
  }

  /** Without events no turn can be served: a server whose stream ended is ended too. */
  private streamLost(): void {
    this.streamUp = false;
    if (this.closing || !this.proc.running) return;
    this.log.warn("opencode serve's event stream ended; ending the server");
    this.closing = true;
    void this.proc.terminate("aborted");
  }

  private dispatch(ev: OcEvent, directory: string | undefined): void {
    const p = ev.properties ?? {};
    const query = directory && directory !== "global" ? { directory } : undefined;
    if (ev.type === "permission.asked" && typeof p.id === "string") {
      // The client's own tools run on the client's side: their calls need nobody's approval here.
      const reply = typeof p.permission === "string" && this.approved.has(p.permission) ? "once" : "reject";
      this.log.debug({ permission: p.permission, reply }, "opencode asked for a permission");
      void this.request("POST", `/permission/${encodeURIComponent(p.id)}/reply`, {
        ...(query ? { query } : {}),
        body: { reply },
      }).catch(() => undefined);
    } else if (ev.type === "server.instance.disposed") {
      const dir = typeof p.directory === "string" ? p.directory : directory;
      for (const key of [...this.mcp.keys()]) if (key.startsWith(`${dir}\0`)) this.mcp.delete(key);
    } else if (ev.type === "global.disposed") {
      this.mcp.clear();
    } else if (ev.type === "question.asked" && typeof p.id === "string") {
      void this.request("POST", `/question/${encodeURIComponent(p.id)}/reject`, { ...(query ? { query } : {}) }).catch(
        () => undefined,
      );
    }
    const sessionId = typeof p.sessionID === "string" ? p.sessionID : undefined;
    if (!sessionId) return;
    if (ev.type === "session.status") {
      const type = (p.status as { type?: string } | undefined)?.type;
      if (type) this.status.set(sessionId, type);
    } else if (ev.type === "session.idle") this.status.set(sessionId, "idle");
    else if (ev.type === "session.deleted") this.status.delete(sessionId);
    this.listeners.get(sessionId)?.({ kind: "message", message: ev as Record<string, unknown> });
  }
}

/** Wait for `opencode server listening on http://…`; keeps reading stdout afterwards (debug log). */
function listening(proc: CliProcess, port: number, timeoutMs: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let done = false;
    const finish = (err: Error | undefined, url?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(url!);
    };
    const timer = setTimeout(
      () => finish(new Error(`opencode serve did not start listening within ${Math.round(timeoutMs / 1000)}s`)),
      timeoutMs,
    );
    void (async () => {
      try {
        for await (const line of proc.lines()) {
          const m = /listening on (http:\/\/[^\s]+)/.exec(line);
          if (m) finish(undefined, m[1]!.replace(/\/$/, ""));
        }
      } catch {
        /* the process ended */
      }
      const end = await proc.wait();
      const stderr = end.stderr
        // eslint-disable-next-line no-control-regex
        .replace(/\x1b\[[0-9;]*m/g, "")
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !/OPENCODE_SERVER_PASSWORD/.test(l))
        .slice(-3)
        .join(" | ")
        .slice(0, 400);
      const why = end.spawnError?.message ?? (stderr || `exit ${end.code ?? end.signal}`);
      finish(new Error(`opencode serve ended before listening on port ${port}: ${why}`));
    })();
  });
}
