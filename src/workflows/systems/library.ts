/**
 * The systems library: every system from the config's `systems:` list and from one YAML file per
 * system in `<dataDir>/systems/`, loaded and checked once at start-up. Each problem names where it
 * is (the config or the file) and the offending key, so `clawbridge systems validate` and the
 * start-up error can say exactly what to fix. What is checked beyond the shape (schema.ts):
 * - ids are unique across the config and the files (a file's id defaults to its name);
 * - `inputs` is a JSON Schema of an object that compiles; `fromTool` only on an mcp system;
 * - every `${inputs.x}` names a declared input, every `${steps.a.output}` a step the step depends
 *   on (directly or not), and templates are well formed;
 * - plan steps: unique ids, known `dependsOn`, no cycle (src/workflows/engine/graph.ts), `uses` a
 *   kind (its settings valid) or a known system (no system that ends up using itself);
 * - webhook URLs keep inputs out of the host; a command's program is fixed;
 * - `model` names a configured model that is not a router;
 * - `${secrets.NAME}` only where a secret goes to its destination and nowhere else (SECRET_FIELDS:
 *   webhook headers and body fields, a command's `setEnv`, an MCP server's `setEnv` and `headers`;
 *   never a URL, an argument, a prompt or another system's inputs), naming a secret that is set.
 * - a schedule's cron expression and time zone (cron.ts), its inputs against the input schema,
 *   its `notify` URL like a webhook's.
 * Side effects are inferred when not set: an MCP tool's `destructiveHint` (read-only tools have
 * none), webhooks and commands have them, models do not, a plan has them when a step has.
 */
import type { z } from "zod";
import type { McpToolInfo as ToolFacts } from "./executors/mcp.js";
import { checkCommand } from "./executors/command.js";
import { checkWebhookUrl } from "./executors/webhook.js";
import { checkInputs, incompleteText, schemaProblem } from "./inputs.js";
import { cronProblem } from "./cron.js";
import { compileRun, type CompiledPlan, type LeafSpec } from "./plan.js";
import {
  isLeafKind,
  LEAF_KINDS,
  type LeafKind,
  runSpecSchema,
  systemSchema,
  type McpServer,
  type SystemFile,
} from "./schema.js";
import { refsIn, TemplateError } from "../engine/template.js";
import { checkGraph, type Graph, useProblem } from "../engine/graph.js";
import type { LoadedSystem } from "./types.js";
import type { InputSchema } from "../../wire/runs.js";
import { whereToSet } from "../../core/secrets/store.js";
import { type LeftOutFile, type LibraryProblem, type Raw, readDir } from "./system-files.js";

// The library's problems, as its callers name them.
export type { LibraryProblem } from "./system-files.js";

/** What start-up reads of an MCP tool (executors/mcp.ts `describeMcpTool`). */
export type { ToolFacts };

export interface LoadOptions {
  /** The config file's raw `systems:` entries. */
  configSystems: unknown[];
  /** `<dataDir>/systems`; missing is fine. */
  dir?: string;
  /** Configured model ids, and whether each is served by a router (a model step may not call one). */
  models: ReadonlyMap<string, { router: boolean }>;
  /** Looks an MCP tool up (for `inputs: fromTool` and side effects); omitted: no MCP server is asked. */
  describeTool?: (server: McpServer, tool: string) => Promise<ToolFacts>;
  /**
   * Systems from elsewhere checked with the rest (a canvas being deployed by the builder); one
   * replaces a file of `dir` with the same id (the system being deployed again).
   */
  candidates?: Array<{ where: string; value: unknown }>;
  /** The secrets `${secrets.NAME}` may name (src/core/secrets/store.ts); omitted: none. */
  secrets?: { has(name: string): boolean; file: string };
}

/** Where each kind takes `${secrets.NAME}`: its settings' fields (`server.x`: a field of the MCP server). */
const SECRET_FIELDS: Record<LeafKind, readonly string[]> = {
  webhook: ["headers", "body"],
  command: ["setEnv"],
  mcp: ["server.setEnv", "server.headers"],
  model: [],
  approval: [],
};
const SECRET_PLACES =
  "webhook headers and body fields, a command's setEnv, an MCP server's setEnv and headers, a schedule's notify headers";

