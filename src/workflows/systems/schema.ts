/**
 * What a system is, as configuration data: the `systems:` list of the config file and one YAML
 * file per system in `<dataDir>/systems/`. zod checks the shape; src/workflows/systems/library.ts then checks
 * what zod cannot (the input schema compiles, templates name known inputs and steps, plans have no
 * cycles, referenced systems and models exist).
 */
import { z } from "zod";

const id = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9_-]{0,63}$/,
    "use lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)",
  );
const seconds = z.number().positive();
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name");

/** POST `{system, inputs, runId, conversation}` to a URL; the reply (JSON, text or SSE) is the output. */
export const webhookRunSchema = z.strictObject({
  kind: z.literal("webhook"),
  /** Inputs may be substituted into the path and query (URL-encoded), never into the scheme, host or port. */
  url: z.string().min(1),
  method: z.enum(["POST", "PUT", "PATCH"]).default("POST"),
  headers: z.record(z.string(), z.string()).default({}),
  /** Extra JSON fields merged into the body (templated). */
  body: z.record(z.string(), z.unknown()).optional(),
  /** Environment variable holding the HMAC-SHA256 secret; the signature goes in `x-clawbridge-signature: sha256=<hex>`. */
  secretEnv: envName.optional(),
  timeoutSeconds: seconds.default(30),
  /** Largest reply kept, in bytes. */
  maxResponseBytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024),
});

/** Run a program: an argv array (inputs substituted per element, never through a shell). */
export const commandRunSchema = z.strictObject({
  kind: z.literal("command"),
  argv: z.array(z.string()).min(1, "argv needs at least the program"),
  /** Names of the bridge's environment variables the command may see (PATH and HOME are always given). */
  env: z.array(envName).default([]),
  /** Fixed variables for the command (templated). */
  setEnv: z.record(envName, z.string()).default({}),
  /** Working directory; default a fresh directory per run under `<dataDir>/runs/<runId>`. */
  cwd: z.string().min(1).optional(),
  timeoutSeconds: seconds.default(300),
  /** Exit codes that mean "try again" (retried like a timeout). */
  retryExitCodes: z.array(z.number().int()).default([]),
  /** Text written to the command's stdin (templated). */
  stdin: z.string().optional(),
});

export const mcpServerSchema = z.discriminatedUnion("transport", [
  z.strictObject({
    transport: z.literal("stdio"),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    /** Names of the bridge's environment variables the server may see. */
    env: z.array(envName).default([]),
    setEnv: z.record(envName, z.string()).default({}),
    cwd: z.string().min(1).optional(),
  }),
  z.strictObject({
    transport: z.literal("http"),
    url: z.string().url(),
    headers: z.record(z.string(), z.string()).default({}),
  }),
]);

/** Call one tool of an MCP server (stdio or Streamable HTTP). */
export const mcpRunSchema = z.strictObject({
  kind: z.literal("mcp"),
  server: mcpServerSchema,
  tool: z.string().min(1),
  /** The tool's arguments (templated); default: the system's inputs as they are. */
  arguments: z.record(z.string(), z.unknown()).optional(),
  timeoutSeconds: seconds.default(120),
});

/** Ask any configured clawbridge model; its answer is streamed. */
export const modelRunSchema = z.strictObject({
  kind: z.literal("model"),
  /** A model id from `models`. */
  model: z.string().min(1),
  /** The prompt (templated). */
  prompt: z.string().min(1),
  system: z.string().optional(),
  timeoutSeconds: seconds.optional(),
});

/**
 * Wait for a person's decision: the run stops `waiting` (src/workflows/systems/runner.ts) until it
 * is approved (the step's output is `{approved: true, by, at, note?}`) or rejected (the run ends
 * `rejected`), in chat, over HTTP or on the dashboard.
 */
export const approvalRunSchema = z.strictObject({
  kind: z.literal("approval"),
  /** What is asked (templated). */
  question: z.string().min(1),
  /** The data shown with the question (templated); default the outputs of the steps it depends on. */
  show: z.unknown().optional(),
  /** Without a decision after this long, `onTimeout` applies. Default: it waits for ever. */
  timeoutSeconds: seconds.optional(),
  onTimeout: z.enum(["reject", "approve"]).default("reject"),
});

