/** Resume-mode bindings: conversation → backend session, with their errors and heal/reset history; "forget". */
import { useState } from "react";
import type { Sessions } from "@wire/admin";
import { api } from "../api";
import { ago, short, time } from "../format";
import { useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const refreshOn = (e: { type: string }) =>
  e.type === "session.healed" || e.type === "session.reset" || e.type === "turn.completed" || e.type === "turn.failed";

export function Conversations() {
  const sessions = useApi<Sessions>("/v1/admin/sessions", { everyMs: 15_000, refreshOn });
  const [open, setOpen] = useState<string | undefined>(undefined);
  const [actionError, setActionError] = useState<string | undefined>(undefined);
  const forget = async (key: string) => {
    setActionError(undefined);
    try {
      await api(`/v1/admin/sessions/${encodeURIComponent(key)}`, { method: "DELETE" });
    } catch (err) {
      setActionError((err as Error).message);
    }
    sessions.reload();
  };
  const rows = sessions.data?.data ?? [];
  return (
    <div className="view" data-testid="view-conversations">
      <h1>Conversations</h1>
      <p className="muted">
        In resume mode the coding-agent CLI keeps the conversation; the bridge binds each conversation to the CLI's
        session. <b>Forget</b> drops the binding: the next message starts a new session, seeded from the conversation
        the client sends.
      </p>
      <Failure error={sessions.error ?? actionError} />
      <Section title="Session bindings" actions={<button onClick={sessions.reload}>Refresh</button>} testid="sessions">
        {sessions.data && !sessions.data.enabled ? (
          <Empty>No model runs in resume mode on this bridge.</Empty>
        ) : sessions.data && rows.length === 0 ? (
          <Empty>No conversation is bound to a backend session.</Empty>
        ) : (
          <table data-testid="sessions-table">
            <thead>
              <tr>
                <th>conversation</th>
                <th>backend</th>
                <th>session</th>
                <th className="num">turns</th>
                <th>last used</th>
                <th>last error</th>
                <th>history</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {rows.map((s) => {
                const heals = s.events.filter((e) => e.kind === "healed" || e.kind === "reset");
                const inProgress = s.last_error?.startsWith("in-progress");
                return [
                  <tr key={s.key} data-testid="session-row" data-key={s.key}>
                    <td className="mono" title={s.key}>
                      {short(s.key, 36)}
                    </td>
                    <td>
                      {s.backend}
                      {s.model && <div className="muted small">{s.model}</div>}
                    </td>
                    <td className="mono" title={`${s.backend_session_id}\n${s.cwd}`}>
                      {short(s.backend_session_id, 18)}
                    </td>
                    <td className="num">{s.turns}</td>
                    <td title={time(s.updated_at)}>{ago(s.updated_at)}</td>
                    <td>
                      {s.last_error ? (
                        inProgress ? (
                          <Badge status="running">turn in progress</Badge>
                        ) : (
                          <span className="error-text" title={s.last_error}>
                            {short(s.last_error, 60)}
                          </span>
                        )
                      ) : (
                        <span className="muted">–</span>
                      )}
                    </td>
                    <td>
                      <button
                        className="link"
                        data-testid="session-history"
                        onClick={() => setOpen(open === s.key ? undefined : s.key)}
                      >
                        {heals.length ? `${heals.length} healed/reset` : `${s.events.length} events`}
                      </button>
                    </td>
                    <td>
                      <button className="danger" data-testid="forget-button" onClick={() => void forget(s.key)}>
                        Forget
                      </button>
                    </td>
                  </tr>,
                  open === s.key && (
                    <tr key={`${s.key}-events`} className="detail-row" data-testid="session-events">
                      <td colSpan={8}>
                        <div className="muted small">cwd: {s.cwd}</div>
                        <ul className="events">
                          {s.events.map((e, i) => (
                            <li key={i}>
                              <span className="muted">{time(e.at)}</span> <Badge status={e.kind} /> {e.reason ?? ""}
                            </li>
                          ))}
                        </ul>
                      </td>
                    </tr>
                  ),
                ];
              })}
            </tbody>
          </table>
        )}
      </Section>
    </div>
  );
}
