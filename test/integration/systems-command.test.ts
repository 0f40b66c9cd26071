/**
 * The `command` executor (src/workflows/systems/executors/command.ts) with real processes (`node -e` scripts
 * and /bin/sh programs given as argv): inputs stay single literal arguments (a `; touch …` or
 * `$(…)` runs nothing), only the allowed environment reaches the command, cwd and stdin are the
 * run's, stdout lines are streamed while the command still runs, a timeout or a cancel ends the
 * whole process group (a backgrounded grandchild too), exit codes map to retryable or not, and a
 * missing program is a spawn failure. Every group started is SIGKILLed in `after` should a test fail.
 */
import { execContext } from "../helpers/exec-context.js";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { ExecError, type ExecContext } from "../../src/workflows/systems/step-executor.js";
import { checkCommand, runCommand } from "../../src/workflows/systems/executors/command.js";
import { commandRunSchema, type CommandRun } from "../../src/workflows/systems/schema.js";
import { exited, killGroups } from "../helpers/process-groups.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-command-"));
const NODE = process.execPath;
/** Pids of backgrounded grandchildren the tests start, killed in `after` whatever happened. */
const started: number[] = [];

after(() => {
  killGroups(started);
  for (const pid of started) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone, as it should be */
    }
  }
  rmSync(root, { recursive: true, force: true });
});

let dirs = 0;
function freshDir(): string {
  return mkdtempSync(path.join(root, `d${dirs++}-`));
}

function spec(over: Partial<CommandRun> & { argv: string[] }): CommandRun {
  return commandRunSchema.parse({ kind: "command", timeoutSeconds: 20, ...over });
}

function context(inputs: Record<string, unknown> = {}): { ctx: ExecContext; pieces: string[]; work: string } {
  const work = freshDir();
  return { ...execContext(inputs, { workDir: () => work }), work };
}

