/**
 * The library (configured and deployed systems) and the builder's canvases (drafts and deployed):
 * each canvas drawn as a graph that grows live while the Builder builds it, its inputs, its
 * triggers (schedules with their next and last run, the inbound hook), its versions (Versions.tsx)
 * and whether the canvas has changes not deployed, and export.
 */
import { useEffect, useMemo, useRef, useState } from "react";
import type { List } from "@wire/admin";
import type { CanvasDetail, CanvasSummary } from "@wire/canvas";
import type { BridgeEvent } from "@wire/events";
import type { LeftOutRow, SystemList, SystemRow } from "@wire/runs";
import { apiResponse } from "../api";
import { CanvasGraph } from "../Canvas";
import { ago, json, ms, time } from "../format";
import { navigate, useApi, useEvents } from "../hooks";
import { Badge, Empty, Failure, Section } from "../ui";
import { Versions } from "./Versions";

interface Entry {
  id: string;
  name: string;
  status: "draft" | "deployed" | "library";
  kind?: string;
  source?: string;
}

/** A build that stopped (a run of origin builder), or a new node: the lists may have changed. */
const buildEnded = (e: BridgeEvent) =>
  "origin" in e && e.origin === "builder" && e.type.startsWith("run.") && e.type !== "run.started";
const listRefresh = (e: BridgeEvent) => buildEnded(e) || e.type === "node.created" || e.type === "trigger.fired";

/** The canvas and library lists (a canvas 404s when the builder is off: then there are none). */
function useEntries() {
  const systems = useApi<SystemList>("/v1/systems", {
    everyMs: 30_000,
    refreshOn: (e) => buildEnded(e) || e.type === "system.version",
  });
  const [canvases, setCanvases] = useState<CanvasSummary[] | undefined>(undefined);
  const [canvasError, setCanvasError] = useState<string | undefined>(undefined);
  const load = useRef<() => void>(() => {});
  load.current = () =>
    void apiResponse("/v1/canvases")
      .then((r) => r.json() as Promise<List<CanvasSummary>>)
      .then((l) => {
        setCanvases(l.data);
        setCanvasError(undefined);
      })
      .catch((err: Error & { status?: number }) => {
        if (err.status === 404) setCanvases([]);
        else setCanvasError(err.message);
      });
  useEffect(() => {
    load.current();
    const t = setInterval(() => load.current(), 30_000);
    return () => clearInterval(t);
  }, []);
  const known = useRef(new Set<string>());
  useEvents((e) => {
    if (!listRefresh(e)) return;
    const sys = "system" in e && typeof e.system === "string" ? e.system : undefined;
    if (e.type === "node.created" && sys && known.current.has(sys)) return;
    load.current();
  });
  const entries = useMemo<Entry[]>(() => {
    const out = new Map<string, Entry>();
    for (const c of canvases ?? []) out.set(c.id, { id: c.id, name: c.name, status: c.status });
    for (const s of systems.data?.data ?? []) {
      const had = out.get(s.id);
      out.set(s.id, { id: s.id, name: s.name, status: had?.status ?? "library", kind: s.kind, source: s.source });
    }
    return [...out.values()].sort((a, b) => a.id.localeCompare(b.id));
  }, [canvases, systems.data]);
  known.current = new Set(entries.map((e) => e.id));
  return {
    entries,
    systems: systems.data?.data ?? [],
    leftOut: systems.data?.left_out ?? [],
    canvases: canvases ?? [],
    error: systems.error ?? canvasError,
    reload: () => load.current(),
  };
}

interface LogLine {
  at: number;
  text: string;
  status?: string;
}

