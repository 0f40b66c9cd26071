import { test } from "node:test";
import assert from "node:assert/strict";
import { TtlCache } from "../../src/request/web-tools/cache.js";

test("TtlCache: expiry, LRU bound, refresh on read", () => {
  let now = 0;
  const c = new TtlCache<number>(1000, 2, () => now);
  c.set("a", 1);
  c.set("b", 2);
  assert.equal(c.get("a"), 1); // a is now most recent
  c.set("c", 3); // evicts b (least recently used)
  assert.equal(c.get("b"), undefined);
  assert.equal(c.get("a"), 1);
  assert.equal(c.get("c"), 3);
  assert.equal(c.size, 2);
  now = 1000;
  assert.equal(c.get("a"), undefined);
  assert.equal(c.size, 1);
});

test("TtlCache: ttl 0 disables caching", () => {
  const c = new TtlCache<number>(0, 10);
  c.set("a", 1);
  assert.equal(c.get("a"), undefined);
});

test("TtlCache.getOrCompute: shares in-flight work, caches successes only", async () => {
  const c = new TtlCache<string>(60_000, 10);
  let calls = 0;
  let release!: (v: string) => void;
  const gate = new Promise<string>((r) => (release = r));
  const compute = () => {
    calls++;
    return gate;
  };
  const p1 = c.getOrCompute("k", compute);
  const p2 = c.getOrCompute("k", compute);
  release("v");
  assert.deepEqual(await p1, { value: "v", cached: false });
  assert.deepEqual(await p2, { value: "v", cached: true });
  assert.deepEqual(await c.getOrCompute("k", compute), { value: "v", cached: true });
  assert.equal(calls, 1);

  let fails = 0;
  const failing = async (): Promise<string> => {
    fails++;
    throw new Error("boom");
  };
  await assert.rejects(c.getOrCompute("f", failing), /boom/);
  await assert.rejects(c.getOrCompute("f", failing), /boom/);
  assert.equal(fails, 2);
});
