import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import type { IntentsConfigInput } from "../../src/request/intents/schema.js";
import { httpGet, plainAgent, ToolError } from "../../src/request/web-tools/http-get.js";
import type { ResolveFn } from "../../src/core/net/netguard.js";
import { ToolRunner } from "../../src/request/web-tools/preexec.js";
import { ARTICLE_SENTENCE, ARTICLE_TITLE, FakeWeb } from "../fakes/web/server.js";

let web: FakeWeb;
const runners: ToolRunner[] = [];

before(async () => {
  web = await FakeWeb.start();
});
after(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await web.close();
});
beforeEach(() => {
  web.requests.length = 0;
});

/** Fake DNS: names used by the tests; everything else does not exist. */
const DNS: Record<string, Array<{ address: string; family: number }>> = {
  localhost: [{ address: "127.0.0.1", family: 4 }],
  "good.test": [{ address: "127.0.0.1", family: 4 }],
  "evil.test": [{ address: "127.0.0.1", family: 4 }],
  "ten.test": [{ address: "10.0.0.1", family: 4 }],
  "v6.test": [{ address: "::1", family: 6 }],
  "mapped.test": [{ address: "::ffff:127.0.0.1", family: 6 }],
  "meta.test": [{ address: "169.254.169.254", family: 4 }],
};
let dnsCalls: string[] = [];
const fakeResolve: ResolveFn = async (host) => {
  dnsCalls.push(host);
  const r = DNS[host];
  if (!r) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
  return r;
};

function runner(fetch: IntentsConfigInput["fetch"] = {}): ToolRunner {
  const r = new ToolRunner({ fetch: { timeoutMs: 3000, ...fetch }, cacheTtlSeconds: 0 }, undefined, {
    resolve: fakeResolve,
  });
  runners.push(r);
  return r;
}

async function refused(r: ToolRunner, url: string, re: RegExp): Promise<void> {
  await assert.rejects(r.fetchPage(url), (e: unknown) => {
    assert.ok(e instanceof ToolError, String(e));
    assert.equal(e.code, "BLOCKED", `${url}: ${e.message}`);
    assert.match(e.message, re);
    return true;
  });
}

const LOCAL = { allowHosts: ["127.0.0.1"] };

test("article: readable text only (no nav, ads, scripts, footer), title, byline, compact markdown", async () => {
  const { page, cached } = await runner(LOCAL).fetchPage(`${web.origin}/article`);
  assert.equal(cached, false);
  assert.equal(page.title, ARTICLE_TITLE);
  assert.match(page.byline ?? "", /Mari Maasikas/);
  assert.ok(page.content.includes(ARTICLE_SENTENCE));
  for (const noise of [
    "NAV_NOISE",
    "ADS_NOISE",
    "SCRIPT_NOISE",
    "FOOTER_NOISE",
    "SIDEBAR_NOISE",
    "IMAGE_ALT_NOISE",
    "color:red",
  ]) {
    assert.ok(!page.content.includes(noise), `content contains ${noise}`);
  }
  assert.match(page.content, /^- Length: 300 metres$/m);
  assert.match(page.content, /Read more on the project page\./); // link text kept, URL dropped
  assert.ok(!page.content.includes("https://example.org/more"));
  assert.ok(!/\n{3,}/.test(page.content));
  assert.equal(page.truncated, false);
});

test("text format, gzip bodies and declared charsets", async () => {
  const text = await runner({ ...LOCAL, format: "text" }).fetchPage(`${web.origin}/article`);
  assert.ok(text.page.content.includes(ARTICLE_SENTENCE));
  assert.ok(!text.page.content.includes("- Length")); // no markdown list markers
  const gz = await runner(LOCAL).fetchPage(`${web.origin}/article-gzip`);
  assert.ok(gz.page.content.includes(ARTICLE_SENTENCE));
  const latin = await runner(LOCAL).fetchPage(`${web.origin}/latin1`);
  assert.equal(latin.page.content, "Tere! Päike paistab ja õhk on värske, ütles Jüri.");
});

