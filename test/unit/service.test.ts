/**
 * The systemd user unit: golden text, quoting, and install/uninstall/status with a systemctl
 * stand-in (a real user manager is never touched by tests), including the no-systemd path.
 */
import { strict as assert } from "node:assert";
import { existsSync, readFileSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  defaultSystemctlRunner,
  environmentLine,
  installService,
  parseEnvAssignments,
  quoteExecArg,
  renderUnit,
  serviceStatus,
  systemdUnavailable,
  uninstallService,
  unitPath,
  type SystemctlResult,
  type SystemctlRunner,
} from "../../src/ops/service/systemd.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

const dirs: string[] = [];
after(() => dirs.forEach(cleanup));
function unitDir(): string {
  const d = tempDir("cb-unit-");
  dirs.push(d);
  return d;
}

/** A systemctl stand-in that records calls and answers from a script. */
function fakeSystemctl(
  answer: (args: string[]) => SystemctlResult = () => ({ code: 0, stdout: "", stderr: "" }),
): SystemctlRunner & { calls: string[][] } {
  const calls: string[][] = [];
  const runner = (async (args: string[]) => {
    calls.push(args);
    return answer(args);
  }) as SystemctlRunner & { calls: string[][] };
  runner.calls = calls;
  return runner;
}
const noBus = () =>
  fakeSystemctl(() => ({ code: 1, stdout: "", stderr: "Failed to connect to bus: No medium found\n" }));

const GOLDEN = `# Written by \`clawbridge service install\`; \`clawbridge service uninstall\` removes it.
[Unit]
Description=clawbridge: OpenAI-compatible bridge to coding-agent CLIs and local models (for OpenClaw)
StartLimitIntervalSec=300
StartLimitBurst=10

[Service]
Type=simple
ExecStart=/opt/node/bin/node /opt/clawbridge/bin/clawbridge.js serve --config "/home/me/My Configs/clawbridge.yaml"
Environment="PATH=/usr/local/bin:/usr/bin"
Environment="ANTHROPIC_API_KEY=sk-ant-secret"
Environment="NOTE=100%% \\"quoted\\" \\\\ $HOME"
Restart=on-failure
RestartSec=5
KillMode=mixed
TimeoutStopSec=30
UMask=0077
StandardOutput=journal
StandardError=journal
SyslogIdentifier=clawbridge

[Install]
WantedBy=default.target
`;

describe("unit text", () => {
  it("matches the golden unit", () => {
    const text = renderUnit({
      nodePath: "/opt/node/bin/node",
      binPath: "/opt/clawbridge/bin/clawbridge.js",
      configPath: "/home/me/My Configs/clawbridge.yaml",
      env: { PATH: "/usr/local/bin:/usr/bin", ANTHROPIC_API_KEY: "sk-ant-secret", NOTE: '100% "quoted" \\ $HOME' },
    });
    assert.equal(text, GOLDEN);
  });

  it("defaults to this node and this package's bin; no --config means embedded defaults", () => {
    const text = renderUnit({});
    const exec = /^ExecStart=(.*)$/m.exec(text)![1]!;
    assert.ok(exec.startsWith(`${quoteExecArg(process.execPath)} `));
    assert.match(exec, /bin\/clawbridge\.js serve$/);
    assert.ok(existsSync(path.resolve(import.meta.dirname, "../../bin/clawbridge.js")));
  });

  it("quotes ExecStart words and Environment values for systemd", () => {
    assert.equal(quoteExecArg("/usr/bin/node"), "/usr/bin/node");
    assert.equal(quoteExecArg("/a b/c"), '"/a b/c"');
    assert.equal(quoteExecArg("50%"), "50%%");
    assert.equal(quoteExecArg("$HOME"), '"$$HOME"');
    assert.equal(quoteExecArg('say "hi"'), '"say \\"hi\\""');
    assert.throws(() => quoteExecArg("a\nb"), /line breaks/);
    assert.equal(environmentLine("A", "x y"), 'Environment="A=x y"');
    assert.throws(() => environmentLine("1A", "x"), /not valid/);
    assert.throws(() => environmentLine("A", "x\ny"), /line break/);
  });

  it("parses --env KEY=VALUE (values may contain =)", () => {
    assert.deepEqual(parseEnvAssignments(["A=1", "B=x=y", "C="]), { A: "1", B: "x=y", C: "" });
    assert.throws(() => parseEnvAssignments(["NOEQUALS"]), /expected KEY=VALUE/);
    assert.throws(() => parseEnvAssignments(["bad-name=1"]), /not a valid variable name/);
  });
});

