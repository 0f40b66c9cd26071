/**
 * Models that exist (issue 27): reading what each CLI lists, choosing a live model for one that is
 * gone, and the catalog with a real openai backend against the fake model API (listing, remap,
 * expose, the cache in the data dir surviving a start where the server is gone).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ModelCatalog } from "../../src/backends/catalog/catalog.js";
import { chooseLive, didYouMean } from "../../src/backends/catalog/choose.js";
import { parseCodexModels } from "../../src/backends/codex/models.js";
import { parseOpencodeModels } from "../../src/backends/opencode/models.js";
import { createBackends } from "../../src/backends/registry.js";
import { embeddedDefaults, resolveConfig } from "../../src/core/config/load.js";
import { createLogger } from "../../src/core/log/logger.js";
import { ModelRouter } from "../../src/request/models/routes.js";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const log = createLogger("silent");

// `opencode models --verbose` of opencode-ai 1.18.33 (two entries, shortened), with an inactive one.
const OPENCODE_VERBOSE = `opencode/big-pickle
{
  "id": "big-pickle",
  "providerID": "opencode",
  "name": "Big Pickle",
  "status": "active",
  "cost": {
    "input": 0,
    "output": 0
  },
  "limit": {
    "context": 200000,
    "output": 32000
  },
  "capabilities": {
    "toolcall": true,
    "input": {
      "text": true,
      "image": false
    }
  }
}
opencode/old-model-free
{
  "id": "old-model-free",
  "status": "deprecated",
  "cost": {
    "input": 0,
    "output": 0
  }
}
anthropic/claude-x
{
  "id": "claude-x",
  "name": "Claude X",
  "status": "active",
  "cost": {
    "input": 3,
    "output": 15
  },
  "limit": {
    "context": 1000000
  },
  "capabilities": {
    "toolcall": true,
    "input": {
      "text": true,
      "image": true,
      "pdf": true
    }
  }
}`;

test("opencode models --verbose: ids with name, free, context window and input types; inactive models left out; plain lines too", () => {
  assert.deepEqual(parseOpencodeModels(OPENCODE_VERBOSE), [
    {
      id: "opencode/big-pickle",
      name: "Big Pickle",
      free: true,
      contextWindow: 200000,
      input: ["text"],
      toolCalls: true,
    },
    {
      id: "anthropic/claude-x",
      name: "Claude X",
      free: false,
      contextWindow: 1000000,
      input: ["text", "image", "pdf"],
      toolCalls: true,
    },
  ]);
  assert.deepEqual(parseOpencodeModels("opencode/big-pickle\nopencode/space-bunny-free\nnot a model line\n"), [
    { id: "opencode/big-pickle" },
    { id: "opencode/space-bunny-free" },
  ]);
});

test("codex debug models: the listed models with their context window and input types; hidden ones left out", () => {
  const out = JSON.stringify({
    models: [
      {
        slug: "gpt-5.5",
        display_name: "GPT-5.5",
        context_window: 272000,
        input_modalities: ["text", "image"],
        visibility: "list",
      },
      { slug: "codex-auto-review", visibility: "hide" },
      { display_name: "no slug" },
    ],
  });
  assert.deepEqual(parseCodexModels(out), [
    { id: "gpt-5.5", name: "GPT-5.5", contextWindow: 272000, input: ["text", "image"], toolCalls: true },
  ]);
  assert.throws(() => parseCodexModels("not json"));
});

test("the CLI's 'Did you mean' suggestions, named like the missing model", () => {
  assert.deepEqual(
    didYouMean(
      "Model not found: opencode/minimax-m2.5-free. Did you mean: ling-3.0-flash-fin-free, longcat-2.5-preview-free, mimo-v2.6-flash-free?",
    ),
    {
      missing: "opencode/minimax-m2.5-free",
      suggestions: [
        "opencode/ling-3.0-flash-fin-free",
        "opencode/longcat-2.5-preview-free",
        "opencode/mimo-v2.6-flash-free",
      ],
    },
  );
  assert.equal(didYouMean("rate limited"), undefined);
});

test("choosing a live model: best-free takes a free hint, else tool calls and the largest context; first; error never", () => {
  const models = [
    { id: "p/paid", free: false, toolCalls: true, contextWindow: 2_000_000 },
    { id: "p/small-free", free: true, toolCalls: true, contextWindow: 100_000 },
    { id: "p/big-free", free: true, toolCalls: true, contextWindow: 1_000_000 },
    { id: "p/no-tools-free", free: true, toolCalls: false, contextWindow: 5_000_000 },
  ];
  assert.equal(chooseLive(models, "best-free")?.id, "p/big-free");
  assert.equal(chooseLive(models, "best-free", ["p/small-free"])?.id, "p/small-free", "the CLI's own suggestion first");
  assert.equal(
    chooseLive(models, "best-free", ["p/paid"])?.id,
    "p/big-free",
    "a suggestion that is not free is not taken",
  );
  assert.equal(chooseLive(models, "first")?.id, "p/paid");
  assert.equal(chooseLive(models, "first", ["p/no-tools-free"])?.id, "p/no-tools-free");
  assert.equal(chooseLive(models, "error"), undefined);
  assert.equal(chooseLive([{ id: "p/paid", free: false }], "best-free"), undefined, "no free model: no remap");
  assert.equal(chooseLive([], "first"), undefined);
});

test("the embedded defaults expose OpenCode's models and remap the seed's names to a free live one", () => {
  const c = resolveConfig(embeddedDefaults({}), "embedded defaults");
  assert.equal(c.backends.opencode!.models.expose, "all");
  assert.equal(c.backends.opencode!.models.remap.onMissing, "best-free");
  assert.ok(c.exposeTemplates.opencode, "a template for the discovered models");
  assert.deepEqual(
    c.models.map((m) => m.id),
    ["opencode/minimax-m2.5-free", "opencode/glm-5-free"],
    "the seed's names stay, as aliases",
  );
});

test("a backend's model settings are checked with messages that name the key", () => {
  const base = {
    backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
    models: [{ id: "m", backend: "up" }],
  };
  const bad = structuredClone(base) as any;
  bad.backends.up.expose = "everything";
  bad.backends.up.remap = { onMissing: "cheapest" };
  assert.throws(
    () => resolveConfig(bad, "t"),
    (err: Error) => /backends\.up\.expose/.test(err.message) && /backends\.up\.remap\.onMissing/.test(err.message),
  );
  const c = resolveConfig(base, "t");
  assert.deepEqual(c.backends.up!.models, {
    expose: "configured",
    remap: { onMissing: "error" },
    discovery: { enabled: true, refreshHours: 6 },
    limits: { backoffSeconds: 300 },
  });
});

test("the catalog with a real openai backend: listed, a gone model remapped (logged once), exposed models served; the cache survives a start with the server gone", async () => {
  const fake = await startFakeOpenAI();
  const dataDir = tempDir("cb-catalog-");
  const config = (baseUrl: string) =>
    resolveConfig(
      {
        dataDir,
        backends: { up: { type: "openai", baseUrl, expose: "all", remap: { onMissing: "first" } } },
        models: [{ id: "mine", backend: "up", model: "gone-model" }],
      },
      "t",
    );
  try {
    const c1 = config(fake.url);
    const backends1 = await createBackends(c1, log);
    const cat1 = new ModelCatalog({
      backends: backends1,
      settings: { up: c1.backends.up!.models },
      dataDir,
      logger: log,
    });
    const router1 = new ModelRouter(c1, backends1, cat1);
    assert.equal(router1.resolve("mine")!.model.backendModel, "gone-model", "before any listing: as configured");
    cat1.start();
    const route = await router1.resolveLive("mine");
    assert.equal(route!.model.backendModel, "fake-model", "remapped to the live one (onMissing: first)");
    assert.equal(route!.model.id, "mine");
    assert.deepEqual(cat1.remaps(), [
      {
        backend: "up",
        wanted: "gone-model",
        using: "fake-model",
        why: "up does not offer gone-model; remap.onMissing: first",
      },
    ]);
    router1.resolve("mine");
    assert.equal(cat1.remaps().length, 1, "chosen once");
    assert.deepEqual(
      router1.listed().map((m) => [m.id, m.ownedBy]),
      [["up/fake-model", "up"]],
      "the configured model its server does not offer is not advertised; the discovered one is",
    );
    const exposed = router1.resolve("up/fake-model");
    assert.equal(exposed?.model.backendModel, "fake-model");
    assert.equal(exposed?.backend.name, "up");
    // A requested `<backend>/<model>` the server does not offer: served by a live one too (onMissing: first).
    const gone = router1.resolve("up/nothing-like-it");
    assert.equal(gone?.model.backendModel, "fake-model");
    assert.equal(gone?.model.id, "up/nothing-like-it");
    assert.ok(cat1.remaps().some((r) => r.wanted === "nothing-like-it" && r.using === "fake-model"));
    assert.equal(router1.resolve("elsewhere/nothing"), undefined, "not a backend's: not served");
    cat1.close();
    await Promise.all([...backends1.values()].map((b) => b.close?.()));
    const cached = JSON.parse(readFileSync(path.join(dataDir, "models.json"), "utf8"));
    assert.deepEqual(cached.backends.up.models, [{ id: "fake-model" }]);

    // The server is gone: the models are known from the cache, and why they could not be listed now.
    await fake.close();
    const c2 = config(fake.url);
    const backends2 = await createBackends(c2, log);
    const cat2 = new ModelCatalog({
      backends: backends2,
      settings: { up: c2.backends.up!.models },
      dataDir,
      logger: log,
    });
    cat2.start();
    await cat2.refresh("up");
    const l = cat2.list("up");
    assert.equal(l?.source, "cache");
    assert.deepEqual(l?.models, [{ id: "fake-model" }]);
    assert.ok(l?.error, "the failed listing is said");
    assert.equal(new ModelRouter(c2, backends2, cat2).resolve("up/fake-model")?.model.backendModel, "fake-model");
    cat2.close();
    await Promise.all([...backends2.values()].map((b) => b.close?.()));
    assert.ok(existsSync(path.join(dataDir, "models.json")), "a failed listing keeps the cache");
  } finally {
    await fake.close().catch(() => undefined);
    cleanup(dataDir);
  }
});
