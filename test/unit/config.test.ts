/**
 * Configuration: YAML/JSON files, embedded defaults from the seed's environment variables, command
 * line overrides, and error messages that name every bad key.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import {
  ConfigError,
  DEFAULT_MODEL,
  isLoopbackHost,
  loadConfig,
  resolveConfig,
  userConfigPath,
} from "../../src/core/config/load.js";
import { DEFAULT_CONTEXT, type Config } from "../../src/core/config/schema.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const dir = tempDir("cb-config-");
after(() => cleanup(dir));

/** The environment every load uses (never the real HOME / process env). */
const baseEnv = { CLAWBRIDGE_DATA_DIR: path.join(dir, "data") };

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** The problems a bad configuration produces (fails the test if it loads). */
function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `a ConfigError, got ${(err as Error).name}: ${(err as Error).message}`);
    assert.ok(err.message.includes(err.problems[0] ?? "-"), "the message lists the problems");
    return err.problems;
  }
  assert.fail("the configuration was accepted");
}

const minimal = (extra: Record<string, unknown> = {}) => ({
  backends: { oc: { type: "opencode" } },
  models: [{ id: "m1", backend: "oc" }],
  ...extra,
});

const ISSUE_EXAMPLE = `server: { host: 127.0.0.1, port: 4097, apiKeys: [] }
backends:
  oc: { type: opencode, command: opencode, env: {}, timeoutSeconds: 300 }
models:
  - id: opencode/minimax-m2.5-free
    backend: oc
    model: opencode/minimax-m2.5-free
    context: { maxSystemChars: 2000, maxHistoryChars: 2500, maxToolResultChars: 3000, maxPromptChars: 10000 }
remap:
  - { match: kimi, to: opencode/glm-5-free }
`;

describe("config files", () => {
  test("a YAML file loads, with defaults filled in", () => {
    const p = file(
      "ok.yaml",
      `# comment
server:
  port: 5055
  maxConcurrent: 2
backends:
  oc:
    type: opencode
    command: /opt/opencode/bin/opencode
    timeoutSeconds: 120
models:
  - id: fast
    backend: oc
    model: opencode/minimax-m2.5-free
    context: { maxHistoryChars: 1234 }
`,
    );
    const cfg = loadConfig({ configPath: p, env: baseEnv });
    assert.equal(cfg.source, p);
    assert.equal(cfg.server.host, "127.0.0.1");
    assert.equal(cfg.server.port, 5055);
    assert.equal(cfg.server.maxConcurrent, 2);
    assert.deepEqual(cfg.server.apiKeys, []);
    assert.equal(cfg.models[0]!.backendModel, "opencode/minimax-m2.5-free");
    assert.equal(cfg.models[0]!.context.maxHistoryChars, 1234);
    assert.equal(cfg.models[0]!.context.maxPromptChars, DEFAULT_CONTEXT.maxPromptChars);
    assert.equal(cfg.models[0]!.sessionMode, "stateless");
    assert.deepEqual(cfg.backends.oc, {
      type: "opencode",
      options: {
        command: "/opt/opencode/bin/opencode",
        args: [],
        env: {},
        timeoutSeconds: 120,
        killGraceSeconds: 3,
        warm: { enabled: true, idleSeconds: 600, maxProcesses: 4, interruptGraceSeconds: 2 },
      },
      models: {
        expose: "configured",
        remap: { onMissing: "error" },
        discovery: { enabled: true, refreshHours: 6 },
        limits: { backoffSeconds: 300 },
      },
    });
    assert.equal(cfg.dataDir, baseEnv.CLAWBRIDGE_DATA_DIR);
  });

  test("a JSON file loads", () => {
    const p = file(
      "ok.json",
      JSON.stringify({ server: { port: 6066 }, ...minimal(), dataDir: path.join(dir, "jdata") }),
    );
    const cfg = loadConfig({ configPath: p, env: baseEnv });
    assert.equal(cfg.server.port, 6066);
    assert.equal(cfg.models[0]!.id, "m1");
    assert.equal(cfg.dataDir, path.join(dir, "jdata"), "dataDir in the file wins over the environment");
  });

  test("CLAWBRIDGE_CONFIG names the file when --config is not given", () => {
    const p = file("env.yml", "backends: { a: { type: opencode } }\nmodels: [{ id: from-env, backend: a }]\n");
    assert.equal(loadConfig({ env: { ...baseEnv, CLAWBRIDGE_CONFIG: p } }).models[0]!.id, "from-env");
  });

  test("the exact example from the issue validates as written", {}, () => {
    const p = file("issue.yaml", ISSUE_EXAMPLE);
    const cfg = loadConfig({ configPath: p, env: baseEnv });
    assert.equal(cfg.models[0]!.id, "opencode/minimax-m2.5-free");
    assert.deepEqual(cfg.remap, [{ match: "kimi", to: "opencode/glm-5-free" }]);
  });

  test("unreadable and unparsable files are reported with the file name", () => {
    const missing = path.join(dir, "nope.yaml");
    const p1 = problems(() => loadConfig({ configPath: missing, env: baseEnv }));
    assert.match(p1[0]!, /cannot read the file/);
    const badYaml = file("bad.yaml", "server: [unclosed\n  port: 1\n");
    assert.match(problems(() => loadConfig({ configPath: badYaml, env: baseEnv }))[0]!, /not valid YAML/);
    const badJson = file("bad.json", '{ "server": ');
    assert.match(problems(() => loadConfig({ configPath: badJson, env: baseEnv }))[0]!, /not valid JSON/);
    try {
      loadConfig({ configPath: badJson, env: baseEnv });
    } catch (err) {
      assert.equal((err as ConfigError).source, badJson);
      assert.ok((err as Error).message.includes(badJson));
    }
  });
});

