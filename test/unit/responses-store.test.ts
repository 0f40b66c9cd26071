/**
 * The response store (src/core/store/responses.ts): a chain read back to its root from rows that
 * each hold only their own part; writes batched and never missed by a read; the file survives
 * closing and reopening; `keepDays` measured from a chain's last use (continuing a chain keeps all
 * of it); `maxStored` drops the least recently used rows first (down to 90%); a chain whose first
 * part was pruned says which response is missing.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { ResponseStore, type StoredResponse } from "../../src/core/store/responses.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const DAY = 86_400_000;

function clock(start = Date.UTC(2026, 10, 28)) {
  let t = start;
  return { now: () => t, add: (ms: number) => (t += ms) };
}

const row = (id: string, previous: StoredResponse | null, text = id): StoredResponse => ({
  id,
  previousId: previous?.id ?? null,
  root: previous?.root ?? id,
  conversation: previous?.conversation ?? `conv:${id}`,
  messages: [
    { role: "user", content: `q ${text}` },
    { role: "assistant", content: `a ${text}` },
  ],
  input: [{ type: "message", role: "user", content: `q ${text}` }],
  body: JSON.stringify({ id, object: "response" }),
});

test("a chain is read back whole, oldest first, with its root's conversation; reads see writes not yet flushed; it survives a reopen", () => {
  const dir = tempDir("cb-resp-store-");
  try {
    const file = path.join(dir, "responses.db");
    const s = ResponseStore.open(file, { keepDays: 30, maxStored: 100 });
    const a = row("resp_a", null);
    const b = row("resp_b", a);
    const c = row("resp_c", b);
    s.put(a);
    s.put(b);
    s.put(c);
    // Not flushed yet (50 ms), yet found.
    const chain = s.chain("resp_c");
    assert.ok(chain.ok);
    assert.equal(chain.root, "resp_a");
    assert.equal(chain.conversation, "conv:resp_a");
    assert.deepEqual(
      chain.messages.map((m: any) => m.content),
      ["q resp_a", "a resp_a", "q resp_b", "a resp_b", "q resp_c", "a resp_c"],
    );
    assert.deepEqual(s.chain("resp_nope"), { ok: false, missing: "resp_nope" });
    assert.equal(s.body("resp_b"), JSON.stringify({ id: "resp_b", object: "response" }));
    assert.deepEqual(s.input("resp_b"), [{ type: "message", role: "user", content: "q resp_b" }]);
    s.put(row("resp_d", null));
    s.close();
    const again = ResponseStore.open(file, { keepDays: 30, maxStored: 100 });
    assert.equal(again.size, 4, "closing wrote what waited");
    assert.ok(again.chain("resp_c").ok);
    assert.ok(again.delete("resp_a"));
    assert.equal(again.delete("resp_a"), false);
    assert.deepEqual(again.chain("resp_c"), { ok: false, missing: "resp_a" });
    again.close();
  } finally {
    cleanup(dir);
  }
});

test("keepDays counts from a chain's last use: continuing an old chain keeps all of it; an unused one goes", () => {
  const c = clock();
  const s = ResponseStore.open(":memory:", { keepDays: 10, maxStored: 100, now: c.now });
  const a = row("resp_a", null);
  const x = row("resp_x", null);
  s.put(a);
  s.put(x);
  s.flush();
  c.add(8 * DAY);
  s.put(row("resp_b", a)); // touches resp_a
  s.flush();
  c.add(3 * DAY);
  assert.equal(s.prune(), 1, "only the unused chain went");
  assert.equal(s.body("resp_x"), undefined);
  assert.ok(s.chain("resp_b").ok);
  c.add(11 * DAY);
  s.prune();
  assert.equal(s.size, 0);
  s.close();
});

test("maxStored: past it the least recently used rows go, down to 90%; a write past the cap prunes by itself", () => {
  const c = clock();
  const s = ResponseStore.open(":memory:", { keepDays: 30, maxStored: 10, now: c.now });
  for (let i = 0; i < 10; i++) {
    s.put(row(`resp_${i}`, null));
    c.add(1000);
  }
  s.flush();
  assert.equal(s.size, 10);
  // resp_0 is used again (continued): resp_1 is now the least recently used.
  s.put(row("resp_0b", row("resp_0", null)));
  s.flush();
  assert.equal(s.size, 9, "11 rows > 10: down to 9");
  assert.equal(s.body("resp_1"), undefined);
  assert.equal(s.body("resp_2"), undefined);
  assert.ok(s.chain("resp_0b").ok, "the chain used last is kept whole");
  s.close();
});

test("writes wait at most 50 ms, and are written at once when 256 wait", async () => {
  const s = ResponseStore.open(":memory:", { keepDays: 30, maxStored: 10_000 });
  for (let i = 0; i < 256; i++) s.put(row(`resp_${i}`, null));
  // 256 waiting: written by the 256th put, before any read.
  assert.equal((s as unknown as { pending: unknown[] }).pending.length, 0);
  s.put(row("resp_late", null));
  assert.equal((s as unknown as { pending: unknown[] }).pending.length, 1);
  await new Promise((r) => setTimeout(r, 120));
  assert.equal((s as unknown as { pending: unknown[] }).pending.length, 0, "the timer wrote it");
  assert.equal(s.size, 257);
  s.close();
});
