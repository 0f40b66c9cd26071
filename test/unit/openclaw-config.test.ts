/**
 * `clawbridge openclaw install | uninstall` on realistic OpenClaw configs: only our keys change,
 * comments/secrets/other settings keep their bytes, re-install is a no-op, uninstall gives the
 * original text back, stale models.json entries are removed, --set-default / --agent, --dry-run.
 * The real OpenClaw (`openclaw config validate --json`) checks what install writes in
 * test/integration/openclaw-validate.test.ts.
 */
import { strict as assert } from "node:assert";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { OpenClawSetupError } from "../../src/ops/openclaw/edit-steps.js";
import { installOpenClaw } from "../../src/ops/openclaw/install.js";
import { readMarker } from "../../src/ops/openclaw/install-record.js";
import { collectModelRefs, uninstallOpenClaw } from "../../src/ops/openclaw/uninstall.js";
import { Json5Doc } from "../../src/ops/openclaw/json5-doc.js";
import {
  bridgeBaseUrl,
  buildProviderEntry,
  PLACEHOLDER_API_KEY,
  providerTimeoutSeconds,
  type OpenClawPaths,
} from "../../src/ops/openclaw/provider.js";
import { redactLine, unifiedDiff } from "../../src/ops/openclaw/config-diff.js";
import type { ValidationResult, Validator } from "../../src/ops/openclaw/validate.js";
import { OPENCLAW_CONFIGS } from "../fixtures/openclaw-configs.js";
import { bridgeConfig, openclawHome } from "../helpers/openclaw-home.js";

const read = (f: string) => readFileSync(f, "utf8");
const backups = (paths: OpenClawPaths) => readdirSync(paths.stateDir).filter((f) => f.startsWith("openclaw.json.bak-"));

/** Deep copy of `cfg` without the keys install may add. */
function withoutOurKeys(cfg: Record<string, any>, providerId = "clawbridge", defaults = false): Record<string, any> {
  const c = structuredClone(cfg);
  delete c.models?.providers?.[providerId];
  // Objects install had to create, now empty (on both sides, so a user's own empty {} compares equal).
  if (c.models?.providers && !Object.keys(c.models.providers).length) delete c.models.providers;
  if (c.models && !Object.keys(c.models).length) delete c.models;
  if (defaults && c.agents?.defaults?.model) {
    if (typeof c.agents.defaults.model === "string") delete c.agents.defaults.model;
    else delete c.agents.defaults.model.primary;
  }
  return c;
}

describe("provider entry", () => {
  it("has the keys OpenClaw accepts, with bridge compat flags and a generous whole-second timeout", () => {
    const config = bridgeConfig();
    const e = buildProviderEntry(config);
    assert.deepEqual(Object.keys(e), ["baseUrl", "apiKey", "api", "timeoutSeconds", "models"]);
    assert.equal(e.baseUrl, "http://127.0.0.1:4097/v1");
    assert.equal(e.apiKey, "bridge-key-0123456789");
    assert.equal(e.api, "openai-completions");
    assert.ok(Number.isInteger(e.timeoutSeconds) && e.timeoutSeconds >= 1200 + 60, `timeout ${e.timeoutSeconds}`);
    assert.deepEqual(
      e.models.map((m) => [m.id, m.name, m.contextWindow, m.maxTokens]),
      [
        ["opencode/big-pickle", "opencode/big-pickle", 200000, 32000],
        ["claude", "Claude via CLI", 100000, 8000],
        ["local-qwen", "local-qwen", 200000, 32000],
      ],
    );
    for (const m of e.models) {
      assert.deepEqual(Object.keys(m), [
        "id",
        "name",
        "reasoning",
        "input",
        "cost",
        "contextWindow",
        "maxTokens",
        "compat",
      ]);
      assert.deepEqual(m.compat, {
        supportsStore: false,
        supportsDeveloperRole: false,
        supportsReasoningEffort: false,
        supportsUsageInStreaming: true,
        supportsStrictMode: false,
        maxTokensField: "max_tokens",
      });
    }
  });

  it("uses a placeholder key when the bridge has no keys, loopback for wildcard hosts, at least 900 s", () => {
    const config = resolveConfig(
      {
        server: { host: "0.0.0.0", port: 4100, allowUnauthenticatedRemote: true },
        backends: { oc: { type: "opencode" } },
        models: [{ id: "m", backend: "oc" }],
      },
      "t",
    );
    const e = buildProviderEntry(config);
    assert.equal(e.apiKey, PLACEHOLDER_API_KEY);
    assert.equal(e.baseUrl, "http://127.0.0.1:4100/v1");
    assert.equal(providerTimeoutSeconds(config), 900);
    assert.equal(bridgeBaseUrl({ server: { ...config.server, host: "::1" } }), "http://[::1]:4100/v1");
  });
});

