/**
 * The config `clawbridge init` writes (src/ops/init/config-writer.ts): commented, accepted by the
 * bridge's own `resolveConfig`, and, on a re-run, merged into the person's file without losing an
 * edit or a comment of theirs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { resolveConfig } from "../../src/core/config/load.js";
import {
  configDiff,
  configuredBackends,
  type InitPlan,
  maskYamlSecrets,
  mergeConfig,
  renderConfig,
  type ServedCli,
} from "../../src/ops/init/config-writer.js";

const opencode: ServedCli = {
  backend: "opencode",
  type: "opencode",
  label: "OpenCode",
  pkg: "opencode-ai",
  foundAt: "~/node_modules/.bin/opencode",
  login: "free models need no login",
  model: { id: "opencode/big-pickle", name: "Big Pickle", free: true },
  exposeAll: true,
};
const claude: ServedCli = {
  backend: "claude-code",
  type: "claude-code",
  label: "Claude Code",
  pkg: "@anthropic-ai/claude-code",
  login: "logged in: Claude account (OAuth, ~/.claude/.credentials.json)",
  model: { id: "sonnet", name: "Claude Sonnet (newest)" },
};
const codex: ServedCli = {
  backend: "codex",
  type: "codex",
  label: "Codex",
  pkg: "@openai/codex",
  login: "logged in: ChatGPT sign-in (~/.codex/auth.json)",
  model: { id: "gpt-6-astra", name: "GPT-6-Astra" },
};

const check = (text: string) => resolveConfig(parse(text), "init test");

describe("init: the config writer", () => {
  it("a new config: a comment on every backend and model, and config check accepts it", () => {
    const plan: InitPlan = { clis: [opencode, claude, codex], date: "2026-11-28" };
    const text = renderConfig(plan);
    assert.match(text, /^# clawbridge configuration, written by `clawbridge init` \(2026-11-28\)/);
    // Each backend: which CLI, where, how logged in — on the line before its key.
    assert.match(
      text,
      /# OpenCode \(opencode-ai\), found at ~\/node_modules\/\.bin\/opencode; free models need no login\n {2}opencode:\n/,
    );
    assert.match(text, /# Claude Code \(@anthropic-ai\/claude-code\); logged in: Claude account.*\n {2}claude-code:\n/);
    assert.match(text, /# Codex \(@openai\/codex\); logged in: ChatGPT sign-in.*\n {2}codex:\n/);
    // Each model: what it is.
    assert.match(text, /# OpenCode: Big Pickle \(free: no login, no cost\)\n {2}- id: opencode\/big-pickle/);
    assert.match(text, /# Claude Code: Claude Sonnet \(newest\)\n {2}- id: claude-code\/sonnet/);
    assert.match(text, /# Codex: GPT-6-Astra\n {2}- id: codex\/gpt-6-astra/);
    assert.match(text, /expose: all # also serve every model OpenCode offers/);
    assert.match(text, /remap: \{ onMissing: best-free \}/);

    const cfg = check(text);
    assert.deepEqual(
      cfg.models.map((m) => [m.id, m.backend, m.backendModel, m.sessionMode]),
      [
        ["opencode/big-pickle", "opencode", "opencode/big-pickle", "resume"],
        ["claude-code/sonnet", "claude-code", "sonnet", "resume"],
        ["codex/gpt-6-astra", "codex", "gpt-6-astra", "resume"],
      ],
    );
    const oc = cfg.backends.opencode?.models;
    assert.deepEqual(
      [oc?.expose, oc?.remap, oc?.discovery],
      ["all", { onMissing: "best-free" }, { enabled: true, refreshHours: 6 }],
    );
    assert.equal(cfg.backends["claude-code"]?.models.expose, "configured");
    assert.equal((cfg.backends["claude-code"]?.options as { warm: { enabled: boolean } }).warm.enabled, true);
    assert.equal(cfg.server.host, "127.0.0.1");
    assert.equal(cfg.server.port, 4097);
    assert.deepEqual(
      [...configuredBackends(text)],
      [
        ["opencode", "opencode"],
        ["claude-code", "claude-code"],
        ["codex", "codex"],
      ],
    );
    assert.throws(() => renderConfig({ clis: [] }), /nothing to serve/);
  });

  it("a re-run keeps the person's edits and comments, adds the new CLI, and shows it as a diff", () => {
    const first = renderConfig({ clis: [opencode, claude], date: "2026-11-28" });
    // The person changes the port, renames a model, adds comments and a key of their own.
    const edited = first
      .replace(/port: 4097 #[^\n]*/, "port: 4100 # my port, 4097 is taken")
      .replace("- id: claude-code/sonnet", "- id: my-claude")
      .replace("backends:\n", "# my note about backends\nbackends:\n")
      .replace(
        "  claude-code:\n    type: claude-code",
        "  claude-code:\n    type: claude-code\n    timeoutSeconds: 900 # long turns",
      );
    assert.notEqual(edited, first);
    const plan = { clis: [opencode, claude, codex], date: "2026-11-29" };
    const merged = mergeConfig(edited, plan);
    assert.deepEqual(merged.added, ["codex"]);
    assert.deepEqual(merged.present, { opencode: "opencode", "claude-code": "claude-code" });
    for (const kept of [
      "port: 4100 # my port, 4097 is taken",
      "- id: my-claude",
      "# my note about backends\nbackends:",
      "timeoutSeconds: 900 # long turns",
      "(2026-11-28)",
    ])
      assert.ok(merged.text.includes(kept), `kept: ${kept}`);
    assert.ok(!merged.text.includes("2026-11-29"), "the header is the person's, not rewritten");
    assert.ok(!merged.text.includes("claude-code/sonnet"), "the renamed model is not added back");
    assert.match(merged.text, /# Codex \(@openai\/codex\); logged in: ChatGPT sign-in.*\n {2}codex:\n/);
    // The old text, line by line, is all still there in order: only lines were added.
    const newLines = merged.text.split("\n");
    let at = 0;
    for (const line of edited.trimEnd().split("\n")) {
      const i = newLines.indexOf(line, at);
      assert.ok(i >= 0, `line kept in order: ${line}`);
      at = i + 1;
    }
    const cfg = check(merged.text);
    assert.deepEqual(
      cfg.models.map((m) => m.id),
      ["opencode/big-pickle", "my-claude", "codex/gpt-6-astra"],
    );
    assert.equal(cfg.server.port, 4100);

    const diff = configDiff("c.yaml", edited, merged.text);
    assert.match(diff, /^--- c\.yaml/m);
    assert.match(diff, /^\+ {2}codex:$/m);
    assert.match(diff, /^\+ {2}- id: codex\/gpt-6-astra/m);
    assert.ok(!/^-/m.test(diff.replace(/^--- .*$/m, "")), `nothing removed:\n${diff}`);

    // Nothing new: the file is left byte for byte.
    const again = mergeConfig(merged.text, plan);
    assert.deepEqual(again.added, []);
    assert.equal(again.text, merged.text);
    assert.equal(configDiff("c.yaml", merged.text, again.text), "");
  });

  it("a CLI the person configured under another name is not added twice; names and ids do not clash", () => {
    const mine = [
      "backends:",
      "  cc: { type: claude-code } # mine",
      "  codex: { type: opencode }",
      "models:",
      "  - { id: codex/gpt-6-astra, backend: codex, model: x }",
      "",
    ].join("\n");
    const merged = mergeConfig(mine, { clis: [claude, codex] });
    assert.deepEqual(merged.added, ["codex-2"]);
    assert.ok(merged.text.includes("cc: { type: claude-code } # mine"));
    const cfg = check(merged.text);
    assert.equal(cfg.backends["codex-2"]?.type, "codex");
    assert.equal(cfg.models.length, 2);
    assert.equal(cfg.models[1]?.id, "codex-2/gpt-6-astra");
  });

  it("an empty file gets the sections; a file that is not a mapping or not YAML is refused", () => {
    const merged = mergeConfig("# just a comment\n", { clis: [claude] });
    assert.ok(merged.text.startsWith("# just a comment\n"));
    assert.equal(check(merged.text).models[0]?.id, "claude-code/sonnet");
    assert.throws(() => mergeConfig("- a\n- b\n", { clis: [claude] }), /not a YAML mapping/);
    assert.throws(() => mergeConfig("a: [1\n", { clis: [claude] }), /not valid YAML/);
    assert.throws(() => mergeConfig("backends: 3\nmodels: []\n", { clis: [claude] }), /backends is not a mapping/);
  });

  it("the diff masks secret-looking values of the person's file", () => {
    const before = [
      "server:",
      "  apiKeys:",
      "    - sk-abcdefgh12345",
      "    - 'sk-quoted-98765'",
      "  port: 4097",
      "backends:",
      "  claude-code:",
      "    type: claude-code",
      "    env: { }",
      "  oc:",
      "    type: opencode",
      "    env:",
      "      ANTHROPIC_API_KEY: sk-plain-55555",
      '      OPENAI_API_KEY: "sk-dq-44444"',
      "other:",
      "  apiKeys: [sk-flow-33333]",
      "  token: tok-22222 # mine",
      "",
    ].join("\n");
    const masked = maskYamlSecrets(before);
    for (const secret of ["abcdefgh", "98765", "55555", "33333", "22222"])
      assert.ok(!masked.includes(secret), `masked ${secret}:\n${masked}`);
    assert.match(masked, /port: 4097/);
    assert.match(masked, /type: opencode/);
    assert.match(masked, /token: <redacted>/);
    // Every line near a change shows, masked (double-quoted values by unifiedDiff itself).
    const lines = before.split("\n");
    const after = lines.map((l, i) => (i % 3 === 0 ? `${l} # seen` : l)).join("\n");
    const diff = configDiff("c.yaml", before, after);
    for (const secret of ["abcdefgh", "98765", "55555", "44444", "33333", "22222"])
      assert.ok(!diff.includes(secret), `masked ${secret}:\n${diff}`);
    assert.match(diff, /port: 4097/);
  });
});
