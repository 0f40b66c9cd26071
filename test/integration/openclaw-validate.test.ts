/**
 * What `clawbridge openclaw install` writes passes the REAL OpenClaw's own check (`openclaw config
 * validate --json`, 2026.5 and 2026.9 from the e2e installs, or CLAWBRIDGE_TEST_OPENCLAW_BIN), on
 * realistic configs; and OpenClaw refuses an unknown compat key, so its schema really is strict.
 * Entries of every api kind (`--api openai-completions | openai-responses | anthropic-messages`),
 * with models that see images and models that do not, pass too.
 * Skipped when no OpenClaw is installed (the e2e set-up installs it).
 */
import { strict as assert } from "node:assert";
import { readFileSync, writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { installOpenClaw } from "../../src/ops/openclaw/install.js";
import { Json5Doc } from "../../src/ops/openclaw/json5-doc.js";
import { OPENCLAW_API_KINDS } from "../../src/ops/openclaw/provider.js";
import { validateWithOpenClaw, type Validator } from "../../src/ops/openclaw/validate.js";
import { OPENCLAW_CONFIGS } from "../fixtures/openclaw-configs.js";
import { bridgeConfig, findRealOpenClaw, openclawHome } from "../helpers/openclaw-home.js";

const read = (f: string) => readFileSync(f, "utf8");

describe("validation by the real OpenClaw", () => {
  const realBins = findRealOpenClaw();
  it(`the installed config passes \`openclaw config validate --json\` (${realBins.map((b) => b.label).join(", ") || "no OpenClaw installed"})`, {
    skip: realBins.length
      ? false
      : "OpenClaw is not installed: set CLAWBRIDGE_TEST_OPENCLAW_BIN or run the e2e set-up that fills test/e2e/.openclaw/",
  }, async () => {
    // ~3-7 s per OpenClaw run: two configs each, both versions at once.
    await Promise.all(
      realBins.map(async (bin) => {
        const fixtures = OPENCLAW_CONFIGS.filter(
          (f) => f.name.startsWith("hand-edited") || f.name.startsWith("onboarding"),
        );
        for (const [i, fx] of fixtures.entries()) {
          const paths = openclawHome(fx.text);
          const env = { ...process.env, HOME: paths.stateDir, ...(bin.node ? { OPENCLAW_NODE: bin.node } : {}) };
          const validate: Validator = (p) => validateWithOpenClaw(bin.bin, p, env);
          const r = await installOpenClaw({ config: bridgeConfig(), paths, setDefault: true, validate });
          assert.equal(r.validation?.ran, true, `${bin.label}: ${r.validation?.detail}`);
          assert.equal(r.validation?.valid, true, `${bin.label} / ${fx.name}: ${r.validation?.detail}`);
          assert.equal(r.ok, true);
          assert.ok(read(paths.configPath).includes("clawbridge/opencode/big-pickle"));
          if (i > 0) continue;
          const v = await validate(paths);
          assert.equal(v.valid, true, `${bin.label}: the written file: ${v.detail}`);
          // And OpenClaw rejects an unknown compat key: the schema really is strict.
          const doc = Json5Doc.parse(read(paths.configPath));
          doc.set(["models", "providers", "clawbridge", "models", 0, "compat", "noSuchFlag"], true);
          writeFileSync(paths.configPath, doc.toString());
          const bad = await validate(paths);
          assert.equal(bad.valid, false, `${bin.label} should reject noSuchFlag`);
          assert.deepEqual(
            bad.issues.map((x) => x.path),
            ["models.providers.clawbridge.models.0.compat"],
          );
          assert.match(bad.issues[0]!.message, /noSuchFlag|Invalid input/);
        }
      }),
    );
  });

  it(`an entry of each api kind, with image and text-only models, passes \`openclaw config validate --json\` (${realBins.map((b) => b.label).join(", ") || "no OpenClaw installed"})`, {
    skip: realBins.length ? false : "OpenClaw is not installed: set CLAWBRIDGE_TEST_OPENCLAW_BIN or run the e2e set-up",
  }, async () => {
    const config = resolveConfig(
      {
        server: { apiKeys: ["bridge-key-0123456789"] },
        backends: {
          cc: { type: "claude-code" },
          up: { type: "openai", baseUrl: "http://127.0.0.1:8000/v1" },
          router: { type: "router", classifier: "cls", answer: "vision" },
        },
        models: [
          { id: "claude", backend: "cc" },
          { id: "cls", backend: "up", input: ["text"] },
          { id: "vision", backend: "up", input: ["text", "image", "pdf"] },
          { id: "router", backend: "router" },
        ],
      },
      "test",
    );
    // One file with a provider per kind, checked by one OpenClaw run per generation.
    await Promise.all(
      realBins.map(async (bin) => {
        const fx = OPENCLAW_CONFIGS.find((f) => f.name.startsWith("onboarding"))!;
        const paths = openclawHome(fx.text);
        for (const api of OPENCLAW_API_KINDS) {
          const r = await installOpenClaw({ config, paths, providerId: `cb-${api}`, entry: { api } });
          assert.equal(r.ok, true, `${api}: ${r.notes.join("; ")}`);
        }
        const env = { ...process.env, HOME: paths.stateDir, ...(bin.node ? { OPENCLAW_NODE: bin.node } : {}) };
        const v = await validateWithOpenClaw(bin.bin, paths, env);
        assert.equal(v.ran, true, `${bin.label}: ${v.detail}`);
        assert.equal(v.valid, true, `${bin.label}: ${v.detail}`);
        const written = Json5Doc.parse(read(paths.configPath)).toJSON() as any;
        const providers = written.models.providers;
        assert.equal(providers["cb-anthropic-messages"].baseUrl, "http://127.0.0.1:4097");
        assert.equal(providers["cb-openai-responses"].baseUrl, "http://127.0.0.1:4097/v1");
        assert.deepEqual(
          providers["cb-openai-responses"].models.map((m: any) => m.input.join("+")),
          ["text+image", "text", "text+image", "text+image"],
        );
      }),
    );
  });
});
