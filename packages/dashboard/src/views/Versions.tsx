/**
 * A system's versions in the Systems view (`GET /v1/systems/:id/versions`): number, when, who made
 * it and why; pick two and see what changed between them (`…/versions/diff`), key by key.
 */
import { useEffect, useState } from "react";
import type { List } from "@wire/admin";
import type { SystemVersionRow, VersionDiffRow } from "@wire/runs";
import { ago, json, short } from "../format";
import { useApi } from "../hooks";
import { Empty, Failure } from "../ui";

export function Versions({ id }: { id: string }) {
  const versions = useApi<List<SystemVersionRow>>(`/v1/systems/${encodeURIComponent(id)}/versions`, {
    refreshOn: (e) => e.type === "system.version" && e.system === id,
  });
  const list = versions.data?.data ?? [];
  const last = list[list.length - 1]?.number;
  const [from, setFrom] = useState<number | undefined>(undefined);
  const [to, setTo] = useState<number | undefined>(undefined);
  // By default: what the latest version changed.
  useEffect(() => {
    if (last === undefined) return;
    setTo((t) => t ?? last);
    setFrom((f) => f ?? Math.max(1, last - 1));
  }, [last]);
  const diff = useApi<VersionDiffRow>(
    from !== undefined && to !== undefined && from !== to
      ? `/v1/systems/${encodeURIComponent(id)}/versions/diff?from=${from}&to=${to}`
      : null,
  );
  if (!list.length) return <Empty>No versions recorded yet.</Empty>;
  const pick = (value: number | undefined, set: (n: number) => void, testid: string) => (
    <select value={value ?? ""} onChange={(e) => set(Number(e.target.value))} data-testid={testid}>
      {list.map((v) => (
        <option key={v.number} value={v.number}>
          v{v.number}
        </option>
      ))}
    </select>
  );
  return (
    <div data-testid="versions">
      <Failure error={versions.error ?? diff.error} />
      <table>
        <thead>
          <tr>
            <th>version</th>
            <th>made</th>
            <th>by</th>
            <th>note</th>
            <th>hash</th>
          </tr>
        </thead>
        <tbody>
          {[...list].reverse().map((v) => (
            <tr key={v.number} data-testid="version-row" data-version={v.number}>
              <td>
                v{v.number}
                {v.number === last ? " (runs now)" : ""}
              </td>
              <td>{ago(v.created_at)}</td>
              <td>{v.by}</td>
              <td>{v.note || "–"}</td>
              <td className="mono">{v.hash.slice(0, 12)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.length > 1 && (
        <div data-testid="version-diff">
          <p className="small">
            What changed from {pick(from, setFrom, "diff-from")} to {pick(to, setTo, "diff-to")}:
          </p>
          {from === to ? (
            <Empty>Pick two different versions.</Empty>
          ) : diff.data && !diff.data.changes.length ? (
            <Empty>Nothing changed.</Empty>
          ) : (
            <ul className="log">
              {(diff.data?.changes ?? []).map((c) => (
                <li key={c.key} data-testid="diff-change" data-key={c.key}>
                  <span className="mono">{c.key}</span>{" "}
                  {c.change === "added"
                    ? `added: ${short(json(c.to), 120)}`
                    : c.change === "removed"
                      ? `removed (was ${short(json(c.from), 120)})`
                      : `${short(json(c.from), 120)} → ${short(json(c.to), 120)}`}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}
