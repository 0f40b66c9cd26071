/**
 * Shared by the OpenClaw set-up tests (test/unit/openclaw-config.test.ts, and
 * test/integration/openclaw-validate.test.ts, which runs the real OpenClaw): a bridge config with
 * three models, private OpenClaw homes (removed after the file's tests), and where the real
 * OpenClaw is installed.
 */
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import type { Config } from "../../src/core/config/schema.js";
import { resolveOpenClawPaths, type OpenClawPaths } from "../../src/ops/openclaw/provider.js";
import { E2E_ROOT, GENERATIONS } from "../e2e/setup.js";
import { cleanup, tempDir } from "./bridge.js";

export function bridgeConfig(extra: Record<string, unknown> = {}): Config {
  return resolveConfig(
    {
      server: { apiKeys: ["bridge-key-0123456789"] },
      backends: {
        oc: { type: "opencode" },
        cc: { type: "claude-code", timeoutSeconds: 1200 },
        up: { type: "openai", baseUrl: "http://127.0.0.1:8000/v1" },
      },
      models: [
        { id: "opencode/big-pickle", backend: "oc" },
        { id: "claude", backend: "cc", name: "Claude via CLI", contextWindow: 100000, maxTokens: 8000 },
        { id: "local-qwen", backend: "up" },
      ],
      ...extra,
    },
    "test",
  );
}

const dirs: string[] = [];
// Registered when the test file imports this module (at its top level, like a hook of its own): a
// hook registered from inside a test would belong to that test and run when it ends.
after(() => dirs.splice(0).forEach(cleanup));

/** A private OpenClaw home (its config file holding `text`, when given); removed after the importing file's tests. */
export function openclawHome(text?: string): OpenClawPaths {
  const dir = tempDir("cb-oc-");
  dirs.push(dir);
  const paths = resolveOpenClawPaths({ openclawHome: dir });
  if (text !== undefined) writeFileSync(paths.configPath, text);
  return paths;
}

/**
 * The real OpenClaw: CLAWBRIDGE_TEST_OPENCLAW_BIN (an executable, or openclaw.mjs run with
 * CLAWBRIDGE_TEST_OPENCLAW_NODE), else the e2e installs in the cache of test/e2e/setup.ts
 * (`~/.cache/clawbridge-e2e/<gen>/`).
 */
export function findRealOpenClaw(): Array<{ bin: string; node?: string; label: string }> {
  const explicit = process.env.CLAWBRIDGE_TEST_OPENCLAW_BIN;
  if (explicit) {
    return explicit
      .split(",")
      .filter(Boolean)
      .map((bin) => ({
        bin,
        label: bin,
        ...(process.env.CLAWBRIDGE_TEST_OPENCLAW_NODE ? { node: process.env.CLAWBRIDGE_TEST_OPENCLAW_NODE } : {}),
      }));
  }
  const root = E2E_ROOT;
  const out: Array<{ bin: string; node?: string; label: string }> = [];
  let versions: string[] = [];
  try {
    versions = readdirSync(root);
  } catch {
    return out;
  }
  // The generations' own folders (not an install still being made, `<gen>.partial-<pid>`).
  for (const v of versions.filter((name) => GENERATIONS.some((g) => g.gen === name)).sort()) {
    const bin = path.join(root, v, "node_modules", "openclaw", "openclaw.mjs");
    const node = path.join(root, v, "node_modules", "node", "bin", "node");
    if (existsSync(bin) && existsSync(node)) out.push({ bin, node, label: `openclaw ${v}` });
  }
  return out;
}
