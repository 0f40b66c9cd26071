/**
 * The canvas and sandbox operations the MCP tools expose (src/workflows/builder/mcp-server.ts), callable
 * directly too (the Builder's plan executor). Each node/edge change runs in one store transaction
 * (CanvasStore.mutate) and is then told on the bus: `node.created`, `node.updated` (with the key),
 * `node.deleted` per removed node, `edge.created`, `edge.deleted` per removed edge; a layout sends
 * `node.updated` (key `position`) for each node it moved.
 *
 * `createNode` on a system id that has no canvas yet creates it (a draft at version 0, named after
 * the id) in the same transaction: a host can start a system by creating its first node. The
 * other canvas operations need an existing canvas. Sandbox operations work on
 * `<dataDir>/sandboxes/<system>/` whether or not a canvas exists (a plan may write files first).
 *
 * Every failure is a `ToolError {code, message, retryable}`. Only transient conditions are
 * retryable (the database busy or locked by another writer, EAGAIN/EBUSY/EMFILE/ENFILE); a refused
 * canvas edit (CanvasOpError) or sandbox operation (SandboxError) is not: retrying it as is gives
 * the same answer.
 */
import type { EventBus } from "../../ops/events/bus.js";
import {
  applyLayout as layoutCanvas,
  CanvasOpError,
  checkSystemId,
  connectNodes as connect,
  createNode as addNode,
  deleteNode as removeNode,
  updateProperty as setProperty,
  type CreateNodeArgs,
  type LayoutKind,
} from "./canvas-ops.js";
import type { CanvasStore } from "./canvas-store.js";
import { type DeployState, deployState } from "./deploy.js";
import { Sandbox, SandboxError, type SandboxEntry, type SandboxLimits } from "./sandbox.js";
import type { Canvas, CanvasEdge, CanvasNode } from "../../wire/canvas.js";

export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "ToolError";
  }
}

const TRANSIENT_SQLITE = /^SQLITE_(BUSY|LOCKED)/;
const TRANSIENT_ERRNO = new Set(["EAGAIN", "EBUSY", "EMFILE", "ENFILE", "EWOULDBLOCK"]);

/** Any thrown value as a ToolError (see the header for what is retryable). */
export function toToolError(err: unknown): ToolError {
  if (err instanceof ToolError) return err;
  if (err instanceof CanvasOpError || err instanceof SandboxError) return new ToolError(err.code, err.message, false);
  const code =
    typeof (err as { code?: unknown } | null)?.code === "string" ? (err as { code: string }).code : undefined;
  const message = err instanceof Error ? err.message : String(err);
  if (code && TRANSIENT_SQLITE.test(code))
    return new ToolError("busy", `The canvas database is busy (${code}); try again in a moment.`, true);
  if (code && TRANSIENT_ERRNO.has(code))
    return new ToolError("busy", `The file system is busy (${code}: ${message}); try again in a moment.`, true);
  return new ToolError("internal_error", code ? `${message} (${code})` : message, false);
}

export interface CanvasToolsOptions {
  store: CanvasStore;
  dataDir: string;
  bus?: EventBus;
  sandboxLimits?: Partial<SandboxLimits>;
}

export interface CanvasSummary {
  system: string;
  name: string;
  description: string;
  status: Canvas["status"];
  version: number;
  nodes: number;
  edges: number;
  updatedAt: number;
}

export class CanvasTools {
  readonly store: CanvasStore;

  constructor(private readonly opts: CanvasToolsOptions) {
    this.store = opts.store;
  }

