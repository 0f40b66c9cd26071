/**
 * The Builder: carries out an ExecutionPlan by calling the canvas and sandbox MCP tools.
 * - Steps run in dependency order, not list order; independent steps run in parallel.
 * - `${steps.ID.output}` in a step's params is the result of step ID (substituted just before the
 *   call; `$${` is a literal `${`; the system's own templates are left as written).
 * - Each step gets up to `retryCount` (≤ 3) more attempts, `retryDelayMs` (1 s) apart, for errors
 *   that can pass (the transport failed, the store was busy); a refusal is final at once.
 * - A failed step stops its dependants (skipped, with the reason); independent branches finish;
 *   the build fails naming the step and why.
 * - Pause stops starting new steps (running ones finish); the build is persisted `paused` and
 *   resumes from its unfinished steps with the variables it had.
 * Every step is published (`execution:stepStart`, `execution:stepRetry`, `execution:stepComplete`,
 * `execution:planComplete`) and written to the build record as it changes.
 */
import type { EventBus } from "../../ops/events/bus.js";
import type { Cancellation } from "../../core/util/cancel.js";
import type { BuildRecord, BuildStore } from "./build-store.js";
import type { ToolCaller, ToolOutcome } from "./mcp-client.js";
import { renderOwnSteps, TemplateError } from "../engine/template.js";
import type { BuildStep } from "./types.js";

export interface ExecuteDeps {
  tools: ToolCaller;
  store: BuildStore;
  bus: EventBus;
  /** Steps at once (default 4). */
  maxParallel?: number;
  /** Multiplies every retry delay (tests: 0.05). */
  delayScale?: number;
}

export interface StepReport {
  step: BuildStep;
  status: "started" | "retry" | "completed" | "failed" | "skipped";
  attempt?: number;
  detail?: string;
}

/** Where each action's result is found in the tool's structured result. */
const RESULT_KEY: Record<BuildStep["action"], string> = {
  CREATE_NODE: "nodeId",
  CONNECT_NODES: "edgeId",
  UPDATE_NODE: "nodeId",
  DELETE_NODE: "nodeId",
  CREATE_FILE: "path",
  REGISTER_CAPABILITY: "path",
};

/** The sandbox path a capability is written to (Claude Code's layout; AGENTS.md for any agent). */
export function capabilityPath(kind: string, name: string): string {
  const slug =
    name
      .toLowerCase()
      .replace(/[^a-z0-9_-]+/g, "-")
      .replace(/^-+|-+$/g, "") || "capability";
  if (kind === "skill") return `.claude/skills/${slug}/SKILL.md`;
  if (kind === "command") return `.claude/commands/${slug}.md`;
  return "AGENTS.md";
}

function capabilityContent(p: Record<string, unknown>): string {
  const content = String(p.content ?? "");
  if (p.kind !== "skill") return content;
  // A skill file starts with its front matter (name, description) unless it already has one.
  if (content.startsWith("---\n")) return content;
  const desc = String(p.description ?? p.name ?? "").replace(/\n/g, " ");
  return `---\nname: ${String(p.name)}\ndescription: ${desc}\n---\n\n${content}`;
}

/** One attempt of one step: the MCP calls its action maps to. */
async function callStep(
  tools: ToolCaller,
  system: string,
  action: BuildStep["action"],
  p: Record<string, unknown>,
): Promise<ToolOutcome> {
  switch (action) {
    case "CREATE_NODE":
      return tools.call("canvas_create_node", { system, ...p });
    case "CONNECT_NODES":
      return tools.call("canvas_connect_nodes", { system, from: p.from, to: p.to });
    case "UPDATE_NODE": {
      let last: ToolOutcome = { ok: true, result: { nodeId: p.node } };
      for (const [key, value] of Object.entries((p.properties ?? {}) as Record<string, unknown>)) {
        last = await tools.call("canvas_update_property", { system, node: p.node, key, value });
        if (!last.ok) return last;
      }
      return { ok: true, result: { ...last.result, nodeId: p.node } };
    }
    case "DELETE_NODE":
      return tools.call("canvas_delete_node", { system, node: p.node });
    case "CREATE_FILE":
      return tools.call("sandbox_create_file", { system, path: p.path, content: p.content });
    case "REGISTER_CAPABILITY":
      return tools.call("sandbox_create_file", {
        system,
        path: capabilityPath(String(p.kind), String(p.name)),
        content: capabilityContent(p),
      });
  }
}

