/**
 * Where a system may name a secret (src/workflows/systems/library.ts SECRET_FIELDS): webhook
 * headers and body fields, a command's `setEnv`, an MCP server's `setEnv` and `headers`, a schedule's
 * `notify` headers. Anywhere
 * else (a URL, an argv element, a prompt, another system's inputs) and a secret that is not set are
 * problems naming the key.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { loadSystems, type LoadOptions } from "../../src/workflows/systems/library.js";

const MODELS: LoadOptions["models"] = new Map([["m", { router: false }]]);
const secrets = { has: (name: string) => name === "TOKEN", file: "/data/secrets" };

async function problems(run: unknown, extra: Record<string, unknown> = {}) {
  const res = await loadSystems({ configSystems: [{ id: "s", run, ...extra }], models: MODELS, secrets });
  return res.problems.map((p) => `${p.key}: ${p.message}`);
}

describe("${secrets.NAME} in systems", () => {
  test("allowed in webhook headers and body, command setEnv, MCP server setEnv and headers", async () => {
    assert.deepEqual(
      await problems({
        kind: "webhook",
        url: "http://127.0.0.1:9/x",
        headers: { authorization: "Bearer ${secrets.TOKEN}" },
        body: { nested: { key: "${secrets.TOKEN}" } },
      }),
      [],
    );
    assert.deepEqual(await problems({ kind: "command", argv: ["/bin/true"], setEnv: { K: "${secrets.TOKEN}" } }), []);
    assert.deepEqual(
      await problems(
        { kind: "mcp", server: { transport: "stdio", command: "srv", setEnv: { K: "${secrets.TOKEN}" } }, tool: "t" },
        { sideEffects: true },
      ),
      [],
    );
    assert.deepEqual(
      await problems(
        {
          kind: "mcp",
          server: { transport: "http", url: "http://127.0.0.1:9/mcp", headers: { k: "${secrets.TOKEN}" } },
          tool: "t",
        },
        { sideEffects: true },
      ),
      [],
    );
  });

  test("refused anywhere else, naming the key", async () => {
    const cases: Array<[unknown, string]> = [
      [{ kind: "webhook", url: "http://127.0.0.1:9/x?k=${secrets.TOKEN}" }, "run.url"],
      [{ kind: "command", argv: ["/bin/echo", "${secrets.TOKEN}"] }, "run.argv[1]"],
      [{ kind: "command", argv: ["/bin/cat"], stdin: "${secrets.TOKEN}" }, "run.stdin"],
      [{ kind: "model", model: "m", prompt: "use ${secrets.TOKEN}" }, "run.prompt"],
      [
        {
          kind: "mcp",
          server: { transport: "stdio", command: "srv" },
          tool: "t",
          arguments: { k: "${secrets.TOKEN}" },
        },
        "run.arguments.k",
      ],
    ];
    for (const [run, key] of cases) {
      const found = await problems(run, { sideEffects: true });
      assert.ok(
        found.some((p) => p.startsWith(`systems[0].${key}: \${secrets.TOKEN} is not allowed here`)),
        `${key}: ${JSON.stringify(found)}`,
      );
    }
  });

  test("another system's inputs may not carry one", async () => {
    const res = await loadSystems({
      configSystems: [
        {
          id: "inner",
          inputs: { type: "object", properties: { k: { type: "string" } } },
          run: { kind: "model", model: "m", prompt: "${inputs.k}" },
        },
        { id: "outer", run: { kind: "plan", steps: [{ id: "a", uses: "inner", with: { k: "${secrets.TOKEN}" } }] } },
      ],
      models: MODELS,
      secrets,
    });
    assert.match(
      res.problems.map((p) => `${p.key}: ${p.message}`).join("\n"),
      /systems\[1\]\.run\.steps\[0\]\.with\.k: \$\{secrets\.TOKEN\} is not allowed here/,
    );
  });

  test("a secret that is not set names itself and where to set it", async () => {
    const found = await problems({
      kind: "webhook",
      url: "http://127.0.0.1:9/x",
      headers: { k: "${secrets.MISSING}" },
    });
    assert.deepEqual(found, [
      'systems[0].run.headers.k: ${secrets.MISSING}: no secret "MISSING" is set; add MISSING=… to /data/secrets (chmod 600) or set CLAWBRIDGE_SECRET_MISSING in the bridge\'s environment',
    ]);
  });

  test("a schedule's notify headers take one (a token for the receiver); its notify URL does not", async () => {
    const webhook = { kind: "webhook", url: "http://127.0.0.1:9/x" };
    const notifyOf = (notify: unknown) => ({ triggers: [{ cron: "0 8 * * *", inputs: {}, notify }] });
    assert.deepEqual(
      await problems(
        webhook,
        notifyOf({ url: "http://127.0.0.1:9/n", headers: { authorization: "Bearer ${secrets.TOKEN}" } }),
      ),
      [],
    );
    const found = await problems(webhook, notifyOf({ url: "http://127.0.0.1:9/n", headers: { k: "${secrets.NOPE}" } }));
    assert.ok(
      found.some((p) => p.startsWith('systems[0].triggers[0].notify.headers.k: ${secrets.NOPE}: no secret "NOPE"')),
      JSON.stringify(found),
    );
    const inUrl = await problems(webhook, notifyOf({ url: "http://127.0.0.1:9/n?t=${secrets.TOKEN}" }));
    assert.ok(
      inUrl.some((p) => p.startsWith("systems[0].triggers[0].notify.url")),
      JSON.stringify(inUrl),
    );
  });
});