export class SystemsLibrary {
  private byId: Map<string, LoadedSystem>;
  private plans = new Map<string, CompiledPlan>();
  private list: LoadedSystem[];
  private skipped: LeftOutFile[];

  constructor(systems: LoadedSystem[], leftOut: LeftOutFile[] = []) {
    this.list = systems;
    this.byId = new Map(systems.map((s) => [s.id, s]));
    this.skipped = leftOut;
  }

  get systems(): LoadedSystem[] {
    return this.list;
  }

  /** The files of `<dataDir>/systems/` left out for their problems (the rest loaded without them). */
  get leftOut(): LeftOutFile[] {
    return this.skipped;
  }

  /**
   * Take another library's systems (a reload after the builder deployed or removed one). Holders
   * of this library see the new list at once; a run already started keeps the plan it compiled.
   */
  replace(next: SystemsLibrary): void {
    this.list = next.systems;
    this.byId = new Map(this.list.map((s) => [s.id, s]));
    this.skipped = next.leftOut;
    this.plans = new Map();
  }

  get(id: string): LoadedSystem | undefined {
    return this.byId.get(id);
  }

  /** The system's run as a plan (a single-kind system is one step). */
  plan(id: string): CompiledPlan {
    let p = this.plans.get(id);
    if (!p) {
      const s = this.byId.get(id);
      if (!s) throw new Error(`no system ${id}`);
      p = compileRun(s.run);
      this.plans.set(id, p);
    }
    return p;
  }
}

const EMPTY_INPUTS: InputSchema = { type: "object", properties: {} };

function keyOf(prefix: string, p: ReadonlyArray<PropertyKey>): string {
  let k = prefix;
  for (const part of p) k += typeof part === "number" ? `[${part}]` : `${k ? "." : ""}${String(part)}`;
  return k || "(top)";
}

function zodProblems(where: string, prefix: string, error: z.ZodError): LibraryProblem[] {
  return error.issues.map((i) => ({ where, key: keyOf(prefix, i.path), message: i.message }));
}

/**
 * Load and check every system; a system with a problem is left out, nothing is thrown. `problems`
 * are those of the config's own systems and of the candidates (they stop a start, or a deploy);
 * the problems of files in `dir` are on `library.leftOut`, one entry per file left out — the
 * library loads without them.
 */
