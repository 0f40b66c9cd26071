/** Environment for running the REAL opencode CLI offline against a fake OpenAI-compatible API. */
import { mkdirSync } from "node:fs";
import path from "node:path";

export const OPENCODE_BIN = path.resolve("node_modules/.bin/opencode");

/** Provider id used in the generated opencode config; models are `fake/<anything>`. */
export const FAKE_PROVIDER = "fake";

/** `config`: more of OpenCode's config (e.g. `permission`), beside the fake provider. */
export function opencodeEnv(
  baseUrl: string,
  home: string,
  models: string[] = ["m1"],
  config: Record<string, unknown> = {},
): Record<string, string> {
  const xdg = (d: string) => {
    const p = path.join(home, d);
    mkdirSync(p, { recursive: true });
    return p;
  };
  return {
    HOME: home,
    XDG_CONFIG_HOME: xdg(".config"),
    XDG_DATA_HOME: xdg(".local/share"),
    XDG_CACHE_HOME: xdg(".cache"),
    XDG_STATE_HOME: xdg(".local/state"),
    OPENCODE_CONFIG_CONTENT: JSON.stringify({
      ...config,
      provider: {
        [FAKE_PROVIDER]: {
          npm: "@ai-sdk/openai-compatible",
          options: { baseURL: baseUrl, apiKey: "dummy" },
          models: Object.fromEntries(models.map((m) => [m, {}])),
        },
      },
    }),
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
  };
}
