/**
 * The provider entry `clawbridge openclaw install --api <kind>` writes, per api kind: the `api`, the
 * `baseUrl` each kind's client wants (`/v1` for the OpenAI kinds, the origin for anthropic-messages,
 * whose client appends /v1/messages), only the `compat` keys that kind's transport reads, and the
 * `input` that tells OpenClaw which models see images. Also: `--api` on the command line, a refusal
 * by OpenClaw naming its version, and `status` with an entry of each kind. (That OpenClaw itself
 * accepts each kind's entry is test/integration/openclaw-validate.test.ts.)
 */
import { strict as assert } from "node:assert";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { installOpenClaw } from "../../src/ops/openclaw/install.js";
import { Json5Doc } from "../../src/ops/openclaw/json5-doc.js";
import {
  API_KIND_PATH,
  baseUrlForKind,
  bridgeBaseUrl,
  buildProviderEntry,
  inputFor,
  isApiKind,
  OPENCLAW_API_KINDS,
  type OpenClawApiKind,
} from "../../src/ops/openclaw/provider.js";
import { openclawStatus } from "../../src/ops/openclaw/status.js";
import { openclawVersionOf, type Validator } from "../../src/ops/openclaw/validate.js";
import { cleanup, tempDir } from "../helpers/bridge.js";
import { bridgeConfig, openclawHome } from "../helpers/openclaw-home.js";

const COMPLETIONS_COMPAT = {
  supportsStore: false,
  supportsDeveloperRole: false,
  supportsReasoningEffort: false,
  supportsUsageInStreaming: true,
  supportsStrictMode: false,
  maxTokensField: "max_tokens",
};

describe("provider entry per api kind", () => {
  it("openai-completions (the default), openai-responses and anthropic-messages: api, baseUrl, compat", () => {
    const config = bridgeConfig();
    const def = buildProviderEntry(config);
    assert.equal(def.api, "openai-completions");
    const want: Record<OpenClawApiKind, { baseUrl: string; compat: unknown }> = {
      "openai-completions": { baseUrl: "http://127.0.0.1:4097/v1", compat: COMPLETIONS_COMPAT },
      "openai-responses": {
        baseUrl: "http://127.0.0.1:4097/v1",
        compat: { supportsDeveloperRole: false, supportsStrictMode: false },
      },
      "anthropic-messages": { baseUrl: "http://127.0.0.1:4097", compat: undefined },
    };
    for (const api of OPENCLAW_API_KINDS) {
      const e = buildProviderEntry(config, { api });
      assert.equal(e.api, api);
      assert.equal(e.baseUrl, want[api].baseUrl, api);
      assert.equal(e.apiKey, "bridge-key-0123456789");
      for (const m of e.models) {
        assert.deepEqual(m.compat, want[api].compat, `${api} ${m.id}`);
        if (!want[api].compat) assert.equal("compat" in m, false, "no empty compat object");
      }
    }
    assert.deepEqual(API_KIND_PATH, {
      "openai-completions": "/v1/chat/completions",
      "openai-responses": "/v1/responses",
      "anthropic-messages": "/v1/messages",
    });
    assert.equal(isApiKind("openai-responses"), true);
    assert.equal(isApiKind("openai-codex-responses"), false);
  });

  it("--base-url in either form becomes the form each kind wants; IPv6 and wildcard hosts", () => {
    const config = bridgeConfig();
    for (const url of [
      "https://proxy.example/bridge/v1",
      "https://proxy.example/bridge/v1/",
      "https://proxy.example/bridge",
    ]) {
      assert.equal(baseUrlForKind(url, "anthropic-messages"), "https://proxy.example/bridge", url);
      assert.equal(baseUrlForKind(url, "openai-responses"), "https://proxy.example/bridge/v1", url);
      assert.equal(
        buildProviderEntry(config, { api: "anthropic-messages", baseUrl: url }).baseUrl,
        "https://proxy.example/bridge",
      );
    }
    const v6 = { server: { ...config.server, host: "::1", port: 4100 } };
    assert.equal(bridgeBaseUrl(v6, "anthropic-messages"), "http://[::1]:4100");
    assert.equal(bridgeBaseUrl(v6, "openai-responses"), "http://[::1]:4100/v1");
    assert.equal(bridgeBaseUrl({ server: { ...config.server, host: "0.0.0.0" } }), "http://127.0.0.1:4097/v1");
  });
});

describe("input (images)", () => {
  it("models[].input when configured, else by backend type: every CLI, openai, router and builder see images", () => {
    for (const t of ["opencode", "claude-code", "gemini-cli", "codex", "qwen-code", "openai", "router", "builder"])
      assert.deepEqual(inputFor({}, t), ["text", "image"], t);
    assert.deepEqual(inputFor({}, "some-future-type"), ["text"]);
    assert.deepEqual(inputFor({ input: ["text"] }, "openai"), ["text"], "configured [text] wins");
    assert.deepEqual(inputFor({ input: ["image"] }, "x"), ["text", "image"]);
    // OpenClaw's schema knows text|image|video|audio; the bridge's doors carry text and images only.
    assert.deepEqual(inputFor({ input: ["text", "pdf", "audio", "video"] }, "openai"), ["text"]);
  });

  it("the entry says it per model, from the config (router and builder models too)", () => {
    const config = resolveConfig(
      {
        backends: {
          up: { type: "openai", baseUrl: "http://127.0.0.1:8000/v1" },
          router: { type: "router", classifier: "cls", answer: "plain" },
        },
        models: [
          { id: "cls", backend: "up", input: ["text"] },
          { id: "plain", backend: "up" },
          { id: "vision", backend: "up", input: ["text", "image"] },
          { id: "router", backend: "router" },
        ],
      },
      "t",
    );
    for (const api of OPENCLAW_API_KINDS) {
      const e = buildProviderEntry(config, { api });
      assert.deepEqual(
        e.models.map((m) => [m.id, m.input.join("+")]),
        [
          ["cls", "text"],
          ["plain", "text+image"],
          ["vision", "text+image"],
          ["router", "text+image"],
        ],
      );
    }
  });
});

