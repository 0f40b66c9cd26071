/**
 * Secrets end to end (src/core/secrets/, `${secrets.NAME}` in src/workflows/engine/template.ts): a
 * real bridge with `<dataDir>/secrets` (0600) runs a plan whose webhook sends `${secrets.TOKEN}` in
 * a header and a body field to a local server that echoes both back, and whose model step is given
 * that echo (the fake model repeats its prompt). The webhook gets the real value; the value is then
 * absent from every event (the bus, and `GET /v1/events` replayed with `includeText`), every log
 * line (the bridge's logger at trace level, captured), the run record and its steps
 * (`GET /v1/runs/:id`), the chat answer of a run started in chat, the export
 * (`GET /v1/systems/:id/export`, with the value planted in a sandbox file), the dashboard's API
 * answers, and every file of the data dir after the bridge stopped (SQLite and WAL included) but
 * the secrets file itself; `[secret TOKEN]` stands where it was. A secrets file readable by others
 * stops the start with a message naming the file and `chmod 600`.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { createLogger } from "../../src/core/log/logger.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const SECRET = "tok-9f3kq2-SECRET-zx81";
const MARK = "[secret TOKEN]";

/** Every file under `dir` (recursively), with its bytes. */
function allFiles(dir: string): Array<{ file: string; data: Buffer }> {
  const out: Array<{ file: string; data: Buffer }> = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) out.push(...allFiles(p));
    else if (st.isFile()) out.push({ file: p, data: readFileSync(p) });
  }
  return out;
}

const system = (url: string) => ({
  id: "echo",
  name: "Echo",
  description: "posts to the echo server and summarises what came back",
  run: {
    kind: "plan",
    steps: [
      {
        id: "call",
        uses: "webhook",
        with: { url, headers: { authorization: "Bearer ${secrets.TOKEN}" }, body: { token: "${secrets.TOKEN}" } },
        retry: 0,
      },
      {
        id: "sum",
        uses: "model",
        with: { model: "worker", prompt: "Summarise: ${steps.call.output}" },
        dependsOn: ["call"],
      },
    ],
  },
});

