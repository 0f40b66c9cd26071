/** Turns as they happen, the CLI processes running now, and the queue. */
import type { List, ProcessRow, TurnRow, Turns } from "@wire/admin";
import { ago, ms, num, short, time } from "../format";
import { useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const isTurnEvent = (e: { type: string }) => e.type.startsWith("turn.") || e.type === "queue.rejected";

function TurnTable({ rows, testid }: { rows: TurnRow[]; testid: string }) {
  return (
    <table data-testid={testid}>
      <thead>
        <tr>
          <th>accepted</th>
          <th>model</th>
          <th>backend</th>
          <th>conversation</th>
          <th>status</th>
          <th className="num">first byte</th>
          <th className="num">duration</th>
          <th className="num">tokens in / out</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((t) => (
          <tr key={t.id} data-testid="turn-row" data-turn-id={t.id} data-status={t.status}>
            <td>{time(t.accepted_at)}</td>
            <td>{t.model}</td>
            <td>
              {t.backend}
              {t.mode && <span className="muted"> · {t.mode}</span>}
            </td>
            <td title={t.conversation}>{short(t.conversation, 32)}</td>
            <td>
              <Badge status={t.status} />
              {t.error && (
                <div className="muted small" title={t.error.message}>
                  {t.error.code}: {short(t.error.message, 60)}
                </div>
              )}
            </td>
            <td className="num">{ms(t.first_byte_ms)}</td>
            <td className="num">
              {t.status === "running" ? (
                <span className="muted">{ms(Date.now() - t.accepted_at)}…</span>
              ) : (
                ms(t.duration_ms)
              )}
            </td>
            <td className="num">
              {num(t.prompt_tokens)} / {num(t.completion_tokens)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Live() {
  const turns = useApi<Turns>("/v1/admin/turns", { everyMs: 5000, refreshOn: isTurnEvent });
  const procs = useApi<List<ProcessRow>>("/v1/admin/processes", { everyMs: 2000, refreshOn: isTurnEvent });
  const q = turns.data?.queue;
  return (
    <div className="view" data-testid="view-live">
      <h1>Live</h1>
      <div className="cards" data-testid="queue-stats">
        <div className="card">
          <div className="label">running turns</div>
          <div className="value" data-testid="queue-running">
            {q ? `${q.running} / ${q.maxConcurrent}` : "–"}
          </div>
        </div>
        <div className="card">
          <div className="label">waiting</div>
          <div className="value" data-testid="queue-waiting">
            {q ? `${q.waiting} / ${q.maxQueue}` : "–"}
          </div>
        </div>
        <div className="card">
          <div className="label">conversations with turns</div>
          <div className="value">{q ? q.conversations : "–"}</div>
        </div>
        <div className="card">
          <div className="label">CLI processes</div>
          <div className="value" data-testid="process-count">
            {procs.data ? procs.data.data.length : "–"}
          </div>
        </div>
      </div>
      <Failure error={turns.error} />
      <Section title="Running turns" testid="turns-running">
        {turns.data && turns.data.running.length === 0 ? (
          <Empty>No turn is running.</Empty>
        ) : (
          <TurnTable rows={turns.data?.running ?? []} testid="turns-running-table" />
        )}
      </Section>
      <Section title="Recent turns" testid="turns-recent">
        {turns.data && turns.data.recent.length === 0 ? (
          <Empty>No turn has ended since the bridge started.</Empty>
        ) : (
          <TurnTable rows={turns.data?.recent ?? []} testid="turns-table" />
        )}
      </Section>
      <Section title="CLI processes" testid="processes">
        <Failure error={procs.error} />
        {procs.data && procs.data.data.length === 0 ? (
          <Empty>No CLI process is running.</Empty>
        ) : (
          <table data-testid="processes-table">
            <thead>
              <tr>
                <th>pid</th>
                <th>what</th>
                <th>command</th>
                <th>working directory</th>
                <th>since</th>
                <th>warm</th>
              </tr>
            </thead>
            <tbody>
              {(procs.data?.data ?? []).map((p) => (
                <tr key={`${p.pid}-${p.started_at}`} data-testid="process-row" data-pid={p.pid ?? ""}>
                  <td>{p.pid ?? "–"}</td>
                  <td>{p.label ?? "–"}</td>
                  <td className="mono" title={p.command}>
                    {short(p.command, 40)}
                  </td>
                  <td className="mono" title={p.cwd ?? ""}>
                    {p.cwd ? short(p.cwd, 48) : "–"}
                  </td>
                  <td>{ago(p.started_at)}</td>
                  <td data-testid="process-warm">
                    {p.warm
                      ? `${p.busy ? "busy" : "idle"} · ${p.turns ?? 0} turns${p.rss_bytes ? ` · ${Math.round(p.rss_bytes / 1048576)} MB` : ""}`
                      : "–"}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </div>
  );
}