describe("Json5Doc", () => {
  it("deletes the last property after a trailing comma without moving braces", () => {
    const text = "{\n  a: {\n    x: { p: 1 },\n    y: {\n      q: [1, 2],\n    },\n  },\n  b: 2,\n}\n";
    const doc = Json5Doc.parse(text);
    assert.equal(doc.delete(["a", "y"]), true);
    assert.equal(doc.toString(), "{\n  a: {\n    x: { p: 1 },\n  },\n  b: 2,\n}\n");
  });

  it("adds to and removes from one-line objects byte-exactly", () => {
    const text = '{ "a": { "x": 1 }, "b": {} }\n';
    const doc = Json5Doc.parse(text);
    doc.set(["a", "y"], { z: [1] });
    doc.set(["b", "c"], "d");
    assert.deepEqual(doc.toJSON(), { a: { x: 1, y: { z: [1] } }, b: { c: "d" } });
    doc.delete(["a", "y"]);
    doc.delete(["b", "c"]);
    assert.equal(doc.toString(), text);
  });

  it("reports syntax errors with a position", () => {
    assert.throws(() => Json5Doc.parse('{\n  "a": 1,\n  "b": \n}'), /line \d+/);
    assert.throws(() => Json5Doc.parse("[1, 2]"), /not an object/);
  });
});

