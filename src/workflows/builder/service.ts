/**
 * The builder room, opened once over the systems floor's store (`sql`) and the systems database: the canvas store and tools (served at
 * `/mcp` and by `clawbridge mcp`), the build records (runs of origin `builder`; release
 * 0.1.0's `builds` table is moved into runs when the room first opens), an in-process MCP
 * connection for the Builder, and export / import of a system as a bundle. The bridge (src/request/http/start.ts), the CLI and the
 * HTTP routes all use this one composition.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type Database from "better-sqlite3";
import type { Sql } from "../../core/db/sql.js";
import { parse as parseYaml, stringify } from "yaml";
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import type { EventBus } from "../../ops/events/bus.js";
import { systemsDir } from "../systems/paths.js";
import { BuildStore, migrateBuilds } from "./build-store.js";
import { readBundle, writeBundle, BundleError } from "./bundle.js";
import type { CanvasStore } from "./canvas-store.js";
import { compileCanvas } from "./compile.js";
import { BUILDER_MARK, type DeployState, deployState, type SystemsHost } from "./deploy.js";
import { connectTools, type ToolCaller } from "./mcp-client.js";
import { Sandbox } from "./sandbox.js";
import { openBuilderTools } from "./runtime.js";
import type { CanvasTools } from "./canvas-tools.js";
import type { Canvas } from "../../wire/canvas.js";

export interface BuilderRoom {
  tools: CanvasTools;
  canvases: CanvasStore;
  builds: BuildStore;
  dataDir: string;
  /** An MCP client to a fresh in-process server over the same tools. */
  connectInternal(): Promise<ToolCaller>;
  /** The system's bundle (`.tar.gz`). */
  exportBundle(system: string): Promise<Buffer>;
  /** The system version a deployed canvas runs as, and whether the canvas changed since (deploy.ts). */
  deployState(canvas: Canvas): Promise<DeployState>;
  /** Read a bundle back: the same canvas (a draft) and files, or the system file when it had no canvas. */
  importBundle(data: Buffer, opts?: ImportOptions): Promise<{ system: string; canvas: boolean; files: number }>;
}

export interface ImportOptions {
  replace?: boolean;
  /**
   * Checks a system file about to be written as the library would load it (the CLI: the config and
   * `<dataDir>/systems/` with it; default: the room's host). A problem naming it refuses the
   * import, before anything is written: what `clawbridge systems validate` would refuse is never
   * imported.
   */
  check?: SystemsHost["check"];
}

