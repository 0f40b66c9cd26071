/** Each backend's health and version, which coding-agent CLIs are installed, and the doctor's findings with their fixes. */
import { useState } from "react";
import type { BackendsInfo, Doctor } from "@wire/admin";
import { api } from "../api";
import { ago, short } from "../format";
import { useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

export function Backends() {
  const [refreshing, setRefreshing] = useState(false);
  const backends = useApi<BackendsInfo>("/v1/admin/backends", { refreshOn: (e) => e.type === "backend.health" });
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
            {backends.data && <span className="muted small">checked {ago(backends.data.checked_at)}</span>}
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