describe("openclaw install / uninstall on realistic configs", () => {
  for (const fx of OPENCLAW_CONFIGS) {
    it(`${fx.name}: adds only our provider, idempotent, uninstall restores the text`, async () => {
      const paths = openclawHome(fx.text);
      const config = bridgeConfig();
      const before = Json5Doc.parse(fx.text).toJSON();

      const r1 = await installOpenClaw({ config, paths, now: new Date("2026-11-21T10:00:00Z") });
      assert.equal(r1.ok, true);
      assert.equal(r1.changed, true);
      const installed = read(paths.configPath);
      const afterCfg = Json5Doc.parse(installed).toJSON() as Record<string, any>;
      // Everything but our key is as it was; our key holds exactly the entry.
      assert.deepEqual(withoutOurKeys(afterCfg), withoutOurKeys(before));
      assert.deepEqual(afterCfg.models.providers.clawbridge, buildProviderEntry(config));
      for (const c of fx.comments) assert.ok(installed.includes(c), `comment kept: ${c}`);
      // Every original line is still there, in order (only added lines, or a comma appended).
      const origLines = fx.text.split(/\r?\n/);
      let at = 0;
      const newLines = installed.split(/\r?\n/);
      for (const line of origLines) {
        const j = newLines.findIndex(
          (l, k) =>
            k >= at &&
            (l === line || l === `${line},` || (line.includes("{") && l.startsWith(line.replace(/\s*}.*$/, "")))),
        );
        assert.ok(j >= 0, `original line kept: ${JSON.stringify(line)}`);
        at = j + 1;
      }
      if (fx.text.includes("\r\n")) assert.ok(!/[^\r]\n/.test(installed), "CRLF kept everywhere");
      // The backup is the original file.
      if (fx.text.trim() || existsSync(paths.configPath)) {
        const b = backups(paths);
        assert.equal(b.length, 1);
        assert.equal(read(path.join(paths.stateDir, b[0]!)), fx.text);
      }

      const r2 = await installOpenClaw({ config, paths });
      assert.equal(r2.changed, false);
      assert.equal(r2.diff, "");
      assert.equal(read(paths.configPath), installed);
      assert.equal(backups(paths).length, 1, "no backup for a no-op");

      const u = await uninstallOpenClaw({ paths });
      assert.equal(u.ok, true);
      assert.equal(u.removedProvider, true);
      const restored = read(paths.configPath);
      if (fx.text === "") assert.deepEqual(Json5Doc.parse(restored).toJSON(), {});
      else assert.equal(restored, fx.text);
      assert.equal(existsSync(paths.markerPath), false, "install record removed");
    });
  }

  it("creates the config file (0600) when there is none", async () => {
    const paths = openclawHome();
    const r = await installOpenClaw({ config: bridgeConfig(), paths });
    assert.equal(r.created, true);
    assert.equal(r.backupPath, undefined);
    assert.equal((await import("node:fs")).statSync(paths.configPath).mode & 0o777, 0o600);
    assert.deepEqual(Object.keys(JSON.parse(read(paths.configPath)).models.providers), ["clawbridge"]);
  });

  it("--dry-run prints the diff and writes nothing", async () => {
    const fx = OPENCLAW_CONFIGS[1]!;
    const paths = openclawHome(fx.text);
    const listing = readdirSync(paths.stateDir);
    const r = await installOpenClaw({ config: bridgeConfig(), paths, dryRun: true, setDefault: true });
    assert.equal(r.dryRun, true);
    assert.equal(r.changed, true);
    assert.match(r.diff, /^\+\s+clawbridge: \{/m);
    assert.match(r.diff, /^\+.*primary: "clawbridge\/opencode\/big-pickle"/m);
    assert.equal(read(paths.configPath), fx.text);
    assert.deepEqual(readdirSync(paths.stateDir), listing, "no backup, no record");
  });

  it("the diff never shows secrets", async () => {
    const fx = OPENCLAW_CONFIGS[0]!;
    const paths = openclawHome(fx.text);
    const r = await installOpenClaw({ config: bridgeConfig(), paths });
    assert.ok(!r.diff.includes("bridge-key-0123456789"), "bridge key masked");
    assert.match(r.diff, /apiKey": "<redacted>"/);
    assert.ok(!JSON.stringify(r).includes("bridge-key-0123456789"), "not in the JSON result either");
    assert.equal(
      redactLine(`  botToken: 'abc', maxTokensField: "max_tokens", apiKey: "${PLACEHOLDER_API_KEY}"`),
      `  botToken: '<redacted>', maxTokensField: "max_tokens", apiKey: "${PLACEHOLDER_API_KEY}"`,
    );
    assert.equal(unifiedDiff("f", "a\n", "a\n"), "");
  });

  it("updates the entry when the bridge's models change and keeps keys the user added to it", async () => {
    const paths = openclawHome(OPENCLAW_CONFIGS[0]!.text);
    await installOpenClaw({ config: bridgeConfig(), paths });
    // The user adds a header to our entry.
    const doc = Json5Doc.parse(read(paths.configPath));
    doc.set(["models", "providers", "clawbridge", "headers"], { "X-Team": "blue" });
    writeFileSync(paths.configPath, doc.toString());
    const changed = bridgeConfig({
      models: [
        { id: "opencode/big-pickle", backend: "oc", maxTokens: 16000 },
        { id: "new-one", backend: "cc" },
      ],
    });
    const r = await installOpenClaw({ config: changed, paths });
    assert.equal(r.changed, true);
    assert.match(r.diff, /\+.*"new-one"/);
    assert.ok(!/^-.*"vllm"|^-.*"gateway"/m.test(r.diff), "nothing else removed");
    assert.ok(r.notes.some((n) => /edited since the last install/.test(n)));
    const cfg = Json5Doc.parse(read(paths.configPath)).toJSON() as Record<string, any>;
    assert.deepEqual(cfg.models.providers.clawbridge.headers, { "X-Team": "blue" });
    assert.deepEqual(
      cfg.models.providers.clawbridge.models.map((m: any) => [m.id, m.maxTokens]),
      [
        ["opencode/big-pickle", 16000],
        ["new-one", 32000],
      ],
    );
    // Edited again after this install: uninstall says so, and still removes only our provider id.
    writeFileSync(paths.configPath, read(paths.configPath).replace('"timeoutSeconds": 1320', '"timeoutSeconds": 2000'));
    const u = await uninstallOpenClaw({ paths });
    assert.ok(u.notes.some((n) => /changed since clawbridge installed it/.test(n)));
    assert.equal(read(paths.configPath), OPENCLAW_CONFIGS[0]!.text);
  });

  it("uninstall leaves unrelated edits made after install in place", async () => {
    const fx = OPENCLAW_CONFIGS[1]!;
    const paths = openclawHome(fx.text);
    await installOpenClaw({ config: bridgeConfig(), paths });
    const edited = read(paths.configPath).replace("port: 18789", "port: 18790");
    writeFileSync(paths.configPath, edited);
    await uninstallOpenClaw({ paths });
    assert.equal(read(paths.configPath), fx.text.replace("port: 18789", "port: 18790"));
  });

  it("uninstall without an install record removes only an entry equal to what install writes (or with --force)", async () => {
    const config = bridgeConfig();
    const entry = buildProviderEntry(config);
    const mine = `{\n  "models": {\n    "providers": {\n      "clawbridge": ${JSON.stringify({ ...entry, baseUrl: "http://10.0.0.5:4097/v1" })}\n    }\n  }\n}\n`;
    const paths = openclawHome(mine);
    const u1 = await uninstallOpenClaw({ paths, expectedEntry: entry });
    assert.equal(u1.ok, false);
    assert.equal(u1.removedProvider, false);
    assert.equal(read(paths.configPath), mine);
    assert.ok(u1.notes.some((n) => /--force/.test(n)));
    const u2 = await uninstallOpenClaw({ paths, force: true });
    assert.equal(u2.removedProvider, true);
    assert.deepEqual(Json5Doc.parse(read(paths.configPath)).toJSON(), { models: { providers: {} } });

    const same = openclawHome(
      `{\n  "models": {\n    "providers": {\n      "clawbridge": ${JSON.stringify(entry)}\n    }\n  }\n}\n`,
    );
    const u3 = await uninstallOpenClaw({ paths: same, expectedEntry: entry });
    assert.equal(u3.removedProvider, true);
  });

  it("refuses a config it cannot parse, or one that $includes the providers, and changes nothing", async () => {
    const broken = '{\n  "gateway": { "port": 18789 },\n  "models": \n}\n';
    const p1 = openclawHome(broken);
    await assert.rejects(
      installOpenClaw({ config: bridgeConfig(), paths: p1 }),
      (e: Error) => e instanceof OpenClawSetupError && /not valid JSON5/.test(e.message),
    );
    assert.equal(read(p1.configPath), broken);
    const inc = '{\n  models: { $include: "./models.json5" },\n}\n';
    const p2 = openclawHome(inc);
    await assert.rejects(installOpenClaw({ config: bridgeConfig(), paths: p2 }), /\$include/);
    assert.equal(read(p2.configPath), inc);
  });
});

describe("--set-default", () => {
  it("sets agents.defaults.model.primary and uninstall puts the old value back", async () => {
    const fx = OPENCLAW_CONFIGS[0]!;
    const paths = openclawHome(fx.text);
    const r = await installOpenClaw({ config: bridgeConfig(), paths, setDefault: true, model: "claude" });
    assert.equal(r.defaultModel, "clawbridge/claude");
    const cfg = Json5Doc.parse(read(paths.configPath)).toJSON() as Record<string, any>;
    assert.equal(cfg.agents.defaults.model.primary, "clawbridge/claude");
    assert.deepEqual(cfg.agents.defaults.model.fallbacks, [], "sibling key kept");
    assert.deepEqual(
      withoutOurKeys(cfg, "clawbridge", true),
      withoutOurKeys(Json5Doc.parse(fx.text).toJSON(), "clawbridge", true),
    );
    assert.equal(readMarker(paths).installs.clawbridge?.defaultModels?.[0]?.previous, "vllm/qwen2.5-coder");
    const u = await uninstallOpenClaw({ paths });
    assert.deepEqual(u.restoredDefaults, [{ path: "agents.defaults.model.primary", to: "vllm/qwen2.5-coder" }]);
    assert.equal(read(paths.configPath), fx.text);
  });

  it("replaces a string-form model, and creates agents.defaults.model when missing", async () => {
    const tabs = OPENCLAW_CONFIGS.find((f) => f.name === "tab indentation")!;
    const p1 = openclawHome(tabs.text);
    await installOpenClaw({ config: bridgeConfig(), paths: p1, setDefault: true });
    assert.equal(
      (Json5Doc.parse(read(p1.configPath)).toJSON() as any).agents.defaults.model,
      "clawbridge/opencode/big-pickle",
    );
    await uninstallOpenClaw({ paths: p1 });
    assert.equal(read(p1.configPath), tabs.text);

    const minimal = OPENCLAW_CONFIGS.find((f) => f.name.startsWith("no models key"))!;
    const p2 = openclawHome(minimal.text);
    await installOpenClaw({ config: bridgeConfig(), paths: p2, setDefault: true });
    assert.deepEqual((Json5Doc.parse(read(p2.configPath)).toJSON() as any).agents.defaults.model, {
      primary: "clawbridge/opencode/big-pickle",
    });
    await uninstallOpenClaw({ paths: p2 });
    assert.equal(read(p2.configPath), minimal.text);
  });

  it("--agent sets that agent's model; an unknown agent is an error naming the agents", async () => {
    const fx = OPENCLAW_CONFIGS[0]!;
    const paths = openclawHome(fx.text);
    await assert.rejects(
      installOpenClaw({ config: bridgeConfig(), paths, setDefault: true, agent: "nope" }),
      /no agent "nope" in agents\.list \(agents: main, work\)/,
    );
    assert.equal(read(paths.configPath), fx.text);
    await installOpenClaw({ config: bridgeConfig(), paths, setDefault: true, agent: "work" });
    await installOpenClaw({ config: bridgeConfig(), paths, setDefault: true, agent: "main" });
    const cfg = Json5Doc.parse(read(paths.configPath)).toJSON() as any;
    assert.equal(cfg.agents.list[1].model, "clawbridge/opencode/big-pickle");
    assert.deepEqual(cfg.agents.list[0].model, { primary: "clawbridge/opencode/big-pickle" });
    assert.equal(cfg.agents.defaults.model.primary, "vllm/qwen2.5-coder", "defaults untouched");
    await uninstallOpenClaw({ paths });
    assert.equal(read(paths.configPath), fx.text);
  });

  it("uninstall does not touch a default model the user changed after install", async () => {
    const fx = OPENCLAW_CONFIGS[1]!;
    const paths = openclawHome(fx.text);
    await installOpenClaw({ config: bridgeConfig(), paths, setDefault: true });
    writeFileSync(
      paths.configPath,
      read(paths.configPath).replace(
        'primary: "clawbridge/opencode/big-pickle"',
        'primary: "anthropic/claude-opus-4-6"',
      ),
    );
    const u = await uninstallOpenClaw({ paths });
    assert.deepEqual(u.restoredDefaults, []);
    assert.ok(u.notes.some((n) => /no longer points at clawbridge\/opencode\/big-pickle/.test(n)));
    assert.equal(
      read(paths.configPath),
      fx.text.replace('primary: "vllm/qwen"', 'primary: "anthropic/claude-opus-4-6"'),
    );
  });

  it("collectModelRefs finds leftover references to the provider", () => {
    const refs = collectModelRefs(
      {
        agents: {
          defaults: { model: { primary: "clawbridge/x", fallbacks: ["clawbridge/y"] }, models: { "clawbridge/x": {} } },
        },
        models: { providers: { clawbridge: { models: [] } } },
      },
      "clawbridge",
    );
    assert.deepEqual(
      refs.sort(),
      [
        "agents.defaults.model.fallbacks[0]",
        "agents.defaults.model.primary",
        'agents.defaults.models["clawbridge/x"]',
      ].sort(),
    );
  });
});

describe("stale models.json", () => {
  function agentModelsJson(paths: OpenClawPaths, agent: string, data: unknown): string {
    const dir = path.join(paths.stateDir, "agents", agent, "agent");
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, "models.json");
    writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
    return file;
  }

  it("removes our provider's entry when its baseUrl/apiKey are stale, keeps other providers, backs up; leaves others alone", async () => {
    const paths = openclawHome(OPENCLAW_CONFIGS[0]!.text);
    const vllm = {
      baseUrl: "http://127.0.0.1:8000/v1",
      apiKey: "sk-vllm-secret-value",
      api: "openai-completions",
      models: [],
    };
    const stale = agentModelsJson(paths, "main", {
      providers: {
        vllm,
        clawbridge: {
          baseUrl: "http://127.0.0.1:4000/v1",
          apiKey: "old-key-123456",
          api: "openai-completions",
          models: [],
        },
      },
    });
    const untouched = agentModelsJson(paths, "work", { providers: { vllm } });
    const untouchedText = read(untouched);
    const r = await installOpenClaw({ config: bridgeConfig(), paths });
    const main = r.modelsJson.find((m) => m.file === stale)!;
    assert.equal(main.action, "removed-entry");
    assert.match(main.reason!, /baseUrl "http:\/\/127\.0\.0\.1:4000\/v1"/);
    assert.deepEqual(JSON.parse(read(stale)), { providers: { vllm } });
    assert.ok(main.backup && read(main.backup).includes("old-key-123456"), "backup holds the old file");
    assert.equal(r.modelsJson.find((m) => m.file === untouched)!.action, "none");
    assert.equal(read(untouched), untouchedText);

    // A models.json that OpenClaw regenerated with the current entry is not stale.
    const entry = buildProviderEntry(bridgeConfig());
    writeFileSync(stale, `${JSON.stringify({ providers: { vllm, clawbridge: entry } }, null, 2)}\n`);
    const r2 = await installOpenClaw({ config: bridgeConfig(), paths });
    assert.equal(r2.modelsJson.find((m) => m.file === stale)!.action, "none");
    // Uninstall: any entry of ours would keep the provider alive in merge mode; it goes.
    const u = await uninstallOpenClaw({ paths });
    assert.equal(u.modelsJson.find((m) => m.file === stale)!.action, "removed-entry");
    assert.deepEqual(JSON.parse(read(stale)), { providers: { vllm } });
  });

  it("--dry-run only reports it; an unreadable models.json is left alone", async () => {
    const paths = openclawHome(OPENCLAW_CONFIGS[0]!.text);
    const stale = agentModelsJson(paths, "main", {
      providers: { clawbridge: { baseUrl: "http://127.0.0.1:1/v1", models: [] } },
    });
    const text = read(stale);
    const broken = path.join(paths.stateDir, "agents", "work", "agent", "models.json");
    mkdirSync(path.dirname(broken), { recursive: true });
    writeFileSync(broken, "{ not json");
    const r = await installOpenClaw({ config: bridgeConfig(), paths, dryRun: true });
    assert.equal(r.modelsJson.find((m) => m.file === stale)!.action, "would-remove-entry");
    assert.equal(r.modelsJson.find((m) => m.file === broken)!.action, "left-unreadable");
    assert.equal(read(stale), text);
    assert.equal(read(broken), "{ not json");
  });
});

