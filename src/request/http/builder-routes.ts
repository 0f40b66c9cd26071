/**
 * The builder over HTTP, behind the same bearer keys as every `/v1/*` route:
 *   GET  /v1/canvases                the canvases (drafts and deployed), without their nodes
 *   GET  /v1/canvases/:id            one canvas: nodes, edges, settings, versions
 *   GET  /v1/builds/:id              a build: its plan, each step's status, the variables it made
 *   POST /v1/builds/:id/pause        stop a running build between steps (202; it ends `paused`)
 *   POST /v1/builds/:id/resume       go on from its first unfinished step (202)
 * A build is a run of origin `builder`: it is also listed by GET /v1/runs, and /v1/runs/:id/pause|
 * resume|cancel act on it; the /v1/builds/:id/pause|resume routes are aliases of those, kept for
 * clients of release 0.1.0.
 *   GET  /v1/systems/:id/export      the system as a bundle (`.tar.gz`: system.yaml, canvas.json, sandbox files)
 * Canvases are sent as src/wire/canvas.ts declares them (the dashboard reads the same declarations).
 * Errors are OpenAI-shaped.
 */
import type { FastifyInstance } from "fastify";
import type { List } from "../../wire/admin.js";
import type { CanvasDetail, CanvasSummary } from "../../wire/canvas.js";
import type { BuilderBase } from "../../workflows/builder/backend-deps.js";
import { ApiError } from "../chat-api/errors.js";
import { sendApiError } from "./reply.js";

export function registerBuilderRoutes(app: FastifyInstance, builder: BuilderBase | undefined): void {
  const none = () =>
    new ApiError(
      404,
      "not_found_error",
      "no_builder",
      "The builder is not available on this bridge (configure systems or a `type: builder` backend).",
    );
  const room = builder?.room;

  app.get("/v1/canvases", async (_req, reply) => {
    if (!room) return sendApiError(reply, none());
    return {
      object: "list",
      data: await Promise.all(
        (await room.canvases.list()).map(async (c) => {
          const d = await room.deployState(c);
          return {
            id: c.system,
            object: "canvas",
            name: c.name,
            description: c.description,
            status: c.status,
            version: c.version,
            nodes: c.nodes.length,
            edges: c.edges.length,
            updated_at: c.updatedAt,
            deployed_version: d.deployedVersion,
            changed_since_deploy: d.changedSinceDeploy,
          };
        }),
      ),
    } satisfies List<CanvasSummary>;
  });

  app.get<{ Params: { id: string } }>("/v1/canvases/:id", async (req, reply) => {
    const c = await room?.canvases.get(req.params.id);
    if (!c)
      return sendApiError(
        reply,
        room ? new ApiError(404, "not_found_error", "canvas_not_found", `No canvas "${req.params.id}".`) : none(),
      );
    return {
      id: c.system,
      object: "canvas",
      ...c,
      versions: await room!.canvases.versions(c.system),
      ...(await room!.deployState(c)),
    } satisfies CanvasDetail;
  });

  app.get<{ Params: { id: string } }>("/v1/builds/:id", async (req, reply) => {
    const b = await room?.builds.get(req.params.id);
    if (!b)
      return sendApiError(
        reply,
        room ? new ApiError(404, "not_found_error", "build_not_found", `No build "${req.params.id}".`) : none(),
      );
    return { object: "build", ...b };
  });

  // Aliases of /v1/runs/:id/pause|resume (a build is a run of origin `builder`), kept for clients of release 0.1.0.
  app.post<{ Params: { id: string } }>("/v1/builds/:id/pause", async (req, reply) => {
    const b = await room?.builds.get(req.params.id);
    if (!b)
      return sendApiError(
        reply,
        room ? new ApiError(404, "not_found_error", "build_not_found", `No build "${req.params.id}".`) : none(),
      );
    if (!builder!.manager.isLive(b.id))
      return sendApiError(
        reply,
        new ApiError(
          409,
          "invalid_request_error",
          "build_not_running",
          `Build ${b.id} is ${b.status}, not running here.`,
        ),
      );
    void builder!.manager.pause(b.id).catch(() => undefined);
    return reply.code(202).send({ object: "build", id: b.id, status: "pausing" });
  });

  app.post<{ Params: { id: string } }>("/v1/builds/:id/resume", async (req, reply) => {
    const b = await room?.builds.get(req.params.id);
    if (!b)
      return sendApiError(
        reply,
        room ? new ApiError(404, "not_found_error", "build_not_found", `No build "${req.params.id}".`) : none(),
      );
    try {
      await builder!.manager.resume(b.id);
    } catch (err) {
      return sendApiError(
        reply,
        new ApiError(409, "invalid_request_error", "build_not_paused", `Build ${b.id}: ${(err as Error).message}.`),
      );
    }
    return reply.code(202).send({ object: "build", id: b.id, status: "running" });
  });

  app.get<{ Params: { id: string } }>("/v1/systems/:id/export", async (req, reply) => {
    if (!room) return sendApiError(reply, none());
    try {
      const data = await room.exportBundle(req.params.id);
      return reply
        .header("content-disposition", `attachment; filename="${req.params.id}.tar.gz"`)
        .type("application/gzip")
        .send(data);
    } catch (err) {
      if ((err as Error).name === "BundleError" || (err as Error).name === "SandboxError")
        return sendApiError(reply, new ApiError(404, "not_found_error", "system_not_found", (err as Error).message));
      throw err;
    }
  });
}
