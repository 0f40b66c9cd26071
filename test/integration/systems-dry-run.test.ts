/**
 * Test runs (dry runs) and strict run requests, on a real bridge: a plan drafts with a model step
 * (run for real: the fake model is called), posts the draft to a webhook with `${secrets.TOKEN}` in
 * a header, and runs a command that would create a file. `POST /v1/systems/:id/runs {dryRun: true}`:
 * the webhook server receives nothing, the file is not created, the webhook step's output is what
 * would have been sent (method, URL, headers with `[secret TOKEN]`, body) and the command's its
 * argv, env and cwd; the run is `test: true` in its record, in the list and on its run.* events.
 * MCP (testkit/mcp-server.ts over HTTP, `${secrets.TOKEN}` in the server's headers): the read-only
 * `echo` runs, the destructive `delete_item` is only recorded (server, tool, arguments). In
 * chat, "test post with topic=tides" and `/test post topic=tides` start a test run at once (no
 * confirmation, although the system has side effects) and answer "Test run of …: nothing was sent;
 * this is what would have been sent". A field the route does not know, or a wrong type, is a 400
 * naming it, and nothing runs.
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { BridgeEvent } from "../../src/wire/events.js";
import type { RunRow } from "../../src/wire/runs.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { startMcpHttpServer, type McpHttpServer } from "../../testkit/mcp-server.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

describe("test runs: nothing with side effects is sent", () => {
  let fake: FakeOpenAI;
  let mcp: McpHttpServer;
  let hook: Server;
  let hookUrl: string;
  let hits = 0;
  let b: TestBridge;
  let dataDir: string;
  let marker: string;
  const events: BridgeEvent[] = [];
  const api = (p: string, body?: unknown) =>
    fetch(`${b.baseURL}${p}`, {
      method: body === undefined ? "GET" : "POST",
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  const mcpServer = () => ({
    transport: "http",
    url: mcp.url,
    headers: { authorization: "Bearer ${secrets.TOKEN}" },
  });

  before(async () => {
    // The classifier finds `post` for "test the posting thing…"; every other call is the draft.
    fake = await startFakeOpenAI((req) =>
      JSON.stringify(req.body?.messages?.[0] ?? "").includes("You classify ONE chat message")
        ? {
            kind: "text",
            chunks: [JSON.stringify({ action: "run", system: "post", confidence: 0.9, inputs: { topic: "tides" } })],
          }
        : { kind: "text", chunks: ["DRAFT about tides"] },
    );
    hook = createServer((req, res) => {
      hits++;
      req.resume();
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/publish`;
    mcp = await startMcpHttpServer();
    dataDir = tempDir("cb-dry-");
    marker = path.join(dataDir, "created-by-the-command");
    writeFileSync(path.join(dataDir, "secrets"), "TOKEN=dry-run-token-123\n", { mode: 0o600 });
    b = await startTestBridge({
      dataDir,
      backends: {
        up: { type: "openai", baseUrl: fake.url, apiKey: "x" },
        router: { type: "router", classifier: "worker", answer: "worker" },
      },
      models: [
        { id: "worker", backend: "up" },
        { id: "router", backend: "router" },
      ],
      systems: [
        {
          id: "post",
          name: "Post",
          description: "drafts a post and publishes it",
          inputs: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
          run: {
            kind: "plan",
            steps: [
              { id: "draft", uses: "model", with: { model: "worker", prompt: "Write about ${inputs.topic}" } },
              {
                id: "send",
                uses: "webhook",
                with: {
                  url: hookUrl,
                  headers: { authorization: "Bearer ${secrets.TOKEN}" },
                  body: { text: "${steps.draft.output}" },
                },
                dependsOn: ["draft"],
              },
              {
                id: "touch",
                uses: "command",
                with: {
                  argv: [process.execPath, "-e", "require('fs').writeFileSync(process.argv[1], 'x')", marker],
                  setEnv: { API_TOKEN: "${secrets.TOKEN}" },
                },
                dependsOn: ["send"],
              },
            ],
          },
        },
        {
          id: "tools",
          sideEffects: true,
          run: {
            kind: "plan",
            steps: [
              { id: "look", uses: "mcp", with: { server: mcpServer(), tool: "echo", arguments: { text: "hi" } } },
              { id: "del", uses: "mcp", with: { server: mcpServer(), tool: "delete_item", arguments: { id: "42" } } },
            ],
          },
        },
      ],
    });
    b.bus.on((e) => events.push(e));
  });

  after(async () => {
    await b?.close().catch(() => {});
    await fake?.close();
    await mcp?.close();
    await new Promise<void>((r) => (hook ? hook.close(() => r()) : r()));
    if (dataDir) cleanup(dataDir);
  });

  test("dryRun over HTTP: models run, the webhook and the command do not, the record says what would have been sent", async () => {
    const modelCalls = fake.requests.length;
    const res = await api("/systems/post/runs", { inputs: { topic: "tides" }, dryRun: true, wait: true });
    assert.equal(res.status, 200);
    const run = (await res.json()) as RunRow;
    assert.equal(run.status, "completed", JSON.stringify(run));
    assert.equal(run.test, true);
    assert.equal(hits, 0, "the webhook server received nothing");
    assert.equal(existsSync(marker), false, "the command did not run");
    assert.ok(fake.requests.length > modelCalls, "the model step ran for real");
    const step = (id: string) => run.steps.find((s) => s.id === id)!;
    assert.equal(step("draft").output, "DRAFT about tides");
    assert.deepEqual(step("send").output, {
      notSent: "webhook",
      method: "POST",
      url: hookUrl,
      headers: {
        accept: "application/json, text/event-stream, text/plain",
        authorization: "Bearer [secret TOKEN]",
        "content-type": "application/json",
      },
      body: {
        system: "post",
        inputs: { topic: "tides" },
        runId: run.id,
        conversation: null,
        text: "DRAFT about tides",
      },
    });
    const touch = step("touch").output as Record<string, unknown>;
    assert.equal(touch.notSent, "command");
    assert.deepEqual((touch.argv as string[]).at(-1), marker);
    assert.deepEqual(touch.env, { API_TOKEN: "[secret TOKEN]" });
    assert.equal(touch.stdin, null);

    const runEvents = events.filter((e) => "runId" in e && e.runId === run.id && e.type.startsWith("run."));
    assert.deepEqual(
      runEvents.filter((e) => e.type !== "run.output").map((e) => [e.type, (e as { test?: boolean }).test]),
      [
        ["run.started", true],
        ["run.completed", true],
      ],
    );
    const list = (await (await api("/runs?limit=10")).json()) as { data: RunRow[] };
    assert.equal(list.data.find((r) => r.id === run.id)?.test, true);
  });

  test("MCP: a read-only tool runs, a destructive one is only recorded", async () => {
    const res = await api("/systems/tools/runs", { dryRun: true, wait: true });
    const run = (await res.json()) as RunRow;
    assert.equal(run.status, "completed", JSON.stringify(run));
    assert.deepEqual(mcp.state.calls, ["echo"], "delete_item was never called");
    assert.equal(run.steps[0]!.output, "echo: hi");
    assert.deepEqual(run.steps[1]!.output, {
      notSent: "mcp",
      server: (run.steps[1]!.output as { server: string }).server,
      tool: "delete_item",
      arguments: { id: "42" },
    });
    assert.match((run.steps[1]!.output as { server: string }).server, /127\.0\.0\.1/);
    assert.ok(
      mcp.requests.some((h) => h.authorization === "Bearer dry-run-token-123"),
      "the server got the real secret (tools are listed and the read-only one called with it)",
    );
  });

  test("in chat: 'test post with topic=tides', /test, and a test the classifier finds run at once, and say nothing was sent", async () => {
    const client = new OpenAI({ baseURL: b.baseURL, apiKey: "x" });
    const asked = ["test post with topic=tides", "/test post topic=tides", "test the posting thing about tides"];
    for (const [i, words] of asked.entries()) {
      const reply = await client.chat.completions.create(
        { model: "router", messages: [{ role: "user", content: words }] },
        { headers: { "x-clawbridge-conversation": `dry-chat-${i}` } },
      );
      const text = reply.choices[0]!.message.content ?? "";
      assert.match(
        text,
        /Test run of \*\*Post\*\* \(run `run[^`]+`\) finished[^:]*: nothing was sent; this is what would have been sent:/,
      );
      assert.match(text, /\*\*send\*\*:[\s\S]*"authorization": "Bearer \[secret TOKEN\]"/);
      assert.doesNotMatch(text, /Ready to run/);
    }
    assert.equal(hits, 0);
    assert.equal(existsSync(marker), false);
    const runs = (await (await api("/runs?limit=10")).json()) as { data: RunRow[] };
    assert.ok(runs.data.filter((r) => r.origin === "chat").every((r) => r.test));
  });

  test("a field the route does not know, or of the wrong type, is a 400 naming it; nothing runs", async () => {
    const before = ((await (await api("/runs?limit=100")).json()) as { data: RunRow[] }).data.length;
    for (const [body, param] of [
      [{ inputs: { topic: "x" }, dry_run: true }, "dry_run"],
      [{ inputs: { topic: "x" }, dryrun: true }, "dryrun"],
      [{ inputs: { topic: "x" }, dryRun: "yes" }, "dryRun"],
      [{ inputs: { topic: "x" }, version: 0 }, "version"],
      [{ inputs: { topic: "x" }, version: "1" }, "version"],
    ] as const) {
      const res = await api("/systems/post/runs", body);
      assert.equal(res.status, 400, JSON.stringify(body));
      const err = ((await res.json()) as { error: { type: string; param: string; message: string } }).error;
      assert.equal(err.type, "invalid_request_error");
      assert.equal(err.param, param);
      assert.ok(err.message.includes(param));
    }
    const unknown = await api("/systems/post/runs", { inputs: { topic: "x" }, priority: 1 });
    const msg = ((await unknown.json()) as { error: { message: string } }).error.message;
    assert.match(msg, /Unknown field "priority": this route takes `inputs`, `wait`, `version`, `dryRun`/);
    const cancel = await api("/runs/nope/cancel", { force: true });
    assert.equal(cancel.status, 400);
    assert.equal(((await cancel.json()) as { error: { param: string } }).error.param, "force");
    const after = ((await (await api("/runs?limit=100")).json()) as { data: RunRow[] }).data.length;
    assert.equal(after, before, "nothing ran");
    assert.equal(hits, 0);
  });
});
