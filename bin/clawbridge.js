#!/usr/bin/env node
// Entry point for `npx clawbridge` and `npm start`: runs the compiled build (dist/) when it is
// current with the sources, else the TypeScript sources through tsx's loader (always works).
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { entryFile } from "../scripts/build-state.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const entry = entryFile(root, "ops/commands/main");
if (entry.endsWith(".ts")) {
  const { register } = await import("tsx/esm/api");
  register();
}
await import(pathToFileURL(entry).href);