describe("every bad key is named", () => {
  const cases: Array<{ name: string; raw: unknown; expect: RegExp }> = [
    {
      name: "unknown top-level key",
      raw: minimal({ modles: [] }),
      expect: /^\(top level\): unknown key "modles" \(known: /,
    },
    { name: "unknown server key", raw: minimal({ server: { prot: 1 } }), expect: /^server: unknown key "prot"$/ },
    {
      name: "wrong type for server.port",
      raw: minimal({ server: { port: "4097" } }),
      expect: /^server\.port: .*expected number/,
    },
    { name: "port out of range", raw: minimal({ server: { port: 70000 } }), expect: /^server\.port: / },
    {
      name: "short API key",
      raw: minimal({ server: { apiKeys: ["short"] } }),
      expect: /^server\.apiKeys\[0\]: API keys must be at least 8 characters$/,
    },
    {
      name: "wrong type for backends.x.timeoutSeconds",
      raw: { backends: { oc: { type: "opencode", timeoutSeconds: "300" } }, models: [{ id: "m", backend: "oc" }] },
      expect: /^backends\.oc\.timeoutSeconds: .*expected number, received string/,
    },
    {
      name: "negative timeout",
      raw: { backends: { oc: { type: "opencode", timeoutSeconds: -1 } }, models: [{ id: "m", backend: "oc" }] },
      expect: /^backends\.oc\.timeoutSeconds: /,
    },
    {
      name: "unknown backend option",
      raw: { backends: { oc: { type: "opencode", comand: "x" } }, models: [{ id: "m", backend: "oc" }] },
      expect: /^backends\.oc: unknown key "comand"$/,
    },
    {
      name: "unknown backend type",
      raw: { backends: { x: { type: "chatgpt-web" } }, models: [{ id: "m", backend: "x" }] },
      expect: /^backends\.x\.type: unknown backend type "chatgpt-web" \(known: .*opencode.*\)$/,
    },
    {
      name: "backend without type",
      raw: { backends: { oc: {} }, models: [{ id: "m", backend: "oc" }] },
      expect: /^backends\.oc\.type: /,
    },
    {
      name: "model pointing at a missing backend",
      raw: { backends: { oc: { type: "opencode" } }, models: [{ id: "m", backend: "ocx" }] },
      expect: /^models\[0\]\.backend: no backend named "ocx" \(configured: oc\)$/,
    },
    {
      name: "remap to an unknown model with several backends",
      raw: minimal({
        backends: { oc: { type: "opencode" }, oc2: { type: "opencode" } },
        remap: [{ match: "kimi", to: "ghost" }],
      }),
      expect:
        /^remap\[0\]\.to: "ghost" is not a configured model id; name the backend that serves it with remap\[0\]\.backend$/,
    },
    {
      name: "remap naming a missing backend",
      raw: minimal({ remap: [{ match: "kimi", to: "ghost", backend: "nope" }] }),
      expect: /^remap\[0\]\.backend: no backend named "nope"$/,
    },
    {
      name: "duplicate model ids",
      raw: {
        backends: { oc: { type: "opencode" } },
        models: [
          { id: "dup", backend: "oc" },
          { id: "dup", backend: "oc" },
        ],
      },
      expect: /^models\[1\]\.id: duplicate model id "dup"$/,
    },
    {
      name: "unknown model key",
      raw: { backends: { oc: { type: "opencode" } }, models: [{ id: "m", backend: "oc", contxt: {} }] },
      expect: /^models\[0\]: unknown key "contxt"$/,
    },
    {
      name: "unknown context key",
      raw: { backends: { oc: { type: "opencode" } }, models: [{ id: "m", backend: "oc", context: { maxHistory: 1 } }] },
      expect: /^models\[0\]\.context: unknown key "maxHistory"$/,
    },
    {
      name: "prompt budget too small",
      raw: {
        backends: { oc: { type: "opencode" } },
        models: [{ id: "m", backend: "oc", context: { maxPromptChars: 500 } }],
      },
      expect: /^models\[0\]\.context\.maxPromptChars: must be at least 1000$/,
    },
    {
      name: "session mode the backend cannot do",
      raw: {
        backends: { oc: { type: "opencode" } },
        models: [{ id: "m", backend: "oc", session: { mode: "passthrough" } }],
      },
      expect: /^models\[0\]\.session\.mode: backend type "opencode" supports stateless, resume, not "passthrough"$/,
    },
    {
      name: "no models",
      raw: { backends: { oc: { type: "opencode" } }, models: [] },
      expect: /^models: configure at least one model/,
    },
    { name: "missing backends and models", raw: {}, expect: /^backends: / },
    { name: "not an object", raw: "just a string", expect: /^\(top level\): / },
    { name: "bad logging level", raw: minimal({ logging: { level: "verbose" } }), expect: /^logging\.level: / },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const ps = problems(() => resolveConfig(c.raw, "test"));
      assert.ok(
        ps.some((p) => c.expect.test(p)),
        `expected ${c.expect} in ${JSON.stringify(ps)}`,
      );
    });
  }

  test("several semantic problems are reported together, each with its key", () => {
    const ps = problems(() =>
      resolveConfig(
        {
          backends: { oc: { type: "opencode", timeoutSeconds: "300" }, web: { type: "nope" } },
          models: [
            { id: "a", backend: "missing" },
            { id: "b", backend: "oc" },
            { id: "b", backend: "oc" },
          ],
          remap: [{ match: "k", to: "zzz" }],
        },
        "test",
      ),
    );
    for (const key of [
      "backends.oc.timeoutSeconds",
      "backends.web.type",
      "models[0].backend",
      "models[2].id",
      "remap[0].to",
    ]) {
      assert.ok(
        ps.some((p) => p.startsWith(`${key}:`)),
        `${key} named in ${JSON.stringify(ps)}`,
      );
    }
  });

  test("schema problems and semantic problems are reported together in one pass", {}, () => {
    const ps = problems(() =>
      resolveConfig(
        {
          bogus: 1,
          backends: { oc: { type: "opencode", timeoutSeconds: "300" } },
          models: [{ id: "a", backend: "missing" }],
        },
        "test",
      ),
    );
    for (const key of ["(top level)", "backends.oc.timeoutSeconds", "models[0].backend"]) {
      assert.ok(
        ps.some((p) => p.startsWith(`${key}:`)),
        `${key} named in ${JSON.stringify(ps)}`,
      );
    }
  });
});

