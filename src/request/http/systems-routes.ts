/**
 * Systems and runs over HTTP, behind the same bearer keys as every `/v1/*` route:
 *   GET  /v1/systems                 the systems this bridge can run
 *   GET  /v1/systems/:id             one, with its input schema, schedules (next and last run) and hook
 *   POST /v1/systems/:id/runs        {inputs, wait?, version?, dryRun?, conversation?} → 202 with the run (inputs
 *                                    checked: 400 names what is missing or wrong; `dryRun: true`, a test run;
 *                                    `version`: run that version of the system, 404 when it has none such)
 *   /v1/systems/:id/versions…, POST /v1/systems/:id/rollback   its versions (versions-routes.ts)
 *   GET  /v1/runs[?status&system&conversation&limit]
 *   GET  /v1/runs/:id
 *   POST /v1/runs/:id/pause|resume|cancel
 *   POST /v1/runs/:id/approve|reject  {note?} → the decision on the approval a `waiting` run waits on (409 when it waits on none)
 * A system and a run are sent as src/wire/runs.ts declares them (`SystemRow`, `RunRow`: the
 * dashboard reads the same declarations). Errors are OpenAI-shaped (`{"error":{message,type,code,param}}`).
 * A body field a route does not know is a 400 naming it (`param`), never ignored: a run asked for
 * with a misspelt or unsupported option does not run at all.
 */
import type { FastifyInstance } from "fastify";
import { ApiError } from "../chat-api/errors.js";
import { sendApiError, unknownField } from "./reply.js";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";
import type { RunRecord } from "../../workflows/systems/db.js";
import type { RunError } from "../../workflows/systems/runner.js";
import type { LoadedSystem } from "../../workflows/systems/types.js";
import type { Schedules } from "../../workflows/triggers/schedule.js";
import type { LeftOutFile } from "../../workflows/systems/system-files.js";
import { registerVersionRoutes } from "./versions-routes.js";
import type { LeftOutRow, RunRow, RunStatus, SystemList, SystemRow } from "../../wire/runs.js";

const BODY_LIMIT = 1024 * 1024;
/** The fields of a run request (`version`: the system version to run). */
const RUN_FIELDS = ["inputs", "wait", "version", "dryRun", "conversation"] as const;

/** A 400 when a field of a run request has the wrong type. */
function runFieldProblem(body: Record<string, unknown>): ApiError | undefined {
  const bad = (field: string, what: string) =>
    new ApiError(400, "invalid_request_error", "invalid_field", `\`${field}\` must be ${what}.`, field);
  if (body.wait !== undefined && typeof body.wait !== "boolean") return bad("wait", "true or false");
  if (body.dryRun !== undefined && typeof body.dryRun !== "boolean") return bad("dryRun", "true or false");
  if (body.version !== undefined && !(Number.isInteger(body.version) && (body.version as number) > 0))
    return bad("version", "a positive integer (a version number of the system)");
  if (body.conversation !== undefined && typeof body.conversation !== "string") return bad("conversation", "a string");
  return undefined;
}
const STATUSES: RunStatus[] = [
  "pending",
  "running",
  "paused",
  "waiting",
  "completed",
  "failed",
  "rejected",
  "cancelled",
  "interrupted",
];

export async function systemJson(
  s: LoadedSystem,
  schedules?: Pick<Schedules, "rows">,
  version?: number,
): Promise<SystemRow> {
  return {
    id: s.id,
    object: "system",
    name: s.name,
    description: s.description,
    kind: s.run.kind,
    examples: s.examples,
    inputs: s.inputs,
    side_effects: s.sideEffects,
    confirm: s.confirm,
    source: s.source,
    triggers: (await schedules?.rows(s.id)) ?? [],
    hook: s.hook ? { path: `/v1/hooks/${s.id}`, per_minute: s.hook.perMinute } : null,
    version: version ?? null,
  };
}

/** A file left out of the library (`left_out` of `GET /v1/systems`, `systems.left_out` of `/health`). */
export function leftOutJson(l: LeftOutFile): LeftOutRow {
  return { file: l.file, id: l.id ?? null, problems: l.problems.map((p) => `${p.key}: ${p.message}`) };
}

