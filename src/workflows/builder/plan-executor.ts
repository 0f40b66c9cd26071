/**
 * A build as the engine's steps: each step of the Architect's ExecutionPlan calls the canvas and
 * sandbox MCP tools (src/workflows/engine/scheduler.ts schedules them, the run manager records
 * them as a run of origin `builder`).
 * - Steps run in dependency order, not list order; independent steps run in parallel.
 * - `${steps.ID.output}` in a step's params is the result of step ID (substituted just before the
 *   call; `$${` is a literal `${`; the system's own templates are left as written).
 * - Each step gets up to `retryCount` (≤ 3) more attempts, `retryDelayMs` (1 s) apart and doubling,
 *   for errors that can pass (the transport failed, the store was busy); a refusal is final at once.
 * - A failed step stops its dependants (skipped, with the reason); independent branches finish.
 * - Pause stops starting new steps; a tool call under way finishes and is kept.
 */
import type { EngineStep } from "../engine/scheduler.js";
import { ExecError } from "../systems/step-executor.js";
import type { ToolCaller, ToolOutcome } from "./mcp-client.js";
import { renderOwnSteps, TemplateError } from "../engine/template.js";
import type { BuildStep, ExecutionPlan } from "./types.js";

/** A plan step as an engine step (its retries bounded, its delay scaled). */
export type BuildEngineStep = BuildStep & EngineStep;

export function compileBuild(plan: ExecutionPlan, delayScale: number): BuildEngineStep[] {
  return plan.steps.map((s) => ({
    ...s,
    retry: Math.min(3, Math.max(0, s.retryCount)),
    retryDelayMs: Math.round(s.retryDelayMs * delayScale),
  }));
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

/**
 * One attempt of one build step: its `${steps.ID.output}`s from the outputs of the steps before it, then its
 * tool calls. The output is the text the action made (a node id, an edge id, a path).
 */
export async function attemptBuildStep(
  tools: ToolCaller | Error,
  plan: ExecutionPlan,
  step: BuildEngineStep,
  outputs: Record<string, unknown>,
): Promise<{ output: unknown }> {
  if (tools instanceof Error)
    throw new ExecError("invalid", `the canvas and sandbox tools could not be reached: ${tools.message}`);
  let params: Record<string, unknown>;
  try {
    params = renderOwnSteps(
      step.params,
      plan.steps.map((s) => s.id),
      outputs,
    );
  } catch (err) {
    // A result that is not there: the step fails at once, saying which.
    if (err instanceof TemplateError) throw new ExecError("invalid", err.message);
    throw err;
  }
  const out = await callStep(tools, plan.metadata.system, step.action, params);
  if (!out.ok) throw new ExecError("tool_error", out.error, out.retryable);
  const value = out.result[RESULT_KEY[step.action]];
  return { output: typeof value === "string" ? value : typeof value === "number" ? String(value) : undefined };
}
