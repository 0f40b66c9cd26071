/**
 * Is the compiled build (dist/, from `npm run build`) current with the TypeScript sources?
 *
 * The bridge runs from dist/ when it is current, else from src/ through tsx (which always works:
 * tsx is a runtime dependency). Compiled JavaScript costs noticeably less CPU per request than
 * tsx's on-the-fly transform (bench/README.md). A build is current when its stamp file is at
 * least as new as every source file and build setting.
 */
import { readdirSync, statSync } from "node:fs";
import path from "node:path";

export const STAMP = path.join("dist", ".build-stamp");
const INPUTS = ["tsconfig.json", "tsconfig.build.json"];

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (entry.isFile()) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/** `{ fresh, reason }` for the package at `root`. */
export function buildState(root) {
  let stamp;
  try {
    stamp = statSync(path.join(root, STAMP)).mtimeMs;
  } catch {
    return { fresh: false, reason: "no build yet" };
  }
  let newest = newestMtime(path.join(root, "src"));
  for (const f of INPUTS) {
    try {
      newest = Math.max(newest, statSync(path.join(root, f)).mtimeMs);
    } catch {
      // an absent settings file cannot be newer
    }
  }
  return newest > stamp ? { fresh: false, reason: "sources changed since the last build" } : { fresh: true, reason: "current" };
}

/**
 * The module to import for `rel` (e.g. "cli/main"): dist's .js when the build is current, else
 * src's .ts. Pass `state` to resolve several modules with one look at the tree.
 */
export function entryFile(root, rel, state = buildState(root)) {
  return state.fresh ? path.join(root, "dist", `${rel}.js`) : path.join(root, "src", `${rel}.ts`);
}