export function runJson(r: RunRecord): RunRow {
  return {
    id: r.id,
    object: "run",
    system: r.system,
    status: r.status,
    inputs: r.inputs,
    output: r.output ?? null,
    error: r.error ?? null,
    failed_step: r.failedStep ?? null,
    conversation: r.conversation ?? null,
    origin: r.origin,
    trigger: r.trigger ?? null,
    version: r.version ?? null,
    created_at: r.createdAt,
    started_at: r.startedAt ?? null,
    ended_at: r.endedAt ?? null,
    test: r.test,
    steps: r.steps.map((s) => ({
      id: s.id,
      status: s.status,
      attempts: s.attempts,
      started_at: s.startedAt ?? null,
      ended_at: s.endedAt ?? null,
      output: s.output ?? null,
      error: s.error ?? null,
    })),
    approval: r.approval
      ? {
          step: r.approval.step,
          question: r.approval.question,
          data: r.approval.shown ?? null,
          created_at: r.approval.createdAt,
          deadline: r.approval.deadline ?? null,
          on_timeout: r.approval.onTimeout,
        }
      : null,
  };
}

// Type-only imports and a name check: the systems code is loaded only when systems are configured.
const isRunError = (err: unknown): err is RunError => err instanceof Error && err.name === "RunError";

const runError = (err: unknown): ApiError => {
  if (isRunError(err)) {
    if (err.code === "not_found") return new ApiError(404, "not_found_error", "run_not_found", err.message);
    if (err.code === "unknown_system") return new ApiError(404, "not_found_error", "system_not_found", err.message);
    if (err.code === "unknown_version")
      return new ApiError(404, "not_found_error", "version_not_found", err.message, "version");
    return new ApiError(409, "invalid_request_error", "run_conflict", err.message);
  }
  throw err;
};

