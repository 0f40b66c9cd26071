/**
 * End to end with the REAL OpenClaw 2026.9.x (test/e2e/setup.ts installs it) speaking the bridge's
 * other doors: a provider entry of `api: "openai-responses"` (OpenClaw's OpenAI client posts to
 * `<baseUrl>/responses`) and one of `api: "anthropic-messages"` (OpenClaw's Anthropic client posts
 * to `<baseUrl>/v1/messages`), both WRITTEN BY THE INSTALLER (`installOpenClaw` with `--api`'s
 * option, from the bridge's own config), not by hand.
 *
 * One private HOME; the bridge runs in-process with one model `gpt` (openai backend, a fake OpenAI
 * upstream) and its debug log on. One `openclaw agent --local` turn per door: OpenClaw's embedded
 * agent runtime sends the turn through its own client library; the bridge translates it for the
 * upstream and back. Checked: the answer text reached OpenClaw's --json output; the bridge's debug
 * log has `POST /v1/responses` (resp. `/v1/messages`) answered 200 and no Chat Completions request
 * from OpenClaw; the fake upstream saw the person's message (it came through the bridge).
 *
 * 2026.5 is not driven here (its clients are the same kinds; its config acceptance is
 * test/integration/openclaw-validate.test.ts). CLAWBRIDGE_E2E_GEN=2026.5 skips this file.
 *
 * Only the model API is faked. Everything listens on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { installOpenClaw } from "../../src/ops/openclaw/install.js";
import { type OpenClawApiKind, resolveOpenClawPaths } from "../../src/ops/openclaw/provider.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import {
  agentReply,
  describeRun,
  lastHumanText,
  openclawHome,
  reapHome,
  runOpenClaw,
  writeOpenClawConfig,
} from "./harness.js";
import { GENERATIONS, type OpenClawInstall } from "./setup.js";

const TEST_KEY = "e2e-test-key-0123456789";
const GEN = GENERATIONS.find((g) => g.gen === "2026.9")!;
const only = process.env.CLAWBRIDGE_E2E_GEN?.trim();
const skip = only && only !== GEN.gen ? `CLAWBRIDGE_E2E_GEN=${only}: this file drives OpenClaw ${GEN.gen}` : false;

/** The fake upstream's answer: a marker per door, so each turn's text is its own. */
function script(req: RecordedRequest) {
  const human = lastHumanText(req.body?.messages ?? []);
  if (human.includes("E2E-RESP")) return { kind: "text" as const, chunks: ["Through the ", "RESPONSES-DOOR-OK"] };
  if (human.includes("E2E-MSG")) return { kind: "text" as const, chunks: ["Through the ", "MESSAGES-DOOR-OK"] };
  return { kind: "text" as const, chunks: ["ok"] };
}

