/**
 * Codex's options (`codexOptionsSchema`, defined in ./options.ts) and the command lines they
 * become: `codex exec` for one cold turn (new thread, or `exec resume <thread id>`), `codex
 * app-server` for a warm process, and
 * the `-c` overrides that give codex the client's tools as an MCP server (token in the process's
 * environment, never in argv). Every value passed with `-c` is a TOML string.
 */
import { CLIENT_TOOLS_SERVER } from "../client-tools/types.js";
import type { TurnInput } from "../contract/backend.js";
import type { CodexOptions } from "./options.js";

export { codexOptionsSchema, type CodexOptions } from "./options.js";

/** A TOML value for `-c key=value` (a JSON string literal is a valid TOML basic string). */
const toml = (s: string) => JSON.stringify(s);

/**
 * Build the argv for one turn (exported for tests and docs). `images`: the turn's image files,
 * relative to codex's working directory (src/backends/cli/images.ts), one `--image=<file>` each,
 * before the other options: `codex exec --image` takes several values and would take the final
 * `-` for one, and splits a value at commas (the paths are relative, of our own names: none).
 */
export function codexArgs(
  opts: CodexOptions,
  turn: Pick<TurnInput, "model" | "session">,
  instructionsFile?: string,
  images: readonly string[] = [],
): string[] {
  const resume = turn.session.backendSessionId;
  const args = resume ? ["exec", "resume", "--json"] : ["exec", "--json"];
  for (const file of images) args.push(`--image=${file}`);
  if (opts.skipGitRepoCheck) args.push("--skip-git-repo-check");
  if (turn.model && turn.model !== opts.defaultModelName) args.push("-m", turn.model);
  args.push("-c", `sandbox_mode=${toml(opts.sandbox)}`, "-c", `approval_policy=${toml(opts.approvalPolicy)}`);
  if (!opts.shellTool) args.push("-c", "features.shell_tool=false");
  if (instructionsFile) args.push("-c", `model_instructions_file=${toml(instructionsFile)}`);
  args.push(...opts.args);
  if (resume) args.push(resume);
  args.push("-");
  return args;
}

/** The environment variable codex reads the client-tools token from (`bearer_token_env_var`): the token never appears in argv. */
export const CODEX_CLIENT_TOOLS_TOKEN_ENV = "CLAWBRIDGE_CLIENT_TOOLS_TOKEN";
/** How long codex may take to connect to the client tools' MCP server and list its tools (`startup_timeout_sec`). */
const CODEX_MCP_STARTUP_SECONDS = 30;

/** The bridge's MCP endpoint of the client's tools, as a codex app-server is given it. */
export interface CodexClientToolsServer {
  url: string;
  /** codex's own limit for one call (`tool_timeout_sec`): past the bridge's pending timeout. */
  timeoutMs: number;
}

/**
 * The `-c` overrides that give codex the client's tools: a streamable HTTP MCP server
 * `mcp_servers.openclaw` with the token read from `CODEX_CLIENT_TOOLS_TOKEN_ENV`. (Checked with
 * codex 0.169.0: the model is offered them inside a `namespace` tool `mcp__openclaw`.)
 */
export function codexClientToolsArgs(server: CodexClientToolsServer): string[] {
  const key = `mcp_servers.${CLIENT_TOOLS_SERVER}`;
  return [
    "-c",
    `${key}.url=${toml(server.url)}`,
    "-c",
    `${key}.bearer_token_env_var=${toml(CODEX_CLIENT_TOOLS_TOKEN_ENV)}`,
    "-c",
    `${key}.startup_timeout_sec=${CODEX_MCP_STARTUP_SECONDS}`,
    "-c",
    `${key}.tool_timeout_sec=${Math.ceil(server.timeoutMs / 1000)}`,
    // A reply's calls run together, so the client gets them in one response (they are read-only for codex).
    "-c",
    `${key}.supports_parallel_tool_calls=true`,
  ];
}

/**
 * `codex app-server`'s arguments: the same safe settings as `codex exec` gets, and of the extra
 * `args` only the config flags the app-server takes too (`-c k=v`, `--config`, `--enable`,
 * `--disable`); then, with `clientTools`, the MCP server of the client's tools (last: the user's
 * flags do not change it).
 */
export function codexAppServerArgs(opts: CodexOptions, clientTools?: CodexClientToolsServer): string[] {
  const args = [
    "app-server",
    "-c",
    `sandbox_mode=${toml(opts.sandbox)}`,
    "-c",
    `approval_policy=${toml(opts.approvalPolicy)}`,
  ];
  if (!opts.shellTool) args.push("-c", "features.shell_tool=false");
  for (let i = 0; i < opts.args.length; i++) {
    const a = opts.args[i]!;
    if (["-c", "--config", "--enable", "--disable"].includes(a) && i + 1 < opts.args.length)
      args.push(a, opts.args[++i]!);
    else if (/^--(?:config|enable|disable)=/.test(a)) args.push(a);
  }
  if (clientTools) args.push(...codexClientToolsArgs(clientTools));
  return args;
}