export function openBuilderRoom(args: {
  /** The systems floor's store (canvases, builds): the one `SqliteSql` over `db`, or the PostgreSQL. */
  sql: Sql;
  /** systems.db (build records, system versions). */
  db: Database.Database;
  dataDir: string;
  bus?: EventBus;
  host?: SystemsHost;
}): BuilderRoom {
  const tools = openBuilderTools({ sql: args.sql, db: args.db, dataDir: args.dataDir, bus: args.bus });
  const canvases = tools.store;
  // Release 0.1.0's `builds` table (SQLite only) moved into runs, once.
  migrateBuilds(args.db);
  const builds = new BuildStore(args.sql);
  const dataDir = args.dataDir;

  return {
    tools,
    canvases,
    builds,
    dataDir,
    async connectInternal() {
      const [{ InMemoryTransport }, { createBuilderMcpServer }] = await Promise.all([
        import("@modelcontextprotocol/sdk/inMemory.js"),
        import("./mcp-server.js"),
      ]);
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      const server = createBuilderMcpServer(tools);
      await server.connect(serverSide);
      const caller = await connectTools(clientSide);
      return {
        ...caller,
        async close() {
          await caller.close();
          await server.close();
        },
      };
    },
    deployState: (c) => deployState(canvases, dataDir, c, args.host),
    async exportBundle(system) {
      const canvas = await canvases.get(system);
      const file = path.join(systemsDir(dataDir), `${system}.yaml`);
      let yaml: string | undefined;
      if (existsSync(file)) yaml = readFileSync(file, "utf8");
      else if (canvas) {
        // Reading a canvas out is not deploying it: no policy applies.
        const res = compileCanvas(canvas);
        if (!res.ok)
          throw new BundleError(
            `the canvas does not make a system yet: ${res.problems.map((p) => `${p.node}: ${p.message}`).join("; ")}`,
          );
        yaml = stringify(res.system);
      } else {
        const loaded = args.host?.library.get(system);
        if (!loaded) throw new BundleError(`there is no system or canvas "${system}"`);
        // The file that would declare it: every field but where it was declared.
        const { source: _source, ...file } = loaded;
        yaml = stringify(file);
      }
      const sandbox = Sandbox.forSystem(dataDir, system);
      const files = sandbox.files().map((f) => ({ path: f.path, content: sandbox.readBytes(f.path) }));
      return writeBundle({ system, yaml, canvas, files });
    },
    async importBundle(data, opts = {}) {
      const b = await readBundle(data);
      // Every file through the sandbox's checks first, in a throwaway sandbox: a bundle refused
      // half-way must leave nothing behind, and --replace must not remove what was there.
      stage(b.files);
      const sandbox = Sandbox.forSystem(dataDir, b.system);
      const check = opts.check ?? args.host?.check.bind(args.host);
      if (!b.canvas && check) {
        // It becomes <dataDir>/systems/<id>.yaml: checked as that file, its id defaulting to the name.
        const value = parseYaml(b.yaml) as Record<string, unknown>;
        const where = `${b.system}.yaml (the bundle's system.yaml)`;
        const problems = (await check([{ where, value: { id: b.system, ...value } }])).filter((p) => p.where === where);
        if (problems.length)
          throw new BundleError(
            `system.yaml would be left out by the library, so nothing was imported: ${problems.map((p) => `${p.key}: ${p.message}`).join("; ")}`,
          );
      }
      const file = path.join(systemsDir(dataDir), `${b.system}.yaml`);
      if (!opts.replace) {
        if (await canvases.get(b.system))
          throw new BundleError(`a canvas "${b.system}" exists; remove it or import with --replace`);
        if (existsSync(file)) throw new BundleError(`${file} exists; remove it or import with --replace`);
        if (sandbox.files().length)
          throw new BundleError(`the sandbox of "${b.system}" has files; import with --replace`);
      }
      if (opts.replace) {
        sandbox.destroy();
        if (await canvases.get(b.system)) await canvases.delete(b.system);
      }
      if (b.canvas) {
        await canvases.create({ system: b.system, name: b.canvas.name, description: b.canvas.description });
        await canvases.mutate(b.system, (c) => ({
          ...c,
          nodes: b.canvas!.nodes,
          edges: b.canvas!.edges,
          settings: b.canvas!.settings ?? {},
          name: b.canvas!.name,
          description: b.canvas!.description,
        }));
        await canvases.commitVersion(b.system, "imported");
      } else {
        // Imported by the operator's command: their file from now on (no builder mark).
        writeFileAtomic(file, b.yaml.startsWith(BUILDER_MARK) ? b.yaml.slice(b.yaml.indexOf("\n") + 1) : b.yaml);
      }
      sandbox.ensure();
      for (const f of b.files) sandbox.write(f.path, f.content);
      return { system: b.system, canvas: Boolean(b.canvas), files: b.files.length };
    },
  };
}

/** Write every file once into a throwaway sandbox (the same path checks and limits); throws what the real one would. */
function stage(files: Array<{ path: string; content: Buffer }>): void {
  if (!files.length) return;
  const dir = mkdtempSync(path.join(tmpdir(), "clawbridge-import-"));
  try {
    const staging = new Sandbox(path.join(dir, "sandbox"));
    staging.ensure();
    for (const f of files) staging.write(f.path, f.content);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
