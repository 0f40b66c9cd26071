/**
 * `clawbridge init` end to end in-process (src/ops/init/run.ts) with what it finds given (no CLI is
 * run): --yes, --dry-run, a re-run that keeps the person's file, OpenClaw found, the service offered.
 * Every case has its own temp HOME; the logins are real files there, and their secrets never show.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { KNOWN_CLIS } from "../../src/backends/cli/resolve.js";
import { resolveConfig } from "../../src/core/config/load.js";
import type { Asker } from "../../src/ops/init/ask.js";
import { CLI_LABELS, type FoundCli } from "../../src/ops/init/detect.js";
import { loginStatus } from "../../src/ops/init/logins.js";
import { runInit } from "../../src/ops/init/run.js";
import type { SystemctlRunner } from "../../src/ops/service/systemd.js";
import { parse } from "yaml";
import { cleanup, tempDir } from "../helpers/bridge.js";

const SECRET = "sk-SECRET-never-shown-2b7e";
const dirs: string[] = [];
after(() => dirs.forEach(cleanup));

const MODELS: Record<string, FoundCli["models"]> = {
  opencode: [
    { id: "opencode/big-pickle", name: "Big Pickle", free: true, toolCalls: true, contextWindow: 200_000 },
    {
      id: "opencode/space-bunny-free",
      name: "Space Bunny Free",
      free: true,
      toolCalls: true,
      contextWindow: 1_000_000,
    },
  ],
  "claude-code": [{ id: "default" }, { id: "sonnet", name: "Claude Sonnet (newest)" }, { id: "opus" }],
  "gemini-cli": [{ id: "auto" }, { id: "gemini-2.5-pro" }],
  codex: [{ id: "gpt-6-astra", name: "GPT-6-Astra" }, { id: "gpt-6-sol" }],
  "qwen-code": [{ id: "coder-model" }],
};

function setup(logins: Array<"claude" | "codex" | "gemini"> = ["claude", "codex"]) {
  const home = tempDir("cb-init-run-");
  dirs.push(home);
  const bin = path.join(home, "bin");
  mkdirSync(bin);
  const env: NodeJS.ProcessEnv = { HOME: home, PATH: bin };
  const put = (rel: string, v: unknown) => {
    mkdirSync(path.dirname(path.join(home, rel)), { recursive: true });
    writeFileSync(path.join(home, rel), JSON.stringify(v));
  };
  if (logins.includes("claude")) put(".claude/.credentials.json", { claudeAiOauth: { accessToken: SECRET } });
  if (logins.includes("codex")) put(".codex/auth.json", { OPENAI_API_KEY: null, tokens: { access_token: SECRET } });
  if (logins.includes("gemini")) put(".gemini/oauth_creds.json", { access_token: SECRET });
  const detect = async (): Promise<FoundCli[]> =>
    KNOWN_CLIS.map((cli) => ({
      cli,
      label: CLI_LABELS[cli.backendType]!,
      path: path.join(home, "node_modules", ".bin", cli.name),
      tried: [],
      login: loginStatus(cli.backendType, env),
      models: MODELS[cli.backendType] ?? [],
    }));
  let out = "";
  const write = (s: string) => void (out += s);
  return { home, env, detect, write, output: () => out };
}

/** Answers from a script: the first rule whose pattern matches the question (else the default). */
function scripted(rules: Array<[RegExp, boolean | string]>, asked: string[]): Asker {
  const pick = (q: string) => rules.find(([re]) => re.test(q))?.[1];
  return {
    async confirm(q, def) {
      asked.push(q);
      const a = pick(q);
      return typeof a === "boolean" ? a : def;
    },
    async choose(q, _choices, def) {
      asked.push(q);
      const a = pick(q);
      return typeof a === "string" ? a : def;
    },
    close() {},
  };
}

const noBus: SystemctlRunner = async () => ({
  code: 1,
  stdout: "",
  stderr: "Failed to connect to bus: No medium found",
});

