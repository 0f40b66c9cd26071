/** The fault suite's markdown report: "Done when" verdicts, the overview, further checks, each part's tables. */
import os from "node:os";
import { DONE_LINES, type Check, type DoneId, type Part, type PartResult } from "./lib/part.js";
import { int } from "./lib/util.js";

/**
 * The machine, as bench/run.ts states it (its `machineLine` cannot be imported: importing
 * bench/run.ts runs the benchmark).
 */
export function machineLine(): string {
  const cpus = os.cpus();
  return `${cpus[0]?.model.trim() ?? "unknown CPU"}, ${cpus.length} core${cpus.length === 1 ? "" : "s"}, ${(os.totalmem() / 1024 ** 3).toFixed(1)} GB RAM, Node ${process.version}, ${os.platform()} ${os.release()} ${os.arch()}`;
}

export const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ");

export interface Outcome {
  part: Part;
  result?: PartResult;
  error?: string;
  seconds: number;
}

export interface Verdict {
  text: string;
  measured: string;
  /** undefined: not measured in this run (its part was not selected). */
  pass: boolean | undefined;
}

const COUNTED: DoneId[] = ["crashes", "5xx", "shape", "orphans", "bindings"];

export function verdicts(outcomes: Outcome[]): Verdict[] {
  return DONE_LINES.map(({ id, text }) => {
    const measuring = outcomes.filter((o) => o.part.measures.includes(id));
    if (!measuring.length) return { text, measured: "not run (its part was not selected)", pass: undefined };
    const failed = measuring.filter((o) => !o.result);
    const figures = measuring.flatMap((o) =>
      o.result?.done[id] ? [{ name: o.part.name, f: o.result.done[id]! }] : [],
    );
    const problems = failed.map((o) => `part ${o.part.name} failed: ${(o.error ?? "").slice(0, 160)}`);
    if (COUNTED.includes(id)) {
      const total = figures.reduce((a, x) => a + (x.f.count ?? 0), 0);
      const measured = [
        `${total}`,
        figures.length > 1
          ? `(${figures.map((x) => `${x.name}: ${x.f.measured}`).join("; ")})`
          : figures[0]
            ? `(${figures[0].f.measured})`
            : "",
        ...problems,
      ]
        .filter(Boolean)
        .join(" ");
      return { text, measured, pass: !failed.length && figures.every((x) => x.f.pass) && total === 0 };
    }
    const measured = [...figures.map((x) => x.f.measured), ...problems].join("; ") || "not measured";
    return { text, measured, pass: !failed.length && figures.length > 0 && figures.every((x) => x.f.pass) };
  });
}

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
const mark = (pass: boolean | undefined) => (pass === undefined ? "–" : pass ? "PASS" : "**FAIL**");

export function report(opts: {
  outcomes: Outcome[];
  startedAt: Date;
  seconds: number;
  command: string;
  /** What the command runs. */
  equivalent: string;
  small: boolean;
  seed: number;
  entry: string;
  knobsLine: string;
  loadBefore: string;
  /** Processes of the run still alive after every part's own clean-up (then ended by the harness). */
  leftBehind: string[];
}): { markdown: string; verdicts: Verdict[] } {
  const v = verdicts(opts.outcomes);
  const cores = os.cpus().length;
  const tallyRows = opts.outcomes.map((o) => {
    const t = o.result?.tally;
    if (!t) return `| ${o.part.name} | **part failed**: ${cell((o.error ?? "").slice(0, 200))} | | | | | | | |`;
    const n = (x: number) => (x ? `**${int(x)}**` : "0");
    return `| ${o.part.name} | ${cell(t.sent)} | ${n(t.crashes)} | ${n(t.fivexx)} | ${n(t.badShape)} | ${n(t.noAnswer)} | ${n(t.orphans)} | ${n(t.lost)} | ${cell(t.notes)} |`;
  });
  const checks: Check[] = opts.outcomes.flatMap((o) => o.result?.checks ?? []);
  const md = [
    `# Fault suite — hostile clients, aborts, kill -9, slow clients, starvation, shutdown${opts.small ? " (--small)" : ""}`,
    "",
    `- Date: ${opts.startedAt.toISOString()} (suite ran ${opts.seconds.toFixed(0)} s)`,
    `- Machine: ${machineLine()}`,
    `- Command: \`${opts.command}\` (= \`${opts.equivalent}\`)`,
    `- Bridge: \`node bin/clawbridge.js serve --config <tmp>.yaml --port 0\`, its own process, running ${opts.entry}; fake CLIs \`testkit/fakes/fake-opencode-cli.sh\` (type \`opencode\`) and \`testkit/fakes/fake-claude-cli.sh\` (type \`claude-code\`, resume mode); fake upstreams on 127.0.0.1 (\`bench/fake-upstream.ts\`, \`faults/lib/upstream.ts\`). Seed ${opts.seed}.`,
    `- Server options of this bridge (src/core/config/schema.ts): ${opts.knobsLine}`,
    `- Load average (1 / 5 / 15 min) before: ${opts.loadBefore}; after: ${loadavg()} (${cores} core${cores === 1 ? "" : "s"}).`,
    "",
    "## Done when (issue 20)",
    "",
    "| line | measured | result |",
    "| --- | --- | --- |",
    ...v.map((x) => `| ${cell(x.text)} | ${cell(x.measured)} | ${mark(x.pass)} |`),
    "",
    "## What was sent, and what was lost, leaked or crashed",
    "",
    "| part | sent | crashes | 5xx | non-OpenAI error bodies | resets / no answer | orphans | lost | notes |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...tallyRows,
    "",
    `Processes of this run still alive when the suite ended (after each part's own clean-up): ${
      opts.leftBehind.length
        ? `**${opts.leftBehind.length}**: ${opts.leftBehind
            .slice(0, 5)
            .map((c) => `\`${c}\``)
            .join(", ")}`
        : "0"
    }.`,
    "",
    "## Further checks (the issue's other items)",
    "",
    "| item | check | goal | measured | result |",
    "| --- | --- | --- | --- | --- |",
    ...checks.map((c) => `| ${c.item} | ${cell(c.check)} | ${cell(c.goal)} | ${cell(c.measured)} | ${mark(c.pass)} |`),
    "",
    ...opts.outcomes.flatMap((o) => [
      `## ${o.part.name}: ${o.part.title} (${o.seconds.toFixed(0)} s)`,
      "",
      o.result ? o.result.details : `The part failed: ${o.error}`,
      "",
    ]),
  ].join("\n");
  return { markdown: md, verdicts: v };
}
