/**
 * `type: builder`: a thin module over src/workflows/builder. The builder is a dispatching backend that always
 * answers itself (plans, builds, questions, exports, settings) except for messages that are none of
 * those, which it hands to its `answer` model. The router hands it making and changing systems.
 */
import { builderOptionsSchema, type BuilderOptions } from "../workflows/builder/options.js";
import type { BuilderEngine } from "../workflows/builder/builder.js";
import type { BackendModule } from "./module.js";
import type { Backend, BackendEvent } from "./contract/backend.js";

export interface BuilderBackend extends Backend {
  engine(): Promise<BuilderEngine>;
}

export const builderBackend: BackendModule<BuilderOptions> = {
  type: "builder",
  schema: builderOptionsSchema,
  defaultSessionMode: "stateless",
  sessionModes: ["stateless"],
  create(name, options, deps): BuilderBackend {
    const base = deps.builder;
    if (!base) throw new Error(`backend "${name}" (type builder) was built without the builder room`);
    let engine: Promise<BuilderEngine> | undefined;
    const load = () =>
      (engine ??= Promise.all([
        import("../workflows/builder/builder.js"),
        import("../workflows/builder/mcp-client.js"),
      ]).then(([m, c]) => {
        const agentModels = options.agentModels
          ? base.models.filter((x) => options.agentModels!.includes(x.id))
          : base.models.filter((x) => x.kind !== "router" && x.kind !== "builder");
        const e = new m.BuilderEngine(name, options, {
          canvases: base.room.canvases,
          builds: base.room.builds,
          conversations: base.conversations,
          connect: options.mcp ? () => c.connectHttpTools(options.mcp!) : () => base.room.connectInternal(),
          bus: base.bus,
          callModel: base.callModel,
          host: base.host,
          runs: base.runs,
          manager: base.manager,
          dataDir: base.dataDir,
          models: agentModels,
          exportBundle: async (system) => {
            const { writeExport } = await import("../workflows/builder/export-file.js");
            return writeExport(base.room, system);
          },
          log: deps.logger,
        });
        return e;
      }));
    base.engines.set(name, load);
    return {
      name,
      type: "builder",
      engine: load,
      timeoutSeconds: options.timeoutSeconds ?? options.detachAfterSeconds + 2 * options.modelTimeoutSeconds,
      dispatch: async (input) => (await load()).dispatch(input),
      async *run(): AsyncGenerator<BackendEvent> {
        yield {
          type: "error",
          error: {
            code: "backend_rejected",
            message: `"${name}" is a builder; ask it through /v1/chat/completions`,
            status: 400,
          },
        };
      },
      async health() {
        const n = (await base.room.canvases.list()).length;
        return {
          usable: true,
          detail: `${n} canvas${n === 1 ? "" : "es"}; supervisor ${options.supervisor}, architect ${options.architect}`,
        };
      },
    };
  },
};