describe("install / uninstall / status", () => {
  const base = {
    nodePath: "/opt/node/bin/node",
    binPath: "/opt/clawbridge/bin/clawbridge.js",
    configPath: "/etc/cb.yaml",
  };

  it("writes the unit (0600), reloads, enables and starts it", async () => {
    const dir = unitDir();
    const sc = fakeSystemctl();
    const r = await installService({ ...base, unitDir: dir, runner: sc, env: { SECRET_TOKEN: "do-not-print-me" } });
    assert.equal(r.ok, true);
    assert.equal(r.systemd, true);
    assert.equal(r.unitPath, path.join(dir, "clawbridge.service"));
    assert.equal(statSync(r.unitPath).mode & 0o777, 0o600);
    assert.match(readFileSync(r.unitPath, "utf8"), /^Environment="SECRET_TOKEN=do-not-print-me"$/m);
    assert.deepEqual(sc.calls, [["daemon-reload"], ["enable", "--now", "clawbridge.service"]]);
    assert.deepEqual(r.envKeys, ["SECRET_TOKEN"]);
    assert.ok(!JSON.stringify(r).includes("do-not-print-me"), "the result never carries env values");
    assert.deepEqual(r.todo, []);
  });

  it("--no-start only enables; a changed unit is restarted on re-install", async () => {
    const dir = unitDir();
    const sc1 = fakeSystemctl();
    await installService({ ...base, unitDir: dir, runner: sc1, start: false });
    assert.deepEqual(sc1.calls, [["daemon-reload"], ["enable", "clawbridge.service"]]);
    const sc2 = fakeSystemctl();
    const same = await installService({ ...base, unitDir: dir, runner: sc2 });
    assert.equal(same.changed, false);
    assert.deepEqual(sc2.calls, [["daemon-reload"], ["enable", "--now", "clawbridge.service"]]);
    const sc3 = fakeSystemctl();
    const changed = await installService({ ...base, configPath: "/etc/other.yaml", unitDir: dir, runner: sc3 });
    assert.equal(changed.changed, true);
    assert.deepEqual(sc3.calls.at(-1), ["restart", "clawbridge.service"]);
  });

  it("without a systemd user session: writes the unit, prints the commands, still ok", async () => {
    const dir = unitDir();
    const r = await installService({ ...base, unitDir: dir, runner: noBus() });
    assert.equal(r.ok, true);
    assert.equal(r.systemd, false);
    assert.match(r.systemdNote!, /no systemd user session/);
    assert.ok(existsSync(r.unitPath));
    assert.deepEqual(r.todo, ["systemctl --user daemon-reload", "systemctl --user enable --now clawbridge.service"]);

    const missing = await installService({
      ...base,
      unitDir: dir,
      runner: fakeSystemctl(() => ({ code: null, stdout: "", stderr: "", error: "systemctl: ENOENT" })),
    });
    assert.equal(missing.systemd, false);
    assert.equal(missing.systemdNote, "systemctl is not installed");
  });

  it("a failing systemctl step is reported, not hidden", async () => {
    const dir = unitDir();
    const sc = fakeSystemctl((args) =>
      args[0] === "enable"
        ? { code: 1, stdout: "", stderr: "Failed to enable unit: Unit file is masked." }
        : { code: 0, stdout: "", stderr: "" },
    );
    const r = await installService({ ...base, unitDir: dir, runner: sc });
    assert.equal(r.ok, false);
    assert.equal(r.steps.at(-1)!.ok, false);
    assert.match(r.steps.at(-1)!.output!, /masked/);
  });

  it("uninstall disables, removes the file and reloads; twice is harmless", async () => {
    const dir = unitDir();
    await installService({ ...base, unitDir: dir, runner: fakeSystemctl() });
    const sc = fakeSystemctl();
    const r = await uninstallService({ unitDir: dir, runner: sc });
    assert.equal(r.ok, true);
    assert.equal(r.changed, true);
    assert.equal(existsSync(unitPath({ unitDir: dir })), false);
    assert.deepEqual(sc.calls, [["disable", "--now", "clawbridge.service"], ["daemon-reload"]]);
    const again = await uninstallService({
      unitDir: dir,
      runner: fakeSystemctl((a) =>
        a[0] === "disable"
          ? { code: 1, stdout: "", stderr: "Failed to disable unit: Unit file clawbridge.service does not exist." }
          : { code: 0, stdout: "", stderr: "" },
      ),
    });
    assert.equal(again.ok, true);
    assert.equal(again.changed, false);
    const offline = await uninstallService({ unitDir: dir, runner: noBus() });
    assert.equal(offline.systemd, false);
    assert.deepEqual(offline.todo, [
      "systemctl --user disable --now clawbridge.service",
      "systemctl --user daemon-reload",
    ]);
  });

  it("status reads systemctl show, or reports the unit file without systemd", async () => {
    const dir = unitDir();
    await installService({ ...base, unitDir: dir, runner: fakeSystemctl(), env: { A_KEY: "v" } });
    const s = await serviceStatus({
      unitDir: dir,
      runner: fakeSystemctl(() => ({
        code: 0,
        stdout: "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nMainPID=4242\n",
        stderr: "",
      })),
    });
    assert.equal(s.installed, true);
    assert.equal(s.active, true);
    assert.equal(s.enabled, true);
    assert.equal(s.properties.MainPID, "4242");
    assert.deepEqual(s.envKeys, ["A_KEY"]);
    assert.match(s.execStart!, /serve --config \/etc\/cb\.yaml$/);
    const off = await serviceStatus({ unitDir: dir, runner: noBus() });
    assert.equal(off.systemd, false);
    assert.equal(off.installed, true);
  });

  it("the real systemctl (read-only `show` of a unit that does not exist) answers or is reported unavailable", async () => {
    const dir = unitDir();
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "x"), "");
    const s = await serviceStatus({
      unitDir: dir,
      name: `clawbridge-test-${process.pid}`,
      runner: defaultSystemctlRunner(),
    });
    assert.equal(s.installed, false);
    if (!s.systemd) assert.ok(s.systemdNote && s.systemdNote.length > 0);
    else assert.notEqual(s.properties.ActiveState, "active");
  });

  it("recognises the ways systemctl says there is no user manager", () => {
    assert.ok(systemdUnavailable({ code: 1, stdout: "", stderr: "Failed to connect to bus: No medium found" }));
    assert.ok(
      systemdUnavailable({
        code: 1,
        stdout: "",
        stderr: "System has not been booted with systemd as init system (PID 1). Can't operate.",
      }),
    );
    assert.ok(
      systemdUnavailable({ code: 1, stdout: "", stderr: "$DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined" }),
    );
    assert.equal(systemdUnavailable({ code: 1, stdout: "", stderr: "Unit foo.service not found." }), undefined);
  });
});
