/**
 * The secrets a system may name as `${secrets.NAME}` (src/workflows/engine/template.ts), read once
 * at start-up from two places:
 * - `<dataDir>/secrets`: `NAME=value` lines, dotenv-like (`#` comments, blank lines, an optional
 *   `export `, values optionally in single or double quotes). It must be private to its owner
 *   (no permission bits for group or others, e.g. 0600): otherwise the bridge refuses to start,
 *   naming the file and the fix (`chmod 600 <file>`).
 * - the environment, under a prefix: `CLAWBRIDGE_SECRET_TOKEN` is `${secrets.TOKEN}`. Not plain
 *   names (n8n's `$env.X` reads any variable): a system — even one built from chat — could then send
 *   the bridge's own API keys anywhere. The environment wins over the file (as dotenv: what is set
 *   is not overridden).
 * Every loaded value is handed to the redactor (redactor.ts) at once, used or not.
 */
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { secretRedactor } from "./redactor.js";

export const SECRETS_FILENAME = "secrets";
export const SECRET_ENV_PREFIX = "CLAWBRIDGE_SECRET_";
/** A secret's name (as an environment variable's). */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function secretsFile(dataDir: string): string {
  return path.join(dataDir, SECRETS_FILENAME);
}

/** Where `${secrets.NAME}` comes from, in words (for a problem naming a missing one). */
export function whereToSet(name: string, file: string): string {
  return `add ${name}=… to ${file} (chmod 600) or set ${SECRET_ENV_PREFIX}${name} in the bridge's environment`;
}

/** What is wrong with the secrets file: `key` is `permissions` or `line N`. */
export interface SecretsProblem {
  file: string;
  key: string;
  message: string;
}

export class SecretStore {
  private constructor(
    private readonly values: ReadonlyMap<string, string>,
    /** The secrets file this store read (or would have). */
    readonly file: string,
  ) {}

  /** The secret's value, or undefined when it is set nowhere. */
  value(name: string): string | undefined {
    return this.values.get(name);
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  get names(): string[] {
    return [...this.values.keys()].sort();
  }

  /**
   * Read the file (when there is one) and the prefixed environment. Returns the problems instead
   * when the file is readable by others or has a line that is not `NAME=value`.
   */
  static load(dataDir: string, env: NodeJS.ProcessEnv = process.env): SecretStore | { problems: SecretsProblem[] } {
    const file = secretsFile(dataDir);
    const values = new Map<string, string>();
    let text: string | undefined;
    try {
      const st = statSync(file);
      if (process.platform !== "win32" && (st.mode & 0o077) !== 0)
        return {
          problems: [
            {
              file,
              key: "permissions",
              message: `${file} is readable by others (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}); secrets must be private to the bridge's user: chmod 600 ${file}`,
            },
          ],
        };
      text = readFileSync(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT")
        return { problems: [{ file, key: "read", message: (err as Error).message }] };
    }
    const problems: SecretsProblem[] = [];
    if (text !== undefined) {
      text.split(/\r?\n/).forEach((raw, i) => {
        const line = raw.trim();
        if (!line || line.startsWith("#")) return;
        const m = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/.exec(line);
        if (!m || !SECRET_NAME.test(m[1]!)) {
          problems.push({
            file,
            key: `line ${i + 1}`,
            message: "expected NAME=value (NAME: letters, digits and _, not starting with a digit)",
          });
          return;
        }
        values.set(m[1]!, unquote(m[2]!));
      });
    }
    for (const [k, v] of Object.entries(env))
      if (k.startsWith(SECRET_ENV_PREFIX) && v !== undefined && SECRET_NAME.test(k.slice(SECRET_ENV_PREFIX.length)))
        values.set(k.slice(SECRET_ENV_PREFIX.length), v);
    if (problems.length) return { problems };
    for (const [name, value] of values) secretRedactor.add(name, value);
    return new SecretStore(values, file);
  }

  /** A store with no secrets (when the file was refused: its problems are reported, the rest is still checked). */
  static empty(file: string): SecretStore {
    return new SecretStore(new Map(), file);
  }
}

function unquote(v: string): string {
  const q = v[0];
  if ((q === '"' || q === "'") && v.length >= 2 && v.endsWith(q)) {
    const inner = v.slice(1, -1);
    return q === '"' ? inner.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1") : inner;
  }
  // An unquoted value ends at a ` #` comment.
  return v.replace(/\s+#.*$/, "");
}
