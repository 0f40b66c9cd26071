/**
 * The dashboard in a real browser: Debian's Chromium (installed by `.ci/run`), driven by
 * playwright-core (no browser download), against a real bridge with `server.apiKeys` set. Faked
 * are only the model API (testkit/fakes/openai-api.ts: ordinary answers, the builder's Supervisor
 * and Architect, the router's classifier) and the Claude Code CLI (testkit/fakes/fake-claude-cli.sh,
 * resume mode); systems run real processes.
 *
 * What a person sees: the page asks for a key and refuses a wrong one; a chat turn appears running
 * in Live and completes, with its CLI process listed; the resume-mode binding in Conversations and
 * Forget; backends (shown within a second of opening, though one backend's probe takes 3 s: the
 * bridge probes in the background), CLIs and the doctor's findings; a system built by chatting with
 * the builder grows on the canvas of the Systems view; a run paused, resumed and cancelled from the
 * Runs view; a run waiting at an approval answered with Approve, a test run's badge, a system's
 * schedule, inbound hook and version in the Systems view; the router's open question and every
 * decision with its confidence and source. No Chromium process outlives the test.
 *
 * `CLAWBRIDGE_SCREENSHOTS=1` also writes a screenshot of each view to docs/images/ (shown in the
 * README); without it nothing in the repository is written.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { chromium, type Browser, type Page } from "playwright-core";
import { resolveConfig } from "../../src/core/config/load.js";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import type { SystemctlRunner } from "../../src/ops/service/systemd.js";
import { contentPipeline } from "../../testkit/systems.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DIST = path.join(ROOT, "packages", "dashboard", "dist");
const SHOTS = process.env.CLAWBRIDGE_SCREENSHOTS === "1" ? path.join(ROOT, "docs", "images") : undefined;
const NODE = process.execPath;
const KEY = "browser-test-key-0123";
/** How long the `slow` backend takes to answer its health probe (`GET /v1/models`). */
const SLOW_PROBE_MS = 3000;
/** Every Playwright wait is bounded by this (a hang fails the step, not the whole run). */
const STEP_MS = 15_000;

/** Debian's chromium (`.ci/run` installs it); CHROMIUM_PATH overrides. */
function chromiumPath(): string | undefined {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  for (const p of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (existsSync(p)) return p;
  const r = spawnSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : undefined;
}

/** The dashboard's build, made (scripts/dashboard-build.mjs: only when its sources changed) if needed. */
function ensureDashboardBuilt(): void {
  const r = spawnSync(NODE, [path.join(ROOT, "scripts", "dashboard-build.mjs")], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 180_000,
  });
  if (r.status !== 0 || !existsSync(path.join(DIST, "index.html"))) {
    throw new Error(
      `the dashboard is not built (packages/dashboard/dist/index.html is missing) and building it failed: ${(r.stderr || r.stdout || String(r.error ?? r.signal)).trim()}. Run \`npm ci\` or \`npm run build\`.`,
    );
  }
}

// --- the fake model API -----------------------------------------------------------------------

const systemText = (r: RecordedRequest) =>
  ((r.body?.messages ?? []) as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "system")
    .map((m) => (typeof m.content === "string" ? m.content : ""))
    .join("\n");
const isSupervisor = (r: RecordedRequest) => systemText(r).includes("sent to a builder");
const isArchitect = (r: RecordedRequest) => systemText(r).includes("You are the Architect");
const isClassifier = (r: RecordedRequest) =>
  JSON.stringify(r.body?.messages?.[0] ?? "").includes("You classify ONE chat message");
const afterMessage = (r: RecordedRequest) => r.lastUser.split("Message:\n").pop() ?? "";

type Step = {
  id: string;
  name?: string;
  action: string;
  params: Record<string, unknown>;
  dependsOn?: string[];
};
const node = (id: string, type: string, label: string, properties: Record<string, unknown> = {}): Step => ({
  id: `n-${id}`,
  name: `${label} node`,
  action: "CREATE_NODE",
  params: { id, type, label, properties },
});
const edge = (from: string, to: string): Step => ({
  id: `e-${from}-${to}`,
  name: `${from} to ${to}`,
  action: "CONNECT_NODES",
  params: { from: `\${steps.n-${from}.output}`, to: `\${steps.n-${to}.output}` },
  dependsOn: [`n-${from}`, `n-${to}`],
});