test("server.backendProbes: on, every 60 s by default; below 5 s or above a day is refused, saying why", () => {
  assert.deepEqual(resolveConfig(minimal({}), "test").server.backendProbes, { enabled: true, everySeconds: 60 });
  const five = resolveConfig(minimal({ server: { backendProbes: { everySeconds: 5 } } }), "test");
  assert.deepEqual(five.server.backendProbes, { enabled: true, everySeconds: 5 });
  for (const [v, why] of [
    [1, /at least 5 seconds/],
    [100_000, /at most 86400/],
  ] as const) {
    const ps = problems(() => resolveConfig(minimal({ server: { backendProbes: { everySeconds: v } } }), "test"));
    assert.ok(
      ps.some((p) => p.startsWith("server.backendProbes.everySeconds:") && why.test(p)),
      JSON.stringify(ps),
    );
  }
});

describe("listening beyond loopback needs API keys", () => {
  test("a non-loopback host without apiKeys is refused", () => {
    for (const host of ["0.0.0.0", "192.168.1.20", "::", "example.com"]) {
      const ps = problems(() => resolveConfig(minimal({ server: { host } }), "test"));
      assert.ok(
        ps.some((p) => p.startsWith("server.host:") && p.includes("apiKeys")),
        `${host}: ${JSON.stringify(ps)}`,
      );
    }
  });

  test("a non-loopback host with apiKeys is allowed", () => {
    const cfg = resolveConfig(minimal({ server: { host: "0.0.0.0", apiKeys: ["a-long-secret-key"] } }), "test");
    assert.equal(cfg.server.host, "0.0.0.0");
    assert.deepEqual(cfg.server.apiKeys, ["a-long-secret-key"]);
  });

  test("allowUnauthenticatedRemote is the explicit opt-out", () => {
    assert.equal(
      resolveConfig(minimal({ server: { host: "10.0.0.2", allowUnauthenticatedRemote: true } }), "test").server.host,
      "10.0.0.2",
    );
  });

  test("loopback hosts need no keys", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) {
      assert.ok(isLoopbackHost(host), host);
      assert.equal(resolveConfig(minimal({ server: { host } }), "test").server.host, host);
    }
    for (const host of ["0.0.0.0", "128.0.0.1", "localhost.evil.com", "::"]) assert.ok(!isLoopbackHost(host), host);
  });

  test("every spelling of loopback is loopback: the inet_aton forms and IPv4-mapped ::ffff:127.x", () => {
    for (const host of [
      "127.1",
      "127.0.1",
      "2130706433",
      "0x7f.1",
      "0177.0.0.1",
      "::ffff:127.0.0.1",
      "[::ffff:127.0.0.1]",
      "::ffff:7f00:1",
      "0:0:0:0:0:0:0:1",
      "LOCALHOST",
    ]) {
      assert.ok(isLoopbackHost(host), host);
      assert.equal(resolveConfig(minimal({ server: { host } }), "test").server.host, host);
    }
    // Not loopback, and refused without keys with the reason as before.
    for (const host of [
      "128.1",
      "10.0.0.1",
      "::ffff:10.0.0.1",
      "64:ff9b::7f00:1",
      "127.0.0.256",
      "1.2.3.4.5",
      "0x",
      "::2",
    ]) {
      assert.ok(!isLoopbackHost(host), host);
    }
    assert.throws(
      () => resolveConfig(minimal({ server: { host: "::ffff:10.0.0.1" } }), "test"),
      /server\.host: "::ffff:10\.0\.0\.1" is reachable from other machines; set server\.apiKeys/,
    );
  });
});