  /** Run `fn`, turning whatever it throws into a ToolError. */
  private async run<T>(fn: () => T | Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toToolError(err);
    }
  }

  /** One edit of a canvas in one store transaction; what the edit made besides the canvas. */
  private async edit<R extends { canvas: Canvas }>(
    system: string,
    fn: (c: Canvas, created: boolean) => R,
    opts?: { create: object },
  ): Promise<R & { created: boolean }> {
    checkSystemId(system);
    let out!: R & { created: boolean };
    await this.store.mutate(
      system,
      (c, created) => {
        out = { ...fn(c, created), created };
        return out.canvas;
      },
      opts,
    );
    return out;
  }

  private sandbox(system: unknown): Sandbox {
    return Sandbox.forSystem(this.opts.dataDir, checkSystemId(system), this.opts.sandboxLimits);
  }

  /** Create a node. A system with no canvas yet gets one (draft, version 0) in the same transaction. */
  createNode(
    system: string,
    args: CreateNodeArgs,
  ): Promise<{ system: string; nodeId: string; node: CanvasNode; canvasCreated: boolean }> {
    return this.run(async () => {
      const { node, created } = await this.edit(system, (c) => addNode(c, args), { create: {} });
      this.opts.bus?.emit({ type: "node.created", system, node: structuredClone(node) });
      return { system, nodeId: node.id, node, canvasCreated: created };
    });
  }

  connectNodes(
    system: string,
    args: { from: string; to: string },
  ): Promise<{ system: string; edgeId: string; edge: CanvasEdge }> {
    return this.run(async () => {
      const { edge } = await this.edit(system, (c) => connect(c, args));
      this.opts.bus?.emit({ type: "edge.created", system, edge: { ...edge } });
      return { system, edgeId: edge.id, edge };
    });
  }

  /** Change one key of a node (see canvas-ops.ts updateProperty for the keys; null removes a property). */
  updateProperty(
    system: string,
    args: { node: string; key: string; value: unknown },
  ): Promise<{ system: string; nodeId: string; key: string; node: CanvasNode }> {
    return this.run(async () => {
      const { node } = await this.edit(system, (c) => setProperty(c, args.node, args.key, args.value));
      const key = typeof args.key === "string" ? args.key.trim() : String(args.key);
      this.opts.bus?.emit({ type: "node.updated", system, node: structuredClone(node), key });
      return { system, nodeId: node.id, key, node };
    });
  }

  /** Delete a node, its edges, its children (recursively) and their edges. */
  deleteNode(
    system: string,
    args: { node: string },
  ): Promise<{ system: string; nodeId: string; removedNodes: string[]; removedEdges: string[] }> {
    return this.run(async () => {
      const { removedNodes, removedEdges } = await this.edit(system, (c) => removeNode(c, args.node));
      for (const edgeId of removedEdges) this.opts.bus?.emit({ type: "edge.deleted", system, edgeId });
      for (const nodeId of removedNodes) this.opts.bus?.emit({ type: "node.deleted", system, nodeId });
      return { system, nodeId: removedNodes[0]!, removedNodes, removedEdges };
    });
  }

  /** One canvas whole, or (no system) a summary of every canvas. */
  async getState(system?: string): Promise<({ canvas: Canvas } & DeployState) | { canvases: CanvasSummary[] }> {
    const found = await this.run(async (): Promise<{ canvas: Canvas } | { canvases: CanvasSummary[] }> => {
      if (system === undefined || system === null || system === "") {
        return {
          canvases: (await this.store.list()).map((c) => ({
            system: c.system,
            name: c.name,
            description: c.description,
            status: c.status,
            version: c.version,
            nodes: c.nodes.length,
            edges: c.edges.length,
            updatedAt: c.updatedAt,
          })),
        };
      }
      checkSystemId(system);
      const canvas = await this.store.get(system);
      if (!canvas) {
        const known = (await this.store.list()).map((c) => c.system);
        throw new ToolError(
          "canvas_not_found",
          `No canvas "${system}". ${known.length ? `Canvases: ${known.join(", ")}.` : "There are no canvases yet;"} Create a node on "${system}" to start one.`,
          false,
        );
      }
      return { canvas };
    });
    if ("canvases" in found) return found;
    return { ...found, ...(await deployState(this.store, this.opts.dataDir, found.canvas)) };
  }

  /** Place every node (`layered` by default). Returns the new positions. */
  applyLayout(
    system: string,
    layout: LayoutKind = "layered",
  ): Promise<{
    system: string;
    layout: LayoutKind;
    positions: Array<{ id: string; position: { x: number; y: number } }>;
  }> {
    return this.run(async () => {
      // An unknown layout is refused by layoutCanvas, inside the transaction (nothing written).
      const { canvas, before } = await this.edit(system, (c) => ({ canvas: layoutCanvas(c, layout), before: c.nodes }));
      const old = new Map(before.map((n) => [n.id, n.position]));
      for (const n of canvas.nodes) {
        const p = old.get(n.id);
        if (!p || p.x !== n.position.x || p.y !== n.position.y)
          this.opts.bus?.emit({ type: "node.updated", system, node: structuredClone(n), key: "position" });
      }
      return { system, layout, positions: canvas.nodes.map((n) => ({ id: n.id, position: { ...n.position } })) };
    });
  }

  /** Write a file in the system's sandbox (replacing one that is there). */
  createFile(system: string, path: string, content: string): Promise<{ system: string; path: string; bytes: number }> {
    return this.run(() => {
      if (typeof content !== "string")
        throw new ToolError("invalid_content", "content must be a string (the file's text).", false);
      return { system, ...this.sandbox(system).write(path, content) };
    });
  }

  readFile(system: string, path: string): Promise<{ system: string; path: string; content: string; bytes: number }> {
    return this.run(() => ({ system, ...this.sandbox(system).read(path) }));
  }

  /** Entries under `path` (default the sandbox root); `recursive` walks subdirectories. */
  listDirectory(
    system: string,
    path?: string,
    recursive?: boolean,
  ): Promise<{ system: string; path: string; entries: SandboxEntry[] }> {
    return this.run(() => {
      const dir = path === undefined || path === null || path === "" ? "." : path;
      return { system, path: dir, entries: this.sandbox(system).list(dir, { recursive: recursive === true }) };
    });
  }

  /** Delete a file, or a directory with everything in it. */
  deleteFile(system: string, path: string): Promise<{ system: string; path: string; type: "file" | "directory" }> {
    return this.run(() => ({ system, ...this.sandbox(system).delete(path) }));
  }
}