describe("validation by OpenClaw", () => {
  it("a rejected config is not written (OpenClaw stand-in says invalid)", async () => {
    const fx = OPENCLAW_CONFIGS[1]!;
    const paths = openclawHome(fx.text);
    const seen: string[] = [];
    const rejecting: Validator = async (p) => {
      seen.push(read(p.configPath));
      const valid = !read(p.configPath).includes("clawbridge");
      return {
        ran: true,
        valid,
        issues: valid
          ? []
          : [{ path: "models.providers.clawbridge.models.0.compat", message: 'Unrecognized key: "x"' }],
        detail: valid ? "valid" : "invalid",
      };
    };
    const r = await installOpenClaw({ config: bridgeConfig(), paths, validate: rejecting });
    assert.equal(r.ok, false);
    assert.equal(read(paths.configPath), fx.text, "unchanged");
    assert.equal(backups(paths).length, 0);
    assert.equal(existsSync(paths.markerPath), false);
    assert.ok(r.notes.some((n) => /was NOT changed/.test(n)));
    assert.ok(seen[0]!.includes("clawbridge"), "the candidate text was validated");
    assert.deepEqual(
      readdirSync(paths.stateDir).filter((f) => f.includes("clawbridge-check")),
      [],
      "candidate file removed",
    );
  });

  it("a config that was already invalid for other reasons is still updated, with a note", async () => {
    const paths = openclawHome(OPENCLAW_CONFIGS[1]!.text);
    const oldIssue: ValidationResult = {
      ran: true,
      valid: false,
      issues: [{ path: "gateway.mode", message: "bad" }],
      detail: "invalid",
    };
    const r = await installOpenClaw({ config: bridgeConfig(), paths, validate: async () => oldIssue });
    assert.equal(r.ok, true);
    assert.ok(r.notes.some((n) => /already invalid before this change \(gateway\.mode: bad\)/.test(n)));
    assert.ok(read(paths.configPath).includes("clawbridge"));
  });
});
