/** What a `type: builder` backend is built with (src/backends/builder-backend.ts); the bridge assembles it at start-up. */
import type { EventBus } from "../../ops/events/bus.js";
import type { ConversationMachine } from "../conversation/machine.js";
import type { RunStore } from "../systems/db.js";
import type { RunManager } from "../systems/runner.js";
import type { ModelCaller } from "../systems/step-executor.js";
import type { SystemsHost } from "./deploy.js";
import type { BuilderRoom } from "./service.js";

export interface BuilderBase {
  room: BuilderRoom;
  bus: EventBus;
  callModel: ModelCaller;
  host: SystemsHost;
  runs?: RunStore;
  /** Every conversation's state and open question (shared with the router). */
  conversations: ConversationMachine;
  /** Runs builds like every run (pause, resume, cancel, restart recovery). */
  manager: RunManager;
  dataDir: string;
  /** Every configured model with its backend type (the builder offers those that do work to agent nodes). */
  models: Array<{ id: string; kind: string }>;
  /** Each builder backend's engine, by backend name, loaded on first use (a build resumed from outside a chat runs with the first one's tools). */
  engines: Map<string, () => Promise<import("./builder.js").BuilderEngine>>;
}