async function execError(p: Promise<unknown>): Promise<ExecError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ExecError, `expected an ExecError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected the command to fail");
}

/** Poll `check` every 20 ms for at most `ms`. */
async function eventually(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `kill -0` says the process is gone (ESRCH), or it is a zombie only waiting for init to reap it. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
  return exited(pid);
}

/** A /bin/sh program (as argv, never a shell built from input) that backgrounds a sleep, writes its pid to $1, says "started" and waits. */
const GROUP_SCRIPT = ["/bin/sh", "-c", 'sleep 30 & echo $! > "$1"; echo started; wait', "sh"];

describe("checkCommand", () => {
  test("a reference in the program, or an empty program, is a load-time problem", () => {
    assert.match(checkCommand(spec({ argv: ["${inputs.prog}", "x"] })).join(), /argv\[0\].*cannot contain a reference/);
    assert.match(checkCommand(spec({ argv: ["/usr/bin/${inputs.prog}"] })).join(), /cannot contain a reference/);
    assert.match(checkCommand(spec({ argv: [""] })).join(), /empty/);
    assert.match(checkCommand(spec({ argv: ["  "] })).join(), /empty/);
    assert.deepEqual(checkCommand(spec({ argv: ["node", "${inputs.x}", "--flag=${run.id}"] })), []);
    assert.deepEqual(checkCommand(spec({ argv: ["/opt/$${odd}/bin"] })), []);
  });

  test("running a command with such a program fails as invalid without starting anything", async () => {
    const err = await execError(runCommand(spec({ argv: ["${inputs.prog}"] }), context({ prog: "/bin/true" }).ctx));
    assert.equal(err.code, "invalid");
  });
});

describe("runCommand", () => {
  test("shell syntax in an input is one literal argument: nothing runs", async () => {
    const marker1 = path.join(root, "pwned-1");
    const marker2 = path.join(root, "pwned-2");
    const marker3 = path.join(root, "pwned-3");
    const evil = `x; touch ${marker1} && $(touch ${marker2}) \`touch ${marker3}\` | cat`;
    const { ctx, pieces } = context({ evil });
    // The program is a shell, but the input only ever reaches it as "$1".
    const viaShell = await runCommand(
      spec({ argv: ["/bin/sh", "-c", 'printf "%s\\n" "$1"', "sh", "${inputs.evil}"] }),
      ctx,
    );
    assert.equal(viaShell.output, evil);
    assert.deepEqual(pieces, [`${evil}\n`]);
    const direct = await runCommand(
      spec({
        argv: [
          NODE,
          "-e",
          "console.log(JSON.stringify(process.argv.slice(1)))",
          "${inputs.evil}",
          "a ${inputs.evil} b",
        ],
      }),
      context({ evil }).ctx,
    );
    assert.deepEqual(JSON.parse(direct.output as string), [evil, `a ${evil} b`]);
    assert.equal(existsSync(marker1), false);
    assert.equal(existsSync(marker2), false);
    assert.equal(existsSync(marker3), false);
  });

  test("only PATH, HOME, the allowed names and setEnv reach the command", async () => {
    process.env.CLAWBRIDGE_TEST_SECRET = "must-not-leak";
    process.env.CLAWBRIDGE_TEST_ALLOWED = "allowed-value";
    delete process.env.CLAWBRIDGE_TEST_UNSET;
    try {
      const { ctx } = context({ name: "Ada" });
      const result = await runCommand(
        spec({
          argv: [NODE, "-e", "console.log(JSON.stringify(process.env))"],
          env: ["CLAWBRIDGE_TEST_ALLOWED", "CLAWBRIDGE_TEST_UNSET"],
          setEnv: { GREETING: "hi ${inputs.name}" },
        }),
        ctx,
      );
      const env = JSON.parse(result.output as string) as Record<string, string>;
      // PWD is the command's own working directory (set with it, as a shell's cd would).
      assert.equal(env.PWD, ctx.workDir());
      delete env.PWD;
      const expected: Record<string, string> = { CLAWBRIDGE_TEST_ALLOWED: "allowed-value", GREETING: "hi Ada" };
      if (process.env.PATH !== undefined) expected.PATH = process.env.PATH;
      if (process.env.HOME !== undefined) expected.HOME = process.env.HOME;
      assert.deepEqual(env, expected);
      assert.ok(!JSON.stringify(env).includes("must-not-leak"));
    } finally {
      delete process.env.CLAWBRIDGE_TEST_SECRET;
      delete process.env.CLAWBRIDGE_TEST_ALLOWED;
    }
  });

  test("runs in the run's working directory, or the configured one", async () => {
    const { ctx, work } = context();
    const byDefault = await runCommand(spec({ argv: [NODE, "-e", "console.log(process.cwd())"] }), ctx);
    assert.equal(realpathSync(byDefault.output as string), realpathSync(work));
    const other = freshDir();
    const configured = await runCommand(
      spec({ argv: [NODE, "-e", "console.log(process.cwd())"], cwd: "${inputs.dir}" }),
      context({ dir: other }).ctx,
    );
    assert.equal(realpathSync(configured.output as string), realpathSync(other));
    const missing = await execError(
      runCommand(spec({ argv: [NODE, "-e", ""], cwd: path.join(root, "no-such-dir") }), context().ctx),
    );
    assert.equal(missing.code, "spawn_failed");
    assert.match(missing.message, /working directory/);
  });

  test("stdin is the rendered text, or empty and closed", async () => {
    const echo = [NODE, "-e", "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.stringify(s)))"];
    const given = await runCommand(
      spec({ argv: echo, stdin: "hello ${inputs.name}\nline 2" }),
      context({ name: "Ada" }).ctx,
    );
    assert.equal(JSON.parse(given.output as string), "hello Ada\nline 2");
    const started = Date.now();
    const none = await runCommand(spec({ argv: echo, timeoutSeconds: 10 }), context().ctx);
    assert.equal(JSON.parse(none.output as string), "");
    assert.ok(Date.now() - started < 5000, "reading stdin should see its end at once");
  });

  test("stdout lines stream out while the command still runs; the output drops one trailing newline", async () => {
    const { ctx, pieces } = context();
    const go = path.join(root, "go-signal");
    // Prints a line, then waits (at most 10 s) for the file the test creates once it has seen that line.
    const script =
      "const fs=require('fs');process.stdout.write('first\\n');const end=Date.now()+10000;" +
      "const t=setInterval(()=>{if(fs.existsSync(process.argv[1])||Date.now()>end){clearInterval(t);process.stdout.write(fs.existsSync(process.argv[1])?'second\\n\\n':'gave up\\n')}},20)";
    ctx.output = (t) => {
      pieces.push(t);
      if (t === "first\n") writeFileSync(go, "");
    };
    const result = await runCommand(spec({ argv: [NODE, "-e", script, go] }), ctx);
    assert.deepEqual(pieces, ["first\n", "second\n", "\n"]);
    assert.equal(result.output, "first\nsecond\n");
    const noNewline = await runCommand(spec({ argv: [NODE, "-e", "process.stdout.write('a\\nb')"] }), context().ctx);
    assert.equal(noNewline.output, "a\nb");
  });

  test("a timeout ends the whole group, a backgrounded grandchild too, and is retryable", async () => {
    const pidFile = path.join(root, "timeout-pid");
    const { ctx, pieces } = context();
    const t0 = Date.now();
    const err = await execError(runCommand(spec({ argv: [...GROUP_SCRIPT, pidFile], timeoutSeconds: 0.5 }), ctx));
    const took = Date.now() - t0;
    assert.equal(err.code, "timeout");
    assert.equal(err.retryable, true);
    assert.ok(took >= 400 && took < 5000, `took ${took} ms`);
    assert.deepEqual(pieces, ["started\n"]);
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    assert.ok(pid > 0);
    started.push(pid);
    assert.ok(await eventually(() => gone(pid)), `grandchild ${pid} still running`);
  });

  test("a cancel ends the whole group promptly", async () => {
    const pidFile = path.join(root, "cancel-pid");
    const { ctx, pieces } = context();
    let seen!: () => void;
    const first = new Promise<void>((r) => (seen = r));
    ctx.output = (t) => {
      pieces.push(t);
      seen();
    };
    const run = execError(runCommand(spec({ argv: [...GROUP_SCRIPT, pidFile], timeoutSeconds: 20 }), ctx));
    await Promise.race([
      first,
      new Promise((_, rej) => setTimeout(() => rej(new Error("no output within 10 s")), 10_000).unref()),
    ]);
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    started.push(pid);
    const t0 = Date.now();
    ctx.cancel.abort();
    const err = await run;
    assert.equal(err.code, "cancelled");
    assert.ok(Date.now() - t0 < 4000, "cancel took too long");
    assert.ok(await eventually(() => gone(pid)), `grandchild ${pid} still running`);
  });

  test("a non-zero exit is an exit_code error with the end of stderr, retryable only for listed codes", async () => {
    const fail = (code: number) => [
      NODE,
      "-e",
      `process.stderr.write('x'.repeat(1000) + ' went wrong (${code})\\n'); process.exit(${code})`,
    ];
    const retry = await execError(runCommand(spec({ argv: fail(75), retryExitCodes: [75] }), context().ctx));
    assert.equal(retry.code, "exit_code");
    assert.equal(retry.retryable, true);
    assert.match(retry.message, /^exited with code 75: x+ went wrong \(75\)$/);
    assert.ok(retry.message.length <= "exited with code 75: ".length + 500);
    const fatal = await execError(runCommand(spec({ argv: fail(3), retryExitCodes: [75] }), context().ctx));
    assert.equal(fatal.code, "exit_code");
    assert.equal(fatal.retryable, false);
    assert.match(fatal.message, /^exited with code 3: /);
  });

  test("a missing program is a spawn failure that names it", async () => {
    const missing = path.join(root, "no-such-program");
    const err = await execError(runCommand(spec({ argv: [missing, "arg"] }), context().ctx));
    assert.equal(err.code, "spawn_failed");
    assert.equal(err.retryable, false);
    assert.equal(err.message, `cannot run ${missing}: no such program`);
    const bare = await execError(runCommand(spec({ argv: ["clawbridge-no-such-program-xyz"] }), context().ctx));
    assert.equal(bare.code, "spawn_failed");
  });

  test("stdout beyond 1 MiB is read and dropped, and the truncation is noted", async () => {
    const { ctx, pieces } = context();
    // 2 MiB in 64-byte lines (63 characters and a newline).
    const script = "const l='z'.repeat(63)+'\\n';process.stdout.write(l.repeat(32768))";
    const result = await runCommand(spec({ argv: [NODE, "-e", script] }), ctx);
    const out = result.output as string;
    assert.ok(out.endsWith("\n[output truncated at 1048576 bytes]"), out.slice(-80));
    const kept = out.slice(0, out.lastIndexOf("\n[output truncated"));
    assert.ok(Buffer.byteLength(kept) <= 1024 * 1024);
    assert.ok(Buffer.byteLength(kept) > 1024 * 1024 - 64);
    assert.equal(pieces.at(-1), "[output truncated at 1048576 bytes]\n");
    assert.ok(pieces.slice(0, -1).every((p) => p === "z".repeat(63) + "\n"));
    assert.equal(pieces.length - 1, 16384);
  });

  test("an already cancelled run starts nothing", async () => {
    const marker = path.join(root, "should-not-exist");
    const { ctx } = context();
    ctx.cancel.abort();
    const err = await execError(
      runCommand(spec({ argv: [NODE, "-e", "require('fs').writeFileSync(process.argv[1], '')", marker] }), ctx),
    );
    assert.equal(err.code, "cancelled");
    assert.equal(existsSync(marker), false);
  });
});
