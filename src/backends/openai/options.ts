/**
 * The options of an OpenAI-compatible upstream and what the config needs of the type (its session
 * mode): the light half of the backend, read by the config loader without loading ./backend.ts
 * (undici, the translator, the tool-call scanners).
 */
import { z } from "zod";
import { compatOverrideSchema } from "./compat.js";
import type { BackendDescriptor } from "../module.js";

export const openaiOptionsSchema = z.strictObject({
  /** Upstream API root including `/v1`, e.g. `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:11434/v1` (Ollama). */
  baseUrl: z.url({ protocol: /^https?$/, error: "baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1" }),
  /** Sent as `Authorization: Bearer <apiKey>`. Never logged. */
  apiKey: z.string().min(1).optional(),
  /** Extra request headers. */
  headers: z.record(z.string(), z.string()).default({}),
  /** Whole request, from sending to the last byte. */
  timeoutSeconds: z.number().positive().default(300),
  /** TCP (and TLS) connect. */
  connectTimeoutSeconds: z.number().positive().default(10),
  /** From sending the request to the first body byte (prompt processing happens here). */
  firstByteTimeoutSeconds: z.number().positive().default(120),
  /** Longest silence between two body chunks once the answer has started. */
  idleTimeoutSeconds: z.number().positive().default(60),
  /** Tool calls per reply; more are dropped (and the upstream request is stopped) to end runaway loops. */
  maxToolCalls: z.number().int().positive().default(20),
  /** Recognise tool calls a model wrote as text (when the request offered tools). */
  extractToolCalls: z.boolean().default(true),
  /** Compat rules on top of the local-server defaults (see ./compat.ts). */
  compat: compatOverrideSchema.default({}),
  /** Per upstream model name (the name the backend is given): compat rules on top of `compat`. */
  modelCompat: z.record(z.string(), compatOverrideSchema).default({}),
  /** Object deep-merged into every request body, e.g. `{"options":{"num_ctx":32768}}`. Same as `compat.extraBody`. */
  extraBody: z.record(z.string(), z.unknown()).default({}),
  /** Most parallel connections to the upstream. */
  maxConnections: z.number().int().positive().default(32),
  /** Ask the upstream for a stream only when the client streams (default), or always. */
  streamUpstream: z.enum(["when-client-streams", "always"]).default("when-client-streams"),
  /** Timeout of the `GET <baseUrl>/models` health check. */
  healthTimeoutSeconds: z.number().positive().default(5),
});
export type OpenAIBackendOptions = z.infer<typeof openaiOptionsSchema>;

export const openaiDescriptor: BackendDescriptor<OpenAIBackendOptions> = {
  type: "openai",
  schema: openaiOptionsSchema as unknown as z.ZodType<OpenAIBackendOptions>,
  defaultSessionMode: "passthrough",
  sessionModes: ["passthrough"],
};