describe("init: the whole run", () => {
  it("--yes: the logged-in CLIs and OpenCode, a config that passes the check, no service, no secret", async () => {
    const s = setup();
    const r = await runInit({ yes: true, env: s.env, write: s.write, detect: s.detect });
    const file = path.join(s.home, ".config", "clawbridge", "config.yaml");
    assert.equal(r.exitCode, 0, s.output());
    assert.equal(r.configPath, file);
    assert.equal(r.written, true);
    const text = readFileSync(file, "utf8");
    assert.equal(text, r.text);
    const cfg = resolveConfig(parse(text), file);
    assert.deepEqual(
      cfg.models.map((m) => m.id),
      ["opencode/space-bunny-free", "claude-code/sonnet", "codex/gpt-6-astra"],
    );
    assert.deepEqual(Object.keys(cfg.backends), ["opencode", "claude-code", "codex"]);
    assert.equal(r.openclaw, "not-found");
    assert.equal(r.service, "not-run");
    const out = s.output();
    assert.match(out, /Serve Gemini CLI \(not logged in\)\? no \(--yes\)/);
    assert.match(out, /Service: not installed with --yes/);
    assert.match(out, /clawbridge service install --config ~\/\.config\/clawbridge\/config\.yaml/);
    assert.match(out, /clawbridge openclaw install --config/);
    assert.ok(!out.includes("SECRET") && !text.includes("SECRET"), "no secret in the output or the file");
    assert.ok(!existsSync(path.join(s.home, ".config", "systemd")), "no unit written");
  });

  it("--dry-run prints the config and writes nothing", async () => {
    const s = setup();
    const file = path.join(s.home, "sub", "c.yaml");
    const r = await runInit({ yes: true, dryRun: true, config: file, env: s.env, write: s.write, detect: s.detect });
    assert.equal(r.exitCode, 0);
    assert.equal(r.written, false);
    assert.ok(!existsSync(path.join(s.home, "sub")), "not even the folder");
    assert.match(s.output(), /Would write ~\/sub\/c\.yaml:/);
    assert.ok(r.text && s.output().includes(r.text), "the config is printed");
    assert.match(s.output(), /dry run: ~\/sub\/c\.yaml was NOT written/);
    assert.match(s.output(), /Service: would offer clawbridge service install/);
  });

  it("a re-run: the person's edits stay, a newly logged-in CLI is added after the diff and a yes, with a backup", async () => {
    const s = setup();
    const file = path.join(s.home, "c.yaml");
    await runInit({ yes: true, config: file, env: s.env, write: s.write, detect: s.detect });
    const edited = readFileSync(file, "utf8")
      .replace(/port: 4097 #[^\n]*/, "port: 4111 # mine")
      .replace("models:\n", "# my models\nmodels:\n");
    writeFileSync(file, edited);
    // Gemini CLI is logged in now.
    mkdirSync(path.join(s.home, ".gemini"), { recursive: true });
    writeFileSync(path.join(s.home, ".gemini", "oauth_creds.json"), JSON.stringify({ access_token: SECRET }));

    // A dry run first: the diff, nothing written.
    const s2 = { ...s, out: "" };
    const dry = await runInit({
      dryRun: true,
      config: file,
      env: s.env,
      write: (x) => void (s2.out += x),
      detect: s.detect,
      asker: scripted([], []),
    });
    assert.equal(dry.written, false);
    assert.equal(readFileSync(file, "utf8"), edited);
    assert.match(s2.out, /^\+ {2}gemini-cli:$/m);

    const asked: string[] = [];
    let out = "";
    const r = await runInit({
      config: file,
      env: s.env,
      write: (x) => void (out += x),
      detect: s.detect,
      asker: scripted(
        [
          [/Default model for Gemini CLI/, "gemini-2.5-pro"],
          [/Write these changes/, true],
          [/service install/, false],
        ],
        asked,
      ),
    });
    assert.equal(r.exitCode, 0, out);
    // Only the CLIs the file lacks are asked about.
    assert.deepEqual(asked, [
      "Serve Gemini CLI?",
      "Default model for Gemini CLI:",
      "Serve Qwen Code (not logged in)?",
      `Write these changes to ~/c.yaml?`,
      "Run the bridge as a systemd user service now (service install)?",
    ]);
    assert.match(out, /OpenCode: already in the config as backend "opencode" \(kept as it is\)/);
    assert.match(out, /^\+ {2}- id: gemini-cli\/gemini-2\.5-pro/m);
    const text = readFileSync(file, "utf8");
    assert.ok(text.includes("port: 4111 # mine") && text.includes("# my models\nmodels:"), "edits kept");
    assert.ok(text.startsWith(edited.split("  codex:")[0]!), "the file up to the new backend is the person's");
    assert.deepEqual(
      resolveConfig(parse(text), file).models.map((m) => m.id),
      ["opencode/space-bunny-free", "claude-code/sonnet", "codex/gpt-6-astra", "gemini-cli/gemini-2.5-pro"],
    );
    const backups = readdirSync(s.home).filter((f) => f.startsWith("c.yaml.bak-"));
    assert.equal(backups.length, 1);
    assert.equal(readFileSync(path.join(s.home, backups[0]!), "utf8"), edited);
    assert.equal(r.service, "declined");
    assert.ok(!out.includes("SECRET"));

    // Nothing new: nothing asked but the offers, the file untouched.
    let out3 = "";
    const again = await runInit({
      yes: true,
      config: file,
      env: s.env,
      write: (x) => void (out3 += x),
      detect: s.detect,
    });
    assert.equal(again.written, false);
    assert.match(out3, /is up to date: nothing to add/);
    assert.equal(readFileSync(file, "utf8"), text);
  });

  it("a 'no' to writing the changes leaves the file; a JSON path is refused", async () => {
    const s = setup();
    const file = path.join(s.home, "c.yaml");
    writeFileSync(file, "# mine\nbackends:\n  oc: { type: opencode }\nmodels:\n  - { id: a, backend: oc }\n");
    const before = readFileSync(file, "utf8");
    const r = await runInit({
      config: file,
      env: s.env,
      write: s.write,
      detect: s.detect,
      asker: scripted([[/Write these changes/, false]], []),
    });
    assert.equal(r.written, false);
    assert.equal(readFileSync(file, "utf8"), before);
    assert.match(s.output(), /was NOT changed/);
    await assert.rejects(
      runInit({ yes: true, config: path.join(s.home, "c.json"), env: s.env, write: s.write, detect: s.detect }),
      /init writes YAML/,
    );
    // A file that cannot take additions is refused before anything is looked for or asked.
    writeFileSync(path.join(s.home, "list.yaml"), "- a\n- b\n");
    let looked = false;
    await assert.rejects(
      runInit({
        yes: true,
        config: path.join(s.home, "list.yaml"),
        env: s.env,
        write: s.write,
        detect: async () => {
          looked = true;
          return s.detect();
        },
      }),
      (e: Error) => e.name === "ConfigError" && /not a YAML mapping/.test(e.message),
    );
    assert.equal(looked, false);
  });

  it("OpenClaw found: --yes adds the bridge's provider entry; service install, when asked for, writes the unit", async () => {
    const s = setup(["claude"]);
    mkdirSync(path.join(s.home, ".openclaw"));
    writeFileSync(path.join(s.home, ".openclaw", "openclaw.json"), "// mine\n{\n  agents: {},\n}\n");
    const file = path.join(s.home, "c.yaml");
    const r = await runInit({ yes: true, config: file, env: s.env, write: s.write, detect: s.detect });
    assert.equal(r.openclaw, "installed", s.output());
    const oc = readFileSync(path.join(s.home, ".openclaw", "openclaw.json"), "utf8");
    assert.match(oc, /\/\/ mine/);
    assert.match(oc, /clawbridge/);
    assert.match(oc, /claude-code\/sonnet/);
    assert.match(s.output(), /OpenClaw can use clawbridge\/opencode\/big-pickle|OpenClaw can use clawbridge\//);

    // Interactive, with a yes to the service: the unit is written (systemd is not reachable here).
    let out = "";
    const r2 = await runInit({
      config: file,
      env: s.env,
      write: (x) => void (out += x),
      detect: s.detect,
      systemctl: noBus,
      asker: scripted(
        [
          [/openclaw install/, false],
          [/service install/, true],
        ],
        [],
      ),
    });
    assert.equal(r2.openclaw, "declined");
    assert.equal(r2.service, "installed", out);
    const unit = readFileSync(path.join(s.home, ".config", "systemd", "user", "clawbridge.service"), "utf8");
    assert.ok(unit.includes(`--config ${file}`), unit);
    assert.match(out, /systemctl --user cannot be used here/);
  });

  it("nothing installed: says how to start, writes nothing", async () => {
    const s = setup();
    const r = await runInit({
      yes: true,
      config: path.join(s.home, "c.yaml"),
      env: s.env,
      write: s.write,
      detect: async () => (await s.detect()).map((f) => ({ ...f, path: undefined, models: [] })),
    });
    assert.equal(r.exitCode, 1);
    assert.match(s.output(), /npm install -g opencode-ai/);
    assert.ok(!existsSync(path.join(s.home, "c.yaml")));
  });
});
