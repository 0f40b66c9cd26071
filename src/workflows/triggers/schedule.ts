/**
 * The schedules of the systems (`triggers:` of a system, src/workflows/systems/schema.ts), run
 * while the bridge runs: one timer, to the next time any schedule is due, armed again after every
 * check and after a reload of the library (`rearm`).
 *
 * Each schedule counts from a time kept in systems.db (state.ts): its next run is the cron's first
 * time after it. When a time comes, the system runs (origin `schedule`, trigger `schedule:<index>`,
 * the schedule's inputs) and the schedule counts from now on, so a schedule fires at most once per
 * check however many of its times passed. A time more than a minute old when it is noticed (the
 * bridge was down, or the machine asleep) was missed: it runs once at the check (`catchUp`, the
 * default) or is skipped (`catchUp: false`); never several times. A schedule seen for the first
 * time, or whose cron or time zone changed, counts from now (nothing is caught up for it).
 *
 * Every instance on one store checks the same schedules: a time is fired (or skipped) only by
 * the check that claims it in the store (state.ts `claim`), so each due time starts one run in
 * the whole cluster, catch-ups included.
 *
 * A schedule made by chat names its conversation: the run is recorded with it, detached, so the
 * router tells that conversation on its next turn. With `notify`, the run's outcome is POSTed when
 * it ends (notify.ts).
 */
import type { Logger } from "pino";
import type { EventBus } from "../../ops/events/bus.js";
import type { TriggerRow } from "../../wire/runs.js";
import { nextCronRun } from "../systems/cron.js";
import type { RunRecord } from "../systems/db.js";
import { checkInputs, incompleteText } from "../systems/inputs.js";
import type { SystemsLibrary } from "../systems/library.js";
import type { RunManager } from "../systems/runner.js";
import type { Trigger } from "../systems/schema.js";
import { type Clock, realClock } from "./clock.js";
import type { TriggerState } from "./state.js";

/** A time noticed later than this was missed (the bridge was down): `catchUp` decides. */
const LATE_MS = 60_000;
/** The timer never sleeps longer (a clock changed under it is noticed within this). */
const MAX_SLEEP_MS = 60 * 60_000;

export interface ScheduleDeps {
  library: SystemsLibrary;
  runs: Pick<RunManager, "start" | "wait">;
  state: TriggerState;
  bus: EventBus;
  log: Logger;
  clock?: Clock;
  /** Told of each run of a schedule with `notify` once it ended. */
  notify?: (run: RunRecord, notify: NonNullable<Trigger["notify"]>) => Promise<void>;
}

const specOf = (t: Trigger) => `${t.cron}|${t.timezone ?? ""}`;

export class Schedules {
  private readonly clock: Clock;
  private cancelTimer?: () => void;
  private closed = false;
  /** The check in progress: checks run one after another. */
  private checking: Promise<void> = Promise.resolve();

  constructor(private readonly d: ScheduleDeps) {
    this.clock = d.clock ?? realClock;
  }

  /**
   * Check every schedule now (runs what is due, catches up what was missed) and arm the timer.
   * Resolves when this check is done (after the ones before it); a failed check is logged.
   */
  rearm(): Promise<void> {
    this.checking = this.checking
      .then(() => this.checkAll())
      .catch((err: unknown) => this.d.log.warn({ err: (err as Error).message }, "the schedules could not be checked"));
    return this.checking;
  }

  private async checkAll(): Promise<void> {
    if (this.closed) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const now = this.clock.now();
    let next = Number.POSITIVE_INFINITY;
    const present = new Set<string>();
    for (const s of this.d.library.systems) {
      for (const [i, t] of s.triggers.entries()) {
        present.add(`${s.id}|${i}`);
        const due = await this.check(s.id, t, i, now);
        if (due !== undefined) next = Math.min(next, due);
      }
    }
    // A schedule removed (or its system) is forgotten: added again later, it catches nothing up.
    await this.d.state.prune(present);
    if (next === Number.POSITIVE_INFINITY || this.closed) return;
    this.cancelTimer = this.clock.setTimer(() => this.rearm(), Math.min(Math.max(next - now, 0), MAX_SLEEP_MS));
  }

