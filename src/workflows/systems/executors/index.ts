/**
 * One attempt of a leaf step, by kind. The MCP client (and the SDK behind it) is loaded on first
 * use only: a bridge without MCP systems never pays for it.
 */
import type { ExecContext, ExecResult } from "../step-executor.js";
import type { LeafSpec } from "../plan.js";
import { runApproval } from "./approval.js";
import { runCommand } from "./command.js";
import { runModel } from "./model.js";
import { runWebhook } from "./webhook.js";

export async function executeLeaf(spec: LeafSpec, ctx: ExecContext): Promise<ExecResult> {
  switch (spec.kind) {
    case "webhook":
      return runWebhook(spec, ctx);
    case "command":
      return runCommand(spec, ctx);
    case "model":
      return runModel(spec, ctx);
    case "approval":
      return runApproval(spec, ctx);
    case "mcp": {
      const { runMcp } = await import("./mcp.js");
      return runMcp(spec, ctx);
    }
  }
}