describe(`real OpenClaw ${GEN.gen}.x through the Responses and Messages doors`, {
  concurrency: false,
  timeout: 10 * 60_000,
  skip,
}, () => {
  let install: OpenClawInstall;
  let home: string;
  let env: NodeJS.ProcessEnv;
  let openai: FakeOpenAI;
  let bridge: TestBridge;
  let logDir: string;
  let debugLog: string;
  const timings: string[] = [];

  before(async () => {
    let workspace: string;
    // Fails loudly (with npm's output) when OpenClaw is not installed and cannot be.
    ({ install, home, env, workspace } = await openclawHome(GEN, "ocdoors"));
    openai = await startFakeOpenAI(script);
    logDir = tempDir("cb-e2e-doorslog-");
    debugLog = path.join(logDir, "debug.log");
    const raw = {
      server: { apiKeys: [TEST_KEY] },
      logging: { debugLog },
      backends: { up: { type: "openai", baseUrl: openai.url, timeoutSeconds: 60 } },
      models: [{ id: "gpt", backend: "up", model: "fake-model" }],
    };
    bridge = await startTestBridge(raw);
    // OpenClaw's own settings (log file inside HOME, workspace), then the installer adds one
    // provider per door from the bridge's config (as `clawbridge openclaw install --api <kind>`).
    writeOpenClawConfig(home, { providers: {}, primary: "cbresp/gpt", workspace });
    const config = resolveConfig({ ...raw, server: { ...raw.server, port: bridge.port } }, "e2e");
    const paths = resolveOpenClawPaths({ openclawHome: path.join(home, ".openclaw") });
    for (const [providerId, api] of [
      ["cbresp", "openai-responses"],
      ["cbmsg", "anthropic-messages"],
    ] as Array<[string, OpenClawApiKind]>) {
      const r = await installOpenClaw({ config, paths, providerId, entry: { api } });
      assert.equal(r.ok, true, r.notes.join("\n"));
    }
  });

  after(async () => {
    await bridge?.close(0);
    await openai?.close();
    if (home) {
      await reapHome(home);
      cleanup(home);
    }
    if (bridge) cleanup(bridge.dataDir);
    if (logDir) cleanup(logDir);
    process.stderr.write(
      `[e2e ${GEN.gen} doors] OpenClaw ${install?.openclawVersion} on Node ${install?.nodeVersion}: ${timings.join("; ")}\n`,
    );
  });

  /** The HTTP lines of the bridge's debug log (one per request it answered). */
  const httpLines = () =>
    readFileSync(debugLog, "utf8")
      .split("\n")
      .filter((l) => l.includes("HTTP: "));

  /** One turn of `openclaw agent --local` on `model`; returns the reply and the debug log lines it added. */
  const turn = async (model: string, message: string) => {
    const seen = httpLines().length;
    const r = await runOpenClaw(
      install,
      env,
      [
        "agent",
        "--local",
        "--agent",
        "main",
        "--session-key",
        `agent:main:${model.replace("/", "-")}`,
        "--model",
        model,
        "--message",
        message,
        "--json",
        "--timeout",
        "150",
      ],
      240_000,
    );
    timings.push(`${model}: ${(r.ms / 1000).toFixed(1)} s`);
    assert.equal(r.code, 0, describeRun(r));
    return { run: r, reply: agentReply(r.stdout), lines: httpLines().slice(seen) };
  };

  test("the installer wrote each kind's entry (api, baseUrl with /v1 for Responses, the origin for Messages)", () => {
    const cfg = JSON.parse(readFileSync(path.join(home, ".openclaw", "openclaw.json"), "utf8"));
    const { cbresp, cbmsg } = cfg.models.providers;
    assert.equal(cbresp.api, "openai-responses");
    assert.equal(cbresp.baseUrl, `http://127.0.0.1:${bridge.port}/v1`);
    assert.equal(cbmsg.api, "anthropic-messages");
    assert.equal(cbmsg.baseUrl, `http://127.0.0.1:${bridge.port}`);
    assert.deepEqual(cbresp.models[0].input, ["text", "image"], "an openai-backed model sees images");
  });

  test("openai-responses: one turn through OpenClaw's OpenAI client is served by the bridge's POST /v1/responses", async () => {
    const before = openai.mainRequests().length;
    const { reply, lines, run } = await turn("cbresp/gpt", "E2E-RESP: say hello");
    assert.match(
      reply.text,
      /RESPONSES-DOOR-OK/,
      `OpenClaw's --json output holds the answer: ${run.stdout.slice(0, 2000)}`,
    );
    assert.ok(
      lines.some((l) => l.includes('"POST /v1/responses HTTP/1.1" 200')),
      `the bridge's Responses door answered: ${lines.join("\n")}`,
    );
    assert.ok(!lines.some((l) => l.includes("/v1/chat/completions")), `no Chat Completions call: ${lines.join("\n")}`);
    assert.ok(
      openai
        .mainRequests()
        .slice(before)
        .some((q) => lastHumanText(q.body?.messages ?? []).includes("E2E-RESP")),
      "the person's message reached the upstream through the bridge",
    );
  });

  test("anthropic-messages: one turn through OpenClaw's Anthropic client is served by the bridge's POST /v1/messages", async () => {
    const before = openai.mainRequests().length;
    const { reply, lines, run } = await turn("cbmsg/gpt", "E2E-MSG: say hello");
    assert.match(
      reply.text,
      /MESSAGES-DOOR-OK/,
      `OpenClaw's --json output holds the answer: ${run.stdout.slice(0, 2000)}`,
    );
    assert.ok(
      lines.some((l) => l.includes('"POST /v1/messages HTTP/1.1" 200')),
      `the bridge's Messages door answered: ${lines.join("\n")}`,
    );
    assert.ok(!lines.some((l) => l.includes("/v1/chat/completions")), `no Chat Completions call: ${lines.join("\n")}`);
    assert.ok(
      openai
        .mainRequests()
        .slice(before)
        .some((q) => lastHumanText(q.body?.messages ?? []).includes("E2E-MSG")),
      "the person's message reached the upstream through the bridge",
    );
  });
});