export const planStepSchema = z.strictObject({
  id,
  /** `webhook`, `command`, `mcp`, `model` or `approval` (then `with` is that kind's settings), or another system's id (then `with` is its inputs). */
  uses: z.string().min(1),
  with: z.record(z.string(), z.unknown()).default({}),
  dependsOn: z.array(id).default([]),
  /** Attempts after the first, for retryable failures only (timeouts, 5xx, `retryExitCodes`). */
  retry: z.number().int().min(0).max(3).default(3),
});

/** Steps with dependencies; independent steps run in parallel, up to `maxParallel`. */
export const planRunSchema = z.strictObject({
  kind: z.literal("plan"),
  steps: z.array(planStepSchema).min(1, "a plan needs at least one step"),
  maxParallel: z.number().int().positive().default(4),
  /** The step whose output is the run's output (default: the last step listed). */
  output: id.optional(),
});

export const runSpecSchema = z.discriminatedUnion("kind", [
  webhookRunSchema,
  commandRunSchema,
  mcpRunSchema,
  modelRunSchema,
  approvalRunSchema,
  planRunSchema,
]);

/**
 * A schedule: run the system at the times of a cron expression (5 fields, or 6 with seconds first),
 * in `timezone` (an IANA name; default the bridge's), with these inputs. src/workflows/triggers runs it.
 */
export const triggerSchema = z.strictObject({
  cron: z.string().min(1),
  timezone: z.string().min(1).optional(),
  inputs: z.record(z.string(), z.unknown()).default({}),
  /** A time missed while the bridge was down is run once at start (false: skipped). */
  catchUp: z.boolean().default(true),
  /** POST each fired run's outcome here when it ends (sent like a webhook step). */
  notify: z.strictObject({ url: z.string().min(1), headers: z.record(z.string(), z.string()).default({}) }).optional(),
  /** The chat conversation that made it (set by the builder): told of each run on its next turn. */
  conversation: z.string().min(1).optional(),
});

/** `POST /v1/hooks/<id>` may start it (signed with its own secret); `perMinute`: requests a minute allowed. */
export const hookSchema = z.union([
  z.boolean(),
  z.strictObject({ perMinute: z.number().int().positive().max(10_000).default(60) }),
]);

export const systemSchema = z.strictObject({
  id,
  name: z.string().min(1).optional(),
  description: z.string().default(""),
  /** Messages that should run this system (for the classifier and the keyword fallback). */
  examples: z.array(z.string().min(1)).default([]),
  /** Extra words that point at this system (the fallback matcher, on word boundaries). */
  keywords: z.array(z.string().min(1)).default([]),
  /**
   * JSON Schema of an object. `fromTool` (mcp systems): the MCP tool's own input schema.
   * Default: no inputs.
   */
  inputs: z.union([z.literal("fromTool"), z.record(z.string(), z.unknown())]).optional(),
  /** Whether running it changes something outside the bridge. Default: inferred (MCP `destructiveHint`, else true for webhook/command). */
  sideEffects: z.boolean().optional(),
  /** `auto`: ask first when it has side effects or the match is not sure; `always`; `never`. */
  confirm: z.enum(["auto", "always", "never"]).default("auto"),
  /** false: kept, runnable by id (HTTP, CLI, another system), but the router does not offer it. */
  enabled: z.boolean().default(true),
  /** Schedules (src/workflows/triggers). */
  triggers: z.array(triggerSchema).default([]),
  /** An inbound hook (src/workflows/triggers/hooks.ts). */
  hook: hookSchema.default(false),
  run: runSpecSchema,
});

export type WebhookRun = z.infer<typeof webhookRunSchema>;
export type CommandRun = z.infer<typeof commandRunSchema>;
export type McpServer = z.infer<typeof mcpServerSchema>;
export type McpRun = z.infer<typeof mcpRunSchema>;
export type ModelRun = z.infer<typeof modelRunSchema>;
export type ApprovalRun = z.infer<typeof approvalRunSchema>;
export type PlanStep = z.infer<typeof planStepSchema>;
export type PlanRun = z.infer<typeof planRunSchema>;
export type RunSpec = z.infer<typeof runSpecSchema>;
export type Trigger = z.infer<typeof triggerSchema>;
export type SystemInput = z.input<typeof systemSchema>;
export type SystemFile = z.infer<typeof systemSchema>;
export type LeafKind = "webhook" | "command" | "mcp" | "model" | "approval";
export const LEAF_KINDS: readonly LeafKind[] = ["webhook", "command", "mcp", "model", "approval"];
/** Whether a plan step's `uses` is a kind (else it names a system). */
export const isLeafKind = (uses: string): uses is LeafKind => (LEAF_KINDS as readonly string[]).includes(uses);