describe("embedded defaults (no config file) honour the seed's environment variables", () => {
  const load = (env: Record<string, string>, overrides?: { host?: string; port?: number }): Config =>
    loadConfig({ env: { ...baseEnv, ...env }, ...(overrides ? { overrides } : {}) });

  test("with nothing set: one opencode backend, the seed's model, 4097, 300 s, kimi remap", () => {
    const cfg = load({});
    assert.equal(cfg.source, "embedded defaults");
    assert.equal(cfg.server.host, "127.0.0.1");
    assert.equal(cfg.server.port, 4097);
    assert.deepEqual(
      cfg.models.map((m) => m.id),
      [DEFAULT_MODEL, "opencode/glm-5-free"],
    );
    assert.equal(DEFAULT_MODEL, "opencode/minimax-m2.5-free");
    assert.equal((cfg.backends.opencode!.options as { timeoutSeconds: number }).timeoutSeconds, 300);
    assert.deepEqual(cfg.remap, [{ match: "kimi", to: "opencode/glm-5-free" }]);
    assert.deepEqual(cfg.models[0]!.context, DEFAULT_CONTEXT, "the seed's v5 limits are the defaults");
    assert.deepEqual(
      [
        DEFAULT_CONTEXT.maxSystemChars,
        DEFAULT_CONTEXT.maxHistoryChars,
        DEFAULT_CONTEXT.maxToolResultChars,
        DEFAULT_CONTEXT.maxPromptChars,
      ],
      [2000, 2500, 3000, 10000],
    );
  });

  test("ROUTER_MODEL, OPENCODE_BIN, ROUTER_TIMEOUT, ROUTER_PORT are used", () => {
    const cfg = load({
      ROUTER_MODEL: "opencode/big-pickle",
      OPENCODE_BIN: "/home/u/.opencode/bin/opencode",
      ROUTER_TIMEOUT: "120",
      ROUTER_PORT: "5099",
    });
    assert.equal(cfg.models[0]!.id, "opencode/big-pickle");
    assert.equal(cfg.models[0]!.backendModel, "opencode/big-pickle");
    const opts = cfg.backends.opencode!.options as { command: string; timeoutSeconds: number };
    assert.equal(opts.command, "/home/u/.opencode/bin/opencode");
    assert.equal(opts.timeoutSeconds, 120);
    assert.equal(cfg.server.port, 5099);
  });

  test("ROUTER_MODEL equal to the remap target is not listed twice", () => {
    assert.deepEqual(
      load({ ROUTER_MODEL: "opencode/glm-5-free" }).models.map((m) => m.id),
      ["opencode/glm-5-free"],
    );
  });

  test("bad values are rejected, naming the variable", () => {
    for (const [k, v] of [
      ["ROUTER_TIMEOUT", "abc"],
      ["ROUTER_TIMEOUT", "-5"],
      ["ROUTER_TIMEOUT", "0"],
      ["ROUTER_PORT", "12x"],
      ["ROUTER_PORT", "-1"],
      ["ROUTER_PORT", "80.5"],
    ] as const) {
      const ps = problems(() => load({ [k]: v }));
      assert.ok(
        ps.some((p) => p.startsWith(`${k}:`) && p.includes(v)),
        `${k}=${v}: ${JSON.stringify(ps)}`,
      );
    }
  });

  test("an out-of-range ROUTER_PORT is rejected", () => {
    problems(() => load({ ROUTER_PORT: "99999" }));
    problems(() => load({ ROUTER_TIMEOUT: "Infinity" }));
  });

  test("an out-of-range ROUTER_PORT / infinite ROUTER_TIMEOUT is rejected naming the variable", {}, () => {
    assert.ok(problems(() => load({ ROUTER_PORT: "99999" })).some((p) => p.startsWith("ROUTER_PORT:")));
    assert.ok(problems(() => load({ ROUTER_TIMEOUT: "Infinity" })).some((p) => p.startsWith("ROUTER_TIMEOUT:")));
  });

  test("a config file ignores the ROUTER_* variables", () => {
    const p = file("plain.yaml", "backends: { oc: { type: opencode } }\nmodels: [{ id: m, backend: oc }]\n");
    const cfg = loadConfig({ configPath: p, env: { ...baseEnv, ROUTER_PORT: "5999", ROUTER_MODEL: "x/y" } });
    assert.equal(cfg.server.port, 4097);
    assert.deepEqual(
      cfg.models.map((m) => m.id),
      ["m"],
    );
  });
});

