/** Turns as they happen, limits and fallbacks, the CLI processes running now, and the queue. */
import type { Processes, TurnRow, Turns, Usage, UsageEventRow } from "@wire/admin";
import { ago, ms, num, short, time } from "../format";
import { useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const isTurnEvent = (e: { type: string }) => e.type.startsWith("turn.") || e.type === "queue.rejected";
const isLimitEvent = (e: { type: string }) => e.type === "turn.fallback" || e.type === "backend.limited";

/** `04:20` (local), for a reset time. */
const hm = (at: number) => new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

/** One limit or fallback as a line: "claude → gemini: limit_reached, resets 04:20". */
export function limitLine(r: UsageEventRow): string {
  const resets = r.reset_at ? `, resets ${hm(r.reset_at)}` : "";
  if (r.kind === "fallback")
    return `${r.backend} → ${r.to_backend ?? r.to_model ?? "?"}: ${r.reason ?? "fallback"}${resets}`;
  return `${r.backend} limited: ${r.message ?? ""}${resets}`;
}

/**
 * Limits and fallbacks as they happen. `/v1/events` redacts a limit's message and a fallback's
 * names, so the lines come from `GET /v1/admin/usage` (behind the same key), reloaded on each event.
 */
function Limits() {
  const usage = useApi<Usage>("/v1/admin/usage?days=1", { everyMs: 30_000, refreshOn: isLimitEvent });
  const rows = usage.data?.recent ?? [];
  return (
    <Section title="Limits and fallbacks" testid="limits">
      <Failure error={usage.error} />
      {usage.data && rows.length === 0 ? (
        <Empty>No backend has hit a limit and no turn was handed on since the bridge started.</Empty>
      ) : (
        <ul className="limit-lines" data-testid="limit-lines">
          {rows.map((r) => (
            <li
              key={`${r.at}-${r.kind}-${r.backend}-${r.to_backend ?? ""}`}
              data-testid="limit-line"
              data-kind={r.kind}
              data-backend={r.backend}
            >
              <span className="muted small">{time(r.at)}</span>{" "}
              <Badge status={r.kind === "fallback" ? "info" : "warn"}>{r.kind}</Badge>{" "}
              <span title={r.message ?? ""}>{short(limitLine(r), 160)}</span>
            </li>
          ))}
        </ul>
      )}
    </Section>
  );
}

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
  const procs = useApi<Processes>("/v1/admin/processes", { everyMs: 2000, refreshOn: isTurnEvent });
  const mem = procs.data?.warm_memory;
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
        <div className="card" title="Resident memory of the warm CLI processes, and their budget (warm.maxMemoryMB)">
          <div className="label">warm memory</div>
          <div className="value" data-testid="warm-memory">
            {mem ? `${Math.round(mem.used_bytes / 1048576)} / ${Math.round(mem.max_bytes / 1048576)} MB` : "–"}
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
      <Limits />
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
                      ? `${p.standby ? "standby" : p.busy ? "busy" : "idle"} · ${p.turns ?? 0} turns${p.rss_bytes ? ` · ${Math.round(p.rss_bytes / 1048576)} MB` : ""}`
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
