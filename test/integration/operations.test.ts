/**
 * Operating the bridge as a user does: the `clawbridge` command (through the package's bin), start-up
 * errors, graceful shutdown with a turn in flight, and back-pressure (429 + Retry-After).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir } from "../helpers/bridge.js";

const BIN = path.resolve("bin/clawbridge.js");
const MODEL = "fake/m1";

function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Start `clawbridge serve` as a child process; resolves with its URL once it listens. */
function serve(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, "serve", ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`bridge did not start: ${stderr}`));
    }, 30_000);
    child.stderr!.on("data", (d) => {
      stderr += d;
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]!, stderr: () => stderr });
      }
    });
    child.on("exit", () => {
      clearTimeout(timer);
      reject(new Error(`bridge exited: ${stderr}`));
    });
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.on("exit", (code) => resolve(code));
  });
}

describe("the clawbridge command", () => {
  let fake: FakeOpenAI;
  let home: string;
  let dir: string;
  let configFile: string;

  before(async () => {
    fake = await startFakeOpenAI();
    home = tempDir("cb-ops-home-");
    dir = tempDir("cb-ops-");
    configFile = path.join(dir, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        server: { port: 0, shutdownGraceSeconds: 30 },
        logging: { level: "warn" },
        dataDir: path.join(dir, "data"),
        intents: { enabled: false },
        backends: {
          oc: { type: "opencode", command: OPENCODE_BIN, env: opencodeEnv(fake.url, home), timeoutSeconds: 60 },
        },
        models: [{ id: MODEL, backend: "oc" }],
      }),
    );
  });

  after(async () => {
    await fake.close();
    cleanup(home);
    cleanup(dir);
  });

  test("--help explains every command, option and environment variable", async () => {
    const top = await run(["--help"]);
    assert.equal(top.code, 0);
    for (const word of [
      "serve",
      "config",
      "sessions",
      "CLAWBRIDGE_CONFIG",
      "ROUTER_MODEL",
      "OPENCODE_BIN",
      "ROUTER_TIMEOUT",
      "ROUTER_PORT",
    ]) {
      assert.ok(top.stdout.includes(word), `--help mentions ${word}`);
    }
    const serveHelp = await run(["serve", "--help"]);
    for (const opt of ["--config", "--port", "--host"])
      assert.ok(serveHelp.stdout.includes(opt), `serve --help mentions ${opt}`);
  });

  test("a bad config file stops start-up with a message naming the key", async () => {
    const bad = path.join(dir, "bad.yaml");
    writeFileSync(
      bad,
      "server:\n  port: 4097\n  colour: blue\nbackends:\n  oc: { type: opencode, timeoutSeconds: soon }\nmodels:\n  - { id: m, backend: nope }\n",
    );
    const res = await run(["config", "check", "--config", bad]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /server: unknown key "colour"/);
    const serveRes = await run(["serve", "--config", bad]);
    assert.equal(serveRes.code, 2);
    assert.match(serveRes.stderr, /invalid configuration/);
  });

  test("a non-loopback host without API keys is refused", async () => {
    const res = await run(["config", "check"], { CLAWBRIDGE_CONFIG: configFile });
    assert.equal(res.code, 0, res.stderr);
    const remote = await run(["serve", "--config", configFile, "--host", "0.0.0.0"]);
    assert.equal(remote.code, 2);
    assert.match(remote.stderr, /server\.host: "0\.0\.0\.0" is reachable from other machines; set server\.apiKeys/);
  });

  test("SIGTERM lets the running turn finish, then exits and leaves no process", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["finished ", "after SIGTERM"], firstDelayMs: 2500 }));
    const { child, url } = await serve(["--config", configFile]);
    try {
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "x", maxRetries: 0 });
      const before = fake.mainRequests().length;
      const answer = client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "long question" }],
      });
      assert.ok(await eventually(() => fake.mainRequests().length > before, 30_000), "the turn reached the model");
      child.kill("SIGTERM");
      const res = await answer;
      assert.equal(res.choices[0]?.message.content, "finished after SIGTERM");
      assert.equal(await exited(child), 0);
      assert.equal(pidsWithEnv(`HOME=${home}`).length, 0, "no CLI left behind");
      await assert.rejects(fetch(`${url}/health`), "no longer listening");
    } finally {
      child.kill("SIGKILL");
    }
  });

  test("a port held by another clawbridge is reported clearly", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["ok"] }));
    const first = await serve(["--config", configFile]);
    try {
      const port = new URL(first.url).port;
      const second = await run(["serve", "--config", configFile, "--port", port]);
      assert.equal(second.code, 2);
      assert.match(second.stderr, new RegExp(`127\\.0\\.0\\.1:${port} is already in use by another clawbridge`));
    } finally {
      first.child.kill("SIGTERM");
      await exited(first.child);
    }
    // Neither start left a CLI behind: the refused one's catalog listing and health probe
    // (`opencode --version`, started before it tried the port) ended with it.
    assert.deepEqual(pidsWithEnv(`HOME=${home}`), [], "no CLI of either start left behind");
  });
});