export function registerSystemsRoutes(app: FastifyInstance, systems: RouterRuntimeHandle | undefined): void {
  const noSystems = () =>
    new ApiError(
      404,
      "not_found_error",
      "no_systems",
      "No systems are configured on this bridge (add `systems:` to the config or files to <dataDir>/systems/).",
    );
  const sendError = sendApiError;

  app.register(async (scope) => {
    // These routes read JSON bodies (the rest of the app reads none).
    scope.addContentTypeParser("application/json", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_req, body, done) => {
      if (body === "") return done(null, {});
      try {
        done(null, JSON.parse(body as string));
      } catch {
        done(new ApiError(400, "invalid_request_error", "invalid_json", "The body is not valid JSON."), undefined);
      }
    });

    scope.get(
      "/v1/systems",
      async (): Promise<SystemList> => ({
        object: "list",
        data: await Promise.all(
          (systems?.library.systems ?? []).map(async (s) =>
            systemJson(s, systems?.triggers.schedules, (await systems?.runs.versions.latest(s.id))?.number),
          ),
        ),
        left_out: (systems?.library.leftOut ?? []).map(leftOutJson),
      }),
    );

    scope.get<{ Params: { id: string } }>("/v1/systems/:id", async (req, reply) => {
      const s = systems?.library.get(req.params.id);
      if (!s)
        return sendError(
          reply,
          systems
            ? new ApiError(404, "not_found_error", "system_not_found", `No system "${req.params.id}".`)
            : noSystems(),
        );
      return systemJson(s, systems?.triggers.schedules, (await systems!.runs.versions.latest(s.id))?.number);
    });

    scope.post<{ Params: { id: string }; Body: unknown }>("/v1/systems/:id/runs", async (req, reply) => {
      if (!systems) return sendError(reply, noSystems());
      const s = systems.library.get(req.params.id);
      if (!s)
        return sendError(
          reply,
          new ApiError(404, "not_found_error", "system_not_found", `No system "${req.params.id}".`),
        );
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (typeof body !== "object" || Array.isArray(body))
        return sendError(
          reply,
          new ApiError(400, "invalid_request_error", "invalid_body", 'Send a JSON object: {"inputs": {...}}.'),
        );
      const problem = unknownField(body, RUN_FIELDS) ?? runFieldProblem(body);
      if (problem) return sendError(reply, problem);
      const inputs = body.inputs ?? {};
      if (!inputs || typeof inputs !== "object" || Array.isArray(inputs))
        return sendError(
          reply,
          new ApiError(400, "invalid_request_error", "invalid_inputs", "`inputs` must be an object.", "inputs"),
        );
      const version = body.version as number | undefined;
      // A chosen version takes the inputs of that version.
      const chosen = version === undefined ? undefined : await systems.runs.versions.get(s.id, version);
      if (version !== undefined && !chosen)
        return sendError(
          reply,
          new ApiError(
            404,
            "not_found_error",
            "version_not_found",
            `System ${s.id} has no version ${version} (GET /v1/systems/${s.id}/versions lists them).`,
            "version",
          ),
        );
      const { checkInputs, incompleteText } = await import("../../workflows/systems/inputs.js");
      const check = checkInputs((chosen?.compiled ?? s).inputs, inputs as Record<string, unknown>);
      if (!check.complete) {
        const why = incompleteText(check);
        return sendError(
          reply,
          new ApiError(
            400,
            "invalid_request_error",
            "invalid_inputs",
            `The inputs of ${s.id} are not complete: ${why.text}.`,
            why.input ? `inputs.${why.input}` : "inputs",
          ),
        );
      }
      let rec: RunRecord;
      try {
        rec = await systems.runs.start({
          system: s.id,
          inputs: check.values,
          origin: "http",
          conversation: typeof body.conversation === "string" ? body.conversation : undefined,
          test: body.dryRun === true,
          version: chosen?.number,
        });
      } catch (err) {
        return sendError(reply, runError(err));
      }
      if (body.wait === true) {
        const ended = await systems.runs.wait(rec.id);
        return reply.code(200).send(runJson(ended));
      }
      return reply.code(202).send(runJson(rec));
    });

    scope.get<{ Querystring: Record<string, string | undefined> }>("/v1/runs", async (req, reply) => {
      if (!systems) return { object: "list", data: [] };
      const q = req.query;
      if (q.status && !STATUSES.includes(q.status as RunStatus))
        return sendError(
          reply,
          new ApiError(
            400,
            "invalid_request_error",
            "invalid_status",
            `status must be one of ${STATUSES.join(", ")}.`,
            "status",
          ),
        );
      const limit = q.limit === undefined ? 50 : Number(q.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        return sendError(
          reply,
          new ApiError(
            400,
            "invalid_request_error",
            "invalid_limit",
            "limit must be an integer from 1 to 1000.",
            "limit",
          ),
        );
      const list = await systems.runs.store.list({
        status: q.status as RunStatus | undefined,
        system: q.system,
        conversation: q.conversation,
        limit,
      });
      return { object: "list", data: list.map(runJson) };
    });

    scope.get<{ Params: { id: string } }>("/v1/runs/:id", async (req, reply) => {
      const r = await systems?.runs.get(req.params.id);
      if (!r)
        return sendError(reply, new ApiError(404, "not_found_error", "run_not_found", `No run "${req.params.id}".`));
      return runJson(r);
    });

    registerVersionRoutes(scope, systems);

    for (const action of ["pause", "resume", "cancel"] as const) {
      scope.post<{ Params: { id: string }; Body: unknown }>(`/v1/runs/:id/${action}`, async (req, reply) => {
        if (!systems) return sendError(reply, noSystems());
        const body = req.body ?? {};
        const problem =
          typeof body !== "object" || Array.isArray(body)
            ? new ApiError(400, "invalid_request_error", "invalid_body", "This route takes no body (or `{}`).")
            : unknownField(body as Record<string, unknown>, []);
        if (problem) return sendError(reply, problem);
        try {
          const r =
            action === "pause"
              ? await systems.runs.pause(req.params.id)
              : action === "cancel"
                ? await systems.runs.cancel(req.params.id)
                : await systems.runs.resume(req.params.id);
          return runJson(r);
        } catch (err) {
          return sendError(reply, runError(err));
        }
      });
    }

    for (const action of ["approve", "reject"] as const) {
      scope.post<{ Params: { id: string }; Body: unknown }>(`/v1/runs/:id/${action}`, async (req, reply) => {
        if (!systems) return sendError(reply, noSystems());
        const body = req.body ?? {};
        const fields = typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
        if (!fields)
          return sendError(
            reply,
            new ApiError(
              400,
              "invalid_request_error",
              "invalid_body",
              'Send no body, or a JSON object {"note": "<why>"}.',
            ),
          );
        const problem =
          unknownField(fields, ["note"]) ??
          (fields.note !== undefined && typeof fields.note !== "string"
            ? new ApiError(400, "invalid_request_error", "invalid_field", "`note` must be a string.", "note")
            : undefined);
        if (problem) return sendError(reply, problem);
        try {
          const r = await systems.runs.decide(req.params.id, {
            approve: action === "approve",
            by: "http",
            note: typeof fields.note === "string" && fields.note.trim() ? fields.note.trim() : undefined,
          });
          return runJson(r);
        } catch (err) {
          return sendError(reply, runError(err));
        }
      });
    }
  });
}

/** Whether a request goes to one of these routes (they read a body; the HTTP front lets them). */
export function isSystemsRoute(method: string | undefined, url: string | undefined): boolean {
  return method === "POST" && !!url && (url.startsWith("/v1/systems/") || url.startsWith("/v1/runs/"));
}
