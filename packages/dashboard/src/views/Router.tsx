/** What the router is waiting for (missing inputs, a yes/no) and its recent decisions with their confidence and source. */
import type { RouterInfo } from "@wire/admin";
import { ago, json, short, time } from "../format";
import { navigate, useApi } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";

const refreshOn = (e: { type: string }) =>
  e.type === "decision" || e.type === "gathering" || e.type === "confirm" || e.type === "state";

function Confidence({ value }: { value: number }) {
  const pct = Math.round(Math.max(0, Math.min(1, value)) * 100);
  return (
    <span className="confidence" title={`${pct}%`} data-testid="confidence" data-value={value}>
      <span className="bar">
        <span style={{ width: `${pct}%` }} />
      </span>
      {pct}%
    </span>
  );
}

export function Router() {
  const info = useApi<RouterInfo>("/v1/admin/router", { everyMs: 10_000, refreshOn });
  const d = info.data;
  return (
    <div className="view" data-testid="view-router">
      <h1>Router</h1>
      <Failure error={info.error} />
      {d && !d.enabled && <Empty>No systems or router are configured on this bridge.</Empty>}
      <Section title="Gathering inputs" testid="gatherings">
        {d && d.gatherings.length === 0 ? (
          <Empty>No conversation is being asked for missing inputs.</Empty>
        ) : (
          <table data-testid="gatherings-table">
            <thead>
              <tr>
                <th>conversation</th>
                <th>system</th>
                <th>collected</th>
                <th>missing</th>
                <th className="num">questions</th>
                <th>since</th>
              </tr>
            </thead>
            <tbody>
              {(d?.gatherings ?? []).map((g) => (
                <tr key={g.conversation} data-testid="gathering-row" data-conversation={g.conversation}>
                  <td className="mono" title={g.conversation}>
                    {short(g.conversation, 32)}
                  </td>
                  <td>{g.system}</td>
                  <td className="small">
                    {g.collected.map((k) => `${k}=${short(json(g.values[k]), 24)}`).join(", ") || "–"}
                  </td>
                  <td>{g.missing.join(", ") || "–"}</td>
                  <td className="num">{g.rounds ?? "–"}</td>
                  <td>{ago(g.since)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Waiting for a yes" testid="confirmations">
        {d && d.confirmations.length === 0 ? (
          <Empty>No run is waiting for a confirmation.</Empty>
        ) : (
          <table data-testid="confirmations-table">
            <thead>
              <tr>
                <th>conversation</th>
                <th>system</th>
                <th>inputs shown</th>
                <th>since</th>
              </tr>
            </thead>
            <tbody>
              {(d?.confirmations ?? []).map((c) => (
                <tr key={c.conversation} data-testid="confirmation-row" data-conversation={c.conversation}>
                  <td className="mono" title={c.conversation}>
                    {short(c.conversation, 32)}
                  </td>
                  <td>
                    {c.system}
                    {c.resume_run && (
                      <button className="link" onClick={() => navigate("runs", c.resume_run!)}>
                        {" "}
                        (resume {c.resume_run})
                      </button>
                    )}
                  </td>
                  <td className="small mono">{short(json(c.values), 120)}</td>
                  <td>{ago(c.since)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Recent decisions" testid="decisions">
        {d && d.decisions.length === 0 ? (
          <Empty>No decision since the bridge started.</Empty>
        ) : (
          <table data-testid="decisions-table">
            <thead>
              <tr>
                <th>time</th>
                <th>conversation</th>
                <th>action</th>
                <th>system</th>
                <th>confidence</th>
                <th>by</th>
                <th>reason</th>
              </tr>
            </thead>
            <tbody>
              {(d?.decisions ?? []).map((x, i) => (
                <tr key={`${x.at}-${i}`} data-testid="decision-row" data-action={x.action} data-source={x.source}>
                  <td>{time(x.at)}</td>
                  <td className="mono" title={x.conversation}>
                    {short(x.conversation, 24)}
                  </td>
                  <td>
                    <Badge status={x.action} />
                  </td>
                  <td>{x.system ?? "–"}</td>
                  <td>
                    <Confidence value={x.confidence} />
                  </td>
                  <td data-testid="decision-source">{x.source}</td>
                  <td className="small" title={x.reason ?? ""}>
                    {x.reason ? short(x.reason, 80) : "–"}
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