export async function loadSystems(opts: LoadOptions): Promise<{ library: SystemsLibrary; problems: LibraryProblem[] }> {
  const problems: LibraryProblem[] = [];
  /** The paths of `dir`'s files (and `dir` itself when it cannot be listed): their problems only leave them out. */
  const files = new Set<string>();
  const raws: Raw[] = opts.configSystems.map((value, i) => ({ where: "config", prefix: `systems[${i}]`, value }));
  const candidates = opts.candidates ?? [];
  const replaced = new Set(
    candidates
      .map((c) => (c.value as { id?: unknown } | null)?.id)
      .filter((id): id is string => typeof id === "string"),
  );
  raws.push(
    ...readDir(opts.dir, problems, files).filter((r) => !replaced.has((r.value as { id?: unknown }).id as string)),
  );
  raws.push(...candidates.map((c) => ({ where: c.where, prefix: "", value: c.value })));

  const parsed: Array<{ raw: Raw; sys: SystemFile; badSteps: Set<number> }> = [];
  const seen = new Map<string, string>();
  /** Ids of systems refused for their shape (a plan step naming one is told so, not "unknown"). */
  const misshapen = new Set<string>();
  for (const raw of raws) {
    const res = systemSchema.safeParse(raw.value);
    if (!res.success) {
      problems.push(...zodProblems(raw.where, raw.prefix, res.error));
      const rawId = (raw.value as { id?: unknown } | null)?.id;
      if (typeof rawId === "string") misshapen.add(rawId);
      continue;
    }
    const sys = res.data;
    const idProblem = (message: string) => problems.push({ where: raw.where, key: keyOf(raw.prefix, ["id"]), message });
    if (isLeafKind(sys.id)) {
      idProblem(`"${sys.id}" is the name of a run kind; a plan step could never use this system. Choose another id`);
      continue;
    }
    const other = seen.get(sys.id);
    if (other) {
      idProblem(`system id "${sys.id}" is already used (${other})`);
      continue;
    }
    seen.set(sys.id, raw.where);
    // Leaf steps: validate (and default) each kind's settings now, so the runner gets complete specs.
    const badSteps = new Set<number>();
    if (sys.run.kind === "plan") {
      sys.run.steps.forEach((step, i) => {
        if (!isLeafKind(step.uses)) return;
        const r = runSpecSchema.safeParse({ ...step.with, kind: step.uses });
        if (!r.success) {
          problems.push(...zodProblems(raw.where, keyOf(raw.prefix, ["run", "steps", i, "with"]), r.error));
          badSteps.add(i);
        } else {
          const { kind: _kind, ...settings } = r.data as LeafSpec;
          step.with = settings;
        }
      });
    }
    parsed.push({ raw, sys, badSteps });
  }
  const ids = new Set(parsed.map((p) => p.sys.id));

  const loaded: LoadedSystem[] = [];
  /** Key prefix of each loaded system (`systems[2]`, or "" for a file), for the problems below. */
  const prefixes = new Map<string, string>();
  /** Systems whose side effects were inferred, not configured. */
  const inferred = new Set<string>();
  for (const { raw, sys, badSteps } of parsed) {
    const before = problems.length;
    const at = (...p: PropertyKey[]) => keyOf(raw.prefix, p);
    const report = (key: string, message: string) => problems.push({ where: raw.where, key, message });

    // Inputs.
    let inputs: InputSchema = EMPTY_INPUTS;
    let tool: ToolFacts | undefined;
    if (sys.run.kind === "mcp" && opts.describeTool && (sys.inputs === "fromTool" || sys.sideEffects === undefined)) {
      try {
        tool = await opts.describeTool(sys.run.server, sys.run.tool);
      } catch (err) {
        if (sys.inputs === "fromTool")
          report(at("inputs"), `cannot read the input schema of MCP tool "${sys.run.tool}": ${(err as Error).message}`);
      }
    }
    if (sys.inputs === "fromTool") {
      if (sys.run.kind !== "mcp") report(at("inputs"), "`fromTool` is only for systems with run.kind mcp");
      else if (!opts.describeTool) report(at("inputs"), "`fromTool` needs the MCP server at start-up");
      else if (tool) {
        const problem = schemaProblem(tool.inputSchema);
        if (problem) report(at("inputs"), `the tool's input schema: ${problem}`);
        else inputs = normaliseSchema(tool.inputSchema);
      }
    } else if (sys.inputs !== undefined) {
      const problem = schemaProblem(sys.inputs);
      if (problem) report(at("inputs"), problem);
      else inputs = normaliseSchema(sys.inputs);
    }
    const declared = new Set(Object.keys(inputs.properties));
    const inputsKnown = sys.inputs !== "fromTool" || tool !== undefined;

    // Schedules.
    sys.triggers.forEach((t, i) => {
      const bad = cronProblem(t.cron, t.timezone);
      if (bad) report(at("triggers", i, bad.key), bad.message);
      if (t.notify) {
        const p = checkWebhookUrl(t.notify.url);
        if (p) report(at("triggers", i, "notify", "url"), p);
      }
      if (!inputsKnown) return;
      const unknown = Object.keys(t.inputs).filter((k) => !declared.has(k));
      if (unknown.length)
        report(
          at("triggers", i, "inputs"),
          `${unknown.join(", ")}: not a declared input (declared: ${[...declared].join(", ") || "none"})`,
        );
      const check = checkInputs(inputs, t.inputs);
      if (!check.complete)
        report(at("triggers", i, "inputs"), `the inputs are not complete: ${incompleteText(check).text}`);
    });

    // Templates and kind-specific checks.
    // Each string is checked on its own, so a problem names the exact key (`run.argv[1]`, `….with.body.text`).
    // `step`: the plan step whose settings these are, and its plan's graph.
    // `secretsOk`: the value is in one of SECRET_FIELDS.
    const checkRefs = (value: unknown, key: string, step?: { id: string; graph: Graph }, secretsOk = false): void => {
      if (Array.isArray(value)) return value.forEach((v, i) => checkRefs(v, `${key}[${i}]`, step, secretsOk));
      if (value && typeof value === "object") {
        for (const [k, v] of Object.entries(value)) checkRefs(v, `${key}.${k}`, step, secretsOk);
        return;
      }
      if (typeof value !== "string") return;
      let refs;
      try {
        refs = refsIn(value);
      } catch (err) {
        if (err instanceof TemplateError) return void report(key, err.message);
        throw err;
      }
      for (const r of refs) {
        if (r.kind === "secret") {
          if (!secretsOk)
            report(
              key,
              `\${secrets.${r.name}} is not allowed here: a secret may be used only in ${SECRET_PLACES} (never in a URL, an argument, a prompt or another system's inputs, where it would not be kept out of logs and records)`,
            );
          else if (!opts.secrets?.has(r.name))
            report(
              key,
              `\${secrets.${r.name}}: no secret "${r.name}" is set; ${whereToSet(r.name, opts.secrets?.file ?? "<dataDir>/secrets")}`,
            );
        }
        if (r.kind === "input" && inputsKnown && !declared.has(r.name))
          report(
            key,
            `\${inputs.${r.name}}: "${r.name}" is not a declared input (declared: ${[...declared].join(", ") || "none"})`,
          );
        if (r.kind !== "step") continue;
        const why = step ? useProblem(step.graph, step.id, r.step) : "is only for plan steps";
        if (why) report(key, `\${steps.${r.step}.output}${step ? ":" : ""} ${why}`);
      }
    };
    // A schedule's `notify` is sent like a webhook: its headers take secrets (a token for the receiving
    // service), its URL takes none.
    sys.triggers.forEach((t, i) => {
      if (!t.notify) return;
      checkRefs(t.notify.url, at("triggers", i, "notify", "url"));
      checkRefs(t.notify.headers, at("triggers", i, "notify", "headers"), undefined, true);
    });
    const checkLeaf = (spec: LeafSpec, key: (...p: PropertyKey[]) => string, step?: { id: string; graph: Graph }) => {
      const { kind: _kind, ...settings } = spec;
      const allowed = SECRET_FIELDS[spec.kind];
      for (const [field, v] of Object.entries(settings)) {
        if (field === "server" && v && typeof v === "object")
          for (const [sub, w] of Object.entries(v))
            checkRefs(w, key(field, sub), step, allowed.includes(`${field}.${sub}`));
        else checkRefs(v, key(field), step, allowed.includes(field));
      }
      if (spec.kind === "webhook") {
        const p = checkWebhookUrl(spec.url);
        if (p) report(key("url"), p);
      }
      if (spec.kind === "command") for (const p of checkCommand(spec)) report(key("argv"), p);
      if (spec.kind === "model") {
        const m = opts.models.get(spec.model);
        if (!m)
          report(key("model"), `no configured model "${spec.model}" (models: ${[...opts.models.keys()].join(", ")})`);
        else if (m.router)
          report(
            key("model"),
            `"${spec.model}" is a router model; a system step must name the model that does the work`,
          );
      }
    };

    if (sys.run.kind === "plan") {
      const steps = sys.run.steps;
      const graph = checkGraph(steps);
      for (const p of graph.problems)
        report(p.index === undefined ? at("run", "steps") : at("run", "steps", p.index, p.key), p.message);
      if (sys.run.output && !graph.ancestors.has(sys.run.output))
        report(at("run", "output"), `unknown step "${sys.run.output}" (steps: ${steps.map((s) => s.id).join(", ")})`);
      steps.forEach((s, i) => {
        const key = (...p: PropertyKey[]) => at("run", "steps", i, "with", ...p);
        if (isLeafKind(s.uses)) {
          if (!badSteps.has(i)) checkLeaf({ ...s.with, kind: s.uses } as LeafSpec, key, { id: s.id, graph });
        } else if (!ids.has(s.uses)) {
          if (misshapen.has(s.uses))
            report(at("run", "steps", i, "uses"), `system "${s.uses}" has problems of its own (see above)`);
          else
            report(
              at("run", "steps", i, "uses"),
              `"${s.uses}" is neither a kind (${LEAF_KINDS.join(", ")}) nor a known system`,
            );
        } else {
          checkRefs(s.with, key(), { id: s.id, graph });
        }
      });
    } else {
      checkLeaf(sys.run, (...p) => at("run", ...p));
    }

    if (problems.length > before || badSteps.size) continue;
    prefixes.set(sys.id, raw.prefix);
    if (sys.sideEffects === undefined) inferred.add(sys.id);
    loaded.push({
      id: sys.id,
      name: sys.name ?? sys.id,
      description: sys.description,
      examples: sys.examples,
      keywords: sys.keywords,
      inputs,
      sideEffects: sys.sideEffects ?? inferSideEffects(sys, tool),
      confirm: sys.confirm,
      enabled: sys.enabled,
      run: sys.run,
      triggers: sys.triggers,
      ...(sys.hook ? { hook: { perMinute: sys.hook === true ? 60 : sys.hook.perMinute } } : {}),
      source: raw.where,
    });
  }

  // Systems that use systems: no loop (every loop, one at a time), and nothing that uses a system
  // left out, directly or through others.
  const byId = new Map(loaded.map((s) => [s.id, s]));
  const usedBy = (s: LoadedSystem) =>
    s.run.kind === "plan" ? s.run.steps.map((st) => st.uses).filter((u) => !isLeafKind(u)) : [];
  for (let n = 0; n <= loaded.length; n++) {
    const loop = checkGraph(
      [...byId.values()].map((s) => ({ id: s.id, dependsOn: usedBy(s).filter((u) => byId.has(u)) })),
    ).cycles[0];
    if (!loop) break;
    // Named at its first member, and at each other member that is a file: each file left out says why.
    for (const [i, id] of [...new Set(loop)].entries()) {
      const s = byId.get(id)!;
      if (i === 0 || files.has(s.source))
        problems.push({
          where: s.source,
          key: keyOf(prefixes.get(id) ?? "", ["run", "steps"]),
          message: `systems use each other in a loop: ${loop.join(" → ")}`,
        });
    }
    for (const id of loop) byId.delete(id);
  }
  // A plan step that names a system left out for its own problems is reported too (until nothing changes).
  for (let changed = true, n = 0; changed && n <= loaded.length; n++) {
    changed = false;
    for (const s of [...byId.values()]) {
      if (s.run.kind !== "plan") continue;
      s.run.steps.forEach((st, i) => {
        if (!byId.has(s.id)) return;
        if (!isLeafKind(st.uses) && !byId.has(st.uses) && ids.has(st.uses)) {
          problems.push({
            where: s.source,
            key: keyOf(prefixes.get(s.id) ?? "", ["run", "steps", i, "uses"]),
            message: `system "${st.uses}" has problems of its own (see above)`,
          });
          byId.delete(s.id);
          changed = true;
        }
      });
    }
  }
  // A plan's inferred side effects include those of the systems its steps use (no loops are left).
  const effects = (s: LoadedSystem): boolean => {
    if (!inferred.has(s.id) || s.run.kind !== "plan") return s.sideEffects;
    inferred.delete(s.id);
    s.sideEffects = s.run.steps.some((st) => {
      if (isLeafKind(st.uses)) return st.uses !== "model" && st.uses !== "approval";
      const sub = byId.get(st.uses);
      return sub ? effects(sub) : true;
    });
    return s.sideEffects;
  };
  for (const s of byId.values()) effects(s);

  // The files' problems leave those files out; the rest are the caller's (the config, candidates).
  const leftOut = new Map<string, LeftOutFile>();
  const others: LibraryProblem[] = [];
  const idOf = new Map(raws.map((r) => [r.where, (r.value as { id?: unknown } | null)?.id]));
  for (const p of problems) {
    if (!files.has(p.where)) {
      others.push(p);
      continue;
    }
    let entry = leftOut.get(p.where);
    if (!entry) {
      const id = idOf.get(p.where);
      entry = { file: p.where, ...(typeof id === "string" ? { id } : {}), problems: [] };
      leftOut.set(p.where, entry);
    }
    entry.problems.push(p);
  }
  return {
    library: new SystemsLibrary(
      [...byId.values()],
      [...leftOut.values()].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0)),
    ),
    problems: others,
  };
}

function inferSideEffects(sys: SystemFile, tool: ToolFacts | undefined): boolean {
  switch (sys.run.kind) {
    case "model":
    case "approval":
      return false;
    case "mcp":
      // MCP: a tool is destructive unless it says it is read-only or not destructive.
      if (!tool) return true;
      if (tool.readOnly) return false;
      return tool.destructive ?? true;
    default:
      // A plan's are worked out once the systems its steps use are known (loadSystems).
      return true;
  }
}

function normaliseSchema(schema: Record<string, unknown>): InputSchema {
  const properties = (
    schema.properties && typeof schema.properties === "object" ? schema.properties : {}
  ) as InputSchema["properties"];
  return { ...schema, type: "object", properties };
}
