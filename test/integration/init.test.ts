/**
 * `clawbridge init` as a person runs it, with the REAL CLIs of this package's node_modules/.bin (the
 * only ones on PATH besides node's folder) in a temp HOME where Claude Code and Codex are logged in
 * (credential files with dummy content):
 * - `init --yes` writes a config that `clawbridge config check` accepts and that `clawbridge serve`
 *   serves (the chosen models on /v1/models, the backends on /health); no secret is printed;
 * - `init --yes --dry-run` writes nothing;
 * - the same run driven in tmux, Enter for every question, writes the same config as `--yes`.
 * Nothing but 127.0.0.1; every process is reaped; every wait is bounded.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { cleanup, eventually, pidsWithEnv, tempDir, within } from "../helpers/bridge.js";

const ROOT = path.resolve(".");
const SECRET = "dummy-SECRET-token-8d1f";
const dirs: string[] = [];
const children: ChildProcess[] = [];
after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c, "SIGKILL");
  dirs.forEach(cleanup);
});

function killGroup(c: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-c.pid!, signal);
  } catch {
    /* gone */
  }
}

/** `node bin/clawbridge.js init` (the package's bin, as a person runs it). */
function initCommand(): string[] {
  return [path.join(ROOT, "bin/clawbridge.js"), "init"];
}

interface Home {
  home: string;
  env: Record<string, string>;
}

/** A temp HOME with its XDG dirs; Claude Code and Codex logged in; PATH: node's folder and the package's .bin. */
function makeHome(): Home {
  const home = tempDir("cb-init-it-");
  dirs.push(home);
  const sub = (d: string) => {
    const p = path.join(home, d);
    mkdirSync(p, { recursive: true });
    return p;
  };
  writeFileSync(
    path.join(sub(".claude"), ".credentials.json"),
    JSON.stringify({ claudeAiOauth: { accessToken: SECRET, refreshToken: SECRET, expiresAt: 1 } }),
  );
  writeFileSync(
    path.join(sub(".codex"), "auth.json"),
    JSON.stringify({ OPENAI_API_KEY: null, tokens: { access_token: SECRET, refresh_token: SECRET } }),
  );
  const env: Record<string, string> = {
    HOME: home,
    XDG_CONFIG_HOME: sub(".config"),
    XDG_DATA_HOME: sub(".local/share"),
    XDG_CACHE_HOME: sub(".cache"),
    XDG_STATE_HOME: sub(".local/state"),
    TMPDIR: sub("tmp"),
    // node's folder for the CLIs' `#!/usr/bin/env node`, the package's .bin for the CLIs, and the
    // basic tools; none of the coding-agent CLIs is installed anywhere else on this PATH (checked below).
    PATH: [path.join(ROOT, "node_modules/.bin"), path.dirname(process.execPath), "/usr/bin", "/bin"].join(":"),
    LANG: "C.UTF-8",
    TERM: "xterm-256color",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
  };
  return { home, env };
}

function run(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 90_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: ROOT, env, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? null) : 0,
          stdout: String(stdout),
          stderr: String(stderr),
        }),
    );
  });
}

/** The coding-agent CLIs a PATH finds outside this package (the test's PATH must find none). */
function foreignClis(env: Record<string, string>): string[] {
  const out: string[] = [];
  for (const dir of env.PATH!.split(":")) {
    if (dir === path.join(ROOT, "node_modules/.bin")) continue;
    for (const name of ["opencode", "claude", "gemini", "codex", "qwen"])
      if (existsSync(path.join(dir, name))) out.push(path.join(dir, name));
  }
  return out;
}

