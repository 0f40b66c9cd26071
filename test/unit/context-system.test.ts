/**
 * System-prompt compression: OpenClaw's 20-50k character system prompt → a short brief made of a
 * configurable preamble plus IDENTITY.md / USER.md / SOUL.md / AGENTS.md, within maxSystemChars.
 * No persona is built in; non-OpenClaw system prompts are kept.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DEFAULT_PREAMBLE } from "../../src/core/config/schema.js";
import { compressSystemPrompt, extractContextFiles, workspacePath } from "../../src/request/context/system-prompt.js";
import { fairShares, truncateAtWord, truncateKeepEnd } from "../../src/request/context/text.js";
import { openclawSystemPrompt } from "../../testkit/openclaw-request.js";

const WS = "/home/someone/.openclaw/workspace";

describe("extractContextFiles", () => {
  test("finds the four workspace files of an OpenClaw system prompt, with their content", () => {
    const files = extractContextFiles(openclawSystemPrompt());
    assert.deepEqual(
      files.map((f) => [f.path, f.name]),
      [
        [`${WS}/AGENTS.md`, "AGENTS.MD"],
        [`${WS}/SOUL.md`, "SOUL.MD"],
        [`${WS}/IDENTITY.md`, "IDENTITY.MD"],
        [`${WS}/USER.md`, "USER.MD"],
      ],
    );
    const identity = files.find((f) => f.name === "IDENTITY.MD")!;
    assert.match(identity.content, /\*\*Name:\*\* Pebble/);
    const user = files.find((f) => f.name === "USER.MD")!;
    assert.ok(!user.content.includes("Silent Replies"), "OpenClaw's own trailing sections end the last file");
    assert.ok(!user.content.includes("NO_REPLY"));
  });

  test("a `## x.md` line inside a code fence is file content, not a new file", () => {
    const soul = "# SOUL.md\n\nExample:\n```md\n## notes/FAKE.md\ninside the fence\n```\nafter the fence";
    const files = extractContextFiles(openclawSystemPrompt({ soul }));
    assert.ok(!files.some((f) => f.name === "FAKE.MD"));
    const s = files.find((f) => f.name === "SOUL.MD")!;
    assert.match(s.content, /inside the fence\n```\nafter the fence/);
  });

  test("relative file names and CRLF line endings work", () => {
    const sys = "Intro\r\n## IDENTITY.md\r\nName: Rook\r\n## USER.md\r\nName: Kim\r\n## Heartbeats\r\nbeat";
    assert.deepEqual(
      extractContextFiles(sys).map((f) => [f.name, f.content]),
      [
        ["IDENTITY.MD", "Name: Rook"],
        ["USER.MD", "Name: Kim"],
      ],
    );
  });

  test("a prompt without file sections has none", () => {
    assert.deepEqual(extractContextFiles("You are a helpful assistant.\n## Rules\nBe nice."), []);
  });
});

describe("workspacePath", () => {
  test("reads OpenClaw's working directory line", () => {
    assert.equal(workspacePath(openclawSystemPrompt({ workspace: "/srv/agent/ws" })), "/srv/agent/ws");
    assert.equal(workspacePath("Your working directory is `/tmp/x`"), "/tmp/x");
    assert.equal(workspacePath("no workspace here"), undefined);
  });
});

describe("compressSystemPrompt", () => {
  const sys = openclawSystemPrompt();

  test("a ~20 KB OpenClaw prompt becomes a brief within maxSystemChars with identity, user, soul and rules", () => {
    assert.ok(sys.length > 15_000);
    const out = compressSystemPrompt(sys, 2000, DEFAULT_PREAMBLE);
    assert.ok(out.length <= 2000, `${out.length} ≤ 2000`);
    assert.ok(out.startsWith(DEFAULT_PREAMBLE));
    assert.ok(out.includes(`Workspace: ${WS}`));
    for (const label of ["## Identity", "## About the user", "## Personality and behaviour", "## Operating rules"])
      assert.ok(out.includes(label), label);
    assert.ok(out.includes("Pebble"), "name from IDENTITY.md");
    assert.ok(out.includes("Alex Example"), "user from USER.md");
    assert.ok(out.includes("Have opinions"), "behaviour from SOUL.md");
    assert.ok(!out.includes("available_skills"), "tool/skill boilerplate dropped");
    assert.ok(!out.includes("NO_REPLY"));
  });

  test("small files are kept whole while a large AGENTS.md takes only the rest (fair shares)", () => {
    const out = compressSystemPrompt(sys, 2000, DEFAULT_PREAMBLE);
    for (const f of extractContextFiles(sys).filter((x) => x.name !== "AGENTS.MD"))
      assert.ok(out.includes(f.content), `${f.name} whole`);
    assert.ok(out.endsWith("…"), "AGENTS.md was cut");
  });

  test("the output never exceeds maxChars, whatever the budget", () => {
    for (let max = 0; max <= 6000; max += 37) {
      const out = compressSystemPrompt(sys, max, DEFAULT_PREAMBLE);
      assert.ok(out.length <= max, `max ${max}: got ${out.length}`);
    }
  });

  test("a bigger budget keeps more", () => {
    const a = compressSystemPrompt(sys, 1000, DEFAULT_PREAMBLE);
    const b = compressSystemPrompt(sys, 4000, DEFAULT_PREAMBLE);
    assert.ok(b.length > a.length + 2000);
  });

  test("the preamble is configurable and optional; nothing personal is built in", () => {
    const custom = compressSystemPrompt(sys, 2000, "Answer in Estonian.");
    assert.ok(custom.startsWith("Answer in Estonian."));
    assert.ok(!custom.includes(DEFAULT_PREAMBLE));
    const none = compressSystemPrompt(sys, 2000, "");
    assert.ok(none.startsWith(`Workspace: ${WS}`));
    for (const name of ["Claw 🦞", "DaN", "Iselter", "VPS"]) {
      assert.ok(!compressSystemPrompt(sys, 2000, DEFAULT_PREAMBLE).includes(name), `no built-in "${name}"`);
    }
  });

  test("the identity follows the request: a different IDENTITY.md gives a different name", () => {
    const a = compressSystemPrompt(
      openclawSystemPrompt({ identity: "# IDENTITY.md\n\n- **Name:** Juniper" }),
      2000,
      DEFAULT_PREAMBLE,
    );
    assert.ok(a.includes("Juniper") && !a.includes("Pebble"));
  });

  test("no IDENTITY.md: no identity section and no invented name", () => {
    const sysNoId = openclawSystemPrompt().replace(/## \S+\/IDENTITY\.md\n\n# IDENTITY\.md[\s\S]*?🦦\n/, "");
    assert.ok(!sysNoId.includes("IDENTITY.md"));
    const out = compressSystemPrompt(sysNoId, 2000, DEFAULT_PREAMBLE);
    assert.ok(!out.includes("## Identity"));
    assert.ok(!out.includes("Pebble"));
    assert.ok(out.includes("Alex Example"));
  });

  test("HTML comments, leading front matter and blank-line runs are squeezed out", () => {
    const soul =
      "---\nsummary: persona\nread_when: always\n---\n# SOUL.md\n<!-- editor note: do not show -->\nBe kind.\n\n\n\n\nVery kind.   \nEnd.";
    const out = compressSystemPrompt(openclawSystemPrompt({ soul }), 4000, DEFAULT_PREAMBLE);
    assert.ok(out.includes("# SOUL.md\n\nBe kind.\n\nVery kind.\nEnd."), out);
    assert.ok(!out.includes("editor note"));
    assert.ok(!out.includes("read_when"));
  });

  test("a non-OpenClaw system prompt is kept after the preamble", () => {
    const plain = "You are a SQL expert. Answer with a single query.\nNever drop tables.";
    assert.equal(compressSystemPrompt(plain, 2000, DEFAULT_PREAMBLE), `${DEFAULT_PREAMBLE}\n\n${plain}`);
    assert.equal(compressSystemPrompt(plain, 2000, ""), plain);
  });

  test("a long non-OpenClaw system prompt is cut at a word boundary within maxChars", () => {
    const plain = "Always cite sources. ".repeat(500);
    const out = compressSystemPrompt(plain, 900, DEFAULT_PREAMBLE);
    assert.ok(out.length <= 900);
    assert.ok(out.endsWith("sources.…") || out.endsWith("Always…") || out.endsWith("cite…"), out.slice(-20));
  });

  test("empty system prompt: the preamble only; zero budget: nothing", () => {
    assert.equal(compressSystemPrompt("", 2000, DEFAULT_PREAMBLE), DEFAULT_PREAMBLE);
    assert.equal(compressSystemPrompt("   \n", 2000, ""), "");
    assert.equal(compressSystemPrompt(sys, 0, DEFAULT_PREAMBLE), "");
  });

  test("with a small maxSystemChars the identity survives (it matters more than the generic preamble)", {}, () => {
    for (const max of [300, 400]) {
      const out = compressSystemPrompt(sys, max, DEFAULT_PREAMBLE);
      assert.ok(out.length <= max);
      assert.ok(out.includes("Pebble"), `max ${max}: ${JSON.stringify(out)}`);
    }
  });
});

describe("text helpers", () => {
  test("truncateAtWord cuts at a boundary and marks the cut", () => {
    assert.equal(truncateAtWord("short", 10), "short");
    assert.equal(truncateAtWord("hello wonderful world", 18), "hello wonderful…");
    assert.equal(truncateAtWord("hello wonderful world", 12), "hello wonde…", "a boundary too far back is not used");
    assert.equal(truncateAtWord("abcdefghijkl", 5), "abcd…");
    assert.equal(truncateAtWord("abc", 1), "…");
    assert.equal(truncateAtWord("abc", 0), "");
    for (let n = 0; n < 40; n++)
      assert.ok(truncateAtWord("the quick brown fox jumps over the lazy dog", n).length <= n);
  });

  test("truncateKeepEnd keeps the end", () => {
    assert.equal(truncateKeepEnd("result: 42", 100), "result: 42");
    const out = truncateKeepEnd("noise ".repeat(50) + "FINAL ANSWER 42", 30);
    assert.ok(out.length <= 30);
    assert.ok(out.startsWith("…") && out.endsWith("FINAL ANSWER 42"));
  });

  test("fairShares: small items get all they need, big ones split the rest; the budget is never exceeded", () => {
    assert.deepEqual(fairShares([10, 1000, 20], 300), [10, 270, 20]);
    assert.deepEqual(fairShares([500, 500], 300), [150, 150]);
    assert.deepEqual(fairShares([], 100), []);
    assert.deepEqual(fairShares([5, 0], -10), [0, 0]);
    for (let b = 0; b < 500; b += 7) {
      const s = fairShares([3, 80, 200, 0, 41], b);
      assert.ok(s.reduce((x, y) => x + y, 0) <= b);
      s.forEach((v, i) => assert.ok(v <= [3, 80, 200, 0, 41][i]!));
    }
  });
});
