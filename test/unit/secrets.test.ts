/**
 * Secrets (src/core/secrets/): the store reads `<dataDir>/secrets` (dotenv-like lines, 0600 only)
 * and `CLAWBRIDGE_SECRET_*` from the environment (which wins); the redactor replaces every long
 * value anywhere in a text, its JSON-escaped form in a log line, and a short value (< 4 chars) only
 * where it is a whole value; the logger's lines pass it; `${secrets.NAME}` renders from the scope.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { after, describe, test } from "node:test";
import { createLogger } from "../../src/core/log/logger.js";
import { SecretRedactor, secretRedactor } from "../../src/core/secrets/redactor.js";
import { SecretStore } from "../../src/core/secrets/store.js";
import { renderString, renderValue, TemplateError } from "../../src/workflows/engine/template.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-secrets-unit-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
/** A data dir whose secrets file holds `text` with `mode`. */
function dataDirWith(text: string, mode = 0o600): string {
  const dir = path.join(root, `d${n++}`);
  mkdirSync(dir);
  writeFileSync(path.join(dir, "secrets"), text);
  chmodSync(path.join(dir, "secrets"), mode);
  return dir;
}

describe("the secrets store", () => {
  test("NAME=value lines: comments, blanks, export, quotes; the prefixed environment wins", () => {
    const dir = dataDirWith(
      [
        "# a comment",
        "",
        "TOKEN=abc123def",
        'export QUOTED="two words # not a comment"',
        "SINGLE='it''s'",
        "PLAIN=value # a comment",
        "OVERRIDDEN=from-file",
      ].join("\n"),
    );
    const store = SecretStore.load(dir, {
      CLAWBRIDGE_SECRET_OVERRIDDEN: "from-env",
      CLAWBRIDGE_SECRET_ENVONLY: "e-value",
      OTHER: "x",
    });
    assert.ok(!("problems" in store), JSON.stringify(store));
    assert.equal(store.value("TOKEN"), "abc123def");
    assert.equal(store.value("QUOTED"), "two words # not a comment");
    assert.equal(store.value("PLAIN"), "value");
    assert.equal(store.value("OVERRIDDEN"), "from-env");
    assert.equal(store.value("ENVONLY"), "e-value");
    assert.equal(store.has("OTHER"), false, "plain environment variables are not secrets");
    assert.deepEqual(store.names, ["ENVONLY", "OVERRIDDEN", "PLAIN", "QUOTED", "SINGLE", "TOKEN"]);
  });

  test("a file readable by others is refused, naming the file and chmod 600", () => {
    const dir = dataDirWith("TOKEN=abcdefgh\n", 0o644);
    const res = SecretStore.load(dir, {});
    assert.ok("problems" in res);
    const file = path.join(dir, "secrets");
    assert.equal(res.problems[0]!.key, "permissions");
    assert.match(
      res.problems[0]!.message,
      new RegExp(`mode 0644.*chmod 600 ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`),
    );
  });

  test("a line that is not NAME=value is a problem naming its line; no file is no secrets", () => {
    const res = SecretStore.load(dataDirWith("GOOD=1234\nnot a pair\n"), {});
    assert.ok("problems" in res);
    assert.equal(res.problems[0]!.key, "line 2");
    const none = SecretStore.load(path.join(root, "no-such-dir"), {});
    assert.ok(!("problems" in none));
    assert.deepEqual(none.names, []);
  });
});

describe("the redactor", () => {
  test("a long value anywhere, longest first; a short value only as a whole value", () => {
    const r = new SecretRedactor();
    r.add("LONG", "abcd1234");
    r.add("LONGER", "abcd1234-extra");
    r.add("PIN", "42");
    assert.equal(r.text("x abcd1234 y abcd1234-extra z"), "x [secret LONG] y [secret LONGER] z");
    assert.equal(r.text("42"), "[secret PIN]");
    assert.equal(r.text("the answer is 42, 420"), "the answer is 42, 420", "a short value inside a text stays");
    const v = { a: ["ok", "abcd1234"], b: { c: "42", d: 42 } };
    assert.deepEqual(r.value(v), { a: ["ok", "[secret LONG]"], b: { c: "[secret PIN]", d: 42 } });
    const clean = { a: ["ok"], b: 1 };
    assert.equal(r.value(clean), clean, "unchanged: the same object");
  });

  test("a log line: the JSON-escaped form, and a short value as a whole JSON string", () => {
    const r = new SecretRedactor();
    r.add("QUOTE", 'pa"ss\\word');
    r.add("PIN", "42");
    const line = JSON.stringify({ msg: 'x pa"ss\\word y', pin: "42", n: 42, other: "420" });
    assert.equal(r.line(line), JSON.stringify({ msg: "x [secret QUOTE] y", pin: "[secret PIN]", n: 42, other: "420" }));
  });

  test("a stream is held back so that no piece ends inside a value", () => {
    const r = new SecretRedactor();
    r.add("TOKEN", "abcdefgh");
    const pieces: string[] = [];
    let held = "";
    for (const t of ["start abc", "def", "gh end of a long enough text", "!"]) {
      const all = held + t;
      const end = r.safeEnd(all);
      held = all.slice(end);
      if (end) pieces.push(all.slice(0, end));
    }
    pieces.push(held);
    assert.equal(pieces.join(""), "start abcdefgh end of a long enough text!");
    assert.ok(
      pieces.every((p) => !p.includes("abc") || p.includes("abcdefgh")),
      JSON.stringify(pieces),
    );
    assert.deepEqual(pieces.map((p) => r.text(p)).join(""), "start [secret TOKEN] end of a long enough text!");
    assert.equal(new SecretRedactor().safeEnd("anything"), 8, "no values: nothing held");
  });

  test("the logger writes every line through the process's redactor", () => {
    secretRedactor.add("LOGGED", "logger-secret-value");
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const log = createLogger("info", sink);
    log.info({ header: "Bearer logger-secret-value" }, "sent logger-secret-value");
    assert.equal(lines.length, 1);
    assert.ok(!lines[0]!.includes("logger-secret-value"));
    assert.equal((lines[0]!.match(/\[secret LOGGED\]/g) ?? []).length, 2);
  });
});

describe("${secrets.NAME} in templates", () => {
  test("renders from the scope; unset or unavailable is a TemplateError", () => {
    const secret = (name: string) => (name === "TOKEN" ? "t-value" : undefined);
    assert.equal(renderString("Bearer ${secrets.TOKEN}", { inputs: {}, secret }), "Bearer t-value");
    assert.deepEqual(renderValue({ k: "${secrets.TOKEN}" }, { inputs: {}, secret }), { k: "t-value" });
    assert.throws(() => renderString("${secrets.NOPE}", { inputs: {}, secret }), TemplateError);
    assert.throws(() => renderString("${secrets.TOKEN}", { inputs: {} }), /not available here/);
    assert.throws(() => renderString("${secrets.1BAD}", { inputs: {}, secret }), /is not a reference/);
  });
});
