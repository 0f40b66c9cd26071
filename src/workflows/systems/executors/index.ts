/**
 * One attempt of a leaf step, by kind. The MCP client (and the SDK behind it) is loaded on first
 * use only: a bridge without MCP systems never pays for it. In a test run (`ctx.test`) a webhook, a
 * command and an MCP tool that is not known to be harmless (read-only or `destructiveHint: false`)
 * are not carried out: the step's output is what would have been sent (`WouldSend`).
 */
import type { ExecContext, ExecResult } from "../step-executor.js";
import type { LeafSpec } from "../plan.js";
import { runApproval } from "./approval.js";
import { commandWouldSend, runCommand } from "./command.js";
import { runModel } from "./model.js";
import { runWebhook, webhookWouldSend } from "./webhook.js";

export async function executeLeaf(spec: LeafSpec, ctx: ExecContext): Promise<ExecResult> {
  switch (spec.kind) {
    case "webhook":
      return ctx.test ? { output: webhookWouldSend(spec, ctx) } : runWebhook(spec, ctx);
    case "command":
      return ctx.test ? { output: commandWouldSend(spec, ctx) } : runCommand(spec, ctx);
    case "model":
      return runModel(spec, ctx);
    case "approval":
      return runApproval(spec, ctx);
    case "mcp": {
      const { mcpWouldSend, runMcp } = await import("./mcp.js");
      const notSent = ctx.test ? await mcpWouldSend(spec, ctx) : undefined;
      return notSent ? { output: notSent } : runMcp(spec, ctx);
    }
  }
}
