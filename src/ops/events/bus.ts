/**
 * The bridge's one in-process event bus: every turn, every routing decision, every change of a
 * conversation's state, every step of a run or a build and every canvas change is published here as
 * a typed event. The pipeline, the router, the systems runner and the builder publish; `/v1/events`,
 * the metrics and tests subscribe. Publishing never throws and never waits: a listener that fails
 * is logged and kept. A secret's value never gets past `emit` (src/core/secrets/redactor.ts: it
 * becomes `[secret NAME]`, also in the text a run streams to a chat). The events themselves are declared in src/wire/events.ts (the dashboard
 * reads the same declarations).
 */
import type { BridgeEvent } from "../../wire/events.js";
import { secretRedactor } from "../../core/secrets/redactor.js";

/** An event as it is published: the bus stamps `at`. */
export type NewEvent = BridgeEvent extends infer E ? (E extends BridgeEvent ? Omit<E, "at"> : never) : never;

export type Listener = (event: BridgeEvent) => void;

export class EventBus {
  private listeners: Listener[] = [];

  constructor(private readonly onListenerError: (err: unknown) => void = () => {}) {}

  /**
   * Publish. Listeners run synchronously, in subscription order; one that throws is reported and
   * kept. The event is stamped with `at` in place (not copied: three events per turn pass here):
   * it belongs to the bus from then on, and whoever published it must not change it afterwards.
   * An event holding a secret's value is copied with the value replaced.
   */
  emit(event: NewEvent): void {
    const stamped = secretRedactor.value(event) as BridgeEvent;
    stamped.at = Date.now();
    for (const fn of this.listeners) {
      try {
        fn(stamped);
      } catch (err) {
        this.onListenerError(err);
      }
    }
  }

  /** Subscribe to every event. Returns the function that unsubscribes. */
  on(fn: Listener): () => void {
    this.listeners = [...this.listeners, fn];
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  /** Subscribe to the events of one run. */
  onRun(runId: string, fn: Listener): () => void {
    return this.on((e) => {
      if ("runId" in e && e.runId === runId) fn(e);
    });
  }

  get listenerCount(): number {
    return this.listeners.length;
  }
}
