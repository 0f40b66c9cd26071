/**
 * IPv6 forms that carry an IPv4 address are classified by that address (issue 20, item 10):
 * IPv4-translated `::ffff:0:0:0/96` (SIIT, RFC 2765/6145) and the local-use NAT64 prefix
 * `64:ff9b:1::/48` (RFC 8215, RFC 6052 /48 layout: IPv4 in bytes 6–7 and 9–10, byte 8 is "u").
 * The well-known NAT64 prefix 64:ff9b::/96 (IPv4 in the last 32 bits) keeps working.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { classifyAddress } from "../../src/core/net/ip.js";
import { BlockedError, NetGuard } from "../../src/core/net/netguard.js";

const CASES: Array<[string, string, string]> = [
  // IPv4-translated ::ffff:0:a.b.c.d
  ["::ffff:0:127.0.0.1", "loopback", "translated 127.0.0.1"],
  ["::ffff:0:7f00:1", "loopback", "translated 127.0.0.1, hex"],
  ["0:0:0:0:ffff:0:a00:1", "private", "translated 10.0.0.1, long form"],
  ["::ffff:0:169.254.169.254", "metadata", "translated metadata address"],
  ["::ffff:0:0:0", "unspecified", "translated 0.0.0.0"],
  ["::ffff:0:8.8.8.8", "public", "translated public address stays public"],
  // Local-use NAT64 64:ff9b:1::/48, RFC 6052 /48 layout
  ["64:ff9b:1:7f00:0:100::", "loopback", "local NAT64 of 127.0.0.1"],
  ["64:ff9b:1:a00:0:100::", "private", "local NAT64 of 10.0.0.1"],
  ["64:ff9b:1:c0a8:1:200::", "private", "local NAT64 of 192.168.1.2"],
  ["64:ff9b:1:a9fe:a9:fe00::", "metadata", "local NAT64 of 169.254.169.254"],
  ["64:ff9b:1:6440:0:100::", "cgnat", "local NAT64 of 100.64.0.1"],
  ["64:ff9b:1::a00:1", "unspecified", "a /96-style address inside the /48 reads as 0.0.0.0: refused"],
  ["64:ff9b:1:808:8:808::", "public", "local NAT64 of 8.8.8.8 stays public"],
  // Well-known NAT64 64:ff9b::/96 (already handled)
  ["64:ff9b::127.0.0.1", "loopback", "well-known NAT64 of 127.0.0.1"],
  ["64:ff9b::a9fe:a9fe", "metadata", "well-known NAT64 of 169.254.169.254"],
  ["64:ff9b::8.8.8.8", "public", "well-known NAT64 of 8.8.8.8"],
];

for (const [addr, cls, what] of CASES) {
  test(`classifyAddress(${addr}) = ${cls} (${what})`, () => assert.equal(classifyAddress(addr), cls));
}

test("the URL guard refuses these spellings as literals", () => {
  const g = new NetGuard({ allowPrivateAddresses: false, allowHosts: [] });
  for (const [url, re] of [
    ["http://[::ffff:0:7f00:1]/", /loopback/],
    ["http://[64:ff9b:1:a9fe:a9:fe00::]/latest/meta-data/", /metadata/],
    ["http://[64:ff9b:1:c0a8:1:200::]:8080/", /private/],
  ] as const) {
    assert.throws(
      () => g.checkUrl(url),
      (e: unknown) => e instanceof BlockedError && re.test(e.message),
      url,
    );
  }
});
