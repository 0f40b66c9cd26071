/**
 * Two bridges on one PostgreSQL (issue 36: `store: { kind: postgres }`, a real PostgreSQL from
 * testkit/postgres.ts), in this process, each with its own data dir and pool, one fake model API
 * as upstream, driven by the official `openai` client: the conversation states and the canvases
 * are the database's, not an instance's.
 * - a run's confirmation asked on bridge A is listed by B's dashboard and answered "yes" on B (the
 *   run happens, once; a second "yes" finds nothing);
 * - a canvas another MCP host wrote in the database is listed by both bridges, and the builder's
 *   "undo" on B is what A's canvas route shows.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { createNode } from "../../src/workflows/builder/canvas-ops.js";
import { CanvasStore } from "../../src/workflows/builder/canvas-store.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";

const KEY = "shared-key";

describe("conversation states and canvases shared by two bridges on one PostgreSQL", () => {
  let pg: TestPostgres;
  let db: PostgresDb;
  let up: FakeOpenAI;
  let a: TestBridge;
  let b: TestBridge;
  const dirs = [tempDir("cb-conv-pg-a-"), tempDir("cb-conv-pg-b-")];

  before(async () => {
    pg = await startPostgres();
    const url = await pg.database();
    db = await PostgresDb.open({ url, poolSize: 2 });
    up = await startFakeOpenAI((req) => ({ kind: "text", chunks: ["HELLO ", req.lastUser.split("\n").at(-1)!] }));
    const config = (dataDir: string) => ({
      dataDir,
      store: { kind: "postgres", url, poolSize: 4 },
      server: { apiKeys: [KEY] },
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        router: { type: "router", classifier: "ans", answer: "ans", builder: "builder" },
        builder: { type: "builder", supervisor: "ans", architect: "ans" },
      },
      models: [
        { id: "ans", backend: "up" },
        { id: "router", backend: "router" },
        { id: "builder", backend: "builder" },
      ],
      systems: [
        {
          id: "greeter",
          name: "Greeter",
          description: "Greets someone by name",
          confirm: "always",
          inputs: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
          run: { kind: "model", model: "ans", prompt: "greet ${inputs.name}" },
        },
      ],
    });
    a = await startTestBridge(config(dirs[0]!));
    b = await startTestBridge(config(dirs[1]!));
  });

  after(async () => {
    await a?.close(0);
    await b?.close(0);
    await up?.close();
    await db?.close();
    await pg?.stop();
    for (const d of dirs) cleanup(d);
  });

  const get = async (bridge: TestBridge, route: string) => {
    const res = await fetch(`${bridge.baseURL.replace(/\/v1$/, "")}${route}`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(res.status, 200, route);
    return (await res.json()) as any;
  };

  test("a confirmation asked on A is listed by B and answered on B, once", async () => {
    const onA = new Chat(a.baseURL, "conv-confirm", "router", KEY);
    const asked = await onA.say("/run greeter name=Ada");
    assert.match(asked.text, /Greeter/);
    assert.match(asked.text, /yes/i);
    const router = await get(b, "/v1/admin/router");
    assert.deepEqual(
      router.confirmations.map((c: { conversation: string; system: string }) => [c.conversation, c.system]),
      [["conv-confirm", "greeter"]],
    );
    const onB = new Chat(b.baseURL, "conv-confirm", "router", KEY);
    onB.messages.push(...onA.messages);
    const ran = await onB.say("yes");
    assert.match(ran.text, /HELLO greet Ada/);
    assert.deepEqual((await get(a, "/v1/admin/router")).confirmations, [], "the question is gone on A too");
    assert.equal((await b.systems!.conversations.get("conv-confirm")).question, undefined);
  });

  test("a canvas in the database is both bridges'; the builder's undo on B is what A shows", async () => {
    // Another MCP host (or bridge) made it: two versions.
    const store = new CanvasStore(db);
    await store.create({ system: "demo", name: "Demo" });
    await store.mutate("demo", (c) => createNode(c, { type: "input", label: "In" }).canvas);
    await store.commitVersion("demo", "first");
    for (const bridge of [a, b]) {
      const list = await get(bridge, "/v1/canvases");
      assert.deepEqual(
        list.data.map((c: { id: string; version: number; nodes: number }) => [c.id, c.version, c.nodes]),
        [["demo", 1, 1]],
      );
    }
    const undone = await new Chat(b.baseURL, "conv-undo", "builder", KEY).say("undo demo");
    assert.match(undone.text, /back at canvas version 0/);
    const onA = await get(a, "/v1/canvases/demo");
    assert.deepEqual([onA.version, onA.nodes.length, onA.versions.length], [0, 0, 1]);
  });
});