async function serve(
  h: Home,
  config: string,
): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    [path.join(ROOT, "bin/clawbridge.js"), "serve", "--config", config, "--port", "0"],
    {
      cwd: ROOT,
      env: h.env,
      detached: true,
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  children.push(child);
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += String(d)));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const ok = await eventually(
    () => /listening on http:\/\/127\.0\.0\.1:\d+/.test(stderr) || child.exitCode !== null,
    60_000,
  );
  const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
  assert.ok(ok && m, `serve started: ${stderr.slice(-2000)}`);
  return {
    url: m[1]!,
    child,
    stop: async () => {
      killGroup(child, "SIGTERM");
      await within(exited, 30_000, "serve exits on SIGTERM").catch(() => killGroup(child, "SIGKILL"));
      killGroup(child, "SIGKILL"); // any CLI left in its group
    },
  };
}

const tmuxPresent = (() => {
  try {
    execFileSync("tmux", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe("clawbridge init with the real CLIs", { timeout: 300_000 }, () => {
  const h = makeHome();
  const config = path.join(h.home, "c.yaml");
  let yesText = "";

  it("the test's PATH finds the CLIs only in this package's node_modules/.bin", () => {
    assert.deepEqual(foreignClis(h.env), []);
  });

  it("init --yes writes a config that config check accepts and serve serves; no secret shows", async () => {
    const r = await run([...initCommand(), "--yes", "--config", config], h.env);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const out = r.stdout;
    for (const [label, bin] of [
      ["OpenCode", "opencode"],
      ["Claude Code", "claude"],
      ["Gemini CLI", "gemini"],
      ["Codex", "codex"],
      ["Qwen Code", "qwen"],
    ] as const)
      assert.ok(out.includes(`${label}: ${path.join(ROOT, "node_modules/.bin", bin)};`), `${label} found: ${out}`);
    assert.match(out, /Claude Code: .*logged in: Claude account \(OAuth, ~\/\.claude\/\.credentials\.json\)/);
    assert.match(out, /Codex: .*logged in: ChatGPT sign-in \(~\/\.codex\/auth\.json\)/);
    assert.match(out, /Gemini CLI: .*not logged in/);
    assert.match(out, /Service: not installed with --yes/);
    assert.match(out, /OpenClaw: no config at ~\/\.openclaw\/openclaw\.json/);
    assert.ok(!`${out}${r.stderr}`.includes("SECRET"), "no secret printed");
    yesText = readFileSync(config, "utf8");
    assert.ok(!yesText.includes("SECRET"), "no secret written");

    const check = await run([path.join(ROOT, "bin/clawbridge.js"), "config", "check", "--config", config], h.env);
    assert.equal(check.code, 0, `${check.stdout}\n${check.stderr}`);
    const ids = [...check.stdout.matchAll(/^model (\S+) -> backend (\S+) \((\S+)\), model "[^"]+", mode (\S+)$/gm)].map(
      (m) => [m[1], m[2], m[3], m[4]],
    );
    assert.equal(ids.length, 3, check.stdout);
    assert.match(ids[0]![0]!, /^opencode\/\S+/);
    assert.deepEqual(
      ids.map((m) => m.slice(1)),
      [
        ["opencode", "opencode", "resume"],
        ["claude-code", "claude-code", "resume"],
        ["codex", "codex", "resume"],
      ],
    );
    assert.equal(ids[1]![0], "claude-code/sonnet");
    assert.match(ids[2]![0]!, /^codex\/\S+/);

    const bridge = await serve(h, config);
    try {
      const models = (await (await fetch(`${bridge.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      const listed = models.data.map((m) => m.id);
      for (const [id] of ids) assert.ok(listed.includes(id!), `${id} on /v1/models: ${listed.join(", ")}`);
      const health = (await (await fetch(`${bridge.url}/health`)).json()) as {
        backends: Array<{ name: string; type: string; usable: boolean }>;
        models: Array<{ id: string }>;
      };
      assert.deepEqual(
        health.backends.map((b) => [b.name, b.type, b.usable]),
        [
          ["opencode", "opencode", true],
          ["claude-code", "claude-code", true],
          ["codex", "codex", true],
        ],
      );
      assert.deepEqual(
        health.models.map((m) => m.id),
        ids.map((m) => m[0]),
      );
    } finally {
      await bridge.stop();
    }
    assert.ok(await eventually(() => pidsWithEnv(`HOME=${h.home}`).length === 0, 15_000), "every process reaped");
  });

  it("init --yes --dry-run prints the config and writes nothing", async () => {
    const other = path.join(h.home, "dry", "d.yaml");
    const r = await run([...initCommand(), "--yes", "--dry-run", "--config", other], h.env);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.ok(!existsSync(path.join(h.home, "dry")), "nothing written");
    assert.match(r.stdout, /Would write ~\/dry\/d\.yaml:/);
    assert.ok(r.stdout.includes(yesText.trimEnd()), "the same config as --yes, printed");
    assert.match(r.stdout, /dry run: ~\/dry\/d\.yaml was NOT written/);
    assert.deepEqual(
      readdirSync(h.home).filter((f) => f.endsWith(".yaml")),
      ["c.yaml"],
    );
  });

  it("in tmux, Enter for every question writes the same config as --yes", {
    skip: tmuxPresent ? false : "tmux is not installed (apt-get install tmux; .ci/run installs it)",
  }, async () => {
    const file = path.join(h.home, "t.yaml");
    const sock = `cb-init-${process.pid}-${Date.now()}`;
    const tmuxDir = path.join(h.home, "tmux");
    mkdirSync(tmuxDir, { mode: 0o700 });
    const tmuxEnv = { ...process.env, TMUX_TMPDIR: tmuxDir };
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const script = path.join(h.home, "run-init.sh");
    writeFileSync(
      script,
      [
        "#!/bin/sh",
        `cd ${q(ROOT)}`,
        `env -i ${Object.entries(h.env)
          .map(([k, v]) => `${k}=${q(v)}`)
          .join(" ")} ${q(process.execPath)} ${[...initCommand(), "--config", file].map(q).join(" ")}`,
        'echo "INIT-EXIT=$?"',
        "exec sleep 300",
        "",
      ].join("\n"),
    );
    const tmux = (...args: string[]) => execFileSync("tmux", ["-L", sock, ...args], { env: tmuxEnv, encoding: "utf8" });
    const screen = () => tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "init");
    try {
      tmux("new-session", "-d", "-s", "init", "-x", "200", "-y", "50", `sh ${q(script)}`);
      const prompt = /\[Y\/n\] |\[y\/N\] |number or name \[[^\]\n]*\]: /g;
      let answered = 0;
      const end = Date.now() + 120_000;
      let text = "";
      while (Date.now() < end) {
        text = screen();
        if (/INIT-EXIT=\d+/.test(text)) break;
        const asked = text.match(prompt)?.length ?? 0;
        if (asked > answered) {
          tmux("send-keys", "-t", "init", "Enter");
          answered++;
        }
        await new Promise((r) => setTimeout(r, 150));
      }
      assert.match(text, /INIT-EXIT=0/, `init ended in tmux:\n${text}`);
      // OpenCode (2 questions), Claude Code (2), Gemini CLI, Codex (2), Qwen Code, the service.
      assert.equal(answered, 9, text);
      assert.match(text, /Serve Claude Code\? \[Y\/n\]/);
      assert.match(text, /Run the bridge as a systemd user service now \(service install\)\? \[y\/N\]/);
      assert.ok(!text.includes("SECRET"));
      const day = (t: string) => t.replace(/\(\d{4}-\d\d-\d\d\)/, "(day)"); // a run across midnight
      assert.equal(day(readFileSync(file, "utf8")), day(yesText), "the same config as --yes");
    } finally {
      try {
        tmux("kill-server");
      } catch {
        /* already gone */
      }
    }
    assert.ok(await eventually(() => pidsWithEnv(`HOME=${h.home}`).length === 0, 15_000), "every process reaped");
  });
});