describe("install --api", () => {
  it("writes the kind's entry; switching kinds rewrites api, baseUrl and models (compat gone for anthropic)", async () => {
    const paths = openclawHome();
    const config = bridgeConfig();
    const r1 = await installOpenClaw({ config, paths, entry: { api: "openai-responses" } });
    assert.equal(r1.ok, true);
    let cfg = Json5Doc.parse(readFileSync(paths.configPath, "utf8")).toJSON() as any;
    assert.deepEqual(cfg.models.providers.clawbridge, buildProviderEntry(config, { api: "openai-responses" }));
    const r2 = await installOpenClaw({ config, paths, entry: { api: "anthropic-messages" } });
    assert.equal(r2.changed, true);
    cfg = Json5Doc.parse(readFileSync(paths.configPath, "utf8")).toJSON() as any;
    const p = cfg.models.providers.clawbridge;
    assert.equal(p.api, "anthropic-messages");
    assert.equal(p.baseUrl, "http://127.0.0.1:4097");
    assert.ok(
      p.models.every((m: any) => !("compat" in m)),
      JSON.stringify(p.models),
    );
  });

  it("a kind OpenClaw refuses: nothing written, and the note names OpenClaw's version and the kinds to use", async () => {
    // An OpenClaw install stand-in: its package.json tells the version (no run needed).
    const root = tempDir("cb-ocpkg-");
    after(() => cleanup(root));
    const pkg = path.join(root, "node_modules", "openclaw");
    mkdirSync(pkg, { recursive: true });
    writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ name: "openclaw", version: "2026.1.9" }));
    const bin = path.join(pkg, "openclaw.mjs");
    writeFileSync(bin, "");
    assert.equal(openclawVersionOf(bin), "2026.1.9");
    assert.equal(openclawVersionOf(path.join(pkg, "missing.mjs")), undefined);
    const paths = openclawHome("{}\n");
    const validate: Validator = async () => ({
      ran: true,
      valid: false,
      bin,
      issues: [
        { path: "models.providers.clawbridge.api", message: 'Invalid option: expected one of "openai-completions"' },
      ],
      detail: "openclaw config validate: INVALID",
    });
    const r = await installOpenClaw({ config: bridgeConfig(), paths, entry: { api: "anthropic-messages" }, validate });
    assert.equal(r.ok, false);
    assert.equal(readFileSync(paths.configPath, "utf8"), "{}\n");
    const note = r.notes.find((n) => n.includes("does not accept api"));
    assert.ok(note, r.notes.join("\n"));
    assert.match(note!, /OpenClaw 2026\.1\.9 does not accept api "anthropic-messages"/);
    assert.match(note!, /--api openai-completions/);
  });
});

describe("status with each kind", () => {
  it("a kind of the bridge is no finding; the expected baseUrl, compat and input are the kind's own", async () => {
    const config = bridgeConfig({ server: { port: 1, apiKeys: ["bridge-key-0123456789"] } });
    for (const api of OPENCLAW_API_KINDS) {
      const paths = openclawHome();
      await installOpenClaw({ config, paths, entry: { api } });
      const r = await openclawStatus({ paths, config, timeoutMs: 500 });
      const byId = new Map(r.findings.map((f) => [f.id, f]));
      assert.equal(byId.has("openclaw:api"), false, api);
      assert.equal(byId.has("openclaw:base-url"), false, `${api}: ${JSON.stringify(byId.get("openclaw:base-url"))}`);
      assert.equal(byId.get("openclaw:compat")?.status, "ok", api);
      assert.equal(byId.has("openclaw:input"), false, api);
      // The probe finds the (dead) bridge's origin whichever form the baseUrl has.
      assert.match(byId.get("bridge:running")!.title, /bridge at http:\/\/127\.0\.0\.1:1: not running/);
      assert.match(byId.get("openclaw:provider")!.detail ?? "", new RegExp(`api ${api}`));
    }
  });

  it("an unknown kind fails with the bridge's kinds; a model OpenClaw thinks is text-only is a warning", async () => {
    const config = bridgeConfig({ server: { port: 1, apiKeys: ["bridge-key-0123456789"] } });
    const paths = openclawHome();
    await installOpenClaw({ config, paths });
    const doc = Json5Doc.parse(readFileSync(paths.configPath, "utf8"));
    doc.set(["models", "providers", "clawbridge", "api"], "google-generative-ai");
    doc.set(["models", "providers", "clawbridge", "models", 1, "input"], ["text"]);
    writeFileSync(paths.configPath, doc.toString());
    const r = await openclawStatus({ paths, config, timeoutMs: 500 });
    const api = r.findings.find((f) => f.id === "openclaw:api");
    assert.equal(api?.status, "fail");
    assert.match(api!.detail ?? "", /openai-responses \(\/v1\/responses\).*anthropic-messages \(\/v1\/messages\)/);
    const input = r.findings.find((f) => f.id === "openclaw:input");
    assert.equal(input?.status, "warn");
    assert.match(
      input!.detail ?? "",
      /claude: input is \["text"\], should be \["text","image"\] \(OpenClaw does not send it images\)/,
    );
  });
});