test("plain text and JSON pass through (tidied); images are unsupported; an empty page is EMPTY", async () => {
  const r = runner(LOCAL);
  assert.equal((await r.fetchPage(`${web.origin}/text`)).page.content, "Plain text\n\nwith spacing.\nSecond line.");
  assert.deepEqual(JSON.parse((await r.fetchPage(`${web.origin}/json`)).page.content), {
    status: "ok",
    items: [1, 2, 3],
    note: "json passthrough",
  });
  await assert.rejects(
    r.fetchPage(`${web.origin}/image`),
    (e: unknown) => e instanceof ToolError && e.code === "UNSUPPORTED" && /image\/png/.test(e.message),
  );
  await assert.rejects(
    r.fetchPage(`${web.origin}/empty-html`),
    (e: unknown) => e instanceof ToolError && e.code === "EMPTY",
  );
});

test("huge page: reading stops at maxBytes and the page is marked truncated", async () => {
  const { page } = await runner({ ...LOCAL, maxBytes: 64 * 1024 }).fetchPage(`${web.origin}/huge`);
  assert.equal(page.truncated, true);
  assert.equal(page.bytes, 64 * 1024);
  assert.match(page.content, /Endless words in a huge document/);
});

test("failures: slow headers and slow body time out, 500 is HTTP, refused connection is NETWORK", async () => {
  const r = runner({ ...LOCAL, timeoutMs: 300 });
  await assert.rejects(
    r.fetchPage(`${web.origin}/slow`),
    (e: unknown) => e instanceof ToolError && e.code === "TIMEOUT",
  );
  await assert.rejects(
    r.fetchPage(`${web.origin}/slow-body`),
    (e: unknown) => e instanceof ToolError && e.code === "TIMEOUT",
  );
  await assert.rejects(
    r.fetchPage(`${web.origin}/slow-gzip`),
    (e: unknown) => e instanceof ToolError && e.code === "TIMEOUT",
  );
  await assert.rejects(
    r.fetchPage(`${web.origin}/error500`),
    (e: unknown) => e instanceof ToolError && e.code === "HTTP" && e.message === "HTTP 500",
  );
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((res) => srv.close(() => res()));
  await assert.rejects(
    r.fetchPage(`http://127.0.0.1:${port}/`),
    (e: unknown) => e instanceof ToolError && e.code === "NETWORK" && /ECONNREFUSED/.test(e.message),
  );
});

test("redirects are followed manually up to maxRedirects", async () => {
  const twice = `${web.origin}/redirect?to=${encodeURIComponent("/redirect?to=/article")}`;
  const { page } = await runner(LOCAL).fetchPage(twice);
  assert.equal(page.finalUrl, `${web.origin}/article`);
  assert.equal(page.title, ARTICLE_TITLE);
  await assert.rejects(runner({ ...LOCAL, maxRedirects: 1 }).fetchPage(twice), /too many redirects/);
});

// --- the guard holds unless relaxed ---------------------------------------------------------

test("guard: loopback, private, metadata and non-http URLs are refused before any connection", async () => {
  const r = runner();
  await refused(r, `${web.origin}/article`, /loopback address 127\.0\.0\.1/);
  await refused(r, `http://localhost:${web.port}/article`, /localhost resolves to a loopback address/);
  await refused(r, `http://[::1]:${web.port}/article`, /loopback address ::1/);
  await refused(r, `http://[::ffff:127.0.0.1]:${web.port}/article`, /loopback/);
  await refused(r, `http://[::ffff:a00:1]/`, /private/);
  await refused(r, "http://10.0.0.1/", /private address 10\.0\.0\.1/);
  await refused(r, "http://192.168.1.1/", /private/);
  await refused(r, "http://100.64.0.1/", /cgnat/);
  await refused(r, "http://169.254.169.254/latest/meta-data/", /metadata/);
  await refused(r, "http://[fd00:ec2::254]/", /metadata/);
  await refused(r, "http://[fe80::1]/", /link-local/);
  await refused(r, "file:///etc/passwd", /scheme file:/);
  await refused(r, `http://user:secret@127.0.0.1:${web.port}/`, /credentials/);
  assert.equal(web.requests.length, 0, "the fake server was contacted");
});

