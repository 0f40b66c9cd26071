/**
 * Each backend's health and version (the bridge's last background probe, with its age), its usage
 * today and over 7 days (turns, tokens, limit hits, the next reset, the last limit message), which
 * coding-agent CLIs are installed, and the doctor's findings with their fixes.
 */
import { useState } from "react";
import type { BackendsInfo, Doctor, Usage, UsageTotals } from "@wire/admin";
import type { BridgeEvent } from "@wire/events";
import { api } from "../api";
import { ago, num, short, time } from "../format";
import { useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const usageEvent = (e: BridgeEvent) =>
  e.type === "turn.completed" || e.type === "turn.failed" || e.type === "backend.limited" || e.type === "turn.fallback";

function Counts({ t, testid }: { t: UsageTotals; testid: string }) {
  return (
    <td
      className="num"
      data-testid={testid}
      data-turns={t.turns}
      data-tokens-in={t.tokens_in}
      data-tokens-out={t.tokens_out}
    >
      {num(t.turns)} turns{t.failed ? <span className="muted"> ({num(t.failed)} failed)</span> : null}
      <div className="muted small">
        {num(t.tokens_in)} in / {num(t.tokens_out)} out
      </div>
    </td>
  );
}

/** Usage per backend: today and over the last 7 days, limit hits, the next reset, the last limit message. */
export function UsageSection() {
  const usage = useApi<Usage>("/v1/admin/usage?days=7", { everyMs: 30_000, refreshOn: usageEvent });
  const u = usage.data;
  return (
    <Section
      title="Usage"
      testid="usage"
      actions={
        u && (
          <span className="muted small">
            {u.from} to {u.to} (UTC days)
          </span>
        )
      }
    >
      <Failure error={usage.error} />
      {usage.loading && !u ? (
        <Empty>Reading the usage…</Empty>
      ) : u && u.backends.length === 0 ? (
        <Empty>No backend has answered a turn yet.</Empty>
      ) : (
        <table data-testid="usage-table">
          <thead>
            <tr>
              <th>backend</th>
              <th className="num">today</th>
              <th className="num">7 days</th>
              <th className="num">limit hits today / 7 days</th>
              <th>next reset</th>
              <th>last limit message</th>
            </tr>
          </thead>
          <tbody>
            {(u?.backends ?? []).map((b) => (
              <tr
                key={b.backend}
                data-testid="usage-row"
                data-backend={b.backend}
                data-limit-hits={b.total.limit_hits}
                data-next-reset={b.next_reset_at ?? ""}
              >
                <td>{b.backend}</td>
                <Counts t={b.today} testid="usage-today" />
                <Counts t={b.total} testid="usage-total" />
                <td className="num" data-testid="usage-limit-hits">
                  {b.total.limit_hits ? (
                    <Badge status="warn">
                      {num(b.today.limit_hits)} / {num(b.total.limit_hits)}
                    </Badge>
                  ) : (
                    "0 / 0"
                  )}
                  {b.total.fallbacks ? <div className="muted small">{num(b.total.fallbacks)} handed on</div> : null}
                </td>
                <td data-testid="usage-next-reset">{b.next_reset_at ? time(b.next_reset_at) : "–"}</td>
                <td className="small" data-testid="usage-limit-message" title={b.last_limit_message ?? ""}>
                  {b.last_limit_message ? (
                    <>
                      {short(b.last_limit_message, 90)} <span className="muted">· {ago(b.last_limit_at)}</span>
                    </>
                  ) : (
                    <span className="muted">–</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function Backends() {
  const [refreshing, setRefreshing] = useState(false);
  // The bridge answers from its last background probe at once; read again to keep it and its age current.
  const backends = useApi<BackendsInfo>("/v1/admin/backends", {
    everyMs: 15_000,
    refreshOn: (e) => e.type === "backend.health",
  });
  const [doctor, setDoctor] = useState<Doctor | undefined>(undefined);
  const [doctorError, setDoctorError] = useState<string | undefined>(undefined);
  const [doctorBusy, setDoctorBusy] = useState(false);

  const refresh = async () => {
    setRefreshing(true);
    try {
      await api("/v1/admin/backends?refresh=1");
    } catch {
      /* shown by the reload */
    }
    backends.reload();
    setRefreshing(false);
  };
  const runDoctor = async (fresh: boolean) => {
    setDoctorBusy(true);
    setDoctorError(undefined);
    try {
      setDoctor(await api<Doctor>(`/v1/admin/doctor${fresh ? "?refresh=1" : ""}`));
    } catch (err) {
      setDoctorError((err as Error).message);
    }
    setDoctorBusy(false);
  };

  return (
    <div className="view" data-testid="view-backends">
      <h1>Backends</h1>
      <Failure error={backends.error} />
      <Section
        title="Backends"
        testid="backends"
        actions={
          <>
            {backends.data && (
              <span className="muted small" data-testid="backends-age" data-age-ms={backends.data.age_ms}>
                checked {ago(Date.now() - backends.data.age_ms)}
                {backends.data.probing ? " · checking again now" : ""}
              </span>
            )}
            <button onClick={() => void refresh()} disabled={refreshing} data-testid="backends-refresh">
              {refreshing ? "checking…" : "Check again"}
            </button>
          </>
        }
      >
        {backends.loading && !backends.data ? (
          <Empty>Checking the backends…</Empty>
        ) : (
          <table data-testid="backends-table">
            <thead>
              <tr>
                <th>backend</th>
                <th>type</th>
                <th>health</th>
                <th>version</th>
                <th>models</th>
                <th>detail</th>
              </tr>
            </thead>
            <tbody>
              {(backends.data?.data ?? []).map((b) => (
                <tr key={b.name} data-testid="backend-row" data-backend={b.name}>
                  <td>{b.name}</td>
                  <td>{b.type}</td>
                  <td>
                    <Badge status={b.usable ? "ok" : "fail"}>{b.usable ? "usable" : "not usable"}</Badge>
                  </td>
                  <td>{b.version ?? "–"}</td>
                  <td>{b.models.join(", ") || "–"}</td>
                  <td className="small" title={b.detail}>
                    {short(b.detail, 80)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <UsageSection />
      <Section title="Coding-agent CLIs on this machine" testid="clis">
        <table data-testid="clis-table">
          <thead>
            <tr>
              <th>CLI</th>
              <th>installed</th>
              <th>version</th>
              <th>used by</th>
              <th>where / how to install</th>
            </tr>
          </thead>
          <tbody>
            {(backends.data?.clis ?? []).map((c) => (
              <tr key={c.name} data-testid="cli-row" data-cli={c.name} data-installed={String(c.installed)}>
                <td>{c.name}</td>
                <td>
                  <Badge status={c.installed ? (c.usable ? "ok" : "warn") : "info"}>
                    {c.installed ? (c.usable ? "installed" : "does not start") : "not installed"}
                  </Badge>
                </td>
                <td>{c.version ?? "–"}</td>
                <td>{c.used_by.join(", ") || <span className="muted">–</span>}</td>
                <td className="mono small" title={c.detail ?? c.path ?? ""}>
                  {c.installed ? (c.path ?? "") : `npm i -g ${c.package}`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <Section
        title="Doctor"
        testid="doctor"
        actions={
          <button onClick={() => void runDoctor(doctor !== undefined)} disabled={doctorBusy} data-testid="doctor-run">
            {doctorBusy ? "running…" : doctor ? "Run again" : "Run the doctor"}
          </button>
        }
      >
        <Failure error={doctorError} />
        {!doctor && !doctorBusy && (
          <Empty>
            The same checks as `clawbridge doctor`: configuration, CLIs, port, OpenClaw's config, lock files, disk,
            service.
          </Empty>
        )}
        {doctor && (
          <>
            <div className="muted small" data-testid="doctor-summary">
              {doctor.summary.ok} ok · {doctor.summary.warn} warnings · {doctor.summary.fail} failures ·{" "}
              {doctor.summary.info} notes — checked {ago(doctor.checked_at)}
            </div>
            <ul className="findings">
              {doctor.findings.map((f) => (
                <li
                  key={f.id}
                  className={`finding finding-${f.status}`}
                  data-testid="doctor-finding"
                  data-status={f.status}
                  data-id={f.id}
                >
                  <Badge status={f.status} /> <b>{f.title}</b>
                  {f.detail && <pre className="detail">{f.detail}</pre>}
                  {f.fix && (
                    <div className="fix" data-testid="doctor-fix">
                      fix: <code>{f.fix}</code>
                    </div>
                  )}
                </li>
              ))}
            </ul>
          </>
        )}
      </Section>
    </div>
  );
}
