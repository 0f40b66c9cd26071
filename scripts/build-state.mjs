/**
 * Is the compiled build (dist/, from `npm run build`) current with the TypeScript sources?
 *
 * The bridge runs from dist/ when it is current, else from src/ through tsx (which always works:
 * tsx is a runtime dependency). Compiled JavaScript costs noticeably less CPU per request than
 * tsx's on-the-fly transform (bench/README.md). A build is current when its stamp file is at
 * least as new as every source file and build setting.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";

export const STAMP = path.join("dist", ".build-stamp");
const INPUTS = ["tsconfig.json", "tsconfig.build.json"];

/** Newest mtime of the files and folders under `dir` (a folder's changes when a file is added or deleted). */
function newestMtime(dir) {
  let newest = statSync(dir).mtimeMs;
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
  return newest > stamp
    ? { fresh: false, reason: "sources changed since the last build" }
    : { fresh: true, reason: "current" };
}

/**
 * The module to import for `rel` (e.g. "ops/commands/main"): dist's .js when the build is current, else
 * src's .ts. Pass `state` to resolve several modules with one look at the tree.
 */
export function entryFile(root, rel, state = buildState(root)) {
  return state.fresh ? path.join(root, "dist", `${rel}.js`) : path.join(root, "src", `${rel}.ts`);
}

/**
 * Compiled files in dist/ whose source is gone (a deleted or renamed src/ file): tsc never removes
 * its old output. Paths relative to `root`; the build's own dotfiles are kept.
 */
export function staleOutputs(root) {
  const out = [];
  const walk = (rel) => {
    let entries;
    try {
      entries = readdirSync(path.join(root, "dist", rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else if (e.isFile() && e.name.endsWith(".js") && !existsSync(path.join(root, "src", r.replace(/\.js$/, ".ts"))))
        out.push(path.join("dist", r));
    }
  };
  walk("");
  return out.sort();
}
