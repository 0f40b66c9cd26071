/**
 * The config file `clawbridge init` writes: a commented YAML document (the `yaml` package's
 * Document API, which keeps comments), and, when the file exists already, the person's own file
 * with only the new CLIs added — every key, edit and comment of theirs stays where it was, and a
 * file with nothing to add is left byte for byte.
 *
 * Each backend gets a comment that says which CLI it is, where it was found and how it is logged
 * in; each model one that says what it is. The result must pass `clawbridge config check`
 * (`resolveConfig`, src/core/config/load.ts); the tests check that it does.
 */
import { Document, isMap, isScalar, isSeq, parseDocument, type Node, type YAMLMap, type YAMLSeq } from "yaml";
import { unifiedDiff } from "../openclaw/config-diff.js";

/** One CLI to serve, as chosen. */
export interface ServedCli {
  /** Backend name in the config (`claude-code`). */
  backend: string;
  /** Backend type (`claude-code`). */
  type: string;
  /** Human name (`Claude Code`). */
  label: string;
  /** npm package that installs it. */
  pkg: string;
  /** Where the binary was found (for the comment; `~` for the home directory). */
  foundAt?: string;
  /** How it is logged in (never a secret). */
  login: string;
  /** The model served by default. */
  model: { id: string; name?: string; free?: boolean };
  /** Serve every model the CLI offers too, and remap a vanished one to a live free one (OpenCode). */
  exposeAll?: boolean;
}

export interface InitPlan {
  clis: ServedCli[];
  port?: number;
  /** For the header comment (default: today). */
  date?: string;
}

/** The model id clients ask for: OpenCode's own `opencode/<model>` as it is, else `<backend>/<model>`. */
export function modelIdFor(cli: Pick<ServedCli, "backend" | "model">): string {
  return cli.model.id.startsWith(`${cli.backend}/`) ? cli.model.id : `${cli.backend}/${cli.model.id}`;
}

function backendComment(cli: ServedCli): string {
  const where = cli.foundAt ? `, found at ${cli.foundAt}` : "";
  return ` ${cli.label} (${cli.pkg})${where}; ${cli.login}`;
}

function modelComment(cli: ServedCli): string {
  const free = cli.model.free ? " (free: no login, no cost)" : "";
  return ` ${cli.label}: ${cli.model.name || cli.model.id}${free}`;
}

function flow(node: unknown): unknown {
  if (isMap(node) || isSeq(node)) node.flow = true;
  return node;
}

function withComment<T>(node: T, comment: string): T {
  (node as Node).comment = comment;
  return node;
}

/** A backend entry, its keys commented. */
function backendNode(doc: Document, cli: ServedCli): YAMLMap {
  const map = doc.createNode({}) as YAMLMap;
  map.set("type", withComment(doc.createNode(cli.type), ` ${cli.label}`));
  map.set(
    "warm",
    withComment(flow(doc.createNode({ enabled: true })), " keep the CLI running between turns (faster answers)"),
  );
  if (cli.exposeAll) {
    map.set(
      "expose",
      withComment(doc.createNode("all"), ` also serve every model ${cli.label} offers, as ${cli.backend}/<model>`),
    );
    map.set(
      "remap",
      withComment(
        flow(doc.createNode({ onMissing: "best-free" })),
        ` a model ${cli.label} no longer offers is served by a live free one`,
      ),
    );
  }
  return map;
}

/** A model entry, commented. */
function modelNode(doc: Document, cli: ServedCli): YAMLMap {
  const map = doc.createNode({}) as YAMLMap;
  map.set("id", withComment(doc.createNode(modelIdFor(cli)), " what clients ask for"));
  map.set("backend", doc.createNode(cli.backend));
  map.set("model", withComment(doc.createNode(cli.model.id), ` what ${cli.label} is given`));
  map.set("session", withComment(flow(doc.createNode({ mode: "resume" })), " the CLI keeps the conversation"));
  map.commentBefore = modelComment(cli);
  return map;
}

function header(plan: InitPlan): string {
  const date = plan.date ?? new Date().toISOString().slice(0, 10);
  return [
    ` clawbridge configuration, written by \`clawbridge init\` (${date}).`,
    " Check it:   clawbridge config check --config <this file>",
    " Serve it:   clawbridge serve --config <this file>",
    " Every key:  docs/CONFIGURATION.md. Run `clawbridge init` again to add CLIs you install later:",
    " your edits and comments here stay.",
  ].join("\n");
}

/** A new config for `plan` (at least one CLI). */
export function renderConfig(plan: InitPlan): string {
  if (!plan.clis.length) throw new Error("no CLI chosen: nothing to serve");
  const doc = new Document({});
  doc.commentBefore = header(plan);
  const server = doc.createNode({}) as YAMLMap;
  server.set("host", withComment(doc.createNode("127.0.0.1"), " this machine only; another address needs apiKeys"));
  server.set(
    "port",
    withComment(doc.createNode(plan.port ?? 4097), " OpenClaw and other clients call http://127.0.0.1:<port>/v1"),
  );
  const root = doc.contents as YAMLMap;
  root.set("server", server);
  const backends = doc.createNode({}) as YAMLMap;
  const models = doc.createNode([]) as YAMLSeq;
  for (const cli of plan.clis) addCli(doc, backends, models, cli);
  for (const [name, node] of [
    ["backends", backends],
    ["models", models],
  ] as const) {
    const key = doc.createNode(name) as Node;
    key.spaceBefore = true; // a blank line before each section
    root.add(doc.createPair(key, node));
  }
  return doc.toString({ lineWidth: 0 });
}

