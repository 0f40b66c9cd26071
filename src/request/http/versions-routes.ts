/**
 * A system's versions over HTTP (src/workflows/systems/versions.ts), registered by systems-routes.ts
 * in its scope (same bearer keys, same JSON body parser):
 *   GET  /v1/systems/:id/versions                 the list (number, created_at, source, by, note, hash)
 *   GET  /v1/systems/:id/versions/diff?from=&to=  what changed, key by key (plan steps by id)
 *   GET  /v1/systems/:id/versions/:n              one, with its definition, settings, canvas and sandbox files' hashes
 *   POST /v1/systems/:id/rollback {version}       the system goes back to that version, as a new version
 *                                                 (409 for a system of the config file or a person's own file, with what to do)
 * Sent as src/wire/runs.ts declares them. Errors are OpenAI-shaped.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";
import type { SystemVersion } from "../../workflows/systems/versions.js";
import type { SystemVersionDetail, SystemVersionRow, VersionDiffRow } from "../../wire/runs.js";
import { ApiError } from "../chat-api/errors.js";
import { sendApiError, unknownField } from "./reply.js";

function versionRow(v: SystemVersion): SystemVersionRow {
  return {
    object: "system.version",
    system: v.system,
    number: v.number,
    created_at: v.createdAt,
    source: v.source,
    by: v.by,
    note: v.note,
    hash: v.hash,
  };
}

function versionDetail(v: SystemVersion): SystemVersionDetail {
  const c = v.compiled;
  return {
    ...versionRow(v),
    definition: v.definition,
    settings: {
      name: c.name,
      description: c.description,
      inputs: c.inputs,
      side_effects: c.sideEffects,
      confirm: c.confirm,
      enabled: c.enabled,
    },
    canvas: v.canvas,
    files: v.files,
  };
}

const notFound = (code: string, message: string, param?: string) =>
  new ApiError(404, "not_found_error", code, message, param ?? null);

/** A version number from a path or query (`param` names it in the error), or the error. */
function numberOf(raw: unknown, param: string): number | ApiError {
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return Number.isInteger(n) && n >= 1
    ? n
    : new ApiError(
        400,
        "invalid_request_error",
        "invalid_version",
        `\`${param}\` must be a version number (1, 2, …).`,
        param,
      );
}

export function registerVersionRoutes(scope: FastifyInstance, systems: RouterRuntimeHandle | undefined): void {
  /** The system's versions, or an error sent. */
  const versionsOf = (id: string, reply: FastifyReply) => {
    if (!systems?.library.get(id)) {
      sendApiError(reply, notFound("system_not_found", `No system "${id}".`));
      return undefined;
    }
    return systems.runs.versions;
  };
  const one = async (
    id: string,
    raw: unknown,
    param: string,
    reply: FastifyReply,
  ): Promise<SystemVersion | undefined> => {
    const store = versionsOf(id, reply);
    if (!store) return undefined;
    const n = numberOf(raw, param);
    if (n instanceof ApiError) return void sendApiError(reply, n);
    const v = await store.get(id, n);
    if (!v) {
      const last = (await store.latest(id))?.number;
      sendApiError(
        reply,
        notFound(
          "version_not_found",
          `System ${id} has no version ${n} (its versions: ${last ? `1 to ${last}` : "none yet"}).`,
          param,
        ),
      );
    }
    return v;
  };

  scope.get<{ Params: { id: string } }>("/v1/systems/:id/versions", async (req, reply) => {
    const store = versionsOf(req.params.id, reply);
    if (!store) return reply;
    return { object: "list", data: (await store.list(req.params.id)).map(versionRow) };
  });

  scope.get<{ Params: { id: string }; Querystring: { from?: string; to?: string } }>(
    "/v1/systems/:id/versions/diff",
    async (req, reply) => {
      const a = await one(req.params.id, req.query.from, "from", reply);
      if (!a) return reply;
      const b = await one(req.params.id, req.query.to, "to", reply);
      if (!b) return reply;
      const { diffVersions } = await import("../../workflows/systems/versions.js");
      return {
        object: "system.version.diff",
        system: a.system,
        from: a.number,
        to: b.number,
        changes: diffVersions(a, b),
      } satisfies VersionDiffRow;
    },
  );

  scope.get<{ Params: { id: string; n: string } }>("/v1/systems/:id/versions/:n", async (req, reply) => {
    const v = await one(req.params.id, req.params.n, "n", reply);
    return v ? versionDetail(v) : reply;
  });

  scope.post<{ Params: { id: string }; Body: unknown }>("/v1/systems/:id/rollback", async (req, reply) => {
    if (!versionsOf(req.params.id, reply)) return reply;
    const body = req.body && typeof req.body === "object" ? (req.body as Record<string, unknown>) : {};
    const extra = unknownField(body, ["version"]);
    if (extra) return sendApiError(reply, extra);
    const n = numberOf(body.version, "version");
    if (n instanceof ApiError) return sendApiError(reply, n);
    const [{ rollbackSystem }, { CanvasStore }] = await Promise.all([
      import("../../workflows/builder/rollback.js"),
      import("../../workflows/builder/canvas-store.js"),
    ]);
    const res = await rollbackSystem({
      store: new CanvasStore(systems!.sql),
      host: systems!,
      dataDir: systems!.runs.versions.dataDir,
      system: req.params.id,
      version: n,
    });
    if (res.ok) return { ...versionDetail(res.version), rolled_back_to: res.to };
    if (res.code === "not_found") return sendApiError(reply, notFound("version_not_found", res.message, "version"));
    return sendApiError(
      reply,
      res.code === "refused"
        ? new ApiError(409, "invalid_request_error", "rollback_refused", res.message, "version")
        : new ApiError(422, "invalid_request_error", "rollback_failed", res.message),
    );
  });
}
