/** The options of a `type: builder` backend, validated at start-up like every backend's. */
import { z } from "zod";

export const builderOptionsSchema = z.strictObject({
  /** Model id that classifies each message (BUILD, EDIT, QUERY, EXPORT, CONFIGURE, UNKNOWN) as JSON; fast and cheap. */
  supervisor: z.string().min(1, "name the model id that classifies builder messages"),
  /** Model id that writes the ExecutionPlan; the strongest you have. */
  architect: z.string().min(1, "name the model id that plans systems"),
  /** Model id that answers questions about canvases, systems and runs, and anything else (default: the supervisor). */
  answer: z.string().min(1).optional(),
  /** Models an agent node may use (default: every configured model that is not a router or a builder). */
  agentModels: z.array(z.string().min(1)).optional(),
  /** Programs a `command` node (or a stdio `mcp` node) of a system built by chat may run once deployed. */
  allowCommands: z.array(z.string().min(1)).default([]),
  /** Hosts and CIDRs a `webhook` or HTTP `mcp` node may reach besides public addresses (e.g. `127.0.0.1`, `nas.lan`, `10.0.0.0/8`). */
  allowHosts: z.array(z.string().min(1)).default([]),
  /**
   * Where the Builder calls the canvas and sandbox tools. Default: in process, over MCP's linked
   * in-memory transport. A URL: any MCP server with these tools over Streamable HTTP (another
   * bridge's `/mcp`).
   */
  mcp: z.strictObject({ url: z.string().url(), headers: z.record(z.string(), z.string()).default({}) }).optional(),
  /** After this long, the chat turn ends with the build id and the build goes on in the background. */
  detachAfterSeconds: z.number().positive().default(120),
  /** Minutes a question ("Deploy it?", "Delete these nodes?") waits for its yes; default 60. One setting with a router's `gathering.ttlMinutes`. */
  confirmMinutes: z.number().positive().optional(),
  /** Limit for one Supervisor or Architect call. */
  modelTimeoutSeconds: z.number().positive().default(180),
  /** Steps of a plan at once. */
  maxParallel: z.number().int().positive().default(4),
  /** Multiplies every retry delay of a plan step (tests make it small). */
  retryDelayScale: z.number().min(0).max(1).default(1),
  /** The turn deadline (default: detachAfterSeconds + 2 × modelTimeoutSeconds). */
  timeoutSeconds: z.number().positive().optional(),
});

export type BuilderOptions = z.infer<typeof builderOptionsSchema>;

/** Problems of the builder backends' model references, each naming its key (checked at start-up). */
export function builderProblems(config: {
  models: Array<{ id: string; backend: string }>;
  backends: Record<string, { type: string; options: unknown }>;
}): string[] {
  const problems: string[] = [];
  const models = new Map(config.models.map((m) => [m.id, m]));
  for (const [name, entry] of Object.entries(config.backends)) {
    if (entry.type !== "builder") continue;
    const opts = builderOptionsSchema.parse(entry.options);
    const refs: Array<[string, string]> = [
      ["supervisor", opts.supervisor],
      ["architect", opts.architect],
      ...(opts.answer ? [["answer", opts.answer] as [string, string]] : []),
      ...(opts.agentModels ?? []).map((m, i) => [`agentModels[${i}]`, m] as [string, string]),
    ];
    for (const [key, id] of refs) {
      const m = models.get(id);
      if (!m)
        problems.push(`backends.${name}.${key}: no model "${id}" in models (models: ${[...models.keys()].join(", ")})`);
      else if (["router", "builder"].includes(config.backends[m.backend]?.type ?? ""))
        problems.push(
          `backends.${name}.${key}: "${id}" is a ${config.backends[m.backend]!.type} model; name a model that does the work`,
        );
    }
  }
  return problems;
}