/** Inputs as a table: from the system's schema, or from a draft canvas's input nodes. */
function Inputs({ system, canvas }: { system?: SystemRow; canvas?: CanvasDetail }) {
  const rows = system
    ? Object.entries(system.inputs.properties ?? {}).map(([name, p]) => ({
        name,
        type: String(p.type ?? "string"),
        required: (system.inputs.required ?? []).includes(name),
        description: String(p.description ?? ""),
        enum: p.enum as unknown[] | undefined,
        dflt: p.default,
      }))
    : (canvas?.nodes ?? [])
        .filter((n) => n.type === "input")
        .map((n) => ({
          name: String(n.properties.name ?? n.id),
          type: String(n.properties.type ?? "string"),
          required: n.properties.required !== false,
          description: String(n.properties.description ?? ""),
          enum: n.properties.enum as unknown[] | undefined,
          dflt: n.properties.default,
        }));
  if (!rows.length) return <Empty>It takes no inputs.</Empty>;
  return (
    <table data-testid="inputs-table">
      <thead>
        <tr>
          <th>input</th>
          <th>type</th>
          <th>required</th>
          <th>description</th>
          <th>values</th>
          <th>default</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.name} data-testid="input-row" data-input={r.name}>
            <td className="mono">{r.name}</td>
            <td>{r.type}</td>
            <td>{r.required ? "yes" : "no"}</td>
            <td>{r.description || "–"}</td>
            <td>{Array.isArray(r.enum) ? r.enum.map(String).join(", ") : "–"}</td>
            <td>{r.dflt === undefined ? "–" : json(r.dflt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Its schedules (next and last run) and its inbound hook (the path; the secret is never sent). */
function Triggers({ system }: { system: SystemRow }) {
  if (!system.triggers.length && !system.hook)
    return <Empty>It runs only when asked (no schedule, no inbound hook).</Empty>;
  return (
    <>
      {system.triggers.length > 0 && (
        <table data-testid="triggers-table">
          <thead>
            <tr>
              <th>cron</th>
              <th>time zone</th>
              <th>inputs</th>
              <th>next run</th>
              <th>last run</th>
            </tr>
          </thead>
          <tbody>
            {system.triggers.map((t) => (
              <tr key={t.index} data-testid="trigger-row">
                <td className="mono">{t.cron}</td>
                <td>{t.timezone ?? "the bridge's"}</td>
                <td className="mono">{json(t.inputs)}</td>
                <td>{t.next_run_at ? time(t.next_run_at) : "never"}</td>
                <td>
                  {t.last_run_at ? (
                    <>
                      {ago(t.last_run_at)} <span className="mono">{t.last_run_id}</span>
                    </>
                  ) : (
                    "–"
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {system.hook && (
        <p data-testid="hook">
          Inbound hook: <span className="mono">POST {system.hook.path}</span>, signed (at most {system.hook.per_minute}{" "}
          a minute). <span className="mono">clawbridge systems hook {system.id}</span> shows its secret.
        </p>
      )}
    </>
  );
}

function Detail({ id, system }: { id: string; system?: SystemRow }) {
  const [canvas, setCanvas] = useState<CanvasDetail | undefined>(undefined);
  const [canvasError, setCanvasError] = useState<string | undefined>(undefined);
  const [fresh, setFresh] = useState<ReadonlySet<string>>(new Set());
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const [layout, setLayout] = useState<"layered" | "canvas">("layered");
  const [log, setLog] = useState<LogLine[]>([]);
  const [exportError, setExportError] = useState<string | undefined>(undefined);

  const load = useRef<() => void>(() => {});
  load.current = () =>
    void apiResponse(`/v1/canvases/${encodeURIComponent(id)}`)
      .then((r) => r.json() as Promise<CanvasDetail>)
      .then((c) => {
        setCanvas(c);
        setCanvasError(undefined);
      })
      .catch((err: Error & { status?: number }) => {
        if (err.status === 404) setCanvas(undefined);
        else setCanvasError(err.message);
      });
  useEffect(() => {
    setCanvas(undefined);
    setLog([]);
    setChosen(undefined);
    load.current();
  }, [id]);

  const mark = (key: string) => {
    setFresh((s) => new Set([...s, key]));
    setTimeout(() => setFresh((s) => new Set([...s].filter((k) => k !== key))), 2500);
  };
  const note = (text: string, status?: string) => setLog((l) => [{ at: Date.now(), text, status }, ...l].slice(0, 300));

  useEvents((e) => {
    if (!("system" in e) || e.system !== id) return;
    const apply = (fn: (c: CanvasDetail) => CanvasDetail) => setCanvas((c) => (c ? fn(c) : c));
    switch (e.type) {
      case "node.created":
      case "node.updated": {
        const node = e.node;
        setCanvas((c) => (c ? { ...c, nodes: [...c.nodes.filter((n) => n.id !== node.id), node] } : c));
        if (!canvas) load.current();
        mark(node.id);
        break;
      }
      case "node.deleted": {
        const gone = e.nodeId;
        apply((c) => ({
          ...c,
          nodes: c.nodes.filter((n) => n.id !== gone && n.parent !== gone),
          edges: c.edges.filter((x) => x.from !== gone && x.to !== gone),
        }));
        break;
      }
      case "edge.created": {
        const edge = e.edge;
        apply((c) => ({ ...c, edges: [...c.edges.filter((x) => x.id !== edge.id), edge] }));
        mark(edge.id);
        break;
      }
      case "edge.deleted":
        apply((c) => ({ ...c, edges: c.edges.filter((x) => x.id !== e.edgeId) }));
        break;
      // Deployed or rolled back: which version the canvas runs as changed.
      case "system.version":
        load.current();
        break;
      // A build's steps (a run of origin builder) as they go.
      case "step.started":
        if (e.origin === "builder")
          note(`step ${e.step} started${e.attempt > 1 ? `, attempt ${String(e.attempt)}` : ""}`, "running");
        break;
      case "step.retry":
        if (e.origin === "builder") note(`step ${e.step} failed, retrying: ${e.error}`, "warn");
        break;
      case "step.completed":
      case "step.failed":
      case "step.skipped":
        if (e.origin === "builder")
          note(
            `step ${e.step} ${e.type.slice(5)}${"ms" in e ? ` in ${ms(e.ms)}` : ""}${"error" in e ? `: ${e.error}` : "reason" in e ? `: ${e.reason}` : ""}`,
            e.type.slice(5),
          );
        break;
      case "run.completed":
      case "run.failed":
      case "run.paused":
      case "run.cancelled":
      case "run.interrupted":
        if (e.origin !== "builder") break;
        note(
          `build ${e.type.slice(4)}${"ms" in e ? ` in ${ms(e.ms)}` : ""}${"error" in e ? `: ${e.error}` : ""}`,
          e.type.slice(4),
        );
        load.current();
        break;
    }
  });

  const exportIt = async () => {
    setExportError(undefined);
    try {
      const res = await apiResponse(`/v1/systems/${encodeURIComponent(id)}/export`);
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = `${id}.tar.gz`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      setExportError((err as Error).message);
    }
  };

  const chosenNode = canvas?.nodes.find((n) => n.id === chosen);
  return (
    <div className="detail" data-testid="system-detail" data-system={id}>
      <header className="detail-head">
        <div>
          <h2>{canvas?.name ?? system?.name ?? id}</h2>
          <div className="muted">
            <span className="mono">{id}</span>
            {canvas && (
              <>
                {" "}
                · <Badge status={canvas.status} /> canvas v{canvas.version}, updated {ago(canvas.updatedAt)}
                {canvas.changedSinceDeploy && (
                  <span data-testid="canvas-undeployed">
                    {" "}
                    · <Badge status="warn">changes not deployed</Badge> (deployed: version {canvas.deployedVersion})
                  </span>
                )}
              </>
            )}
            {system?.version != null && <span data-testid="system-version"> · runs version {system.version}</span>}
            {system && (
              <>
                {" "}
                · {system.kind} · {system.source}
                {system.side_effects && " · has side effects"}
              </>
            )}
          </div>
          {(canvas?.description || system?.description) && <p>{canvas?.description || system?.description}</p>}
        </div>
        <div className="actions">
          <button onClick={() => void exportIt()} data-testid="system-export">
            Export (.tar.gz)
          </button>
          <button onClick={() => navigate("runs")}>Runs</button>
        </div>
      </header>
      <Failure error={canvasError ?? exportError} />
      {canvas ? (
        <Section
          title={`Canvas: ${canvas.nodes.length} nodes, ${canvas.edges.length} edges`}
          testid="canvas-section"
          actions={
            <label className="small">
              layout{" "}
              <select
                value={layout}
                onChange={(e) => setLayout(e.target.value as "layered" | "canvas")}
                data-testid="canvas-layout"
              >
                <option value="layered">by data flow</option>
                <option value="canvas">as the builder placed it</option>
              </select>
            </label>
          }
        >
          <div className="canvas-wrap">
            <CanvasGraph
              nodes={canvas.nodes}
              edges={canvas.edges}
              layout={layout}
              fresh={fresh}
              selected={chosen}
              onSelect={setChosen}
            />
            {chosenNode && (
              <aside className="node-panel" data-testid="node-panel">
                <h3>{chosenNode.label}</h3>
                <div className="muted">
                  {chosenNode.type} · <span className="mono">{chosenNode.id}</span>
                </div>
                <pre>{json(chosenNode.properties)}</pre>
              </aside>
            )}
          </div>
        </Section>
      ) : (
        <Empty>This system has no canvas (it was written as YAML, not built by chat).</Empty>
      )}
      <Section title="Inputs" testid="inputs">
        <Inputs system={system} canvas={canvas} />
      </Section>
      {system && (
        <Section title="Triggers" testid="triggers">
          <Triggers system={system} />
        </Section>
      )}
      {system && (
        <Section title="Versions" testid="versions-section">
          <Versions id={id} />
        </Section>
      )}
      {log.length > 0 && (
        <Section title="Builder activity" testid="builder-log">
          <ul className="log">
            {log.map((l, i) => (
              <li key={i}>
                <span className="muted">{time(l.at)}</span> {l.status && <Badge status={l.status} />} {l.text}
              </li>
            ))}
          </ul>
        </Section>
      )}
    </div>
  );
}

/** Files of <dataDir>/systems/ the bridge left out, each with its problems (the rest are served). */
function LeftOut({ files }: { files: LeftOutRow[] }) {
  if (!files.length) return null;
  return (
    <div className="group" data-testid="systems-left-out">
      <h3>Left out</h3>
      <ul className="pick">
        {files.map((f) => (
          <li key={f.file} data-testid="left-out-row" data-file={f.file}>
            <div className="error">
              <span>
                <Badge status="fail">left out</Badge> {f.id ?? f.file.split("/").pop()}
              </span>
              <div className="muted small">{f.file}</div>
              <ul>
                {f.problems.map((p) => (
                  <li key={p} className="small">
                    {p}
                  </li>
                ))}
              </ul>
            </div>
          </li>
        ))}
      </ul>
    </div>
  );
}

export function Systems({ selected }: { selected?: string }) {
  const { entries, systems, leftOut, error } = useEntries();
  const groups: Array<[string, Entry[]]> = [
    ["Drafts", entries.filter((e) => e.status === "draft")],
    ["Deployed", entries.filter((e) => e.status === "deployed")],
    ["Library", entries.filter((e) => e.status === "library")],
  ];
  return (
    <div className="view split" data-testid="view-systems">
      <div className="list-pane">
        <h1>Systems</h1>
        <Failure error={error} />
        {entries.length === 0 && !leftOut.length && (
          <Empty>No systems yet. Ask the router in chat to build one, or add them to the config.</Empty>
        )}
        {groups.map(([title, list]) =>
          list.length ? (
            <div key={title} className="group">
              <h3>{title}</h3>
              <ul className="pick">
                {list.map((e) => (
                  <li key={e.id}>
                    <a
                      href={`/dashboard/systems/${encodeURIComponent(e.id)}`}
                      className={e.id === selected ? "active" : ""}
                      data-testid="system-row"
                      data-system={e.id}
                      data-status={e.status}
                      onClick={(ev) => {
                        ev.preventDefault();
                        navigate("systems", e.id);
                      }}
                    >
                      <span>{e.name}</span>
                      <span className="muted small">
                        {e.id}
                        {e.kind ? ` · ${e.kind}` : ""}
                      </span>
                    </a>
                  </li>
                ))}
              </ul>
            </div>
          ) : null,
        )}
        <LeftOut files={leftOut} />
      </div>
      <div className="detail-pane">
        {selected ? (
          <Detail key={selected} id={selected} system={systems.find((s) => s.id === selected)} />
        ) : (
          <Empty>Choose a system.</Empty>
        )}
      </div>
    </div>
  );
}