/** What the Architect answers for "build a system that researches a topic and writes a post about it". */
const BLOG_PLAN = {
  metadata: {
    system: "blog-writer",
    name: "Blog Writer",
    description: "Researches a topic, then writes a post about it",
    summary: "a topic, a researcher, a writer, the post",
  },
  steps: [
    node("topic", "input", "Topic", { description: "What the post is about" }),
    node("tone", "input", "Tone", {
      description: "How it sounds",
      enum: ["casual", "formal"],
      default: "casual",
      required: false,
    }),
    node("research", "agent", "Researcher", { model: "ans", prompt: "Collect facts about {{topic}}." }),
    node("writer", "agent", "Writer", { model: "ans", prompt: "Write a {{tone}} post from {{research}}." }),
    node("post", "output", "Post"),
    edge("topic", "research"),
    edge("research", "writer"),
    edge("tone", "writer"),
    edge("writer", "post"),
  ],
};
const BLOG_NODES = ["post", "research", "tone", "topic", "writer"];

function script(req: RecordedRequest): Reply {
  if (isSupervisor(req)) {
    const intent = /build a system/.test(afterMessage(req)) ? "BUILD" : "UNKNOWN";
    return { kind: "text", chunks: ["```json\n", JSON.stringify({ intent, confidence: 0.93 }), "\n```"] };
  }
  if (isArchitect(req)) return { kind: "text", chunks: [JSON.stringify(BLOG_PLAN)] };
  if (isClassifier(req)) {
    const msg = afterMessage(req);
    const verdict = /blog post about cats/.test(msg)
      ? { action: "run", system: "content-pipeline", confidence: 0.88, inputs: { topic: "cats" } }
      : { action: "answer", confidence: 0.07 };
    return { kind: "text", chunks: ["```json\n", JSON.stringify(verdict), "\n```"] };
  }
  // An ordinary answer; "[slow]" in the message streams it over about two seconds.
  const slow = req.lastUser.includes("[slow]");
  return {
    kind: "text",
    chunks: ["Sure. ", "Here is ", "an answer ", "in a few ", "chunks, ", "streamed."],
    delayMs: slow ? 350 : 0,
    firstDelayMs: slow ? 300 : 0,
    usage: { prompt_tokens: 57, completion_tokens: 12 },
  };
}

// --- the test ---------------------------------------------------------------------------------

const noBus: SystemctlRunner = async () => ({
  code: 1,
  stdout: "",
  stderr: "Failed to connect to bus: No medium found",
});
const sel = (testid: string, attrs: Record<string, string> = {}) =>
  `[data-testid="${testid}"]${Object.entries(attrs)
    .map(([k, v]) => `[data-${k}="${v}"]`)
    .join("")}`;

