/**
 * The load balancer snippets of docs/MULTI_INSTANCE.md, as written there, in front of two real
 * bridges: Debian's nginx and HAProxy (`.ci/run` installs them) run the doc's own blocks, with only
 * the example addresses replaced by the test's loopback ports. Each bridge's model answers with its
 * instance's name (a fake upstream per bridge), so the test sees where each turn went:
 * - every turn of a conversation (`x-session-id`) reaches the same instance, streamed or not, and
 *   the conversations are spread over both;
 * - a conversation whose instance stopped is answered by the other (the failover the doc promises).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, describe, it } from "node:test";
import OpenAI from "openai";
import { type FakeOpenAI, startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, type TestBridge, tempDir } from "../helpers/bridge.js";

const doc = readFileSync(new URL("../../docs/MULTI_INSTANCE.md", import.meta.url), "utf8");
/** The doc's first fenced block of `lang`. */
function block(lang: string): string {
  const m = doc.match(new RegExp("```" + lang + "\\n([\\s\\S]*?)```"));
  assert.ok(m, `docs/MULTI_INSTANCE.md has a \`\`\`${lang} block`);
  return m[1]!;
}

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

interface Instance {
  name: string;
  fake: FakeOpenAI;
  bridge: TestBridge;
  port: number;
}

async function instance(name: string): Promise<Instance> {
  const fake = await startFakeOpenAI(() => ({ kind: "text", chunks: [`answered by `, name] }));
  cleanups.push(() => fake.close());
  // A fixed port: the balancer's config names it, and a restarted instance comes back on it.
  const port = await freePort();
  const bridge = await startTestBridge({
    server: { port },
    backends: { up: { type: "openai", baseUrl: `${fake.url}/v1` } },
    models: [{ id: "m", backend: "up" }],
  });
  cleanups.push(async () => {
    await bridge.close(100);
    cleanup(bridge.dataDir);
  });
  return { name, fake, bridge, port };
}

/** A balancer process (its own process group, ended at the end), ready when its port answers. */
async function startBalancer(cmd: string, args: string[], port: number, dir: string): Promise<ChildProcess> {
  const p = spawn(cmd, args, { cwd: dir, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  p.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  cleanups.push(async () => {
    try {
      process.kill(-p.pid!, "SIGKILL");
    } catch {
      /* gone */
    }
  });
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    assert.equal(p.exitCode, null, `${cmd} exited: ${stderr}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return p;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${cmd} did not listen on ${port}: ${stderr}`);
}

/** The doc's addresses → the two bridges and the balancer's port. */
function localize(text: string, a: Instance, b: Instance, lbPort: number): string {
  return text
    .replaceAll("10.0.0.11:4097", `127.0.0.1:${a.port}`)
    .replaceAll("10.0.0.12:4097", `127.0.0.1:${b.port}`)
    .replace(/listen 8080;/, `listen 127.0.0.1:${lbPort};`)
    .replace(/bind :8080/, `bind 127.0.0.1:${lbPort}`);
}

async function nginx(a: Instance, b: Instance): Promise<number> {
  const dir = tempDir("cb-nginx-");
  cleanups.push(() => cleanup(dir));
  for (const d of ["body", "proxy"]) mkdirSync(path.join(dir, d));
  const port = await freePort();
  const conf = `${process.getuid?.() === 0 ? "user root;\n" : ""}daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
${localize(block("nginx"), a, b, port)}
}
`;
  writeFileSync(path.join(dir, "nginx.conf"), conf);
  const bin = existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx";
  await startBalancer(bin, ["-p", dir, "-c", path.join(dir, "nginx.conf")], port, dir);
  return port;
}

async function haproxy(a: Instance, b: Instance): Promise<number> {
  const dir = tempDir("cb-haproxy-");
  cleanups.push(() => cleanup(dir));
  const port = await freePort();
  writeFileSync(path.join(dir, "haproxy.cfg"), localize(block("haproxy"), a, b, port));
  const bin = existsSync("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy";
  await startBalancer(bin, ["-db", "-f", path.join(dir, "haproxy.cfg")], port, dir);
  return port;
}

const CONVERSATIONS = Array.from({ length: 12 }, (_, i) => `conversation-${i}`);

/** One turn of `conversation` through the balancer; the name of the instance that answered. */
async function turn(lbPort: number, conversation: string, stream: boolean): Promise<string> {
  const client = new OpenAI({
    baseURL: `http://127.0.0.1:${lbPort}/v1`,
    apiKey: "unused",
    maxRetries: 0,
    timeout: 20_000,
    defaultHeaders: { "x-session-id": conversation },
  });
  const messages = [{ role: "user" as const, content: `hello from ${conversation}` }];
  let text = "";
  if (stream) {
    const s = await client.chat.completions.create({ model: "m", messages, stream: true });
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
  } else {
    text = (await client.chat.completions.create({ model: "m", messages })).choices[0]!.message.content ?? "";
  }
  const m = text.match(/^answered by (\w+)$/);
  assert.ok(m, `an answer from one instance, got ${JSON.stringify(text)}`);
  return m[1]!;
}

async function affinity(lbPort: number): Promise<Map<string, string>> {
  const home = new Map<string, string>();
  for (let round = 0; round < 3; round++)
    for (const c of CONVERSATIONS) {
      const who = await turn(lbPort, c, round % 2 === 1);
      if (!home.has(c)) home.set(c, who);
      assert.equal(who, home.get(c), `${c}: turn ${round + 1} went to ${who}, its first to ${home.get(c)}`);
    }
  const used = new Set(home.values());
  assert.deepEqual([...used].sort(), ["A", "B"], "the conversations are spread over both instances");
  return home;
}

describe("docs/MULTI_INSTANCE.md's load balancer snippets, in front of two bridges", () => {
  it("nginx: one conversation, one instance (streamed or not); a stopped instance's conversation goes to the other", async () => {
    const a = await instance("A");
    const b = await instance("B");
    const lb = await nginx(a, b);
    const home = await affinity(lb);
    const onA = CONVERSATIONS.filter((c) => home.get(c) === "A");
    await a.bridge.close(100);
    for (const c of onA) assert.equal(await turn(lb, c, true), "B", `${c} after A stopped`);
  });

  it("HAProxy: one conversation, one instance (streamed or not); a stopped instance's conversation goes to the other", async () => {
    const a = await instance("A");
    const b = await instance("B");
    const lb = await haproxy(a, b);
    const home = await affinity(lb);
    const onB = CONVERSATIONS.filter((c) => home.get(c) === "B");
    await b.bridge.close(100);
    for (const c of onB) assert.equal(await turn(lb, c, false), "A", `${c} after B stopped`);
  });
});
