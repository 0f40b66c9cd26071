/**
 * `GET /dashboard` and `/dashboard/*`: the dashboard's single-page app, built from
 * packages/dashboard by `npm ci` / `npm run build` (scripts/dashboard-build.mjs) into
 * packages/dashboard/dist. Files are served as they are; any other path without a file extension is
 * a client route and gets index.html. The page holds no data, so it is served without a key; every
 * call it makes goes to `/v1/*` with the key. A strict Content-Security-Policy keeps it from
 * loading anything but the bridge's own files. Without a build: 503 saying how to make one.
 */
import { readFile, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError } from "../chat-api/errors.js";
import { sendApiError } from "./reply.js";

/** packages/dashboard/dist of this package (the same two levels up from src/request/http and dist/server). */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL("../../../packages/dashboard/dist/", import.meta.url));

export const DASHBOARD_CSP = [
  "default-src 'self'",
  "connect-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
  ".webmanifest": "application/manifest+json",
};

/** Vite names the files under assets/ by their content hash: they never change under one name. */
const IMMUTABLE = "public, max-age=31536000, immutable";

/** The path under the dashboard, as safe relative segments; undefined for anything that could leave it. */
function relativePath(rest: string): string | undefined {
  if (rest.includes("\0") || rest.includes("\\")) return undefined;
  const segments = rest.split("/").filter((s) => s !== "");
  if (segments.some((s) => s === "." || s === ".." || s.startsWith("."))) return undefined;
  return segments.join("/");
}

async function fileAt(root: string, rel: string): Promise<string | undefined> {
  const file = path.join(root, rel);
  try {
    if (!(await stat(file)).isFile()) return undefined;
    // A symlink must not lead out of the build.
    const real = await realpath(file);
    return real.startsWith(root + path.sep) ? real : undefined;
  } catch {
    return undefined;
  }
}

export function registerDashboardRoute(app: FastifyInstance, opts: { dir?: string } = {}): void {
  const dir = path.resolve(opts.dir ?? DEFAULT_DASHBOARD_DIR);

  const notBuilt = (req: FastifyRequest, reply: FastifyReply) => {
    const message = `The dashboard is not built (no ${path.join(dir, "index.html")}). Run \`npm run build\` in the clawbridge folder (after \`npm ci\`, which installs what it needs), then reload.`;
    if ((req.headers.accept ?? "").includes("text/html"))
      return reply.code(503).type("text/plain; charset=utf-8").send(`${message}\n`);
    return sendApiError(reply, new ApiError(503, "server_error", "dashboard_not_built", message));
  };
  const notFound = (req: FastifyRequest, reply: FastifyReply) =>
    sendApiError(
      reply,
      new ApiError(404, "not_found_error", "not_found", `No file ${req.url.split("?")[0]} in the dashboard.`),
    );

  const serve = async (req: FastifyRequest<{ Params: { "*"?: string } }>, reply: FastifyReply) => {
    void reply
      .header("content-security-policy", DASHBOARD_CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("x-frame-options", "DENY");
    let root: string;
    try {
      root = await realpath(dir);
    } catch {
      return notBuilt(req, reply);
    }
    const index = await fileAt(root, "index.html");
    if (!index) return notBuilt(req, reply);
    const rel = relativePath(req.params["*"] ?? "");
    if (rel === undefined) return notFound(req, reply);
    let file = rel ? await fileAt(root, rel) : index;
    let cache = file && rel.startsWith("assets/") ? IMMUTABLE : "no-cache";
    if (!file) {
      // A client route (`/dashboard/runs/r_1`) gets the app; a missing file (under assets/, or named like one we serve) is 404.
      if (rel.startsWith("assets/") || TYPES[path.extname(rel).toLowerCase()] !== undefined)
        return notFound(req, reply);
      file = index;
      cache = "no-cache";
    }
    const body = await readFile(file);
    return reply
      .header("cache-control", cache)
      .type(TYPES[path.extname(file).toLowerCase()] ?? "application/octet-stream")
      .send(body);
  };

  app.get("/dashboard", serve);
  app.get("/dashboard/*", serve);
}
