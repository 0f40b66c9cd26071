/**
 * Outbound request guard for UNTRUSTED URLs (user-supplied URLs, redirects, search result links).
 *
 * - Only http: and https: URLs, no credentials in the URL.
 * - IP-literal hosts are checked before connecting.
 * - Hostnames are checked AFTER DNS resolution, inside the connection's own `lookup` hook, so the
 *   address that was checked is the address the socket connects to (no TOCTOU / DNS rebinding).
 * - Redirects are followed manually by the caller and every hop goes through `checkUrl` again.
 *
 * Relaxations (operator config): `allowPrivateAddresses` lets loopback, RFC 1918, CGNAT, ULA and
 * link-local through; `allowHosts` entries are CIDRs/addresses (those addresses are allowed, even
 * metadata ranges) or hostnames (`nas.lan`, `*.lan`: that host may resolve to anything).
 */
import { lookup as dnsLookup } from "node:dns";
import type { LookupAddress } from "node:dns";
import { classifyAddress, cidrContains, isIpLiteral, parseCidr, parseIp, PRIVATE_CLASSES, type Cidr } from "./ip.js";

/** A DNS resolver: hostname → addresses. Injectable for tests. */
export type ResolveFn = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

export const systemResolve: ResolveFn = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses);
    });
  });

export interface GuardPolicy {
  allowPrivateAddresses: boolean;
  /** CIDRs / addresses, or hostnames (exact or "*.suffix"). */
  allowHosts: string[];
}

export class BlockedError extends Error {
  readonly code = "BLOCKED";
  constructor(message: string) {
    super(message);
    this.name = "BlockedError";
  }
}

interface CompiledPolicy {
  allowPrivate: boolean;
  cidrs: Cidr[];
  hosts: string[];
  suffixes: string[];
}

function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

export class NetGuard {
  private readonly p: CompiledPolicy;

  constructor(policy: GuardPolicy) {
    const cidrs: Cidr[] = [];
    const hosts: string[] = [];
    const suffixes: string[] = [];
    for (const entry of policy.allowHosts) {
      const c = parseCidr(entry.trim());
      if (c) {
        cidrs.push(c);
        continue;
      }
      const h = normalizeHost(entry);
      if (h.startsWith("*.")) suffixes.push(h.slice(1));
      else if (h) hosts.push(h);
    }
    this.p = { allowPrivate: policy.allowPrivateAddresses, cidrs, hosts, suffixes };
  }

  /** True when the hostname itself is on the allowlist (it may resolve to any address). */
  hostAllowed(hostname: string): boolean {
    const h = normalizeHost(hostname);
    if (this.p.hosts.includes(h)) return true;
    return this.p.suffixes.some((s) => h.endsWith(s) && h.length > s.length);
  }

  /** Reason the address is refused, or null when it may be contacted. */
  addressProblem(address: string): string | null {
    const bytes = parseIp(address);
    if (!bytes) return `unparseable address ${address}`;
    if (this.p.cidrs.some((c) => cidrContains(c, bytes))) return null;
    const cls = classifyAddress(address);
    if (cls === "public") return null;
    if (this.p.allowPrivate && PRIVATE_CLASSES.has(cls)) return null;
    return `${cls} address ${address} is not allowed`;
  }

  /**
   * Static checks on a URL before any connection: scheme, credentials, IP-literal host.
   * Hostnames are checked later, at connect time, by `lookup`.
   */
  checkUrl(raw: string | URL): URL {
    let url: URL;
    try {
      url = typeof raw === "string" ? new URL(raw) : raw;
    } catch {
      throw new BlockedError(`invalid URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new BlockedError(`scheme ${url.protocol} is not allowed (only http and https)`);
    }
    if (url.username || url.password) throw new BlockedError("URLs with credentials are not allowed");
    const host = normalizeHost(url.hostname);
    if (!host) throw new BlockedError("URL has no host");
    if (isIpLiteral(host)) {
      if (this.hostAllowed(host)) return url;
      const problem = this.addressProblem(host);
      if (problem) throw new BlockedError(problem);
    }
    return url;
  }

  /**
   * A `net.connect`-compatible lookup function: resolves with `resolve`, refuses when ANY resolved
   * address is not allowed (a name mixing public and private answers is a rebinding attempt), and
   * hands the checked addresses to the socket.
   */
  lookupHook(resolve: ResolveFn) {
    return (
      hostname: string,
      options: { all?: boolean; family?: number | string } | number | undefined,
      callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
    ): void => {
      const opts = typeof options === "object" && options !== null ? options : {};
      const wantFamily = typeof options === "number" ? options : typeof opts.family === "number" ? opts.family : 0;
      const host = normalizeHost(hostname);
      const done = (err: Error | null, list: LookupAddress[]) => {
        if (err) {
          callback(err as NodeJS.ErrnoException, opts.all ? [] : "", undefined);
          return;
        }
        if (opts.all) callback(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      };
      if (isIpLiteral(host)) {
        const family = host.includes(":") ? 6 : 4;
        const problem = this.hostAllowed(host) ? null : this.addressProblem(host);
        done(problem ? new BlockedError(problem) : null, [{ address: host, family }]);
        return;
      }
      resolve(host).then(
        (addresses) => {
          let list: LookupAddress[] = addresses.map((a) => ({ address: a.address, family: a.family }));
          if (wantFamily === 4 || wantFamily === 6) list = list.filter((a) => a.family === wantFamily);
          if (list.length === 0) {
            const e = new Error(`no addresses for ${host}`) as NodeJS.ErrnoException;
            e.code = "ENOTFOUND";
            done(e, []);
            return;
          }
          if (!this.hostAllowed(host)) {
            for (const a of list) {
              const problem = this.addressProblem(a.address);
              if (problem) {
                done(new BlockedError(`${host} resolves to a ${problem.replace(/ is not allowed$/, "")}; refused`), []);
                return;
              }
            }
          }
          done(null, list);
        },
        (err: unknown) => done(err instanceof Error ? err : new Error(String(err)), []),
      );
    };
  }
}
