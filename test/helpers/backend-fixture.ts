/**
 * A CLI backend's test set-up inside a `describe`: the fake of its model API, a private HOME and
 * data directory, a shared `backend`, and `make(extra)` for backends with more options. After the
 * suite every backend made is closed (ending its warm processes, which must then be gone), the
 * fake stopped and the directories removed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before } from "node:test";
import type { Backend } from "../../src/backends/contract/backend.js";
import { warmProcesses } from "../../src/backends/warm/registry.js";
import { pidGone } from "./backend-turn.js";
import { eventually } from "./bridge.js";

export interface BackendFixture<F, B> {
  readonly fake: F;
  readonly home: string;
  readonly dataDir: string;
  /** The backend the suite's tests share (made in `before`). */
  readonly backend: B;
  make(extra?: Record<string, unknown>): B;
}

export function backendFixture<F extends { close(): Promise<void> }, B extends Backend>(o: {
  /** Short name for the temporary directories. */
  name: string;
  startFake(): Promise<F>;
  /** A backend on `fake` with the suite's options plus `extra`. */
  create(fx: { fake: F; home: string; dataDir: string }, extra: Record<string, unknown>): B;
}): BackendFixture<F, B> {
  const made: B[] = [];
  const fx = {
    fake: undefined as unknown as F,
    home: "",
    dataDir: "",
    backend: undefined as unknown as B,
    make(extra: Record<string, unknown> = {}): B {
      const b = o.create(fx, extra);
      made.push(b);
      return b;
    },
  };
  before(async () => {
    fx.fake = await o.startFake();
    fx.home = mkdtempSync(path.join(tmpdir(), `cb-${o.name}-home-`));
    fx.dataDir = mkdtempSync(path.join(tmpdir(), `cb-${o.name}-data-`));
    fx.backend = fx.make();
  });
  after(async () => {
    const names = new Set(made.map((b) => b.name));
    const pids = warmProcesses()
      .filter((w) => names.has(w.backend))
      .map((w) => w.pid);
    for (const b of made) await b.close?.();
    for (const pid of pids)
      if (pid) assert.ok(await eventually(() => pidGone(pid), 10_000), `warm process ${pid} ended by close()`);
    await fx.fake?.close();
    rmSync(fx.home, { recursive: true, force: true });
    rmSync(fx.dataDir, { recursive: true, force: true });
  });
  return fx;
}