function addCli(doc: Document, backends: YAMLMap, models: YAMLSeq, cli: ServedCli): void {
  const key = doc.createNode(cli.backend) as Node;
  key.commentBefore = backendComment(cli);
  backends.add(doc.createPair(key, backendNode(doc, cli)));
  models.add(modelNode(doc, cli));
}

/** The backends a config text already has, by type (first name of each type). Unparsable: none. */
export function configuredBackends(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const doc = parseDocument(text);
  const backends = doc.get("backends", true);
  if (!isMap(backends)) return out;
  for (const pair of backends.items) {
    const name = isScalar(pair.key) ? String(pair.key.value) : undefined;
    const type = isMap(pair.value) ? pair.value.get("type") : undefined;
    if (name && typeof type === "string" && !out.has(type)) out.set(type, name);
  }
  return out;
}

export class InitConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError"; // bad input: exit 2 (src/ops/commands/common.ts tells it by name)
  }
}

export interface MergeResult {
  /** The new text (the old one, unchanged, when nothing was added). */
  text: string;
  /** Backend names added. */
  added: string[];
  /** CLIs of the plan already configured: type -> the backend name there. */
  present: Record<string, string>;
}

/**
 * `plan`'s CLIs added to an existing config text: a CLI whose type the file already has is left as
 * the person wrote it; a new one gets its backend and its model (unless a model of that id exists).
 * Nothing is removed or rewritten; comments stay. Throws an InitConfigError when the text is not a
 * YAML mapping.
 */
export function mergeConfig(existing: string, plan: InitPlan, file = "the config"): MergeResult {
  const doc: Document = parseDocument(existing);
  if (doc.errors.length) throw new InitConfigError(`${file} is not valid YAML: ${doc.errors[0]!.message}`);
  if (doc.contents !== null && !isMap(doc.contents))
    throw new InitConfigError(
      `${file} is not a YAML mapping (server, backends, models); fix it or choose another --config`,
    );
  if (doc.contents === null) doc.contents = doc.createNode({}) as YAMLMap;
  const root = doc.contents as YAMLMap;
  const present = Object.fromEntries(configuredBackends(existing));
  const todo = plan.clis.filter((c) => !present[c.type]);
  if (!todo.length) return { text: existing, added: [], present };
  let backends: unknown = root.get("backends", true);
  if (backends === undefined) {
    backends = doc.createNode({}) as YAMLMap;
    root.set("backends", backends);
  }
  if (!isMap(backends))
    throw new InitConfigError(`${file}: backends is not a mapping; fix it or choose another --config`);
  let models: unknown = root.get("models", true);
  if (models === undefined) {
    models = doc.createNode([]) as YAMLSeq;
    root.set("models", models);
  }
  if (!isSeq(models)) throw new InitConfigError(`${file}: models is not a list; fix it or choose another --config`);
  if (backends.flow) backends.flow = false;
  if (models.flow) models.flow = false;
  const names = new Set(backends.items.map((p) => (isScalar(p.key) ? String(p.key.value) : "")));
  const ids = new Set(models.items.map((m) => (isMap(m) ? String(m.get("id")) : "")));
  const added: string[] = [];
  for (const cli0 of todo) {
    let backend = cli0.backend;
    for (let i = 2; names.has(backend); i++) backend = `${cli0.backend}-${i}`;
    const cli = { ...cli0, backend };
    names.add(backend);
    const key = doc.createNode(backend) as Node;
    key.commentBefore = backendComment(cli);
    backends.add(doc.createPair(key, backendNode(doc, cli)));
    if (!ids.has(modelIdFor(cli))) models.add(modelNode(doc, cli));
    ids.add(modelIdFor(cli));
    added.push(backend);
  }
  return { text: doc.toString({ lineWidth: 0 }), added, present };
}

/** Keys whose values are secrets (as src/ops/openclaw/config-diff.ts tells them: by how the key ends). */
const SECRET_KEY = /(?:api[-_]?keys?|token|secret|password|passphrase|authorization|cookie|private[-_]?key)$/i;

/**
 * YAML text with secret-looking values masked, line by line: `apiKeys` items (block or flow) and the
 * plain values of keys like `apiKey`, `ANTHROPIC_API_KEY`, `token`. (Quoted values are masked by
 * `unifiedDiff` itself.)
 */
export function maskYamlSecrets(text: string): string {
  let listIndent = -1;
  return text
    .split("\n")
    .map((line) => {
      const indent = line.length - line.trimStart().length;
      if (listIndent >= 0) {
        if (line.trim() && indent <= listIndent && !line.trimStart().startsWith("-")) listIndent = -1;
        else if (/^\s*-\s+\S/.test(line)) return line.replace(/^(\s*-\s+).*$/, "$1<redacted>");
      }
      const key = /^(\s*(?:-\s+)?)([A-Za-z0-9_$.-]+)(\s*:)(\s*)(.*)$/.exec(line);
      if (!key || !SECRET_KEY.test(key[2]!)) return line;
      const value = key[5]!;
      if (value === "" || value.startsWith("#")) {
        listIndent = indent; // a block list of keys may follow
        return line;
      }
      if (value.startsWith("[")) return `${key[1]}${key[2]}${key[3]} [<redacted>]`;
      if (/^["']/.test(value)) return line;
      return `${key[1]}${key[2]}${key[3]} <redacted>`;
    })
    .join("\n");
}

/** A unified diff of the config's old and new text ("" when equal), secret-looking values masked. */
export function configDiff(file: string, before: string, after: string): string {
  if (before === after) return "";
  return unifiedDiff(file, maskYamlSecrets(before), maskYamlSecrets(after));
}
