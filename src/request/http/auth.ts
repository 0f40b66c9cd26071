/** Bearer API keys, compared in constant time (hash both sides so lengths never leak). */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

const digest = (s: string) => createHash("sha256").update(s).digest();

export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  get required(): boolean {
    return this.digests.length > 0;
  }

  /** The presented key from `Authorization: Bearer …` or `x-api-key`. */
  static presented(headers: IncomingHttpHeaders): string | undefined {
    const auth = headers.authorization;
    if (auth) {
      const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
      if (m) return m[1]!.trim();
    }
    const x = headers["x-api-key"];
    return (Array.isArray(x) ? x[0] : x)?.trim() || undefined;
  }

  check(presented: string | undefined): boolean {
    if (!this.required) return true;
    if (!presented) return false;
    const d = digest(presented);
    let ok = false;
    for (const k of this.digests) ok = timingSafeEqual(d, k) || ok; // no early exit
    return ok;
  }
}
