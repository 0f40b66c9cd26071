import { test } from "node:test";
import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import { classifyAddress, formatIp, parseCidr, parseIp, cidrContains } from "../../src/core/net/ip.js";
import { BlockedError, NetGuard, type ResolveFn } from "../../src/core/net/netguard.js";

const ADDRESS_CASES: Array<[string, string]> = [
  ["8.8.8.8", "public"],
  ["1.1.1.1", "public"],
  ["2606:4700:4700::1111", "public"],
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["::1", "loopback"],
  ["[::1]", "loopback"],
  ["10.0.0.1", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["172.32.0.1", "public"],
  ["192.168.1.10", "private"],
  ["100.64.0.1", "cgnat"],
  ["100.127.255.255", "cgnat"],
  ["100.128.0.1", "public"],
  ["169.254.1.1", "link-local"],
  ["169.254.169.254", "metadata"],
  ["fd00:ec2::254", "metadata"],
  ["fc00::1", "private"],
  ["fd12:3456::1", "private"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["0.0.0.0", "unspecified"],
  ["::", "unspecified"],
  ["224.0.0.1", "multicast"],
  ["ff02::1", "multicast"],
  ["255.255.255.255", "reserved"],
  // IPv6 spellings of IPv4 addresses
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:10.1.2.3", "private"],
  ["::ffff:169.254.169.254", "metadata"],
  ["::ffff:8.8.8.8", "public"],
  ["::127.0.0.1", "loopback"], // IPv4-compatible (deprecated)
  ["64:ff9b::a00:1", "private"], // NAT64 of 10.0.0.1
  ["2002:7f00:1::1", "loopback"], // 6to4 of 127.0.0.1
  ["not-an-ip", "reserved"],
];

for (const [addr, cls] of ADDRESS_CASES) {
  test(`classifyAddress(${addr}) = ${cls}`, () => assert.equal(classifyAddress(addr), cls));
}

test("parseIp / parseCidr / formatIp", () => {
  assert.equal(formatIp(parseIp("::ffff:7f00:1")!), "127.0.0.1");
  assert.equal(formatIp(parseIp("2001:db8::1")!), "2001:db8:0:0:0:0:0:1");
  assert.equal(parseIp("1.2.3"), null);
  assert.equal(parseIp("1:2:3:4:5:6:7:8:9"), null);
  assert.equal(parseIp("1::2::3"), null);
  const lan = parseCidr("192.168.1.0/24")!;
  assert.equal(cidrContains(lan, parseIp("192.168.1.77")!), true);
  assert.equal(cidrContains(lan, parseIp("::ffff:192.168.1.77")!), true);
  assert.equal(cidrContains(lan, parseIp("192.168.2.1")!), false);
  assert.equal(parseCidr("10.0.0.0/33"), null);
  assert.equal(parseCidr("nas.lan"), null);
});

test("checkUrl: only http(s), no credentials, IP literals checked before connecting", () => {
  const g = new NetGuard({ allowPrivateAddresses: false, allowHosts: [] });
  assert.equal(g.checkUrl("https://example.com/x").hostname, "example.com");
  const refused: Array<[string, RegExp]> = [
    ["file:///etc/passwd", /scheme file:/],
    ["ftp://example.com/", /scheme ftp:/],
    ["gopher://example.com/", /scheme gopher:/],
    ["https://user:pw@example.com/", /credentials/],
    ["http://127.0.0.1:8080/", /loopback address 127\.0\.0\.1/],
    ["http://127.1/", /loopback/], // normalized by the URL parser
    ["http://2130706433/", /loopback/], // decimal form of 127.0.0.1
    ["http://0x7f000001/", /loopback/],
    ["http://[::1]/", /loopback/],
    ["http://[::ffff:127.0.0.1]/", /loopback/],
    ["http://[::ffff:a00:1]/", /private/],
    ["http://10.0.0.1/", /private/],
    ["http://169.254.169.254/latest/meta-data/", /metadata/],
    ["http://[fd00:ec2::254]/", /metadata/],
    ["http://[fe80::1]/", /link-local/],
    ["http://0.0.0.0/", /unspecified/],
    ["not a url", /invalid URL/],
  ];
  for (const [url, re] of refused) {
    assert.throws(
      () => g.checkUrl(url),
      (e: unknown) => e instanceof BlockedError && re.test(e.message),
      url,
    );
  }
});

test("relaxations: allowPrivateAddresses lets LAN through but not metadata; allowHosts CIDRs and names", () => {
  const lan = new NetGuard({ allowPrivateAddresses: true, allowHosts: [] });
  assert.doesNotThrow(() => lan.checkUrl("http://192.168.1.5/"));
  assert.doesNotThrow(() => lan.checkUrl("http://[::1]:80/"));
  assert.throws(() => lan.checkUrl("http://169.254.169.254/"), /metadata/);
  assert.throws(() => lan.checkUrl("http://0.0.0.0/"), /unspecified/);

  const list = new NetGuard({
    allowPrivateAddresses: false,
    allowHosts: ["192.168.1.0/24", "nas.lan", "*.home.arpa", "::1"],
  });
  assert.doesNotThrow(() => list.checkUrl("http://192.168.1.5/"));
  assert.throws(() => list.checkUrl("http://192.168.2.5/"), /private/);
  assert.doesNotThrow(() => list.checkUrl("http://[::1]/"));
  assert.equal(list.hostAllowed("nas.lan"), true);
  assert.equal(list.hostAllowed("NAS.LAN."), true);
  assert.equal(list.hostAllowed("printer.home.arpa"), true);
  assert.equal(list.hostAllowed("home.arpa"), false);
  assert.equal(list.hostAllowed("evilnas.lan"), false);
});

function runLookup(
  g: NetGuard,
  resolve: ResolveFn,
  host: string,
  options: { all?: boolean; family?: number },
): Promise<{ err: Error | null; address: string | LookupAddress[] }> {
  return new Promise((done) => {
    g.lookupHook(resolve)(host, options, (err, address) => done({ err, address }));
  });
}

test("lookup hook: checks every resolved address (after DNS), hands over only checked ones", async () => {
  const dns: Record<string, Array<{ address: string; family: number }>> = {
    "good.test": [{ address: "93.184.216.34", family: 4 }],
    "evil.test": [{ address: "127.0.0.1", family: 4 }],
    "ten.test": [{ address: "10.0.0.1", family: 4 }],
    "mixed.test": [
      { address: "93.184.216.34", family: 4 },
      { address: "192.168.0.1", family: 4 },
    ],
    "v6.test": [{ address: "::1", family: 6 }],
    "mapped.test": [{ address: "::ffff:127.0.0.1", family: 6 }],
    "meta.test": [{ address: "169.254.169.254", family: 4 }],
  };
  const resolve: ResolveFn = async (h) => {
    const r = dns[h];
    if (!r) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: "ENOTFOUND" });
    return r;
  };
  const g = new NetGuard({ allowPrivateAddresses: false, allowHosts: ["ten.test"] });

  const ok = await runLookup(g, resolve, "good.test", { all: true });
  assert.equal(ok.err, null);
  assert.deepEqual(ok.address, [{ address: "93.184.216.34", family: 4 }]);
  const single = await runLookup(g, resolve, "good.test", {});
  assert.equal(single.address, "93.184.216.34");

  for (const [host, re] of [
    ["evil.test", /evil\.test resolves to a loopback address 127\.0\.0\.1/],
    ["mixed.test", /private address 192\.168\.0\.1/],
    ["v6.test", /loopback address ::1/],
    ["mapped.test", /loopback/],
    ["meta.test", /metadata/],
  ] as const) {
    const r = await runLookup(g, resolve, host, { all: true });
    assert.ok(r.err instanceof BlockedError, host);
    assert.match(r.err.message, re);
  }
  // A hostname on the allowlist may resolve to a private address.
  const allowed = await runLookup(g, resolve, "ten.test", { all: true });
  assert.equal(allowed.err, null);
  // DNS failures pass through as errors.
  const missing = await runLookup(g, resolve, "nope.test", { all: true });
  assert.match(String(missing.err?.message), /ENOTFOUND/);
  // IP literals given to the hook are checked too.
  const literal = await runLookup(g, resolve, "127.0.0.1", {});
  assert.ok(literal.err instanceof BlockedError);
});
