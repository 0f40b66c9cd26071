/**
 * `node --import <this file> …`: writes every module the process loads (ES modules through a load
 * hook, CommonJS through Module._load) to the file named by CLAWBRIDGE_TRACE_LOADS, one a line.
 * The `cli` suite (bench/suites/cli.ts) counts them per package to show what a command loads.
 */
import { appendFileSync, writeFileSync } from "node:fs";
import Module, { register } from "node:module";

const file = process.env.CLAWBRIDGE_TRACE_LOADS;
if (file) {
  writeFileSync(file, "");
  register(
    `data:text/javascript,${encodeURIComponent(
      `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  appendFileSync(${JSON.stringify(file)}, url + "\\n");
  return next(url, context);
}`,
    )}`,
  );
  const load = Module._load;
  Module._load = function traced(request, parent, isMain, ...rest) {
    try {
      appendFileSync(file, `${Module._resolveFilename(request, parent, isMain)}\n`);
    } catch {
      // a built-in or a module that fails to resolve: the real load reports it
    }
    return load.call(this, request, parent, isMain, ...rest);
  };
}
