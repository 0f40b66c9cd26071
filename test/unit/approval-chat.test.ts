/**
 * The chat side of approvals below the router: "approve" and "reject" are a plain yes and no
 * (src/workflows/conversation/replies.ts), and an approval question does not lapse with the
 * conversation TTL (src/workflows/conversation/machine.ts: the approval has its own deadline),
 * while any other question still does.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConversationMachine } from "../../src/workflows/conversation/machine.js";
import { replyKind } from "../../src/workflows/conversation/replies.js";
import { SqliteSql } from "../../src/core/db/sql.js";
import { openSystemsDb } from "../../src/workflows/systems/db.js";

describe("approvals in a conversation", () => {
  test("approve and reject are yes and no", () => {
    assert.equal(replyKind("approve"), "yes");
    assert.equal(replyKind("Approved, thanks!"), "yes");
    assert.equal(replyKind("reject"), "no");
    assert.equal(replyKind("deny"), "no");
    assert.equal(replyKind("approve it and change the title"), null);
  });

  test("an approval question outlives the TTL; a confirmation lapses", async () => {
    const db = openSystemsDb(":memory:");
    try {
      const m = new ConversationMachine(new SqliteSql(db), 1);
      const asked = { kind: "approval" as const, system: "post", runId: "run1", step: "check", since: Date.now() };
      await m.ask("c1", asked);
      await m.ask("c2", { kind: "confirm", system: "post", values: {}, hash: "h", since: Date.now() });
      await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(await m.reply("c1", "yes"), { kind: "yes", question: asked });
      assert.equal((await m.reply("c2", "yes")).kind, "expired");
      assert.equal(await m.withBuilder("c1"), false, "the router's question");
      assert.equal((await m.reply("c1", "no")).kind, "ended");
      assert.equal((await m.get("c1")).question, undefined, "a no closes it");
    } finally {
      db.close();
    }
  });
});
