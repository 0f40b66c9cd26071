/**
 * Runs (a system's, and builds: origin builder): each run's steps with status and times, its
 * output, pause/resume/cancel, the approval a waiting run waits on (Approve / Reject), and a live log.
 */
import { useEffect, useRef, useState } from "react";
import type { List } from "@wire/admin";
import type { BridgeEvent } from "@wire/events";
import type { ApprovalRow, RunRow } from "@wire/runs";
import { api } from "../api";
import { ago, json, ms, short, time } from "../format";
import { navigate, useApi, useEvents } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const STATUSES = [
  "",
  "pending",
  "running",
  "paused",
  "waiting",
  "completed",
  "failed",
  "rejected",
  "cancelled",
  "interrupted",
];
const isRunEvent = (e: BridgeEvent) => e.type.startsWith("run.") || e.type.startsWith("step.");

interface LogLine {
  at: number;
  text: string;
  status?: string;
  output?: boolean;
  /** The same moment told by the record and by a live event is shown once. */
  key?: string;
}

/** The log a run's record already tells (before the page was open), oldest first. */
function fromRecord(r: RunRow): LogLine[] {
  const lines: LogLine[] = [
    { at: r.created_at, text: `run ${r.id} of ${r.system} created (${r.origin})`, status: "pending", key: "created" },
  ];
  if (r.started_at) lines.push({ at: r.started_at, text: "run started", status: "running", key: "run-start" });
  for (const s of r.steps) {
    if (s.started_at)
      lines.push({
        at: s.started_at,
        text: `step ${s.id} started${s.attempts > 1 ? ` (attempt ${s.attempts})` : ""}`,
        status: "running",
        key: `step-start:${s.id}`,
      });
    if (s.ended_at)
      lines.push({
        at: s.ended_at,
        text: `step ${s.id} ${s.status}${s.error ? `: ${s.error}` : ""}`,
        status: s.status,
        key: `step-end:${s.id}`,
      });
  }
  if (r.ended_at)
    lines.push({
      at: r.ended_at,
      text: `run ${r.status}${r.error ? `: ${r.error}` : ""}`,
      status: r.status,
      key: "run-end",
    });
  return lines.sort((a, b) => a.at - b.at);
}

function lineOf(e: BridgeEvent): LogLine | undefined {
  const line = describe(e);
  if (!line) return undefined;
  const step = "step" in e && typeof e.step === "string" ? e.step : "";
  const key =
    e.type === "run.started"
      ? "run-start"
      : e.type === "step.started"
        ? `step-start:${step}`
        : e.type === "step.completed" || e.type === "step.failed" || e.type === "step.skipped"
          ? `step-end:${step}`
          : e.type === "run.output" || e.type === "step.retry"
            ? undefined
            : "run-end";
  return { ...line, key };
}

function describe(e: BridgeEvent): LogLine | undefined {
  const step = "step" in e && typeof e.step === "string" ? e.step : undefined;
  switch (e.type) {
    case "run.output":
      return { at: e.at, text: `${step ? `[${step}] ` : ""}${String(e.text)}`, output: true };
    case "run.started":
      return { at: e.at, text: "run started", status: "running" };
    case "step.started":
      return {
        at: e.at,
        text: `step ${step} started${Number(e.attempt) > 1 ? ` (attempt ${String(e.attempt)})` : ""}`,
        status: "running",
      };
    case "step.retry":
      return {
        at: e.at,
        text: `step ${step} failed (${String(e.error)}); retrying in ${ms(Number(e.delayMs))}`,
        status: "warn",
      };
    case "step.completed":
      return { at: e.at, text: `step ${step} completed in ${ms(Number(e.ms))}`, status: "completed" };
    case "step.failed":
      return { at: e.at, text: `step ${step} failed after ${ms(Number(e.ms))}: ${String(e.error)}`, status: "failed" };
    case "step.skipped":
      return { at: e.at, text: `step ${step} skipped: ${String(e.reason)}`, status: "skipped" };
    case "run.completed":
      return { at: e.at, text: `run completed in ${ms(Number(e.ms))}`, status: "completed" };
    case "run.failed":
      return { at: e.at, text: `run failed${step ? ` at ${step}` : ""}: ${String(e.error)}`, status: "failed" };
    case "run.paused":
    case "run.cancelled":
    case "run.interrupted":
      return { at: e.at, text: `run ${e.type.slice(4)}`, status: e.type.slice(4) };
    case "run.waiting":
      return { at: e.at, text: `run waiting for an approval at ${e.step}: ${e.question}`, status: "waiting" };
    case "approval.decided":
      return {
        at: e.at,
        text: `approval of ${e.step} ${e.decision} by ${e.by}${e.note ? `: ${e.note}` : ""}`,
        status: e.decision === "approved" ? "completed" : "rejected",
      };
    case "run.rejected":
      return { at: e.at, text: `run rejected: ${e.error}`, status: "rejected" };
  }
  return undefined;
}