describe("secrets: used where they go, never shown", () => {
  let fake: FakeOpenAI;
  let hook: Server;
  let hookUrl: string;
  const received: Array<{ authorization?: string; body: string }> = [];
  let b: TestBridge;
  let dataDir: string;
  const logLines: string[] = [];
  const events: string[] = [];

  before(async () => {
    fake = await startFakeOpenAI((req) => ({ kind: "text", chunks: ["ECHO: ", req.lastUser] }));
    hook = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        if (req.url === "/split") {
          // The value echoed in two pieces, cut in its middle.
          res.writeHead(200, { "content-type": "text/plain" });
          res.write(`echo: ${SECRET.slice(0, 9)}`);
          setTimeout(() => res.end(`${SECRET.slice(9)} done`), 100);
          return;
        }
        received.push({ authorization: req.headers.authorization, body });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ headers: req.headers, body: JSON.parse(body) }));
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/echo`;
    dataDir = tempDir("cb-secrets-");
    writeFileSync(path.join(dataDir, "secrets"), `# for the echo system\nTOKEN=${SECRET}\n`, { mode: 0o600 });
    const sink = new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    b = await startTestBridge(
      {
        dataDir,
        events: { includeText: true },
        backends: {
          up: { type: "openai", baseUrl: fake.url, apiKey: "x" },
          router: { type: "router", classifier: "worker", answer: "worker" },
        },
        models: [
          { id: "worker", backend: "up" },
          { id: "router", backend: "router" },
        ],
        systems: [
          system(hookUrl),
          {
            id: "split",
            run: { kind: "webhook", url: hookUrl.replace("/echo", "/split"), headers: { k: "${secrets.TOKEN}" } },
          },
        ],
      },
      { logger: createLogger("trace", sink) },
    );
    b.bus.on((e) => events.push(JSON.stringify(e)));
  });

  after(async () => {
    await b?.close().catch(() => {});
    await fake?.close();
    await new Promise<void>((r) => (hook ? hook.close(() => r()) : r()));
    if (dataDir) cleanup(dataDir);
  });

  test("a value streamed back in two pieces is still replaced where the run streams it", async () => {
    const res = await fetch(`${b.baseURL}/systems/split/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ wait: true }),
    });
    const run = (await res.json()) as { id: string; output: string };
    assert.equal(run.output, `echo: ${MARK} done`);
    const streamed = events
      .map((e) => JSON.parse(e) as { type: string; runId?: string; text?: string })
      .filter((e) => e.type === "run.output" && e.runId === run.id);
    assert.ok(streamed.length >= 1);
    assert.equal(streamed.map((e) => e.text).join(""), `echo: ${MARK} done`);
  });

  test("the webhook gets the value; events, logs, records, chat, export, dashboard and the data dir never hold it", async () => {
    const api = (p: string, init?: RequestInit) => fetch(`${b.baseURL}${p}`, init);
    // A run over HTTP, waited for.
    const res = await api("/systems/echo/runs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ inputs: {}, wait: true }),
    });
    assert.equal(res.status, 200);
    const run = (await res.json()) as { id: string; status: string; output: string };
    assert.equal(run.status, "completed", JSON.stringify(run));
    assert.equal(received.length, 1);
    assert.equal(received[0]!.authorization, `Bearer ${SECRET}`, "the webhook got the real value");
    assert.ok(received[0]!.body.includes(SECRET), "and in the body field");
    // The model step was given the echo and repeated it: the run's output shows the mark instead.
    assert.ok(
      fake.requests.some((r) => r.lastUser.includes(SECRET)),
      "the model saw the echoed value in memory",
    );
    assert.ok(run.output.includes(MARK), run.output);
    assert.ok(!run.output.includes(SECRET));

    // A run in chat: "/run echo", then the confirmation.
    const client = new OpenAI({ baseURL: b.baseURL, apiKey: "x" });
    const headers = { "x-clawbridge-conversation": "secret-chat" };
    const ask = await client.chat.completions.create(
      { model: "router", messages: [{ role: "user", content: "/run echo" }] },
      { headers },
    );
    assert.match(ask.choices[0]!.message.content ?? "", /Ready to run/);
    const chat = await client.chat.completions.create(
      {
        model: "router",
        messages: [
          { role: "user", content: "/run echo" },
          { role: "assistant", content: ask.choices[0]!.message.content ?? "" },
          { role: "user", content: "yes" },
        ],
      },
      { headers },
    );
    const said = chat.choices[0]!.message.content ?? "";
    assert.equal(received.length, 2, said);
    assert.ok(said.includes(MARK), said);
    assert.ok(!said.includes(SECRET));

    // The run record and the dashboard's API answers.
    const detail = await (await api(`/runs/${run.id}`)).text();
    assert.ok(detail.includes(MARK), detail);
    for (const p of [`/runs/${run.id}`, "/runs?limit=100", "/systems", "/systems/echo", "/admin/usage"]) {
      const text = await (await api(p)).text();
      assert.ok(!text.includes(SECRET), `${p}: ${text.slice(0, 300)}`);
    }
    const dashboard = await (await fetch(`${b.url}/dashboard/runs/${run.id}`)).text();
    assert.ok(!dashboard.includes(SECRET));

    // Every event: the bus, and the stream a watcher replays (with includeText).
    assert.ok(events.length > 10 && events.some((e) => e.includes(MARK)), "events carry the mark");
    assert.deepEqual(
      events.filter((e) => e.includes(SECRET)),
      [],
    );
    const ctl = new AbortController();
    const stream = await api("/events", { headers: { "last-event-id": "0" }, signal: ctl.signal });
    let replay = "";
    const reader = stream.body!.getReader();
    const deadline = Date.now() + 3000;
    while (Date.now() < deadline && !/event: run\.completed[\s\S]*event: run\.completed/.test(replay)) {
      const { value, done } = await reader.read();
      if (done) break;
      replay += Buffer.from(value).toString("utf8");
    }
    ctl.abort();
    assert.match(replay, /event: run\.completed/);
    assert.ok(replay.includes(MARK));
    assert.ok(!replay.includes(SECRET));

    // The export, with the value planted in a sandbox file.
    const sandbox = path.join(dataDir, "sandboxes", "echo");
    mkdirSync(sandbox, { recursive: true });
    writeFileSync(path.join(sandbox, "notes.txt"), `the token is ${SECRET}\n`);
    const exp = await api("/systems/echo/export");
    assert.equal(exp.status, 200);
    const tar = gunzipSync(Buffer.from(await exp.arrayBuffer())).toString("utf8");
    assert.ok(tar.includes(`the token is ${MARK}`), "the sandbox file is exported with the mark");
    assert.ok(tar.includes("${secrets.TOKEN}"), "the references stay");
    assert.ok(!tar.includes(SECRET));
    rmSync(path.join(sandbox, "notes.txt"));

    // Every log line (trace level: the runs, the webhook calls, the requests).
    assert.ok(logLines.length > 5);
    assert.deepEqual(
      logLines.filter((l) => l.includes(SECRET)),
      [],
    );

    // The whole data dir once the bridge stopped (SQLite, WAL and every other file), but the secrets file.
    await b.close();
    const leaks = allFiles(dataDir).filter(
      (f) => f.file !== path.join(dataDir, "secrets") && f.data.includes(Buffer.from(SECRET)),
    );
    assert.deepEqual(
      leaks.map((f) => f.file),
      [],
    );
    assert.ok(
      allFiles(dataDir).some((f) => f.file.includes("systems.db")),
      "the run store was written in the data dir",
    );
  });

  test("a secrets file readable by others stops the start, naming the file and the fix", async () => {
    const dir = tempDir("cb-secrets-open-");
    try {
      const file = path.join(dir, "secrets");
      writeFileSync(file, "TOKEN=abcdefgh\n");
      chmodSync(file, 0o644);
      await assert.rejects(
        startTestBridge({
          dataDir: dir,
          backends: { up: { type: "openai", baseUrl: fake.url, apiKey: "x" } },
          models: [{ id: "worker", backend: "up" }],
          systems: [system(hookUrl)],
        }),
        (err: Error) => err.message.includes(file) && err.message.includes(`chmod 600 ${file}`),
      );
    } finally {
      cleanup(dir);
    }
  });

  test("an unknown secret, or one in a URL, is a start-up problem naming the key", async () => {
    const dir = tempDir("cb-secrets-bad-");
    try {
      writeFileSync(path.join(dir, "secrets"), "TOKEN=abcdefgh\n", { mode: 0o600 });
      const bad = {
        id: "bad",
        run: {
          kind: "webhook",
          url: "http://127.0.0.1:9/x?k=${secrets.TOKEN}",
          headers: { "x-key": "${secrets.MISSING}" },
        },
      };
      await assert.rejects(
        startTestBridge({
          dataDir: dir,
          backends: { up: { type: "openai", baseUrl: fake.url, apiKey: "x" } },
          models: [{ id: "worker", backend: "up" }],
          systems: [bad],
        }),
        (err: Error) =>
          /systems\[0\]\.run\.url: \$\{secrets\.TOKEN\} is not allowed here/.test(err.message) &&
          /systems\[0\]\.run\.headers\.x-key: \$\{secrets\.MISSING\}: no secret "MISSING"/.test(err.message),
      );
    } finally {
      cleanup(dir);
    }
  });
});
