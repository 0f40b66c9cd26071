/**
 * The `command` kind: run a program with an argv array and take what it prints as the step's
 * output. Inputs are untrusted, so they go in as whole arguments and nothing else: each argv
 * element is substituted on its own and stays exactly one argument whatever it contains, the
 * program is spawned directly (never through a shell), and the program itself (argv[0]) may not be
 * a reference at all.
 *
 * The command sees little of the bridge: its environment is PATH and HOME, the variables its
 * system names in `env`, and its `setEnv`; nothing else (API keys, the bridge's own settings)
 * leaks to it. It runs in its own process group (`CliProcess`), so a timeout or a cancel ends
 * everything it started, and the group is recorded for the orphan reaper in case the bridge dies
 * first. stdout is streamed line by line as it arrives; the whole of it (up to 1 MiB) is the output.
 */
import { statSync } from "node:fs";
import { ExecError, type ExecContext, type Executor, type WouldSend } from "../step-executor.js";
import type { CommandRun } from "../schema.js";
import { parseTemplate, renderString } from "../../engine/template.js";
import { CliProcess } from "../../../core/util/process.js";

/** stdout kept (and streamed) per run; the rest is read and dropped. */
const MAX_OUTPUT_BYTES = 1024 * 1024;
const STDERR_QUOTE = 500;
const KILL_GRACE_MS = 2000;

/**
 * Problems with a command found when its system is loaded: a `${…}` reference in argv[0] (the
 * program must be named in the configuration, not chosen by an input), or an empty program.
 */
export function checkCommand(spec: CommandRun): string[] {
  const program = spec.argv[0];
  if (program === undefined) return ["argv needs at least the program"];
  // Without references, the program is its text (`$${` is `${`): empty exactly when the template is.
  let parts;
  try {
    parts = parseTemplate(program);
  } catch (err) {
    return [`argv[0]: ${(err as Error).message}`];
  }
  const ref = parts.find((p) => "ref" in p);
  if (ref && "source" in ref)
    return [`argv[0] is the program and cannot contain a reference (${ref.source}): name the program itself`];
  if (program.trim() === "") return ["argv[0], the program, is empty"];
  return [];
}

/** The environment of a command or a stdio MCP server: PATH and HOME, the listed names that are set, then `setEnv`. */
export function childEnv(names: readonly string[], setEnv: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", ...names]) {
    const v = process.env[name];
    if (v !== undefined) env[name] = v;
  }
  return { ...env, ...setEnv };
}

/** The command as it would run: argv, `setEnv`, cwd (undefined: the run's own directory) and stdin, rendered. */
function render(
  spec: CommandRun,
  ctx: ExecContext,
): { argv: [string, ...string[]]; setEnv: Record<string, string>; cwd?: string; stdin?: string } {
  const problems = checkCommand(spec);
  if (problems.length > 0) throw new ExecError("invalid", problems.join("; "));
  try {
    const one = (s: string) => renderString(s, ctx.scope);
    return {
      argv: spec.argv.map(one) as [string, ...string[]],
      setEnv: Object.fromEntries(Object.entries(spec.setEnv).map(([n, v]) => [n, one(v)])),
      cwd: spec.cwd !== undefined ? one(spec.cwd) : undefined,
      stdin: spec.stdin !== undefined ? one(spec.stdin) : undefined,
    };
  } catch (err) {
    throw new ExecError("invalid", (err as Error).message);
  }
}

/** A test run's record of the command (secrets as `[secret NAME]`: the runner's scope of a test run); nothing is created. */
export function commandWouldSend(spec: CommandRun, ctx: ExecContext): WouldSend {
  const r = render(spec, ctx);
  return {
    notSent: "command",
    argv: r.argv,
    env: r.setEnv,
    inherits: ["PATH", "HOME", ...spec.env],
    cwd: r.cwd ?? "(a new directory for the run, <dataDir>/runs/<runId>)",
    stdin: r.stdin ?? null,
  };
}

export const runCommand: Executor<CommandRun> = async (spec, ctx) => {
  const r = render(spec, ctx);
  if (ctx.cancel.aborted) throw new ExecError("cancelled", "the command was cancelled");
  const [program, ...args] = r.argv;
  const env = childEnv(spec.env, r.setEnv);
  const cwd = r.cwd ?? ctx.workDir();
  const stdin = r.stdin;
  // spawn reports a missing cwd as a missing program (ENOENT): say which it is.
  let isDir = false;
  try {
    isDir = statSync(cwd).isDirectory();
  } catch {
    /* missing */
  }
  if (!isDir) throw new ExecError("spawn_failed", `cannot run ${program}: the working directory ${cwd} does not exist`);

  ctx.log.debug({ system: ctx.systemId, program, args: args.length, cwd }, "command start");
  const proc = new CliProcess({
    command: program,
    args,
    env,
    cwd,
    stdin,
    signal: ctx.cancel.signal,
    timeoutMs: spec.timeoutSeconds * 1000,
    killGraceMs: KILL_GRACE_MS,
    label: `system ${ctx.systemId}`,
  });

  // stdout, line by line as it arrives; decoded as UTF-8 across chunk boundaries.
  const kept: string[] = [];
  let size = 0;
  let partial = "";
  let truncated = false;
  const emit = (line: string) => {
    kept.push(line);
    ctx.output(`${line}\n`);
  };
  const stdout = proc.child.stdout;
  stdout?.setEncoding("utf8");
  stdout?.on("data", (chunk: string) => {
    if (truncated) return;
    let text = chunk;
    const bytes = Buffer.byteLength(text);
    if (size + bytes > MAX_OUTPUT_BYTES) {
      text = Buffer.from(text)
        .subarray(0, MAX_OUTPUT_BYTES - size)
        .toString("utf8");
      truncated = true;
    }
    size += Buffer.byteLength(text);
    const lines = (partial + text).split("\n");
    partial = lines.pop()!;
    for (const line of lines) emit(line);
    if (truncated) {
      if (partial) emit(partial);
      partial = "";
      ctx.output(`[output truncated at ${MAX_OUTPUT_BYTES} bytes]\n`);
      ctx.log.warn({ system: ctx.systemId, program }, "command output truncated at 1 MiB");
    }
  });

  const end = await proc.wait();
  if (partial) emit(partial);

  switch (end.reason) {
    case "spawn_error": {
      const code = (end.spawnError as NodeJS.ErrnoException | undefined)?.code;
      const why =
        code === "ENOENT"
          ? "no such program"
          : code === "EACCES"
            ? "permission denied"
            : (end.spawnError?.message ?? "spawn failed");
      throw new ExecError("spawn_failed", `cannot run ${program}: ${why}`);
    }
    case "timeout":
      throw new ExecError("timeout", `${program} did not finish within ${spec.timeoutSeconds}s and was stopped`, true);
    case "aborted":
      throw new ExecError("cancelled", "the command was cancelled");
    case "exit":
      break;
  }
  const stderr = end.stderr.trim().slice(-STDERR_QUOTE);
  if (end.code === null) {
    throw new ExecError("exit_code", `was ended by ${end.signal ?? "a signal"}${stderr ? `: ${stderr}` : ""}`);
  }
  if (end.code !== 0) {
    throw new ExecError(
      "exit_code",
      `exited with code ${end.code}${stderr ? `: ${stderr}` : ""}`,
      spec.retryExitCodes.includes(end.code),
    );
  }
  let output = kept.join("\n");
  if (truncated) output += `\n[output truncated at ${MAX_OUTPUT_BYTES} bytes]`;
  return { output };
};