describe("dashboard in a real browser (Chromium via playwright-core)", () => {
  let dir: string;
  let up: FakeOpenAI;
  let slow: http.Server | undefined;
  let b: TestBridge;
  let browser: Browser | undefined;
  let page: Page;
  let client: OpenAI;
  const mark = `CB_BROWSER_TEST=${randomUUID()}`;
  const fakeCliMark = () => `FAULTS_DIR=${path.join(dir, "cli")}`;
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];
  const timings: string[] = [];
  let t0 = Date.now();

  const api = async (p: string, init: RequestInit = {}) =>
    fetch(`${b.url}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...(init.headers ?? {}) },
    });
  const shot = async (name: string) => {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    // Let a fresh node's highlight and xyflow's fit-view animation settle.
    await page.waitForTimeout(400);
    await page.screenshot({ path: path.join(SHOTS, `dashboard-${name}.png`), type: "png" });
  };
  /** Wait for `selector`; on a timeout, what the page showed is saved in the OS temp folder and named in the error. */
  const wait = async (selector: string, state: "visible" | "attached" | "detached" | "hidden" = "visible") => {
    try {
      await page.locator(selector).first().waitFor({ state, timeout: STEP_MS });
    } catch (err) {
      const file = path.join(tmpdir(), `clawbridge-browser-failure-${Date.now()}.png`);
      await page.screenshot({ path: file }).catch(() => {});
      (err as Error).message += `\n(the page at that moment: ${file})`;
      throw err;
    }
  };
  const go = async (view: string) => {
    await page.getByTestId(`nav-${view}`).click();
    await wait(sel(`view-${view}`));
  };
  const lap = (what: string) => {
    timings.push(`${what} ${Date.now() - t0} ms`);
    t0 = Date.now();
  };

  before(async () => {
    const exe = chromiumPath();
    if (!exe)
      throw new Error("Chromium is not installed: `apt-get install chromium` (.ci/run does it), or set CHROMIUM_PATH.");
    ensureDashboardBuilt();
    lap("dashboard build check");

    dir = tempDir("cb-browser-");
    mkdirSync(path.join(dir, "cli"), { recursive: true });
    const home = path.join(dir, "home");
    mkdirSync(home);
    up = await startFakeOpenAI(script);
    // A model server whose health probe takes seconds: the Backends view must not wait for it.
    slow = http.createServer((_req, res) => {
      const t = setTimeout(
        () => res.writeHead(200, { "content-type": "application/json" }).end('{"data":[]}'),
        SLOW_PROBE_MS,
      );
      res.on("close", () => clearTimeout(t));
    });
    await new Promise<void>((resolve) => slow!.listen(0, "127.0.0.1", resolve));
    const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/v1`;
    const raw = {
      dataDir: path.join(dir, "data"),
      // Backends probed in the background (test/helpers/bridge.ts turns it off for other tests).
      server: { host: "127.0.0.1", apiKeys: [KEY], backendProbes: { enabled: true } },
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        // Nothing listens on port 9: a backend the Backends view and the doctor show as not usable.
        offline: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" },
        slow: { type: "openai", baseUrl: slowUrl, healthTimeoutSeconds: 10 },
        cc: {
          type: "claude-code",
          command: path.join(ROOT, "testkit", "fakes", "fake-claude-cli.sh"),
          env: { FAULTS_DIR: path.join(dir, "cli") },
          timeoutSeconds: 30,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
        builder: { type: "builder", supervisor: "sup", architect: "arch", answer: "ans", retryDelayScale: 0.05 },
        router: { type: "router", classifier: "cls", answer: "ans" },
      },
      models: [
        { id: "fast", backend: "up" },
        { id: "sup", backend: "up" },
        { id: "arch", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "cls", backend: "up" },
        { id: "local", backend: "offline" },
        { id: "slowpoke", backend: "slow" },
        { id: "claude", backend: "cc", session: { mode: "resume" } },
        { id: "builder", backend: "builder" },
        { id: "router", backend: "router" },
      ],
      systems: [
        contentPipeline(NODE),
        {
          id: "nightly-report",
          name: "Nightly Report",
          description: "Gathers the numbers, renders the report, publishes it",
          keywords: ["report"],
          inputs: { type: "object", properties: { day: { type: "string", description: "Which day" } } },
          confirm: "never",
          run: {
            kind: "plan",
            steps: [
              {
                id: "gather",
                uses: "command",
                with: {
                  argv: [NODE, "-e", "setTimeout(() => console.log('gathered 42 rows'), 700)"],
                  timeoutSeconds: 20,
                },
              },
              {
                id: "render",
                uses: "command",
                dependsOn: ["gather"],
                with: { argv: [NODE, "-e", "setTimeout(() => console.log('rendered'), 6000)"], timeoutSeconds: 20 },
              },
              {
                id: "publish",
                uses: "command",
                dependsOn: ["render"],
                with: { argv: [NODE, "-e", "setTimeout(() => console.log('published'), 1000)"], timeoutSeconds: 20 },
              },
            ],
          },
        },
        {
          // Issue 35 in the page: an approval step, a yearly schedule (never due while the test runs), a hook.
          id: "release-gate",
          name: "Release Gate",
          description: "Builds a release, asks before shipping it",
          inputs: { type: "object", required: ["tag"], properties: { tag: { type: "string" } } },
          confirm: "never",
          triggers: [{ cron: "0 0 1 1 *", timezone: "UTC", inputs: { tag: "yearly" } }],
          hook: true,
          run: {
            kind: "plan",
            steps: [
              {
                id: "build",
                uses: "command",
                with: { argv: [NODE, "-e", "console.log('built ' + process.argv[1])", "${inputs.tag}"] },
              },
              {
                id: "approve",
                uses: "approval",
                dependsOn: ["build"],
                with: { question: "Ship ${inputs.tag}?" },
              },
              {
                id: "ship",
                uses: "command",
                dependsOn: ["approve"],
                with: { argv: [NODE, "-e", "console.log('shipped ' + process.argv[1])", "${inputs.tag}"] },
              },
            ],
          },
        },
      ],
    };
    const config = resolveConfig({ intents: { enabled: false }, ...raw }, "test");
    b = await startTestBridge(raw, {
      systemsDb: ":memory:",
      retryBaseMs: 20,
      doctor: () =>
        runDoctor({
          config,
          backends: b.backends,
          openclawHome: path.join(home, ".openclaw"),
          tmpDir: dir,
          unitDir: path.join(home, "units"),
          systemctl: noBus,
          scanClis: false,
          validate: null,
          env: { ...process.env, HOME: home },
        }),
    });
    client = new OpenAI({ baseURL: b.baseURL, apiKey: KEY, maxRetries: 0, timeout: 30_000 });
    lap("bridge and fakes");

    browser = await chromium.launch({
      executablePath: exe,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
      // Every process of this browser carries the mark: none may be left after close().
      env: { ...process.env, CB_BROWSER_TEST: mark.split("=")[1]! },
      timeout: STEP_MS,
    });
    const context = await browser.newContext({
      viewport: { width: 1280, height: 800 },
      deviceScaleFactor: 1,
      colorScheme: "light",
    });
    page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    page.setDefaultNavigationTimeout(STEP_MS);
    page.on("pageerror", (err) => pageErrors.push(`${err.message} ${err.stack ?? ""}`));
    page.on("console", (m) => {
      // Expected: 401s before the key is given, and the 404 of a canvas not built yet (Chromium reports each as a failed resource).
      if (
        m.type() === "error" &&
        !/Failed to load resource: the server responded with a status of 40[14]/.test(m.text())
      )
        consoleErrors.push(m.text());
    });
    lap("chromium");
  });

  after(async () => {
    await browser?.close().catch(() => {});
    await b?.close(1000);
    await up?.close();
    slow?.closeAllConnections();
    await new Promise((resolve) => (slow ? slow.close(resolve) : resolve(undefined)));
    if (dir) cleanup(dir);
    console.log(`# timings: ${timings.join(", ")}`);
  });

  test("the page asks for a key; a wrong one is refused; the right one opens the app", async () => {
    const res = await page.goto(`${b.url}/dashboard`);
    assert.equal(res?.status(), 200);
    await wait(sel("key-prompt"));
    assert.equal(await page.getByTestId("key-submit").isDisabled(), true, "nothing to send yet");
    await page.getByTestId("key-input").fill("not-the-key");
    await page.getByTestId("key-submit").click();
    await wait(sel("key-error"));
    assert.match((await page.getByTestId("key-error").textContent()) ?? "", /refused/);
    await shot("key");
    // Nothing from the bridge reached the page without a key.
    assert.equal(await page.locator(sel("turn-row")).count(), 0);
    assert.equal(await page.evaluate('sessionStorage.getItem("clawbridge.apiKey")'), null);

    await page.getByTestId("key-input").fill(KEY);
    await page.getByTestId("key-submit").click();
    await wait(sel("key-prompt"), "detached");
    await wait(sel("view-live"));
    await wait(sel("events-status", { status: "live" }));
    await wait(sel("key-clear"));
    assert.match((await page.getByTestId("queue-running").textContent()) ?? "", /^0 \/ \d+$/);
    assert.equal(await page.evaluate('sessionStorage.getItem("clawbridge.apiKey")'), KEY);
    lap("key prompt");
  });

  test("Live: a chat turn appears running, with its CLI process, and completes", async () => {
    await go("live");
    // A quick turn first: it is listed among the recent ones.
    const quick = await client.chat.completions
      .create(
        { model: "fast", messages: [{ role: "user", content: "hello" }] },
        { headers: { "x-session-id": "live-quick" } },
      )
      .withResponse();
    assert.equal(quick.data.choices[0]?.message.content, "Sure. Here is an answer in a few chunks, streamed.");
    await wait(
      `${sel("turns-table")} ${sel("turn-row", { "turn-id": quick.response.headers.get("x-request-id") ?? "?", status: "completed" })}`,
    );
    // A slow answer from the model API, and a resume-mode turn through the (fake) Claude Code CLI.
    const { data: stream, response } = await client.chat.completions
      .create(
        {
          model: "fast",
          messages: [{ role: "user", content: "[slow] what changed since yesterday?" }],
          stream: true,
          stream_options: { include_usage: true },
        },
        { headers: { "x-session-id": "live-fast" } },
      )
      .withResponse();
    const turnId = response.headers.get("x-request-id");
    assert.ok(turnId, "x-request-id");
    const answered = (async () => {
      let text = "";
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
      return text;
    })();
    // (The fake CLI runs for about two seconds: FAULTN-6 deltas FAULTMS-400 apart.)
    let cliText = "";
    const cli = (async () => {
      const s = await client.chat.completions.create(
        {
          model: "claude",
          messages: [{ role: "user", content: "tidy the changelog FAULTKEY-live FAULTN-6 FAULTMS-400" }],
          stream: true,
        },
        { headers: { "x-session-id": "changelog-chat" } },
      );
      let finish: string | null | undefined;
      for await (const c of s) {
        finish = c.choices[0]?.finish_reason ?? finish;
        cliText += c.choices[0]?.delta?.content ?? "";
      }
      return finish;
    })();

    await wait(`${sel("turns-running-table")} ${sel("turn-row", { "turn-id": turnId, status: "running" })}`);
    await wait(`${sel("turns-running-table")} ${sel("turn-row")}:has-text("claude")`);
    // The turn's CLI process (the background probe's `--version` processes may be listed beside it).
    await wait(`${sel("process-row")} td[title*="fake-claude-cli"]`);
    assert.match((await page.getByTestId("queue-running").textContent()) ?? "", /^[12] \/ \d+$/);
    await shot("live");

    assert.equal(await answered, "Sure. Here is an answer in a few chunks, streamed.");
    assert.equal(await cli, "stop");
    assert.match(cliText, /FAULTS-OK live 1\. [\s\S]*FAULTS-OK live 6\./);
    await wait(`${sel("turns-table")} ${sel("turn-row", { "turn-id": turnId, status: "completed" })}`);
    const row = page.locator(sel("turn-row", { "turn-id": turnId }));
    assert.match((await row.textContent()) ?? "", /fast.*up.*live-fast.*completed.*57 \/ 12/s);
    await wait(`${sel("turns-table")} ${sel("turn-row", { status: "completed" })}:has-text("claude")`);
    await wait(sel("process-row"), "detached");
    await wait(sel("turns-running-table"), "detached");
    lap("live");
  });

  test("Live: a backend's limit and a turn handed on along a fallback chain show as lines", async () => {
    await go("live");
    await wait(sel("limits"));
    const resetAt = Date.now() + 2 * 3_600_000;
    // As the pipeline publishes them when a backend answers with a limit and the next model takes the turn.
    b.bus.emit({
      type: "backend.limited",
      backend: "offline",
      message: "Usage limit reached for the 5-hour window",
      resetAt,
      until: resetAt,
    });
    b.bus.emit({
      type: "turn.fallback",
      turnId: "fallback-turn-1",
      conversation: "live-fallback",
      model: "local",
      fromModel: "local",
      fromBackend: "offline",
      to: "fast",
      toBackend: "up",
      reason: "limit_reached",
      resetAt,
    });
    await wait(sel("limit-line", { kind: "fallback", backend: "offline" }));
    await wait(sel("limit-line", { kind: "limited", backend: "offline" }));
    const hm = await page.evaluate(
      (t) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
      resetAt,
    );
    const fallbackLine = await page
      .locator(sel("limit-line", { kind: "fallback" }))
      .first()
      .textContent();
    assert.ok(fallbackLine?.includes(`offline → up: limit_reached, resets ${hm}`), `the line: ${fallbackLine}`);
    const limitedLine = await page
      .locator(sel("limit-line", { kind: "limited" }))
      .first()
      .textContent();
    assert.ok(
      limitedLine?.includes(`offline limited: Usage limit reached for the 5-hour window, resets ${hm}`),
      `the line: ${limitedLine}`,
    );
    lap("live limits");
  });

  test("Conversations: the resume-mode binding is listed; Forget drops it", async () => {
    await go("conversations");
    const row = page.locator(`${sel("session-row")}:has-text("changelog-chat")`);
    await row.waitFor({ timeout: STEP_MS });
    assert.match((await row.textContent()) ?? "", /cc/);
    await shot("conversations");
    const before = await page.locator(sel("session-row")).count();
    await row.getByTestId("forget-button").click();
    await row.waitFor({ state: "detached", timeout: STEP_MS });
    assert.equal(await page.locator(sel("session-row")).count(), before - 1);
    const left = (await (await api("/v1/admin/sessions")).json()) as { data: Array<{ key: string }> };
    assert.ok(!left.data.some((s) => s.key.includes("changelog-chat")), "forgotten on the bridge too");
    lap("conversations");
  });

  test("Backends: health of each backend, the CLIs, and the doctor's findings with fixes", async () => {
    // The probes ran in the background since the bridge started (the slow backend's takes 3 s): the
    // view shows the last result, with its age, within a second of opening.
    const opened = Date.now();
    await go("backends");
    await wait(sel("backend-row", { backend: "slow" }));
    const ms = Date.now() - opened;
    timings.push(`backends rows ${ms} ms after opening`);
    assert.ok(
      ms < 1000,
      `the Backends view showed its rows ${ms} ms after opening (a probe takes ${SLOW_PROBE_MS} ms)`,
    );
    assert.match((await page.getByTestId("backends-age").textContent()) ?? "", /checked \d+ s ago/);
    assert.match((await page.locator(sel("backend-row", { backend: "slow" })).textContent()) ?? "", /reachable/);
    for (const name of ["up", "offline", "cc", "builder", "router"]) await wait(sel("backend-row", { backend: name }));
    assert.match((await page.locator(sel("backend-row", { backend: "offline" })).textContent()) ?? "", /local/);
    await wait(sel("cli-row"));
    assert.ok((await page.locator(sel("cli-row")).count()) >= 5, "every known coding-agent CLI has a row");
    await page.getByTestId("doctor-run").click();
    await wait(sel("doctor-finding"));
    await wait(`${sel("doctor-finding")} ${sel("doctor-fix")}`);
    const ids = await page
      .locator(sel("doctor-finding"))
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-id")));
    assert.ok(ids.includes("config"), `findings: ${ids.join(", ")}`);
    // Usage per backend: the turns of the Live view today, the limit published there with its reset and message.
    await wait(sel("usage-row", { backend: "up" }));
    const upToday = page.locator(`${sel("usage-row", { backend: "up" })} ${sel("usage-today")}`);
    assert.ok(Number(await upToday.getAttribute("data-turns")) >= 2, "the turns of the Live view are counted today");
    assert.ok(Number(await upToday.getAttribute("data-tokens-in")) >= 57 * 2, "with their tokens");
    await wait(sel("usage-row", { backend: "offline", "limit-hits": "1" }));
    const offline = page.locator(sel("usage-row", { backend: "offline" }));
    assert.match((await offline.getByTestId("usage-limit-message").textContent()) ?? "", /Usage limit reached/);
    assert.notEqual(
      (await offline.getByTestId("usage-next-reset").textContent())?.trim(),
      "–",
      "the next reset is shown",
    );
    await shot("backends");
    lap("backends");
  });

  test("Systems: a system built by chatting with the builder grows on the canvas", async () => {
    await go("systems");
    await wait(sel("system-row", { system: "nightly-report", status: "library" }));
    // Open the canvas-to-be first: its nodes must arrive through the live feed, not a reload.
    // (A string: the test's TypeScript has no DOM types. The SPA's own navigate(): pushState + cb:navigate.)
    await page.evaluate(
      'history.pushState(null, "", "/dashboard/systems/blog-writer"); window.dispatchEvent(new Event("cb:navigate"))',
    );
    await wait(sel("system-detail", { system: "blog-writer" }));
    assert.equal(await page.locator(sel("canvas")).count(), 0, "no canvas before the build");

    const reply = await client.chat.completions.create(
      {
        model: "builder",
        messages: [{ role: "user", content: "build a system that researches a topic and writes a post about it" }],
      },
      { headers: { "x-session-id": "build-chat" } },
    );
    const text = reply.choices[0]?.message.content ?? "";
    assert.match(text, /Done: \*\*Blog Writer\*\* has 5 nodes and 4 connections/, text);

    await wait(sel("canvas", { nodes: "5", edges: "4" }));
    for (const id of BLOG_NODES) await wait(sel("canvas-node", { "node-id": id }));
    const nodes = await page
      .locator(sel("canvas-node"))
      .evaluateAll((els) =>
        els.map((e) => `${e.getAttribute("data-node-id")}:${e.getAttribute("data-node-type")}`).sort(),
      );
    assert.deepEqual(nodes, ["post:output", "research:agent", "tone:input", "topic:input", "writer:agent"]);
    // The four connections are drawn (xyflow draws an edge once both of its nodes are measured).
    await page.waitForFunction(
      'document.querySelectorAll("[data-testid=canvas] .react-flow__edge").length === 4',
      undefined,
      { timeout: STEP_MS },
    );
    await wait(sel("system-row", { system: "blog-writer", status: "draft" }));
    await wait(sel("input-row", { input: "topic" }));
    await wait(sel("input-row", { input: "tone" }));
    await wait(sel("system-export"));

    // The highlight of what was just added fades.
    await wait(".cnode.fresh", "detached");
    await shot("systems");

    // A node opens its panel; the other layout draws the same nodes.
    await page.locator(sel("canvas-node", { "node-id": "writer" })).click();
    await wait(sel("node-panel"));
    assert.match((await page.getByTestId("node-panel").textContent()) ?? "", /Writer.*agent.*writer/s);
    await page.getByTestId("canvas-layout").selectOption("canvas");
    await page.getByTestId("canvas-layout").selectOption("layered");
    assert.equal(await page.locator(sel("canvas-node")).count(), 5);
    lap("systems");
  });

  test("Runs: a run paused, resumed and cancelled from the page", async () => {
    await go("runs");
    // A run that completes shows its output.
    const ok = await api("/v1/systems/content-pipeline/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { topic: "tide pools", tone: "casual", words: 300 } }),
    });
    assert.equal(ok.status, 202);
    const okId = ((await ok.json()) as { id: string }).id;
    await page.locator(sel("run-row", { "run-id": okId })).click();
    await wait(sel("run-detail", { "run-id": okId, status: "completed" }));
    await wait(sel("run-output"));
    assert.match(
      (await page.getByTestId("run-output").textContent()) ?? "",
      /post about tide pools in casual tone, 300 words/,
    );

    // A plan of three steps, paused, resumed and cancelled with the page's buttons.
    const started = await api("/v1/systems/nightly-report/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { day: "2026-11-24" } }),
    });
    assert.equal(started.status, 202);
    const runId = ((await started.json()) as { id: string }).id;
    await page.locator(sel("run-row", { "run-id": runId })).click();
    await wait(sel("run-detail", { "run-id": runId }));
    const detail = (status: string) => wait(sel("run-detail", { "run-id": runId, status }));
    const step = (id: string, status: string) => wait(sel("step-row", { step: id, status }));

    // Paused while `render` runs: `gather` stays done, `render` goes back to waiting.
    await step("gather", "completed");
    await step("render", "running");
    await page.getByTestId("run-pause").click();
    await detail("paused");
    await step("gather", "completed");
    await step("render", "pending");
    assert.equal(await page.getByTestId("run-resume").isEnabled(), true);
    assert.equal(await page.getByTestId("run-pause").isDisabled(), true);

    // Resumed from the first unfinished step (gather is not run again).
    await page.getByTestId("run-resume").click();
    await detail("running");
    await step("render", "running");
    assert.equal(await page.locator(sel("step-row", { step: "gather", status: "completed" })).count(), 1);

    await page.getByTestId("run-cancel").click();
    await detail("cancelled");
    await step("gather", "completed");
    await step("publish", "pending");
    assert.equal(await page.locator(sel("step-row", { status: "completed" })).count(), 1, "only gather completed");
    await wait(sel("run-row", { "run-id": runId, status: "cancelled" }));
    assert.match((await page.locator(sel("step-row", { step: "gather" })).textContent()) ?? "", /gathered 42 rows/);
    const log = (await page.getByTestId("run-log").textContent()) ?? "";
    for (const line of ["step gather completed", "run paused", "step render started", "run cancelled"])
      assert.ok(log.includes(line), `log has "${line}": ${log}`);
    for (const action of ["run-pause", "run-resume", "run-cancel"])
      assert.equal(await page.getByTestId(action).isDisabled(), true, `${action} is off once cancelled`);
    const rec = (await (await api(`/v1/runs/${runId}`)).json()) as {
      status: string;
      steps: Array<{ id: string; status: string; attempts: number }>;
    };
    assert.equal(rec.status, "cancelled");
    assert.equal(rec.steps.find((s) => s.id === "gather")?.attempts, 1, "gather ran once");

    // (The run's whole story is in the log: the screenshot shows it.)
    await shot("runs");
    lap("runs");
  });

  test("Runs and Systems: an approval answered from the page, a test run's badge, a system's schedule, hook and version", async () => {
    await go("runs");
    // A run stops waiting at its approval; the page shows the question and the data, and Approve goes on.
    const started = await api("/v1/systems/release-gate/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { tag: "v1.2" } }),
    });
    assert.equal(started.status, 202);
    const runId = ((await started.json()) as { id: string }).id;
    await page.locator(sel("run-row", { "run-id": runId })).click();
    await wait(sel("run-detail", { "run-id": runId, status: "waiting" }));
    await wait(sel("run-approval"));
    assert.match((await page.getByTestId("approval-question").textContent()) ?? "", /^Ship v1\.2\? \(step approve\)$/);
    assert.match(
      (await page.getByTestId("run-approval").textContent()) ?? "",
      /built v1\.2/,
      "the data so far is shown",
    );
    await page.getByTestId("run-approve").click();
    await wait(sel("run-detail", { "run-id": runId, status: "completed" }));
    assert.match((await page.getByTestId("run-output").textContent()) ?? "", /shipped v1\.2/);
    const rec = (await (await api(`/v1/runs/${runId}`)).json()) as { status: string; version: number | null };
    assert.deepEqual([rec.status, rec.version], ["completed", 1]);

    // A test run: nothing with side effects is carried out, and the row says so.
    const dry = await api("/v1/systems/content-pipeline/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { topic: "kelp", tone: "casual", words: 100 }, dryRun: true }),
    });
    assert.equal(dry.status, 202);
    const dryId = ((await dry.json()) as { id: string }).id;
    await wait(`${sel("run-row", { "run-id": dryId })} ${sel("test-run")}`);
    assert.equal(
      await page.locator(`${sel("run-row", { "run-id": runId })} ${sel("test-run")}`).count(),
      0,
      "a real run has no test badge",
    );

    // The system's schedule with its next run, its hook's path (never a secret), and the version that runs.
    await page.evaluate(
      'history.pushState(null, "", "/dashboard/systems/release-gate"); window.dispatchEvent(new Event("cb:navigate"))',
    );
    await wait(sel("system-detail", { system: "release-gate" }));
    await wait(sel("trigger-row"));
    const trigger = (await page.getByTestId("trigger-row").textContent()) ?? "";
    assert.match(trigger, /0 0 1 1 \*/);
    assert.match(trigger, /UTC/);
    assert.doesNotMatch(trigger, /never/, "a next run is shown");
    assert.match((await page.getByTestId("hook").textContent()) ?? "", /POST \/v1\/hooks\/release-gate/);
    await wait(sel("system-version"));
    assert.match((await page.getByTestId("system-version").textContent()) ?? "", /runs version 1/);
    await wait(sel("version-row", { version: "1" }));
    lap("approvals");
  });

  test("Router: an open question for missing inputs, and decisions with their confidence", async () => {
    await go("router");
    const ask = (conv: string, text: string) =>
      client.chat.completions.create(
        { model: "router", messages: [{ role: "user", content: text }] },
        { headers: { "x-session-id": conv } },
      );
    const everyday = await ask("router-everyday", "what is the capital of France?");
    assert.match(everyday.choices[0]?.message.content ?? "", /Sure\./);
    const clarify = await ask("router-blog", "write a blog post about cats");
    assert.match(clarify.choices[0]?.message.content ?? "", /tone/);

    await wait(sel("gathering-row"));
    const gathering = page.locator(sel("gathering-row")).first();
    assert.match((await gathering.textContent()) ?? "", /content-pipeline.*topic=.*tone/s);
    await wait(sel("decision-row"));
    await wait(`${sel("decision-row")} ${sel("confidence", { value: "0.88" })}`);
    // A hand-over to the answer model shows the classifier's confidence too, and every decision its confidence and source.
    await wait(
      `${sel("decision-row", { action: "answer", source: "classifier" })} ${sel("confidence", { value: "0.07" })}`,
    );
    const rows = await page.locator(sel("decision-row")).count();
    assert.ok(rows >= 2);
    assert.equal(await page.locator(`${sel("decision-row")} ${sel("confidence")}`).count(), rows);
    assert.equal(await page.locator(`${sel("decision-row")} ${sel("decision-source")}`).count(), rows);
    await shot("router");
    lap("router");
  });

  test("the page threw nothing, and Chromium leaves no process behind", async () => {
    assert.deepEqual(pageErrors, [], "uncaught errors in the page");
    assert.deepEqual(consoleErrors, [], "console errors in the page");
    assert.ok(pidsWithEnv(mark).length > 0, "the browser's processes carry the mark");
    await browser!.close();
    browser = undefined;
    assert.ok(
      await eventually(() => pidsWithEnv(mark).length === 0, 10_000),
      `chromium processes left: ${pidsWithEnv(mark).join(", ")}`,
    );
    assert.deepEqual(pidsWithEnv(fakeCliMark()), [], "no fake CLI left running");
    lap("close");
  });
});
