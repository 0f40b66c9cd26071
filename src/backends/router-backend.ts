/**
 * `type: router`: a thin module over src/workflows/router. The router is a dispatching backend: the pipeline
 * asks it per turn whether it answers itself (clarify, confirm, a run's progress) or hands the turn
 * to its `answer` model, which then runs as if it had been asked directly.
 */
import type { RouterEngine } from "../workflows/router/router.js";
import { routerOptionsSchema, type RouterOptions } from "../workflows/router/options.js";
import type { BackendModule } from "./module.js";
import type { Backend, BackendEvent } from "./contract/backend.js";

export interface RouterBackend extends Backend {
  /** The router itself (loaded on the first turn: a bridge that never routes never loads it). */
  engine(): Promise<RouterEngine>;
}

export const routerBackend: BackendModule<RouterOptions> = {
  type: "router",
  schema: routerOptionsSchema,
  defaultSessionMode: "stateless",
  sessionModes: ["stateless"],
  create(name, options, deps): RouterBackend {
    if (!deps.router) throw new Error(`backend "${name}" (type router) was built without the systems runtime`);
    const rt = { ...deps.router, log: deps.logger };
    let engine: Promise<RouterEngine> | undefined;
    const load = () =>
      (engine ??= import("../workflows/router/router.js").then((m) => new m.RouterEngine(name, options, rt)));
    return {
      name,
      type: "router",
      engine: load,
      timeoutSeconds: options.timeoutSeconds ?? options.detachAfterSeconds + 60,
      dispatch: async (input) => (await load()).dispatch(input),
      async *run(): AsyncGenerator<BackendEvent> {
        // Only the chat pipeline drives a router (through `dispatch`); a system step may not name one (refused at load).
        yield {
          type: "error",
          error: {
            code: "backend_rejected",
            message: `"${name}" is a router; ask it through /v1/chat/completions`,
            status: 400,
          },
        };
      },
      async health() {
        const n = deps.router!.library.systems.length;
        return {
          usable: true,
          detail: `${n} system${n === 1 ? "" : "s"}; classifier ${options.classifier}, answers by ${options.answer}`,
        };
      },
    };
  },
};
