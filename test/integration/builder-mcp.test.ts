/**
 * The builder's MCP tools as a host sees them, through the SDK's own client:
 * - over Streamable HTTP at `/mcp` of a real bridge app (buildApp: the HTTP front, the API keys,
 *   the route and its body exemption) on 127.0.0.1, with real CanvasTools on a temp data dir and
 *   the systems SQLite file. start.ts does not wire the builder yet, so the app is assembled here
 *   the way startBridge assembles it, plus `builderTools`;
 * - over stdio: `node bin/clawbridge.js mcp --config <file>` started by the SDK's
 *   StdioClientTransport, on the same data dir (so the bridge sees what it wrote), and reaped.
 * Covered: 401 without or with a wrong key, exactly the 10 tools, the canvas edits and their bus
 * events, errors with code and retryable, the sandbox file tools, and escapes refused (`..`,
 * absolute paths, symlinks) with nothing written outside.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createBackends } from "../../src/backends/registry.js";
import type { Backend } from "../../src/backends/contract/backend.js";
import { BUILDER_TOOL_NAMES } from "../../src/workflows/builder/mcp-server.js";
import { openBuilderTools } from "../../src/workflows/builder/runtime.js";
import { sandboxDir } from "../../src/workflows/builder/sandbox.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { DebugLog } from "../../src/core/log/debug-log.js";
import { createLogger } from "../../src/core/log/logger.js";
import { ChatPipeline } from "../../src/request/pipeline/chat.js";
import { TurnScheduler } from "../../src/request/queue/scheduler.js";
import { ModelRouter } from "../../src/request/models/routes.js";
import { buildApp, type BuiltApp } from "../../src/request/http/app.js";
import { ApiKeys } from "../../src/request/http/auth.js";
import { registerMcpRoute } from "../../src/request/http/mcp-route.js";
import { SqliteSql } from "../../src/core/db/sql.js";
import { openSystemsDb, systemsDbPath } from "../../src/workflows/systems/db.js";
import { procStat } from "../../src/core/util/run-records.js";
import { cleanup, eventually, tempDir, within } from "../helpers/bridge.js";
import type Database from "better-sqlite3";
import Fastify from "fastify";

const KEY = "builder-test-key-123";
const BIN = path.resolve("bin/clawbridge.js");

type Result = CallToolResult & { structuredContent?: Record<string, any> };

describe("builder MCP tools", () => {
  let dir: string;
  let dataDir: string;
  let outside: string;
  let db: Database.Database;
  let built: BuiltApp;
  let backends: Map<string, Backend>;
  let url: string;
  const events: BridgeEvent[] = [];
  const clients: Client[] = [];

  const rawConfig = () => ({
    dataDir,
    server: { host: "127.0.0.1", port: 0, apiKeys: [KEY] },
    backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
    models: [{ id: "m", backend: "up" }],
    intents: { enabled: false },
  });

  before(async () => {
    dir = tempDir("cb-builder-mcp-");
    dataDir = path.join(dir, "data");
    outside = path.join(dir, "outside");
    mkdirSync(outside, { recursive: true });
    writeFileSync(path.join(outside, "secret.txt"), "top secret");
    const config = resolveConfig(rawConfig(), "test");
    const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");
    const debugLog = new DebugLog(null);
    const bus = new EventBus();
    bus.on((e) => void events.push(e));
    db = openSystemsDb(systemsDbPath(dataDir));
    const builderTools = openBuilderTools({ sql: new SqliteSql(db), db, dataDir, bus });
    backends = await createBackends(config, logger);
    const router = new ModelRouter(config, backends);
    const scheduler = new TurnScheduler({ maxConcurrent: 2, maxQueue: 4, queueTimeoutMs: 1000 });
    const pipeline = new ChatPipeline({ config, scheduler, logger, debugLog });
    built = buildApp({ config, pipeline, router, scheduler, backends, logger, debugLog, builderTools });
    await built.app.listen({ host: "127.0.0.1", port: 0 });
    const addr = built.app.server.address() as AddressInfo;
    url = `http://127.0.0.1:${addr.port}/mcp`;
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    if (built) {
      built.front.shutdown();
      await built.front.close(() => built.app.close());
    }
    await Promise.all([...(backends?.values() ?? [])].map((b) => b.close?.()));
    db?.close();
    cleanup(dir);
  });

  async function connect(key?: string): Promise<Client> {
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: key ? { authorization: `Bearer ${key}` } : {} },
    });
    const client = new Client({ name: "builder-test", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  let client: Client;
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as Result;
  const text = (r: Result) => (r.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("");
  const ok = async (name: string, args: Record<string, unknown>) => {
    const r = await call(name, args);
    assert.ok(!r.isError, `${name} failed: ${text(r)}`);
    assert.deepEqual(JSON.parse(text(r)), r.structuredContent, "the text is the structured result as JSON");
    return r.structuredContent!;
  };
  const refused = async (name: string, args: Record<string, unknown>, code: string, message?: RegExp) => {
    const r = await call(name, args);
    assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should fail, got ${text(r)}`);
    assert.equal(r._meta?.["clawbridge/code"], code, text(r));
    assert.equal(r._meta?.["clawbridge/retryable"], false);
    if (message) assert.match(text(r), message);
    return r;
  };

  test("401 without a key and with a wrong one (raw HTTP and through the SDK)", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    };
    for (const headers of [{}, { authorization: "Bearer wrong-key-000000" }] as Array<Record<string, string>>) {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(init),
      });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
      const body = (await res.json()) as { error: { code: string; type: string } };
      assert.equal(body.error.code, "invalid_api_key");
      assert.equal(body.error.type, "authentication_error");
    }
    await assert.rejects(connect());
    await assert.rejects(connect("wrong-key-000000"));
    // GET and DELETE have no meaning in stateless mode.
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${KEY}`, accept: "text/event-stream" },
      });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get("allow"), "POST");
      await res.body?.cancel();
    }
  });

  test("lists exactly the 10 tools, with schemas and hints; no shell tool", async () => {
    client = await connect(KEY);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...BUILDER_TOOL_NAMES].sort());
    assert.equal(tools.length, 10);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.ok(byName.canvas_create_node!.description!.length > 80);
    assert.deepEqual(byName.canvas_create_node!.inputSchema.required?.sort(), ["label", "system", "type"]);
    assert.deepEqual(byName.canvas_update_property!.inputSchema.required?.sort(), ["key", "node", "system", "value"]);
    for (const n of ["canvas_delete_node", "sandbox_delete_file"])
      assert.equal(byName[n]!.annotations?.destructiveHint, true, n);
    for (const n of ["canvas_get_state", "sandbox_read_file", "sandbox_list_directory"])
      assert.equal(byName[n]!.annotations?.readOnlyHint, true, n);
    assert.ok(!tools.some((t) => /shell|exec|command_run|bash/.test(t.name)));
  });

  test("canvas: create, connect, update, get_state, layout, delete (edges and children go), with bus events", async () => {
    events.length = 0;
    const a = await ok("canvas_create_node", {
      system: "digest",
      type: "input",
      label: "Topic",
      properties: { type: "string" },
    });
    assert.equal(a.nodeId, "topic");
    assert.equal(a.canvasCreated, true, "the first node creates the canvas");
    assert.deepEqual(a.node.properties, { type: "string" });
    const b = await ok("canvas_create_node", {
      system: "digest",
      type: "agent",
      label: "Research",
      properties: { model: "m", prompt: "Research {{topic}}" },
    });
    assert.equal(b.nodeId, "research");
    assert.equal(b.canvasCreated, false);
    assert.equal(
      (await ok("canvas_create_node", { system: "digest", type: "agent", label: "Research" })).nodeId,
      "research-2",
    );
    await ok("canvas_create_node", {
      system: "digest",
      type: "agent",
      label: "Notes",
      parent: "research",
      id: "notes",
    });
    await ok("canvas_create_node", { system: "digest", type: "output", label: "Result" });
    await refused(
      "canvas_create_node",
      { system: "digest", type: "agent", label: "x", parent: "ghost" },
      "node_not_found",
      /ghost/,
    );
    await refused("canvas_create_node", { system: "Bad Id", type: "agent", label: "x" }, "invalid_system");

    assert.equal(
      (await ok("canvas_connect_nodes", { system: "digest", from: "topic", to: "research" })).edgeId,
      "e-topic-research",
    );
    await ok("canvas_connect_nodes", { system: "digest", from: "research", to: "result" });
    await ok("canvas_connect_nodes", { system: "digest", from: "notes", to: "research-2" });
    await refused("canvas_connect_nodes", { system: "digest", from: "research", to: "topic" }, "edge_into_input");
    await refused("canvas_connect_nodes", { system: "digest", from: "topic", to: "research" }, "duplicate_edge");
    await refused("canvas_connect_nodes", { system: "nosuch", from: "a", to: "b" }, "canvas_not_found");

    const u = await ok("canvas_update_property", {
      system: "digest",
      node: "research",
      key: "prompt",
      value: "Find news about {{topic}}",
    });
    assert.equal(u.node.properties.prompt, "Find news about {{topic}}");
    const removed = await ok("canvas_update_property", {
      system: "digest",
      node: "research",
      key: "properties.model",
      value: null,
    });
    assert.equal("model" in removed.node.properties, false);
    await refused(
      "canvas_update_property",
      { system: "digest", node: "research", key: "id", value: "x" },
      "invalid_key",
      /id cannot change/,
    );

    const state = (await ok("canvas_get_state", { system: "digest" })).canvas;
    assert.deepEqual(
      state.nodes.map((n: { id: string }) => n.id),
      ["topic", "research", "research-2", "notes", "result"],
    );
    assert.equal(state.status, "draft");
    const list = (await ok("canvas_get_state", {})).canvases;
    assert.deepEqual(
      list.map((c: { system: string; nodes: number; status: string; version: number }) => [
        c.system,
        c.nodes,
        c.status,
        c.version,
      ]),
      [["digest", 5, "draft", 0]],
    );
    await refused("canvas_get_state", { system: "nosuch" }, "canvas_not_found");

    const layout = await ok("canvas_apply_layout", { system: "digest" });
    assert.equal(layout.layout, "layered");
    const pos = Object.fromEntries(layout.positions.map((p: { id: string; position: unknown }) => [p.id, p.position]));
    assert.deepEqual(pos.topic, { x: 0, y: 0 });
    assert.deepEqual(pos.research, { x: 280, y: 0 });
    assert.deepEqual(pos.result, { x: 560, y: 0 });
    assert.equal((await ok("canvas_apply_layout", { system: "digest", layout: "grid" })).layout, "grid");

    const del = await ok("canvas_delete_node", { system: "digest", node: "research" });
    assert.deepEqual(del.removedNodes, ["research", "notes"]);
    assert.deepEqual(del.removedEdges.sort(), ["e-notes-research-2", "e-research-result", "e-topic-research"]);
    const after = (await ok("canvas_get_state", { system: "digest" })).canvas;
    assert.deepEqual(
      after.nodes.map((n: { id: string }) => n.id),
      ["topic", "research-2", "result"],
    );
    assert.deepEqual(after.edges, []);

    const kinds = (t: string) => events.filter((e) => e.type === t);
    assert.deepEqual(
      kinds("node.created").map((e) => (e as { node: { id: string } }).node.id),
      ["topic", "research", "research-2", "notes", "result"],
    );
    assert.ok(kinds("node.created").every((e) => (e as { system: string }).system === "digest"));
    assert.deepEqual(
      kinds("edge.created").map((e) => (e as { edge: { id: string } }).edge.id),
      ["e-topic-research", "e-research-result", "e-notes-research-2"],
    );
    assert.deepEqual(
      kinds("node.deleted").map((e) => (e as { nodeId: string }).nodeId),
      ["research", "notes"],
    );
    assert.deepEqual(
      kinds("edge.deleted")
        .map((e) => (e as { edgeId: string }).edgeId)
        .sort(),
      ["e-notes-research-2", "e-research-result", "e-topic-research"],
    );
    const updates = kinds("node.updated") as Array<{ key?: string }>;
    assert.deepEqual(
      updates.slice(0, 2).map((e) => e.key),
      ["prompt", "properties.model"],
    );
    assert.ok(
      updates.slice(2).every((e) => e.key === "position"),
      "layouts report moved nodes",
    );
  });

  test("sandbox: create, read, list, delete; escapes refused and nothing written outside", async () => {
    const root = sandboxDir(dataDir, "digest");
    assert.deepEqual(
      await ok("sandbox_create_file", {
        system: "digest",
        path: "prompts/summary.md",
        content: "Summarise ${HOME} {{topic}}",
      }),
      { system: "digest", path: "prompts/summary.md", bytes: 27 },
    );
    await ok("sandbox_create_file", { system: "digest", path: "notes.txt", content: "hello" });
    const read = await ok("sandbox_read_file", { system: "digest", path: "prompts/summary.md" });
    assert.equal(read.content, "Summarise ${HOME} {{topic}}");
    assert.equal(readFileSync(path.join(root, "prompts/summary.md"), "utf8"), "Summarise ${HOME} {{topic}}");
    const top = await ok("sandbox_list_directory", { system: "digest" });
    assert.deepEqual(
      top.entries.map((e: { path: string; type: string }) => [e.path, e.type]),
      [
        ["notes.txt", "file"],
        ["prompts", "directory"],
      ],
    );
    const all = await ok("sandbox_list_directory", { system: "digest", path: ".", recursive: true });
    assert.deepEqual(
      all.entries.map((e: { path: string }) => e.path),
      ["notes.txt", "prompts", "prompts/summary.md"],
    );
    assert.deepEqual(await ok("sandbox_delete_file", { system: "digest", path: "notes.txt" }), {
      system: "digest",
      path: "notes.txt",
      type: "file",
    });
    await refused("sandbox_read_file", { system: "digest", path: "notes.txt" }, "not_found");
    assert.deepEqual(
      (await ok("sandbox_list_directory", { system: "fresh-one" })).entries,
      [],
      "an empty sandbox lists nothing",
    );

    // Escapes.
    await refused("sandbox_create_file", { system: "digest", path: "../x", content: "x" }, "escape");
    await refused("sandbox_create_file", { system: "digest", path: "../../outside/x.txt", content: "x" }, "escape");
    await refused(
      "sandbox_create_file",
      { system: "digest", path: path.join(outside, "abs.txt"), content: "x" },
      "invalid_path",
      /relative/,
    );
    const passwd = await refused("sandbox_read_file", { system: "digest", path: "/etc/passwd" }, "invalid_path");
    assert.doesNotMatch(text(passwd), /root:/);
    await refused("sandbox_delete_file", { system: "digest", path: "../data" }, "escape");
    await refused("sandbox_create_file", { system: "../digest", path: "x", content: "x" }, "invalid_system");
    symlinkSync(outside, path.join(root, "link"));
    symlinkSync(path.join(outside, "secret.txt"), path.join(root, "secret-link"));
    await refused("sandbox_create_file", { system: "digest", path: "link/pwned.txt", content: "x" }, "escape");
    const leak = await refused("sandbox_read_file", { system: "digest", path: "link/secret.txt" }, "escape");
    assert.doesNotMatch(text(leak), /top secret/);
    await refused("sandbox_read_file", { system: "digest", path: "secret-link" }, "escape");
    await refused("sandbox_create_file", { system: "digest", path: "secret-link", content: "overwritten" }, "escape");
    await refused("sandbox_list_directory", { system: "digest", path: "link" }, "escape");
    assert.deepEqual(readdirSync(outside), ["secret.txt"], "nothing was written outside the sandbox");
    assert.equal(readFileSync(path.join(outside, "secret.txt"), "utf8"), "top secret");
    assert.equal(existsSync(path.join(dataDir, "sandboxes", "x")), false);
    assert.equal(existsSync(path.join(dataDir, "x")), false);
    // Deleting the link removes the link, never its target.
    await ok("sandbox_delete_file", { system: "digest", path: "link" });
    assert.ok(existsSync(path.join(outside, "secret.txt")));
  });

  test("bad arguments are tool errors, not protocol failures", async () => {
    const r = await call("canvas_create_node", { system: "digest", type: "robot", label: "x" });
    assert.equal(r.isError, true);
    assert.match(text(r), /robot|type/);
    await refused("canvas_apply_layout", { system: "nosuch" }, "canvas_not_found");
  });

  test("a body over 4 MiB is 413; without the builder /mcp is 404", async () => {
    const big = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/list",
      params: { pad: "x".repeat(4 * 1024 * 1024) },
    });
    const res = await fetch(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${KEY}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: big,
    });
    assert.equal(res.status, 413);
    await res.body?.cancel();

    const bare = Fastify({ logger: false });
    registerMcpRoute(bare, { keys: new ApiKeys([]) });
    try {
      const r = await bare.inject({
        method: "POST",
        url: "/mcp",
        headers: { "content-type": "application/json" },
        payload: "{}",
      });
      assert.equal(r.statusCode, 404);
      assert.equal((r.json() as { error: { code: string } }).error.code, "builder_not_configured");
    } finally {
      await bare.close();
    }
  });

  test("stdio: `clawbridge mcp` serves the same tools on the same data; reaped on close", {
    timeout: 120_000,
  }, async () => {
    const configFile = path.join(dir, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify({ ...rawConfig(), server: { host: "127.0.0.1", port: 4097, apiKeys: [KEY] } }),
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, "mcp", "--config", configFile],
      env: { ...(process.env as Record<string, string>), CLAWBRIDGE_CONFIG: "" },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => void (stderr += d.toString()));
    const errors: Error[] = [];
    const stdio = new Client({ name: "builder-stdio-test", version: "1.0.0" });
    stdio.onerror = (e) => void errors.push(e);
    let pid: number | null = null;
    try {
      await within(stdio.connect(transport), 60_000, "stdio connect");
      pid = transport.pid;
      assert.ok(pid, "the server process started");
      const { tools } = await stdio.listTools();
      assert.equal(tools.length, 10);
      const created = (await stdio.callTool({
        name: "canvas_create_node",
        arguments: { system: "from-stdio", type: "agent", label: "Hello World" },
      })) as Result;
      assert.ok(!created.isError, text(created));
      assert.equal(created.structuredContent!.nodeId, "hello-world");
      const state = (await stdio.callTool({ name: "canvas_get_state", arguments: { system: "from-stdio" } })) as Result;
      assert.deepEqual(
        state.structuredContent!.canvas.nodes.map((n: { id: string }) => n.id),
        ["hello-world"],
      );
      const bad = (await stdio.callTool({
        name: "sandbox_create_file",
        arguments: { system: "from-stdio", path: "../x", content: "x" },
      })) as Result;
      assert.equal(bad.isError, true);
      assert.equal(bad._meta?.["clawbridge/code"], "escape");
      // The bridge reads the same database.
      const seen = (await ok("canvas_get_state", { system: "from-stdio" })).canvas;
      assert.deepEqual(
        seen.nodes.map((n: { id: string }) => n.id),
        ["hello-world"],
      );
    } finally {
      await stdio.close().catch(() => {});
    }
    assert.deepEqual(
      errors.map((e) => e.message),
      [],
      `stdout held nothing but JSON-RPC (stderr: ${stderr})`,
    );
    const gone = () => {
      const s = procStat(pid!);
      return s === undefined || s.state === "Z";
    };
    assert.ok(await eventually(gone, 10_000), `clawbridge mcp (pid ${pid}) still runs after the client closed`);
  });
});
