/**
 * The trigger room's one handle, opened with the systems (src/workflows/router/runtime.ts): the
 * schedules (schedule.ts) and the inbound hooks (hooks.ts) over the same library, run manager and
 * store (the runtime's one `Sql`: systems.db, or the PostgreSQL the instances share). `reload` after the library changed (a deploy, a removal) arms the schedules again and
 * makes the secrets of new hooks.
 */
import type { Logger } from "pino";
import type { Sql } from "../../core/db/sql.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { SystemsLibrary } from "../systems/library.js";
import type { RunManager } from "../systems/runner.js";
import type { Clock } from "./clock.js";
import { Hooks } from "./hooks.js";
import { notifyRun } from "./notify.js";
import { Schedules } from "./schedule.js";
import { TriggerState } from "./state.js";

export interface TriggersDeps {
  library: SystemsLibrary;
  runs: RunManager;
  sql: Sql;
  bus: EventBus;
  log: Logger;
  dataDir: string;
  /** A secret's value, for `${secrets.NAME}` in a schedule's `notify` headers. */
  secret?: (name: string) => string | undefined;
  clock?: Clock;
}

export class Triggers {
  readonly schedules: Schedules;
  readonly hooks: Hooks;

  constructor(d: TriggersDeps) {
    const state = new TriggerState(d.sql);
    this.schedules = new Schedules({ ...d, state, notify: (run, notify) => notifyRun(run, notify, d.log, d.secret) });
    this.hooks = new Hooks({ ...d, state });
  }

  /** Start (and after every reload of the library): secrets for new hooks, schedules checked and armed. */
  reload(): Promise<void> {
    this.hooks.ensureSecrets();
    return this.schedules.rearm();
  }

  /** No more checks; resolves when the one in progress is done. */
  close(): Promise<void> {
    return this.schedules.close();
  }
}
