/**
 * The builder's MCP server: canvas and sandbox operations as MCP tools, for the Builder and for any
 * MCP host (Claude Code, OpenClaw…). Served over Streamable HTTP at `/mcp` (src/request/http/mcp-route.ts)
 * and over stdio by `clawbridge mcp` (src/ops/commands/mcp-stdio.ts); both build one with `createBuilderMcpServer`.
 *
 * Tools (exactly these; there is no shell tool and never will be):
 *   canvas_create_node, canvas_connect_nodes, canvas_update_property, canvas_delete_node,
 *   canvas_get_state, canvas_apply_layout,
 *   sandbox_create_file, sandbox_read_file, sandbox_list_directory, sandbox_delete_file.
 *
 * A result is JSON twice: as text content and as `structuredContent`. A failure is `isError: true`
 * with the message as text and `_meta: {"clawbridge/code": code, "clawbridge/retryable": bool}`
 * (retryable only for transient conditions; see src/workflows/builder/canvas-tools.ts).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { VERSION } from "../../core/version.js";
import { LAYOUTS } from "./canvas-ops.js";
import { toToolError, type CanvasTools } from "./canvas-tools.js";
import { NODE_TYPES } from "./types.js";

export const BUILDER_TOOL_NAMES = [
  "canvas_create_node",
  "canvas_connect_nodes",
  "canvas_update_property",
  "canvas_delete_node",
  "canvas_get_state",
  "canvas_apply_layout",
  "sandbox_create_file",
  "sandbox_read_file",
  "sandbox_list_directory",
  "sandbox_delete_file",
] as const;

export const META_CODE = "clawbridge/code";
export const META_RETRYABLE = "clawbridge/retryable";

const INSTRUCTIONS = `Build runnable systems as canvases. A canvas belongs to one system id (lower-case letters, digits, - and _) and holds nodes and edges; it compiles to a system clawbridge runs.
Node types: input (data coming in; properties {name?, type?: string|number|integer|boolean, description?, required?, enum?, default?}), output (the system's result: connect the one node whose output it is into it), agent ({model, prompt?, system?, timeoutSeconds?}; prompts may use {{name}} for an input or upstream node), webhook / command / mcp (that run kind's settings without "kind"), system ({system: "<id>", with?: {...}}).
Edges are data flow and therefore dependencies: from the producer to the consumer; no cycles, nothing into an input, nothing out of an output.
Each system also has a sandbox directory for files (prompts, skills, notes) its agent steps run in; paths are relative to it.
Start with canvas_get_state to see what exists. canvas_create_node on a new system id creates that canvas.`;

const system = z
  .string()
  .describe('The system id the canvas belongs to (lower-case letters, digits, - and _; e.g. "news-digest").');
const nodeId = (what: string) => z.string().describe(what);
const position = z.object({ x: z.number(), y: z.number() }).describe("Where the node sits on the canvas, in pixels.");
const path = (what: string) =>
  z
    .string()
    .describe(
      `${what} Relative to the system's sandbox, "/" between directories (e.g. "prompts/summary.md"); absolute paths and ".." are refused.`,
    );

function ok(result: object): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(result) }],
    structuredContent: result as Record<string, unknown>,
  };
}

function failure(err: unknown): CallToolResult {
  const e = toToolError(err);
  return {
    isError: true,
    content: [{ type: "text", text: e.message }],
    _meta: { [META_CODE]: e.code, [META_RETRYABLE]: e.retryable },
  };
}

/** Run a tool body: its value as a result, anything thrown as an error result. */
async function call(fn: () => Promise<object>): Promise<CallToolResult> {
  try {
    return ok(await fn());
  } catch (err) {
    return failure(err);
  }
}