  /** No more checks; resolves when the one in progress is done. */
  close(): Promise<void> {
    this.closed = true;
    this.cancelTimer?.();
    return this.checking;
  }

  /** Each schedule of a system with its next and last run (`GET /v1/systems/:id`). */
  async rows(system: string): Promise<TriggerRow[]> {
    const s = this.d.library.get(system);
    if (!s) return [];
    const now = this.clock.now();
    const states = await Promise.all(s.triggers.map((_, index) => this.d.state.get(system, index)));
    return s.triggers.map((t, index) => {
      const st = states[index];
      const from = st && st.spec === specOf(t) ? Math.max(st.since, now) : now;
      return {
        index,
        cron: t.cron,
        timezone: t.timezone ?? null,
        inputs: t.inputs,
        catch_up: t.catchUp,
        notify: t.notify !== undefined,
        conversation: t.conversation ?? null,
        next_run_at: nextCronRun(t.cron, t.timezone, from) ?? null,
        last_run_at: st?.lastRunAt ?? null,
        last_run_id: st?.lastRunId ?? null,
      };
    });
  }

  /** Run the schedule when it is due (and this check claims the time); returns its next time (undefined: never again). */
  private async check(system: string, t: Trigger, idx: number, now: number): Promise<number | undefined> {
    const spec = specOf(t);
    const st = await this.d.state.get(system, idx);
    if (!st || st.spec !== spec) {
      await this.d.state.reset(system, idx, spec, now);
      return nextCronRun(t.cron, t.timezone, now);
    }
    const due = nextCronRun(t.cron, t.timezone, st.since);
    if (due === undefined || due > now) return due;
    // Another instance (or an earlier check) took this time: it fired or skipped it.
    if (!(await this.d.state.claim(system, idx, spec, due, now))) return nextCronRun(t.cron, t.timezone, now);
    const missed = now - due > LATE_MS;
    const trigger = `schedule:${idx}`;
    if (missed && !t.catchUp) {
      this.d.bus.emit({ type: "trigger.skipped", system, trigger, dueAt: due, reason: "missed; catchUp is false" });
      this.d.log.info(
        { system, trigger, dueAt: new Date(due).toISOString() },
        "missed schedule skipped (catchUp: false)",
      );
    } else await this.fire(system, t, idx, now, due, missed);
    return nextCronRun(t.cron, t.timezone, now);
  }

  private async fire(
    system: string,
    t: Trigger,
    idx: number,
    now: number,
    due: number,
    missed: boolean,
  ): Promise<void> {
    const trigger = `schedule:${idx}`;
    const s = this.d.library.get(system)!;
    const check = checkInputs(s.inputs, t.inputs);
    let rec: RunRecord | undefined;
    let problem: string | undefined;
    if (!check.complete) problem = `its inputs are not complete: ${incompleteText(check).text}`;
    else {
      try {
        rec = await this.d.runs.start({
          system,
          inputs: check.values,
          origin: "schedule",
          trigger,
          ...(t.conversation ? { conversation: t.conversation, detached: true } : {}),
        });
      } catch (err) {
        problem = (err as Error).message;
      }
    }
    if (!rec) {
      this.d.bus.emit({ type: "trigger.skipped", system, trigger, dueAt: due, reason: problem ?? "not started" });
      this.d.log.warn({ system, trigger, problem }, "schedule could not start its run");
      return;
    }
    await this.d.state.fired(system, idx, now, rec.id);
    this.d.bus.emit({ type: "trigger.fired", system, trigger, runId: rec.id, dueAt: due, catchUp: missed });
    this.d.log.info({ system, trigger, runId: rec.id, catchUp: missed }, "schedule started a run");
    const notify = t.notify;
    if (notify && this.d.notify) {
      const send = this.d.notify;
      this.d.runs
        .wait(rec.id)
        .then((end) => send(end, notify))
        .catch((err: unknown) =>
          this.d.log.warn({ system, runId: rec.id, err: (err as Error).message }, "schedule's notify failed"),
        );
    }
  }
}
