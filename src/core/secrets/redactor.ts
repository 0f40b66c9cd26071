/**
 * The one redactor of secret values: every value of a loaded secret (src/core/secrets/store.ts) is
 * replaced by `[secret NAME]` wherever the bridge writes or sends what a run did — the event bus
 * (src/ops/events/bus.ts), the log lines (src/core/log/logger.ts), the run store's writes
 * (src/workflows/systems/db.ts) and the builder's exports. It is one per process (`secretRedactor`)
 * because the logger and the bus are made before the data dir's secrets are read, and a value must
 * be kept out of every one of them; values are only ever added (two bridges in one process both
 * stay covered).
 *
 * A value of at least MIN_SUBSTRING_CHARS characters is replaced wherever it appears, also inside a
 * longer text (a webhook that echoes its headers in a sentence) and in its JSON-escaped form (a log
 * line). A shorter value would turn every "ok" of every text into a secret, so it is replaced only
 * where it is a whole value: a string equal to it, or a JSON string equal to it in a log line.
 * Such short secrets are weak anyway; docs/SYSTEMS.md says so. Text streamed in pieces is held
 * back just enough (`safeEnd`) that no piece ends inside a value.
 */

export const MIN_SUBSTRING_CHARS = 4;

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** A string as it appears inside a JSON string literal. */
const jsonInner = (s: string) => JSON.stringify(s).slice(1, -1);

export class SecretRedactor {
  /** Value (raw and JSON-escaped) → the secret's name. */
  private names = new Map<string, string>();
  /** The long values, longest first, as one pattern (undefined: none). */
  private long?: RegExp;
  /** The longest value's length. */
  private longest = 0;
  /** Short values as whole JSON strings of a log line, `"value"`. */
  private shortQuoted?: RegExp;

  /** Keep `value` (the secret `name`'s) out of everything redacted from now on. Empty values are ignored. */
  add(name: string, value: string): void {
    if (!value) return;
    const forms = [value, jsonInner(value)];
    if (forms.every((f) => this.names.get(f) === name)) return;
    for (const f of forms) this.names.set(f, name);
    const all = [...this.names.keys()];
    const long = all.filter((v) => v.length >= MIN_SUBSTRING_CHARS).sort((a, b) => b.length - a.length);
    const short = all.filter((v) => v.length < MIN_SUBSTRING_CHARS);
    this.long = long.length ? new RegExp(long.map(escapeRegExp).join("|"), "g") : undefined;
    this.longest = long[0]?.length ?? 0;
    this.shortQuoted = short.length ? new RegExp(`"(${short.map(escapeRegExp).join("|")})"`, "g") : undefined;
  }

  /** Whether any value is kept out (when none, every method returns its argument). */
  get active(): boolean {
    return this.names.size > 0;
  }

  private mark(value: string): string {
    return `[secret ${this.names.get(value)}]`;
  }

  /** A text with every long value replaced; a text that is exactly a (short) value becomes its mark. */
  text(s: string): string {
    if (!this.active) return s;
    if (this.names.has(s)) return this.mark(s);
    return this.long ? s.replace(this.long, (m) => this.mark(m)) : s;
  }

  /** A value with every string inside it redacted (`text`); the same reference when nothing changed. */
  value<T>(v: T): T {
    if (!this.active) return v;
    return this.deep(v) as T;
  }

  private deep(v: unknown): unknown {
    if (typeof v === "string") return this.text(v);
    if (Array.isArray(v)) {
      const out = v.map((x) => this.deep(x));
      return out.some((x, i) => x !== v[i]) ? out : v;
    }
    if (v && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
      let changed = false;
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const y = this.deep(x);
        if (y !== x) changed = true;
        out[k] = y;
      }
      return changed ? out : v;
    }
    return v;
  }

  /**
   * How much of a text being streamed may go out now without cutting a value in two (the rest is
   * held until more comes or the stream ends): all but the last `longest - 1` characters, and never
   * past the start of a value that crosses that point.
   */
  safeEnd(s: string): number {
    if (!this.long) return s.length;
    let end = Math.max(0, s.length - (this.longest - 1));
    for (const m of s.matchAll(this.long)) if (m.index < end && m.index + m[0].length > end) end = m.index;
    return end;
  }

  /** A serialised line (a JSON log line): `text`, and short values that are a whole JSON string. */
  line(s: string): string {
    if (!this.active) return s;
    const t = this.text(s);
    return this.shortQuoted ? t.replace(this.shortQuoted, (_m, v: string) => `"${this.mark(v)}"`) : t;
  }
}

/** The process's redactor (see the header). */
export const secretRedactor = new SecretRedactor();