/** The question a waiting run asks, the data it shows, and the buttons that decide it (POST /v1/runs/:id/approve|reject). */
function ApprovalPanel({ id, approval, onDone }: { id: string; approval: ApprovalRow; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const decide = async (action: "approve" | "reject") => {
    setBusy(true);
    setError(undefined);
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}/${action}`, { method: "POST" });
    } catch (err) {
      setError((err as Error).message);
    }
    setBusy(false);
    onDone();
  };
  return (
    <Section title="Waiting for approval" testid="run-approval">
      <p data-testid="approval-question">
        <strong>{approval.question}</strong> <span className="muted small">(step {approval.step})</span>
      </p>
      {approval.data !== null && <pre className="json">{json(approval.data)}</pre>}
      {approval.deadline && (
        <p className="muted small">
          {approval.on_timeout === "approve" ? "approved" : "rejected"} at {time(approval.deadline)} without an answer
        </p>
      )}
      <div className="actions">
        <button onClick={() => void decide("approve")} disabled={busy} data-testid="run-approve">
          Approve
        </button>
        <button className="danger" onClick={() => void decide("reject")} disabled={busy} data-testid="run-reject">
          Reject
        </button>
      </div>
      <Failure error={error} />
    </Section>
  );
}

function RunDetail({ id }: { id: string }) {
  const run = useApi<RunRow>(`/v1/runs/${encodeURIComponent(id)}`, {
    refreshOn: (e) => "runId" in e && e.runId === id && e.type !== "run.output",
  });
  const [live, setLive] = useState<LogLine[]>([]);
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const [actionError, setActionError] = useState<string | undefined>(undefined);
  const logEnd = useRef<HTMLDivElement>(null);
  useEvents((e) => {
    if (!("runId" in e) || e.runId !== id) return;
    const line = lineOf(e);
    if (line) setLive((l) => [...l, line].slice(-2000));
  });
  // A block body: scrollIntoView returns a Promise in current Chromium, and an effect must not return one.
  useEffect(() => {
    logEnd.current?.scrollIntoView({ block: "nearest" });
  }, [live.length]);

  const act = async (action: "pause" | "resume" | "cancel") => {
    setBusy(action);
    setActionError(undefined);
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}/${action}`, { method: "POST" });
    } catch (err) {
      setActionError((err as Error).message);
    }
    setBusy(undefined);
    run.reload();
  };

  const r = run.data;
  if (!r) return run.error ? <Failure error={run.error} /> : <Empty>Loading…</Empty>;
  const told = new Set(live.map((l) => l.key).filter(Boolean));
  const lines = [...fromRecord(r).filter((l) => !told.has(l.key)), ...live].sort((a, b) => a.at - b.at);
  const canPause = r.status === "running" || r.status === "pending";
  const canResume = r.status === "paused" || r.status === "interrupted";
  const canCancel =
    r.status === "running" ||
    r.status === "pending" ||
    r.status === "paused" ||
    r.status === "waiting" ||
    r.status === "interrupted";
  return (
    <div className="detail" data-testid="run-detail" data-run-id={r.id} data-status={r.status}>
      <header className="detail-head">
        <div>
          <h2>
            {r.system} <Badge status={r.status} />
            {r.test && <TestBadge />}
          </h2>
          <div className="muted">
            <span className="mono">{r.id}</span> · from {r.origin}
            {r.trigger && ` (${r.trigger})`}
            {r.conversation && ` · conversation ${short(r.conversation, 24)}`} · created {time(r.created_at)}
            {r.started_at && r.ended_at && ` · took ${ms(r.ended_at - r.started_at)}`}
          </div>
        </div>
        <div className="actions">
          <button onClick={() => void act("pause")} disabled={!canPause || !!busy} data-testid="run-pause">
            Pause
          </button>
          <button onClick={() => void act("resume")} disabled={!canResume || !!busy} data-testid="run-resume">
            Resume
          </button>
          <button
            className="danger"
            onClick={() => void act("cancel")}
            disabled={!canCancel || !!busy}
            data-testid="run-cancel"
          >
            Cancel
          </button>
          <button className="link" onClick={() => navigate("systems", r.system)}>
            system
          </button>
        </div>
      </header>
      <Failure error={actionError ?? run.error} />
      {r.error && (
        <div className="error" data-testid="run-error">
          {r.failed_step ? `step ${r.failed_step}: ` : ""}
          {r.error}
        </div>
      )}
      {r.status === "waiting" && r.approval && <ApprovalPanel id={r.id} approval={r.approval} onDone={run.reload} />}
      <Section title="Inputs">
        <pre className="json">{json(r.inputs)}</pre>
      </Section>
      <Section title="Steps" testid="run-steps">
        {r.steps.length === 0 ? (
          <Empty>No step has started.</Empty>
        ) : (
          <table data-testid="steps-table">
            <thead>
              <tr>
                <th>step</th>
                <th>status</th>
                <th className="num">attempts</th>
                <th>started</th>
                <th>ended</th>
                <th className="num">took</th>
                <th>output / error</th>
              </tr>
            </thead>
            <tbody>
              {r.steps.map((s) => (
                <tr key={s.id} data-testid="step-row" data-step={s.id} data-status={s.status}>
                  <td className="mono">{s.id}</td>
                  <td>
                    <Badge status={s.status} />
                  </td>
                  <td className="num">{s.attempts}</td>
                  <td>{time(s.started_at)}</td>
                  <td>{time(s.ended_at)}</td>
                  <td className="num">{s.started_at && s.ended_at ? ms(s.ended_at - s.started_at) : "–"}</td>
                  <td className="small" title={s.error ?? json(s.output)}>
                    {s.error ? (
                      <span className="error-text">{short(s.error, 80)}</span>
                    ) : s.output === null ? (
                      "–"
                    ) : (
                      short(json(s.output), 80)
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Output" testid="run-output-section">
        {r.output === null ? (
          <Empty>No output yet.</Empty>
        ) : (
          <pre className="json" data-testid="run-output">
            {json(r.output)}
          </pre>
        )}
      </Section>
      <Section title="Log" testid="run-log-section">
        <div className="log-box" data-testid="run-log">
          {lines.map((l, i) => (
            <div key={i} className={l.output ? "out" : ""} data-testid="log-line">
              <span className="muted">{time(l.at)}</span> {l.status && <Badge status={l.status} />} {l.text}
            </div>
          ))}
          <div ref={logEnd} />
        </div>
      </Section>
    </div>
  );
}

export function Runs({ selected }: { selected?: string }) {
  const [status, setStatus] = useState("");
  const runs = useApi<List<RunRow>>(`/v1/runs?limit=100${status ? `&status=${status}` : ""}`, {
    everyMs: 15_000,
    refreshOn: (e) => isRunEvent(e) && e.type !== "run.output",
  });
  const rows = runs.data?.data ?? [];
  return (
    <div className="view split" data-testid="view-runs">
      <div className="list-pane">
        <h1>Runs</h1>
        <label className="small">
          status{" "}
          <select value={status} onChange={(e) => setStatus(e.target.value)} data-testid="runs-filter">
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s || "any"}
              </option>
            ))}
          </select>
        </label>
        <Failure error={runs.error} />
        {runs.data && rows.length === 0 && <Empty>No runs.</Empty>}
        <ul className="pick">
          {rows.map((r) => (
            <li key={r.id}>
              <a
                href={`/dashboard/runs/${encodeURIComponent(r.id)}`}
                className={r.id === selected ? "active" : ""}
                data-testid="run-row"
                data-run-id={r.id}
                data-status={r.status}
                onClick={(e) => {
                  e.preventDefault();
                  navigate("runs", r.id);
                }}
              >
                <span>
                  {r.system} <Badge status={r.status} />
                  {r.test && <TestBadge />}
                </span>
                <span className="muted small">
                  {r.id} · {r.origin === "builder" ? "build · " : ""}
                  {ago(r.created_at)}
                </span>
              </a>
            </li>
          ))}
        </ul>
      </div>
      <div className="detail-pane">
        {selected ? <RunDetail key={selected} id={selected} /> : <Empty>Choose a run.</Empty>}
      </div>
    </div>
  );
}

/** A test run (dry run): nothing with side effects was sent; its steps' outputs say what would have been. */
function TestBadge() {
  return (
    <span className="badge badge-test" data-testid="test-run" title="test run: nothing with side effects was sent">
      test
    </span>
  );
}