describe("--port / --host overrides win", () => {
  test("over the environment", () => {
    const cfg = loadConfig({ env: { ...baseEnv, ROUTER_PORT: "5000" }, overrides: { port: 7001, host: "localhost" } });
    assert.equal(cfg.server.port, 7001);
    assert.equal(cfg.server.host, "localhost");
  });

  test("over the file", () => {
    const p = file(
      "ports.yaml",
      "server: { host: 127.0.0.1, port: 5000 }\nbackends: { oc: { type: opencode } }\nmodels: [{ id: m, backend: oc }]\n",
    );
    const cfg = loadConfig({ configPath: p, env: baseEnv, overrides: { port: 7002 } });
    assert.equal(cfg.server.port, 7002);
    assert.equal(cfg.server.host, "127.0.0.1", "only what was overridden changes");
  });

  test("an overridden non-loopback host is still checked", () => {
    const ps = problems(() => loadConfig({ env: baseEnv, overrides: { host: "0.0.0.0" } }));
    assert.ok(ps.some((p) => p.startsWith("server.host:")));
    const p = file(
      "keys.yaml",
      "server: { apiKeys: [a-long-secret-key] }\nbackends: { oc: { type: opencode } }\nmodels: [{ id: m, backend: oc }]\n",
    );
    assert.equal(loadConfig({ configPath: p, env: baseEnv, overrides: { host: "0.0.0.0" } }).server.host, "0.0.0.0");
  });

  test("an override with a bad port is rejected naming server.port", () => {
    assert.ok(
      problems(() => loadConfig({ env: baseEnv, overrides: { port: 123456 } })).some((p) =>
        p.startsWith("server.port:"),
      ),
    );
  });
});