export function createBuilderMcpServer(tools: CanvasTools): McpServer {
  const server = new McpServer({ name: "clawbridge-builder", version: VERSION }, { instructions: INSTRUCTIONS });

  server.registerTool(
    "canvas_create_node",
    {
      title: "Create a canvas node",
      description:
        `Add a node (a step, an input or the output) to a system's canvas. Types: ${NODE_TYPES.join(", ")}. ` +
        'The id becomes the step id: give one (lower-case letters, digits, - and _) or leave it out to derive it from the label ("Fetch news" → fetch-news, then fetch-news-2…). ' +
        "If the system has no canvas yet, a draft canvas is created for it. Without a position the node goes to the next free grid spot. " +
        "Returns {nodeId, node}: use nodeId to connect or update it.",
      inputSchema: {
        system,
        type: z
          .enum(NODE_TYPES as [string, ...string[]])
          .describe(
            "What the node does: input and output carry data in and out; agent, webhook, command, mcp and system are steps.",
          ),
        label: z.string().describe('A short human name shown on the canvas, e.g. "Summarise articles".'),
        id: z.string().optional().describe("Optional explicit node id (must be unused on this canvas)."),
        properties: z
          .record(z.string(), z.unknown())
          .optional()
          .describe(
            'Settings by type, e.g. agent {"model": "<model id>", "prompt": "Summarise {{articles}}"}, input {"type": "string", "description": "..."}, system {"system": "<id>"}.',
          ),
        parent: z
          .string()
          .optional()
          .describe("Optional id of a node this one belongs to (deleting the parent deletes it too)."),
        position: position.optional(),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (a) => call(() => tools.createNode(a.system, a)),
  );

  server.registerTool(
    "canvas_connect_nodes",
    {
      title: "Connect two nodes",
      description:
        "Add an edge: data flows from `from` to `to`, so `to` runs after `from` and can use its output. " +
        "Refused: a node to itself, an edge that exists, an edge into an input node or out of an output node, and an edge that would make a cycle. " +
        "Returns {edgeId} (e-<from>-<to>).",
      inputSchema: {
        system,
        from: nodeId("The node whose output flows out (the producer)."),
        to: nodeId("The node that receives it (the consumer)."),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (a) => call(() => tools.connectNodes(a.system, a)),
  );

  server.registerTool(
    "canvas_update_property",
    {
      title: "Change a node",
      description:
        'Change one thing on a node. key: "label"; "position" ({x, y}), "position.x", "position.y"; "parent" (a node id, null to detach); ' +
        '"properties" (the whole settings object); "properties.<name>" or just "<name>" for one setting ("with.topic" sets a nested value). ' +
        "A null value removes that setting. The id and the node type cannot change (delete the node and create a new one). Returns {nodeId, node}.",
      inputSchema: {
        system,
        node: nodeId("The id of the node to change."),
        key: z.string().describe('What to change, e.g. "label", "properties.prompt", "model", "position.x".'),
        value: z
          .unknown()
          .describe("The new value (any JSON: string, number, boolean, object, list); null removes a setting."),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.updateProperty(a.system, { node: a.node, key: a.key, value: a.value })),
  );

  server.registerTool(
    "canvas_delete_node",
    {
      title: "Delete a node",
      description:
        "Delete a node together with its edges and its child nodes (those whose parent it is, recursively) and their edges. Returns {removedNodes, removedEdges}.",
      inputSchema: { system, node: nodeId("The id of the node to delete.") },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async (a) => call(() => tools.deleteNode(a.system, a)),
  );

  server.registerTool(
    "canvas_get_state",
    {
      title: "Read a canvas",
      description:
        "With a system id: that canvas whole ({canvas: {system, name, description, status, version, nodes, edges, settings, updatedAt}, " +
        "deployedVersion: the system version it runs as (null: a draft), changedSinceDeploy: edits not deployed yet — say deploy in the builder chat}). " +
        "Without one: every canvas with its status (draft or deployed), version and node count ({canvases: [...]}). Read this before editing.",
      inputSchema: { system: system.optional() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.getState(a.system)),
  );

  server.registerTool(
    "canvas_apply_layout",
    {
      title: "Arrange a canvas",
      description:
        'Reposition every node of a canvas. "layered" (default): a column per step of the data flow, left to right; "grid": rows of 4 in creation order. Returns the new positions.',
      inputSchema: {
        system,
        layout: z
          .enum(LAYOUTS as [string, ...string[]])
          .optional()
          .describe('"layered" (default) or "grid".'),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.applyLayout(a.system, (a.layout ?? "layered") as (typeof LAYOUTS)[number])),
  );

  server.registerTool(
    "sandbox_create_file",
    {
      title: "Write a sandbox file",
      description:
        "Create or replace a text file in the system's sandbox (the directory its agent steps run in): prompts, instructions, skills, data. " +
        "Missing directories are created. Size and file-count limits apply. Returns {path, bytes}.",
      inputSchema: {
        system,
        path: path("The file to write."),
        content: z.string().describe("The whole text of the file (UTF-8, written as is)."),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.createFile(a.system, a.path, a.content)),
  );

  server.registerTool(
    "sandbox_read_file",
    {
      title: "Read a sandbox file",
      description: "Read a text file from the system's sandbox. Returns {path, content, bytes}.",
      inputSchema: { system, path: path("The file to read.") },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.readFile(a.system, a.path)),
  );

  server.registerTool(
    "sandbox_list_directory",
    {
      title: "List sandbox files",
      description:
        "List the files and directories in the system's sandbox (or in one of its directories). Each entry is {path, type: file|directory, bytes}; paths can be passed to read or delete. An empty sandbox lists nothing.",
      inputSchema: {
        system,
        path: path('The directory to list (default: the sandbox itself, ".").').optional(),
        recursive: z.boolean().optional().describe("Also list everything in subdirectories (default false)."),
      },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (a) => call(() => tools.listDirectory(a.system, a.path, a.recursive)),
  );

  server.registerTool(
    "sandbox_delete_file",
    {
      title: "Delete a sandbox file",
      description:
        "Delete a file, or a directory with everything in it, from the system's sandbox. Returns {path, type}.",
      inputSchema: { system, path: path("The file or directory to delete.") },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async (a) => call(() => tools.deleteFile(a.system, a.path)),
  );

  return server;
}
