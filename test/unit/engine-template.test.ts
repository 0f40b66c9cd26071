/**
 * `${…}` substitution (src/workflows/engine/template.ts): parsing references and `$${` literals, listing
 * every reference inside a value, `renderString` (text, with an optional encoder applied to the
 * substituted values only) and `renderValue` (a whole-string reference keeps the value's type),
 * field access into a step's JSON output, and the errors for what cannot be resolved.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  asText,
  parseTemplate,
  refsIn,
  renderString,
  renderValue,
  TemplateError,
  type Scope,
} from "../../src/workflows/engine/template.js";

const scope: Scope = {
  inputs: { name: "Ada", count: 3, flag: false, tags: ["a", "b"], obj: { k: 1 }, nothing: null, spaced: "a b/c?d=e&f" },
  steps: {
    text: { output: "plain text" },
    json: { output: '{"user":{"name":"Grace","id":7},"list":[10,20],"ok":true}' },
    obj: { output: { n: 2, nested: { deep: "yes" }, arr: [{ x: 1 }] } },
    num: { output: 42 },
    "1st": { output: "first" },
  },
  runId: "run-abc",
};

describe("parseTemplate", () => {
  test("text and references, with their source", () => {
    assert.deepEqual(parseTemplate("hi ${inputs.name}, run ${run.id}!"), [
      { text: "hi " },
      { ref: { kind: "input", name: "name" }, source: "${inputs.name}" },
      { text: ", run " },
      { ref: { kind: "run", field: "id" }, source: "${run.id}" },
      { text: "!" },
    ]);
    assert.deepEqual(parseTemplate("${steps.a.output.f.g}"), [
      { ref: { kind: "step", step: "a", path: ["f", "g"] }, source: "${steps.a.output.f.g}" },
    ]);
    assert.deepEqual(parseTemplate("${ steps.b-2.output }"), [
      { ref: { kind: "step", step: "b-2", path: [] }, source: "${ steps.b-2.output }" },
    ]);
    assert.deepEqual(parseTemplate(""), []);
    assert.deepEqual(parseTemplate("no refs { } $ $x {x}"), [{ text: "no refs { } $ $x {x}" }]);
  });

  test("`$${` is a literal `${` (and what follows is text)", () => {
    assert.deepEqual(parseTemplate("a $${inputs.name} b"), [{ text: "a ${inputs.name} b" }]);
    assert.deepEqual(parseTemplate("$${foo}"), [{ text: "${foo}" }]);
    // A `$` before `$${` is text: "$" then the literal "${".
    assert.deepEqual(parseTemplate("$$${inputs.x}"), [{ text: "$${inputs.x}" }]);
    assert.deepEqual(parseTemplate("$${a} ${inputs.b}"), [
      { text: "${a} " },
      { ref: { kind: "input", name: "b" }, source: "${inputs.b}" },
    ]);
  });

  test("malformed references are TemplateErrors", () => {
    for (const bad of [
      "${foo}",
      "${inputs}",
      "${inputs.a.b}",
      "${steps.a}",
      "${steps.a.result}",
      "${steps.a.output.}",
      "${run.name}",
      "${}",
      "${inputs.a b}",
      "x ${inputs.x",
    ]) {
      assert.throws(() => parseTemplate(bad), TemplateError, bad);
    }
    assert.throws(() => parseTemplate("${foo}"), /\$\{foo\} is not a reference/);
    assert.throws(() => parseTemplate("x ${inputs.x"), /unclosed/);
  });

  test("a step id or input name may start with a digit (step ids may)", () => {
    assert.deepEqual(parseTemplate("${steps.1st.output}"), [
      { ref: { kind: "step", step: "1st", path: [] }, source: "${steps.1st.output}" },
    ]);
    assert.equal(renderString("${steps.1st.output}", scope), "first");
  });
});

describe("refsIn", () => {
  test("every reference in strings anywhere inside objects and arrays; keys are not templates", () => {
    const refs = refsIn({
      a: "${inputs.x}",
      "${inputs.key}": ["lit", { b: "${steps.s.output.f} ${run.id}" }],
      n: 5,
      z: null,
    });
    assert.deepEqual(refs, [
      { kind: "input", name: "x" },
      { kind: "step", step: "s", path: ["f"] },
      { kind: "run", field: "id" },
    ]);
    assert.deepEqual(refsIn(42), []);
    assert.throws(() => refsIn(["ok", { deep: "${bad}" }]), TemplateError);
  });
});

describe("renderString", () => {
  test("inputs, step outputs, fields of JSON output, the run id", () => {
    assert.equal(renderString("Hello ${inputs.name} (${inputs.count}, ${inputs.flag})", scope), "Hello Ada (3, false)");
    assert.equal(
      renderString("${inputs.tags} ${inputs.obj} [${inputs.nothing}] [${inputs.absent}]", scope),
      '["a","b"] {"k":1} [] []',
    );
    assert.equal(renderString("${steps.text.output}", scope), "plain text");
    assert.equal(renderString("${steps.json.output.user.name} #${steps.json.output.user.id}", scope), "Grace #7");
    assert.equal(renderString("${steps.json.output.list.1} ${steps.json.output.ok}", scope), "20 true");
    assert.equal(renderString("${steps.obj.output}", scope), '{"n":2,"nested":{"deep":"yes"},"arr":[{"x":1}]}');
    assert.equal(renderString("${steps.obj.output.nested.deep} ${steps.obj.output.arr.0.x}", scope), "yes 1");
    assert.equal(renderString("${steps.num.output}", scope), "42");
    assert.equal(renderString("id=${run.id}", scope), "id=run-abc");
    assert.equal(renderString("$${inputs.name} is ${inputs.name}", scope), "${inputs.name} is Ada");
  });

  test("the encoder applies to substituted values only", () => {
    const out = renderString("http://127.0.0.1/p/${inputs.spaced}?q=${inputs.name}&lit=a b", scope, encodeURIComponent);
    assert.equal(out, "http://127.0.0.1/p/a%20b%2Fc%3Fd%3De%26f?q=Ada&lit=a b");
    const seen: string[] = [];
    renderString("${inputs.count}-${steps.json.output.user.id}", scope, (t) => (seen.push(t), t));
    assert.deepEqual(seen, ["3", "7"]);
  });

  test("what cannot be resolved is a TemplateError", () => {
    assert.throws(() => renderString("${steps.later.output}", scope), /step "later" has no output yet/);
    assert.throws(
      () => renderString("${steps.text.output.field}", scope),
      /output is text, not JSON with a field "field"/,
    );
    assert.throws(() => renderString("${steps.json.output.user.email}", scope), /has no field "user.email"/);
    assert.throws(() => renderString("${steps.num.output.x}", scope), TemplateError);
    assert.throws(() => renderString("${run.id}", { inputs: {} }), /not known here/);
    assert.throws(() => renderString("${steps.obj.output}", { inputs: {} }), /no output yet/);
  });

  test("inherited properties are not fields", () => {
    assert.throws(() => renderString("${steps.obj.output.constructor}", scope), /has no field "constructor"/);
    assert.throws(() => renderString("${steps.json.output.__proto__}", scope), /has no field/);
  });
});

describe("renderValue", () => {
  test("a string that is exactly one reference keeps the value's type", () => {
    assert.equal(renderValue("${inputs.count}", scope), 3);
    assert.equal(renderValue("${inputs.flag}", scope), false);
    assert.deepEqual(renderValue("${inputs.tags}", scope), ["a", "b"]);
    assert.equal(renderValue("${inputs.nothing}", scope), null);
    assert.equal(renderValue("${inputs.absent}", scope), undefined);
    assert.deepEqual(renderValue("${steps.obj.output.nested}", scope), { deep: "yes" });
    assert.deepEqual(renderValue("${steps.json.output.user}", scope), { name: "Grace", id: 7 });
    assert.equal(renderValue("${steps.json.output.ok}", scope), true);
    // A JSON step output named whole stays what it was (text here).
    assert.equal(renderValue("${steps.json.output}", scope), scope.steps!.json!.output);
  });

  test("anything else is text; structures are rendered deeply; non-strings pass through", () => {
    const out = renderValue(
      {
        msg: "n=${inputs.count}",
        list: ["${inputs.count}", "x${inputs.count}", 7, true, null],
        nested: { who: "${inputs.name}", lit: "$${inputs.name}" },
        "${inputs.name}": "key kept",
      },
      scope,
    );
    assert.deepEqual(out, {
      msg: "n=3",
      list: [3, "x3", 7, true, null],
      nested: { who: "Ada", lit: "${inputs.name}" },
      "${inputs.name}": "key kept",
    });
    assert.equal(renderValue("$${x}", scope), "${x}");
    assert.equal(renderValue(12, scope), 12);
  });
});

describe("asText", () => {
  test("strings as they are, numbers and booleans as text, others as JSON, nothing as empty", () => {
    assert.equal(asText("s"), "s");
    assert.equal(asText(1.5), "1.5");
    assert.equal(asText(true), "true");
    assert.equal(asText({ a: [1] }), '{"a":[1]}');
    assert.equal(asText(null), "");
    assert.equal(asText(undefined), "");
  });
});
