/**
 * `clawbridge systems …` and `clawbridge runs …` as a person types them: the real bin against a
 * config file, a real bridge for the commands that start or steer runs, and a real MCP server
 * (testkit/mcp-server.ts, built with the SDK) behind an `inputs: fromTool` system.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { mcpStdioCommand } from "../../testkit/mcp-server.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const execFileP = promisify(execFile);
const BIN = path.resolve("bin/clawbridge.js");
const NODE = process.execPath;

describe("clawbridge systems and runs", () => {
  let dir: string;
  let configFile: string;
  let bridge: TestBridge | undefined;
  const mcp = mcpStdioCommand();

  const config = (port = 4097, extra: unknown[] = []) => ({
    dataDir: path.join(dir, "data"),
    server: { port },
    backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
    models: [{ id: "m", backend: "up" }],
    systems: [
      {
        id: "hello",
        description: "says hello",
        inputs: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
        sideEffects: false,
        run: { kind: "command", argv: [NODE, "-e", "console.log('hello ' + process.argv[1])", "${inputs.name}"] },
      },
      {
        id: "remove",
        description: "deletes an item",
        inputs: "fromTool",
        run: { kind: "mcp", server: { transport: "stdio", command: mcp.command, args: mcp.args }, tool: "delete_item" },
      },
      {
        id: "echo",
        description: "echoes",
        run: {
          kind: "mcp",
          server: { transport: "stdio", command: mcp.command, args: mcp.args },
          tool: "echo",
          arguments: { text: "fixed" },
        },
      },
      ...extra,
    ],
  });

  const run = async (...args: string[]) => {
    try {
      const r = await execFileP(NODE, [BIN, ...args, "--config", configFile], {
        env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
        timeout: 90_000,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err: any) {
      return { code: err.code as number, stdout: String(err.stdout), stderr: String(err.stderr) };
    }
  };

  before(() => {
    dir = tempDir("cb-systems-cli-");
    configFile = path.join(dir, "clawbridge.yaml");
    writeFileSync(configFile, stringify(config()));
  });
  after(async () => {
    await bridge?.close();
    cleanup(dir);
  });

  test("validate: fine systems pass; each problem names its file or key", async () => {
    const ok = await run("systems", "validate");
    assert.equal(ok.code, 0, ok.stderr + ok.stdout);
    assert.match(ok.stdout, /3 systems OK/);

    const sysDir = path.join(dir, "data", "systems");
    mkdirSync(sysDir, { recursive: true });
    writeFileSync(
      path.join(sysDir, "broken.yaml"),
      stringify({
        description: "x",
        run: {
          kind: "plan",
          steps: [
            { id: "a", uses: "command", with: { argv: ["echo"] }, dependsOn: ["b"] },
            { id: "b", uses: "command", with: { argv: ["echo", "${inputs.nope}"] }, dependsOn: ["a"] },
          ],
        },
      }),
    );
    writeFileSync(
      configFile,
      stringify(
        config(4097, [
          {
            id: "hook",
            run: { kind: "webhook", url: "https://${inputs.host}/x" },
            inputs: { type: "object", properties: { host: { type: "string" } } },
          },
        ]),
      ),
    );
    const bad = await run("systems", "validate");
    assert.equal(bad.code, 1);
    assert.match(bad.stdout, /systems\[3\]\.run\.url: .*host/);
    assert.match(bad.stdout, /broken\.yaml: run\.steps: steps depend on each other in a cycle: a → b → a/);
    assert.match(bad.stdout, /broken\.yaml: run\.steps\[1\]\.with\.argv\[1\]: .*"nope" is not a declared input/);
  });

  test("list and show: fromTool takes the MCP tool's schema, destructiveHint means side effects", async () => {
    const list = await run("systems", "list", "--json");
    assert.equal(list.code, 0, list.stderr);
    const systems = JSON.parse(list.stdout) as Array<{
      id: string;
      sideEffects: boolean;
      inputs: { properties: Record<string, unknown>; required?: string[] };
    }>;
    const remove = systems.find((s) => s.id === "remove")!;
    assert.ok(remove.inputs.properties.id, "the tool's input schema");
    assert.equal(remove.sideEffects, true);
    assert.equal(systems.find((s) => s.id === "echo")!.sideEffects, false, "a read-only tool has no side effects");
    const show = await run("systems", "show", "hello");
    assert.equal(JSON.parse(show.stdout).id, "hello");
    assert.equal((await run("systems", "show", "nope")).code, 2);
  });

  test("run, then runs list/show; a stopped bridge is named", async () => {
    writeFileSync(configFile, stringify(config()));
    rmSync(path.join(dir, "data", "systems", "broken.yaml"));
    const down = await run("systems", "run", "hello", "name=world", "--url", "http://127.0.0.1:9");
    assert.equal(down.code, 2);
    assert.match(down.stderr, /no bridge answers at http:\/\/127\.0\.0\.1:9/);

    bridge = await startTestBridge({ ...config(0) });
    const res = await run("systems", "run", "hello", "name=world", "--url", bridge.url);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /completed/);
    assert.match(res.stdout, /hello world/);
    const missing = await run("systems", "run", "hello", "--url", bridge.url);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /missing name/);

    const list = await run("runs", "list", "--json");
    const runs = JSON.parse(list.stdout) as Array<{ id: string; system: string; status: string }>;
    assert.equal(runs[0]!.system, "hello");
    assert.equal(runs[0]!.status, "completed");
    const show = await run("runs", "show", runs[0]!.id);
    assert.match(show.stdout, /step run: completed/);
    const cancel = await run("runs", "cancel", runs[0]!.id, "--url", bridge.url);
    assert.equal(cancel.code, 2);
    assert.match(cancel.stderr, /already ended/);
  });
});
