/**
 * Models that exist (issue 27): a real `clawbridge serve` on its EMBEDDED DEFAULTS (no config file)
 * with the REAL `opencode` (opencode-ai from npm, no network: OpenCode's own provider pointed at the
 * fake OpenAI API the test starts). The seed's default `opencode/minimax-m2.5-free` is gone from
 * OpenCode: /v1/models lists what OpenCode really offers, a chat to the seed's name is answered
 * through a live free model, the remap is logged once and shown in /health; after a restart with
 * the CLI missing the models are still known from the data dir's cache.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { startFakeResponses } from "../../testkit/fakes/responses-api.js";
import { OPENCODE_BIN } from "../../testkit/fakes/opencode-env.js";
import { cleanup, eventually, tempDir } from "../helpers/bridge.js";
import { bridgeListening } from "../helpers/process-groups.js";

const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");

function serve(env: NodeJS.ProcessEnv): { proc: ChildProcess; log: () => string; exited: Promise<number | null> } {
  const proc = spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, "serve", "--port", "0"], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  proc.stderr!.on("data", (d: Buffer) => {
    log += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, log: () => log, exited };
}

/**
 * One base URL for OpenCode's own provider, whose models speak Chat Completions or the Responses
 * API (by model): `/responses` goes to the fake Responses API, the rest to the fake OpenAI API.
 */
async function splitByPath(chat: string, responses: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const base = req.url!.includes("/responses") ? responses : chat;
    const fwd = http.request(
      `${base}${req.url!.replace(/^\/v1/, "")}`,
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    fwd.on("error", () => res.destroy());
    req.pipe(fwd);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function stop(s: ReturnType<typeof serve>): Promise<void> {
  if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill("SIGTERM");
  const killer = setTimeout(() => s.proc.kill("SIGKILL"), 20_000);
  await s.exited;
  clearTimeout(killer);
}

test("embedded defaults with the real opencode: the models it offers, the seed's name served by a live free one, cached for a start without the CLI", async () => {
  const fake = await startFakeOpenAI((req) => ({
    kind: "text",
    chunks: [`fake answer to: ${req.lastUser.slice(0, 40)}`],
  }));
  const fakeResponses = await startFakeResponses((req) => ({
    kind: "text",
    chunks: [`fake answer to: ${req.lastUserText.slice(0, 40)}`],
  }));
  const upstream = await splitByPath(fake.url, fakeResponses.url);
  const home = tempDir("cb-md-home-");
  const dataDir = tempDir("cb-md-data-");
  const xdg = (d: string) => path.join(home, d);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: xdg(".config"),
    XDG_DATA_HOME: xdg(".local/share"),
    XDG_CACHE_HOME: xdg(".cache"),
    XDG_STATE_HOME: xdg(".local/state"),
    CLAWBRIDGE_DATA_DIR: dataDir,
    OPENCODE_BIN,
    // OpenCode's own provider (its free tier) answered by the fake: nothing leaves the machine.
    OPENCODE_CONFIG_CONTENT: JSON.stringify({
      provider: { opencode: { options: { baseURL: upstream.url, apiKey: "dummy" } } },
    }),
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
  };
  delete env.CLAWBRIDGE_CONFIG;
  delete env.ROUTER_MODEL;
  delete env.ROUTER_PORT;
  let first: ReturnType<typeof serve> | undefined;
  let second: ReturnType<typeof serve> | undefined;
  try {
    first = serve(env);
    const base = await bridgeListening(first.proc).url;
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "k", maxRetries: 0, timeout: 120_000 });
    // The listing runs in the background at start-up; /v1/models shows it once it is in.
    let ids: string[] = [];
    assert.ok(
      await eventually(async () => {
        ids = (await client.models.list()).data.map((m) => m.id);
        return ids.includes("opencode/big-pickle");
      }, 60_000),
      `OpenCode's models are listed: ${ids.join(", ")}`,
    );
    assert.ok(!ids.includes("opencode/minimax-m2.5-free"), "the seed's model, gone from OpenCode, is not advertised");
    assert.ok(!ids.includes("opencode/glm-5-free"));
    const listed = (await client.models.list()).data.find((m) => m.id === "opencode/big-pickle") as any;
    assert.equal(listed.owned_by, "opencode");
    assert.equal(listed.context_window, 200000);
    assert.deepEqual(listed.input_modalities, ["text"]);

    // The seed's name is answered through a live free model of OpenCode's, by the fake.
    for (const text of ["what is 9 * 9", "and 7 * 7"]) {
      const stream = await client.chat.completions.create({
        model: "opencode/minimax-m2.5-free",
        stream: true,
        messages: [{ role: "user", content: text }],
      });
      let answer = "";
      for await (const c of stream) answer += c.choices[0]?.delta?.content ?? "";
      assert.ok(answer.startsWith("fake answer to:") && answer.includes(text), answer);
    }
    const calls = [
      ...fake.mainRequests().map((r) => r.body),
      ...fakeResponses.responseCalls().map((r) => r.body),
    ].filter((b) => b?.model);
    assert.ok(calls.length >= 2, "the fakes answered the turns");
    const models = new Set(calls.map((b) => b.model as string));
    assert.equal(models.size, 1, `one live model served every turn: ${[...models].join(", ")}`);
    const used = [...models][0]!;
    assert.notEqual(used, "minimax-m2.5-free");

    // A model OpenCode's free tier once had and no configuration names: served by a live free one too.
    const gone = await client.chat.completions.create({
      model: "opencode/grok-code",
      messages: [{ role: "user", content: "and 3 * 3" }],
    });
    assert.match(gone.choices[0]!.message.content ?? "", /^fake answer to:/);
    assert.equal(gone.model, "opencode/grok-code", "the response names what was asked");

    const health = (await (await fetch(`${base}/health`)).json()) as any;
    const remap = health.remappedModels.find((r: any) => r.wanted === "opencode/minimax-m2.5-free");
    assert.ok(remap, JSON.stringify(health.remappedModels));
    assert.equal(remap.using, `opencode/${used}`, "the model the fake was asked for is the remap's");
    assert.equal(health.discoveredModels.opencode.source, "live");
    const logged = first
      .log()
      .split("\n")
      .filter((l) => l.includes("remapped to a live one") && l.includes("opencode/minimax-m2.5-free"));
    assert.equal(logged.length, 1, `the remap is logged once:\n${logged.join("\n")}`);
    await stop(first);

    // A restart with the CLI gone: the models are known from the cache in the data dir.
    second = serve({ ...env, OPENCODE_BIN: path.join(home, "no-such-opencode") });
    const base2 = await bridgeListening(second.proc).url;
    const ids2 = ((await (await fetch(`${base2}/v1/models`)).json()) as any).data.map((m: any) => m.id);
    assert.ok(ids2.includes("opencode/big-pickle"), ids2.join(", "));
    assert.ok(
      await eventually(async () => {
        const h = (await (await fetch(`${base2}/health`)).json()) as any;
        return (
          h.discoveredModels.opencode?.source === "cache" && /not found/.test(h.discoveredModels.opencode?.error ?? "")
        );
      }, 20_000),
      "health says the list is the cached one, and why it could not be listed now",
    );
  } finally {
    if (first) await stop(first);
    if (second) await stop(second);
    await upstream.close();
    await fake.close();
    await fakeResponses.close();
    cleanup(home);
    cleanup(dataDir);
  }
});