describe("back-pressure", () => {
  test("beyond maxConcurrent and maxQueue a turn gets 429 with Retry-After", async () => {
    const fake = await startFakeOpenAI(() => ({ kind: "hang" }));
    const home = tempDir("cb-429-home-");
    const bridge = await startTestBridge({
      server: { maxConcurrent: 1, maxQueue: 0 },
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    const ac = new AbortController();
    try {
      const first = fetch(`${bridge.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": "one" },
        body: JSON.stringify({
          model: MODEL,
          stream: true,
          messages: [{ role: "user", content: "hold the only slot" }],
        }),
        signal: ac.signal,
      }).catch(() => undefined);
      assert.ok(
        await eventually(
          async () => ((await (await fetch(`${bridge.url}/health`)).json()) as any).turns.running === 1,
          10_000,
        ),
      );
      const res = await fetch(`${bridge.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": "two" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "no room" }] }),
      });
      assert.equal(res.status, 429);
      const retry = Number(res.headers.get("retry-after"));
      assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
      const body = (await res.json()) as any;
      assert.equal(body.error.type, "rate_limit_error");
      assert.equal(body.error.code, "queue_full");
      ac.abort();
      await first;
      assert.ok(await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000));
    } finally {
      ac.abort();
      await bridge.close(0);
      await fake.close();
      cleanup(home);
      cleanup(bridge.dataDir);
    }
  });
});

describe("shutting down", () => {
  test("a request that arrives while the bridge drains (pipelined behind a running turn) gets 503 and the connection closes; the running turn finishes", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const answer = JSON.stringify({
      id: "x",
      object: "chat.completion",
      created: 1,
      model: "up",
      choices: [{ index: 0, message: { role: "assistant", content: "finished in time" }, finish_reason: "stop" }],
    });
    const fake = await startFakeOpenAI(() => ({
      kind: "steps",
      headers: { "content-type": "application/json" },
      steps: [() => gate, answer],
    }));
    const bridge = await startTestBridge({
      server: { shutdownGraceSeconds: 20 },
      backends: { up: { type: "openai", baseUrl: fake.url } },
      models: [{ id: "up", backend: "up" }],
    });
    const { connect } = await import("node:net");
    const url = new URL(bridge.url);
    const socket = connect(Number(url.port), url.hostname);
    try {
      const request = (text: string) => {
        const body = JSON.stringify({ model: "up", messages: [{ role: "user", content: text }] });
        return `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\nx-session-id: ${text}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      };
      let received = "";
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      socket.on("data", (d) => (received += d.toString("utf8")));
      await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      socket.write(request("first"));
      assert.ok(await eventually(() => fake.requests.length === 1, 10_000), "the first turn reached the upstream");
      const closing = bridge.close();
      // Behind the running turn, on the same connection: the bridge is draining now.
      socket.write(request("second"));
      await new Promise((r) => setTimeout(r, 200));
      release();
      await closing;
      const timer = setTimeout(() => socket.destroy(), 10_000);
      await closed;
      clearTimeout(timer);
      const [first, second] = received.split(/(?=HTTP\/1\.1 )/);
      assert.match(first ?? "", /^HTTP\/1\.1 200 /);
      assert.match(first ?? "", /finished in time/);
      assert.match(second ?? "", /^HTTP\/1\.1 503 /, `second answer: ${second}`);
      assert.match(second ?? "", /connection: close/i);
      const json = JSON.parse((second ?? "").slice((second ?? "").indexOf("\r\n\r\n") + 4)) as any;
      assert.equal(json.error.code, "shutting_down");
      assert.equal(fake.requests.length, 1, "the request that came during the drain never reached the upstream");
    } finally {
      release();
      socket.destroy();
      await bridge.close(0);
      await fake.close();
      cleanup(bridge.dataDir);
    }
  });
});