test("guard: a hostname that resolves to a private address is refused (checked after DNS)", async () => {
  const r = runner();
  dnsCalls = [];
  await refused(r, `http://evil.test:${web.port}/article`, /evil\.test resolves to a loopback address 127\.0\.0\.1/);
  await refused(r, "http://ten.test/", /private address 10\.0\.0\.1/);
  await refused(r, `http://v6.test:${web.port}/`, /loopback address ::1/);
  await refused(r, `http://mapped.test:${web.port}/`, /loopback address ::ffff:127\.0\.0\.1/);
  await refused(r, "http://meta.test/", /metadata/);
  assert.ok(dnsCalls.includes("evil.test") && dnsCalls.includes("ten.test"));
  assert.equal(web.requests.length, 0);
});

test("guard: an allowed host works, but its redirect to a private address is refused", async () => {
  const r = runner({ allowHosts: ["good.test"] });
  dnsCalls = [];
  const ok = await r.fetchPage(`http://good.test:${web.port}/article`);
  assert.equal(ok.page.title, ARTICLE_TITLE);
  assert.deepEqual(dnsCalls, ["good.test"]); // resolved once, by the connection itself
  assert.equal(web.requests.length, 1);

  for (const target of [
    `http://127.0.0.1:${web.port}/article`,
    "http://10.0.0.1/",
    `http://evil.test:${web.port}/article`,
    `http://[::1]:${web.port}/article`,
  ]) {
    web.requests.length = 0;
    await refused(r, `http://good.test:${web.port}/redirect?to=${encodeURIComponent(target)}`, /loopback|private/);
    assert.deepEqual(
      web.requests.map((q) => q.path),
      ["/redirect"],
      `followed the redirect to ${target}`,
    );
  }
  // A redirect to a non-http scheme is refused too.
  await refused(
    r,
    `http://good.test:${web.port}/redirect?to=${encodeURIComponent("file:///etc/passwd")}`,
    /scheme file:/,
  );
});

test("relaxed: allowPrivateAddresses lets loopback through (metadata stays blocked); CIDR allowlist", async () => {
  const lan = runner({ allowPrivateAddresses: true });
  assert.equal((await lan.fetchPage(`${web.origin}/article`)).page.title, ARTICLE_TITLE);
  assert.equal((await lan.fetchPage(`http://evil.test:${web.port}/article`)).page.title, ARTICLE_TITLE);
  await refused(lan, "http://169.254.169.254/", /metadata/);
  await refused(lan, "http://meta.test/", /metadata/);
  const cidr = runner({ allowHosts: ["127.0.0.0/8"] });
  assert.equal((await cidr.fetchPage(`http://evil.test:${web.port}/article`)).page.title, ARTICLE_TITLE);
  await refused(cidr, `http://[::1]:${web.port}/`, /loopback address ::1/);
});

test("no credentials are ever sent: Authorization/Cookie dropped, plain User-Agent set", async () => {
  const agent = plainAgent(2000);
  try {
    const res = await httpGet(`${web.origin}/echo-headers`, {
      timeoutMs: 2000,
      maxBytes: 65536,
      maxRedirects: 0,
      dispatcher: agent,
      headers: { Authorization: "Bearer secret", Cookie: "session=1", "Proxy-Authorization": "x" },
    });
    const { headers } = JSON.parse(res.text) as { headers: Record<string, string> };
    assert.equal(headers.authorization, undefined);
    assert.equal(headers.cookie, undefined);
    assert.equal(headers["proxy-authorization"], undefined);
    assert.match(headers["user-agent"]!, /clawbridge/);
  } finally {
    await agent.close();
  }
  const { page } = await runner(LOCAL).fetchPage(`${web.origin}/echo-headers`);
  const echoed = JSON.parse(page.content) as { headers: Record<string, string> };
  assert.equal(echoed.headers.authorization, undefined);
  assert.equal(echoed.headers.cookie, undefined);
});