test("the person's own config file (clawbridge init's) is read when neither --config nor CLAWBRIDGE_CONFIG names one", () => {
  const home = tempDir("cb-userconf-");
  try {
    const env = { HOME: home, CLAWBRIDGE_DATA_DIR: path.join(home, "data") };
    assert.equal(loadConfig({ env }).source, "embedded defaults", "no file: the embedded defaults");
    const own = userConfigPath(env);
    assert.equal(own, path.join(home, ".config", "clawbridge", "config.yaml"));
    mkdirSync(path.dirname(own), { recursive: true });
    writeFileSync(own, "backends:\n  cc: { type: claude-code }\nmodels:\n  - { id: claude, backend: cc }\n");
    assert.equal(loadConfig({ env }).source, own);
    assert.deepEqual(
      loadConfig({ env }).models.map((m) => m.id),
      ["claude"],
    );
    const xdg = path.join(home, "xdg");
    assert.equal(userConfigPath({ ...env, XDG_CONFIG_HOME: xdg }), path.join(xdg, "clawbridge", "config.yaml"));
    const other = path.join(home, "other.yaml");
    writeFileSync(other, "backends:\n  oc: { type: opencode }\nmodels:\n  - { id: oc, backend: oc }\n");
    assert.equal(loadConfig({ env: { ...env, CLAWBRIDGE_CONFIG: other } }).source, other, "CLAWBRIDGE_CONFIG wins");
    assert.equal(loadConfig({ env, configPath: other }).source, other, "--config wins");
  } finally {
    cleanup(home);
  }
});

test("store: SQLite by default; postgres needs a postgres:// URL (from the file or CLAWBRIDGE_STORE_URL), each problem naming its key", () => {
  assert.deepEqual(resolveConfig(minimal({}), "test").store, { kind: "sqlite" });
  const pg = resolveConfig(minimal({ store: { kind: "postgres", url: "postgres://u:p@db.example:5432/cb" } }), "test");
  assert.deepEqual(pg.store, {
    kind: "postgres",
    url: "postgres://u:p@db.example:5432/cb",
    poolSize: 20,
    leaseSeconds: 30,
  });
  const fromEnv = resolveConfig(minimal({ store: { kind: "postgres" } }), "test", {
    CLAWBRIDGE_STORE_URL: "postgresql://h/cb",
  });
  assert.equal(fromEnv.store.kind === "postgres" && fromEnv.store.url, "postgresql://h/cb");
  for (const [store, env, why] of [
    [{ kind: "postgres" }, {}, /^store\.url: set the database URL/],
    [{ kind: "postgres", url: "mysql://h/db" }, {}, /^store\.url: must be a postgres:\/\//],
    [{ kind: "postgres" }, { CLAWBRIDGE_STORE_URL: "http://h" }, /^store\.url: CLAWBRIDGE_STORE_URL must be/],
    [{ kind: "postgres", url: "postgres://h/db", leaseSeconds: 1 }, {}, /^store\.leaseSeconds: must be at least 3/],
    [{ kind: "postgres", url: "postgres://h/db", instanceId: "a b" }, {}, /^store\.instanceId:/],
    [{ kind: "mongo" }, {}, /^store\.kind/],
  ] as const) {
    const ps = problems(() => resolveConfig(minimal({ store }), "test", env));
    assert.ok(
      ps.some((p) => why.test(p)),
      JSON.stringify(ps),
    );
  }
});
