/**
 * IP address parsing and classification for the outbound-request guard (SSRF protection).
 *
 * Addresses are parsed into 16 bytes (IPv4 as IPv4-mapped IPv6) so one set of CIDR rules covers
 * every spelling: `127.0.0.1`, `::ffff:127.0.0.1`, `::ffff:7f00:1`, `[::1]`, `fe80::1%eth0`.
 * IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-translated
 * ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and the local-use 64:ff9b:1::/48, 6to4 2002::/16) are
 * classified by the embedded IPv4 address as well.
 */
import { isIP } from "node:net";

/** Why an address is refused. "public" = allowed. */
export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "cgnat"
  | "link-local"
  | "metadata"
  | "unspecified"
  | "multicast"
  | "reserved";

/** Classes that `allowPrivateAddresses: true` lets through. The rest stay refused unless an
 * `allowHosts` CIDR covers the address explicitly. */
export const PRIVATE_CLASSES: ReadonlySet<AddressClass> = new Set<AddressClass>([
  "loopback",
  "private",
  "cgnat",
  "link-local",
]);

export interface Cidr {
  bytes: Uint8Array; // 16 bytes
  prefix: number; // 0..128 (IPv4 prefixes are stored +96)
}

function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

function parseIPv6(text: string): Uint8Array | null {
  let s = text;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (s.length === 0) return null;
  // Embedded IPv4 tail.
  let tail: Uint8Array | null = null;
  const lastColon = s.lastIndexOf(":");
  if (lastColon >= 0 && s.slice(lastColon + 1).includes(".")) {
    tail = parseIPv4(s.slice(lastColon + 1));
    if (!tail) return null;
    s = `${s.slice(0, lastColon + 1)}${((tail[0]! << 8) | tail[1]!).toString(16)}:${((tail[2]! << 8) | tail[3]!).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const parseGroups = (part: string): number[] | null => {
    if (part === "") return [];
    const groups = part.split(":");
    const out: number[] = [];
    for (const g of groups) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = parseGroups(halves[0]!);
  const rest = halves.length === 2 ? parseGroups(halves[1]!) : [];
  if (!head || !rest) return null;
  let groups: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - rest.length;
    if (missing < 1) return null;
    groups = [...head, ...new Array<number>(missing).fill(0), ...rest];
  } else {
    groups = head;
  }
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** Parse an IPv4 or IPv6 literal (brackets and zone ids allowed) into 16 bytes, or null. */
export function parseIp(text: string): Uint8Array | null {
  let s = text.trim();
  if (s.startsWith("[") && s.endsWith("]")) s = s.slice(1, -1);
  const v4 = parseIPv4(s);
  if (v4) {
    const out = new Uint8Array(16);
    out[10] = 0xff;
    out[11] = 0xff;
    out.set(v4, 12);
    return out;
  }
  if (s.includes(":")) return parseIPv6(s);
  return null;
}

/** True when `text` is an IP literal (optionally bracketed). */
export function isIpLiteral(text: string): boolean {
  let s = text.trim();
  if (s.startsWith("[") && s.endsWith("]")) s = s.slice(1, -1);
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  return isIP(s) !== 0;
}

/** Parse "10.0.0.0/8", "fc00::/7", or a bare address (= /32 or /128). */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf("/");
  const addr = slash >= 0 ? text.slice(0, slash) : text;
  const bytes = parseIp(addr);
  if (!bytes) return null;
  const isV4 = parseIPv4(addr.trim()) !== null;
  let prefix: number;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return null;
    prefix = Number(p);
    if (prefix > (isV4 ? 32 : 128)) return null;
    if (isV4) prefix += 96;
  } else {
    prefix = 128;
  }
  return { bytes, prefix };
}

export function cidrContains(cidr: Cidr, bytes: Uint8Array): boolean {
  let bits = cidr.prefix;
  for (let i = 0; i < 16 && bits > 0; i++) {
    const take = Math.min(8, bits);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((cidr.bytes[i]! & mask) !== (bytes[i]! & mask)) return false;
    bits -= take;
  }
  return true;
}

function cidr(text: string): Cidr {
  const c = parseCidr(text);
  if (!c) throw new Error(`bad built-in CIDR ${text}`);
  return c;
}

// Order matters: the first match wins (metadata before link-local, etc.).
const TABLE: Array<[Cidr, AddressClass]> = [
  // Cloud metadata endpoints.
  [cidr("169.254.169.254/32"), "metadata"],
  [cidr("169.254.170.2/32"), "metadata"], // AWS ECS task metadata
  [cidr("100.100.100.200/32"), "metadata"], // Alibaba Cloud
  [cidr("fd00:ec2::254/128"), "metadata"], // AWS IMDS over IPv6
  // IPv4 (stored as IPv4-mapped).
  [cidr("0.0.0.0/8"), "unspecified"],
  [cidr("127.0.0.0/8"), "loopback"],
  [cidr("10.0.0.0/8"), "private"],
  [cidr("172.16.0.0/12"), "private"],
  [cidr("192.168.0.0/16"), "private"],
  [cidr("100.64.0.0/10"), "cgnat"],
  [cidr("169.254.0.0/16"), "link-local"],
  [cidr("192.0.0.0/24"), "reserved"],
  [cidr("192.0.2.0/24"), "reserved"],
  [cidr("198.18.0.0/15"), "reserved"],
  [cidr("198.51.100.0/24"), "reserved"],
  [cidr("203.0.113.0/24"), "reserved"],
  [cidr("224.0.0.0/4"), "multicast"],
  [cidr("240.0.0.0/4"), "reserved"], // includes 255.255.255.255
  // IPv6.
  [cidr("::/128"), "unspecified"],
  [cidr("::1/128"), "loopback"],
  [cidr("fc00::/7"), "private"],
  [cidr("fe80::/10"), "link-local"],
  [cidr("fec0::/10"), "private"], // deprecated site-local
  [cidr("ff00::/8"), "multicast"],
  [cidr("2001:db8::/32"), "reserved"],
  [cidr("2001::/32"), "reserved"], // Teredo
  [cidr("100::/64"), "reserved"], // discard-only
];

const MAPPED = cidr("::ffff:0:0/96");
const COMPAT = cidr("::/96");
/** IPv4-translated addresses (SIIT, RFC 2765 / RFC 6145): `::ffff:0:a.b.c.d`, the IPv4 in the last 32 bits. */
const TRANSLATED = cidr("::ffff:0:0:0/96");
const NAT64 = cidr("64:ff9b::/96");
/**
 * Local-use NAT64 prefix (RFC 8215). Its addresses follow RFC 6052's layout for a /48 prefix: the
 * IPv4 address is split around the reserved "u" octet (bits 64–71), first half in bits 48–63
 * (bytes 6–7), second half in bits 72–87 (bytes 9–10). An operator may use a longer prefix inside
 * it, which puts the IPv4 address further right: read with the /48 layout such an address gives
 * another IPv4 address, 0.0.x.x (refused as "unspecified") when the extra prefix bits are zero.
 */
const NAT64_LOCAL = cidr("64:ff9b:1::/48");
const SIX_TO_FOUR = cidr("2002::/16");

function v4Mapped(b4: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  out[10] = 0xff;
  out[11] = 0xff;
  out.set(b4, 12);
  return out;
}

/** The IPv4 address embedded in an IPv6 address (mapped, compatible, translated, NAT64, 6to4), if any. */
function embeddedV4(bytes: Uint8Array): Uint8Array | null {
  if (cidrContains(MAPPED, bytes)) return null; // already the canonical IPv4 form
  if (cidrContains(COMPAT, bytes) || cidrContains(TRANSLATED, bytes) || cidrContains(NAT64, bytes))
    return v4Mapped(bytes.slice(12, 16));
  if (cidrContains(NAT64_LOCAL, bytes)) return v4Mapped(new Uint8Array([bytes[6]!, bytes[7]!, bytes[9]!, bytes[10]!]));
  if (cidrContains(SIX_TO_FOUR, bytes)) return v4Mapped(bytes.slice(2, 6));
  return null;
}

function classifyBytes(bytes: Uint8Array): AddressClass {
  for (const [range, cls] of TABLE) if (cidrContains(range, bytes)) return cls;
  return "public";
}

/**
 * Classify an address. Unparseable input is "reserved" (refused). For IPv6 forms embedding IPv4,
 * the stricter of the two classifications is returned.
 */
export function classifyAddress(address: string): AddressClass {
  const bytes = parseIp(address);
  if (!bytes) return "reserved";
  const own = classifyBytes(bytes);
  if (own !== "public" && own !== "reserved") return own;
  const inner = embeddedV4(bytes);
  if (inner) {
    const innerCls = classifyBytes(inner);
    if (innerCls !== "public") return innerCls;
    // "::/96" with a public tail is the deprecated IPv4-compatible form: treat as what it embeds.
  }
  return own;
}

/** Canonical text form for logs: IPv4-mapped addresses print as dotted IPv4. */
export function formatIp(bytes: Uint8Array): string {
  if (cidrContains(MAPPED, bytes)) return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(":");
}

/**
 * The IPv4 forms `inet_aton` (and so `getaddrinfo`, and a listening socket's host) accepts: one to
 * four parts, each decimal, octal (`0` first) or hex (`0x`), the last part filling the bytes left
 * (`127.1` is 127.0.0.1, `2130706433` too). Null for anything else.
 */
export function parseInetAton(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length > 4) return null;
  const nums: number[] = [];
  for (const p of parts) {
    const m = /^(?:0x([0-9a-f]+)|(0[0-7]*)|([1-9][0-9]*))$/i.exec(p);
    if (!m) return null;
    const n =
      m[1] !== undefined ? Number.parseInt(m[1], 16) : m[2] !== undefined ? Number.parseInt(m[2], 8) : Number(m[3]);
    if (!Number.isSafeInteger(n)) return null;
    nums.push(n);
  }
  const last = nums.pop()!;
  if (nums.some((n) => n > 255) || last >= 2 ** (8 * (4 - nums.length))) return null;
  let value = last;
  nums.forEach((n, i) => {
    value += n * 2 ** (8 * (3 - i));
  });
  return new Uint8Array([value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]);
}

/**
 * Whether a listening socket on `host` is reachable from this machine only: `localhost`, any
 * spelling of an address in 127.0.0.0/8 (`127.1`, `2130706433`), `::1` however written, and
 * IPv4-mapped loopback (`::ffff:127.0.0.1`). Brackets around an IPv6 address are allowed.
 */
export function isLoopbackListenHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost") return true;
  const v4 = parseInetAton(h);
  if (v4) return v4[0] === 127;
  if (!h.includes(":")) return false;
  const bytes = parseIp(h);
  if (!bytes) return false;
  const v6Loopback = bytes.every((b, i) => b === (i === 15 ? 1 : 0));
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255;
  return v6Loopback || (mapped && bytes[12] === 127);
}