function wait(ms: number, cancel: Cancellation): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      off();
      resolve();
    }, ms);
    const off = cancel.onAbort(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

/**
 * Run (or resume) a build until it completes, fails, or `pause` aborts (then `paused`). `report`
 * hears each step as it goes (the chat streams it).
 */
export async function executeBuild(
  deps: ExecuteDeps,
  build: BuildRecord,
  pause: Cancellation,
  report: (r: StepReport) => void = () => {},
): Promise<BuildRecord> {
  const { tools, store, bus } = deps;
  const scale = deps.delayScale ?? 1;
  const maxParallel = deps.maxParallel ?? 4;
  const started = Date.now();
  const steps = build.plan.steps;
  for (const s of steps) {
    const r = build.steps[s.id];
    // A step left running by a pause or a stop is started again (the tools are idempotent enough:
    // a node with an explicit id is refused the second time, and that is reported).
    if (!r || r.status === "running") build.steps[s.id] = { status: "pending", attempts: r?.attempts ?? 0 };
  }
  build.status = "running";
  delete build.failedStep;
  delete build.error;
  store.save(build);

  const state = (id: string) => build.steps[id]!.status;
  const running = new Map<string, Promise<void>>();

  const runStep = async (s: BuildStep): Promise<void> => {
    const rec = build.steps[s.id]!;
    const t0 = Date.now();
    const maxAttempts = 1 + Math.min(3, Math.max(0, s.retryCount));
    let params: Record<string, unknown>;
    try {
      params = renderOwnSteps(s.params, Object.keys(build.steps), build.vars);
    } catch (err) {
      const msg = err instanceof TemplateError ? err.message : String(err);
      finish(s, "failed", Date.now() - t0, undefined, msg);
      return;
    }
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      rec.attempts++;
      bus.emit({
        type: "execution:stepStart",
        buildId: build.id,
        system: build.system,
        step: s.id,
        name: s.name,
        action: s.action,
        attempt,
      });
      report({ step: s, status: "started", attempt });
      const out = await callStep(tools, build.system, s.action, params);
      if (out.ok) {
        const value = out.result[RESULT_KEY[s.action]];
        const text = typeof value === "string" ? value : typeof value === "number" ? String(value) : undefined;
        if (text !== undefined) build.vars[s.id] = text;
        finish(s, "completed", Date.now() - t0, text);
        return;
      }
      if (out.retryable && attempt < maxAttempts) {
        const delayMs = Math.round(s.retryDelayMs * scale);
        bus.emit({
          type: "execution:stepRetry",
          buildId: build.id,
          system: build.system,
          step: s.id,
          attempt: attempt + 1,
          error: out.error,
          delayMs,
        });
        report({ step: s, status: "retry", attempt: attempt + 1, detail: out.error });
        store.save(build);
        await wait(delayMs, pause);
        // A pause during the wait: the step goes back to pending and resumes later.
        if (pause.aborted) {
          rec.status = "pending";
          store.save(build);
          return;
        }
        continue;
      }
      finish(s, "failed", Date.now() - t0, undefined, out.error);
      return;
    }
  };

  const finish = (
    s: BuildStep,
    status: "completed" | "failed" | "skipped",
    ms: number,
    output?: string,
    error?: string,
  ) => {
    const rec = build.steps[s.id]!;
    rec.status = status;
    rec.ms = ms;
    if (output !== undefined) rec.output = output;
    if (error !== undefined) rec.error = error;
    if (status === "failed" && !build.failedStep) {
      build.failedStep = s.id;
      build.error = error;
    }
    store.save(build);
    bus.emit({
      type: "execution:stepComplete",
      buildId: build.id,
      system: build.system,
      step: s.id,
      status,
      ...(output !== undefined ? { output } : {}),
      ...(error !== undefined ? { error } : {}),
      ms,
    });
    report({ step: s, status, detail: error ?? output });
  };

  // Bounded: each pass starts or settles at least one step, or ends.
  for (let pass = 0; pass <= steps.length * 8 + 8; pass++) {
    let changed = true;
    while (changed) {
      changed = false;
      for (const s of steps) {
        if (state(s.id) !== "pending") continue;
        const bad = s.dependsOn.find((d) => state(d) === "failed" || state(d) === "skipped");
        if (bad) {
          finish(s, "skipped", 0, undefined, `not run: ${bad} ${state(bad) === "failed" ? "failed" : "was skipped"}`);
          changed = true;
        }
      }
    }
    if (!pause.aborted) {
      for (const s of steps) {
        if (running.size >= maxParallel) break;
        if (state(s.id) !== "pending" || !s.dependsOn.every((d) => state(d) === "completed")) continue;
        build.steps[s.id]!.status = "running";
        running.set(
          s.id,
          runStep(s).finally(() => running.delete(s.id)),
        );
      }
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  const unfinished = steps.some((s) => state(s.id) === "pending" || state(s.id) === "running");
  build.status = build.failedStep ? "failed" : unfinished ? "paused" : "completed";
  store.save(build);
  bus.emit({
    type: "execution:planComplete",
    buildId: build.id,
    system: build.system,
    status: build.status as "completed" | "failed" | "paused",
    ...(build.failedStep ? { failedStep: build.failedStep, error: build.error } : {}),
    ms: Date.now() - started,
  });
  return build;
}
