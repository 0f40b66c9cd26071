/**
 * A system's canvas as a graph (@xyflow/react): its nodes and edges, laid out in layers along the
 * data flow (or where the builder placed them), growing as node and edge events arrive.
 */
import {
  Background,
  Controls,
  Handle,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
  type Edge,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { useCallback, useEffect, useMemo, useRef } from "react";
import type { CanvasEdge, CanvasNode } from "@wire/canvas";

type CbNode = Node<{ label: string; kind: string; fresh: boolean; selected: boolean }, "cb">;

function CbNodeView({ id, data }: NodeProps<CbNode>) {
  return (
    <div
      className={`cnode cnode-${data.kind}${data.fresh ? " fresh" : ""}${data.selected ? " chosen" : ""}`}
      data-testid="canvas-node"
      data-node-id={id}
      data-node-type={data.kind}
    >
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="cnode-type">{data.kind}</div>
      <div className="cnode-label">{data.label}</div>
      <div className="cnode-id">{id}</div>
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
}

const nodeTypes = { cb: CbNodeView };

const COL = 240;
const ROW = 110;

/** Longest path from a node without inputs decides the column; nodes in a cycle go after the rest. */
export function layered(nodes: CanvasNode[], edges: CanvasEdge[]): Map<string, { x: number; y: number }> {
  const ids = new Set(nodes.map((n) => n.id));
  const incoming = new Map<string, number>();
  const next = new Map<string, string[]>();
  for (const n of nodes) {
    incoming.set(n.id, 0);
    next.set(n.id, []);
  }
  for (const e of edges) {
    if (!ids.has(e.from) || !ids.has(e.to)) continue;
    incoming.set(e.to, (incoming.get(e.to) ?? 0) + 1);
    next.get(e.from)!.push(e.to);
  }
  const depth = new Map<string, number>();
  const queue = nodes.filter((n) => incoming.get(n.id) === 0).map((n) => n.id);
  for (const id of queue) depth.set(id, 0);
  while (queue.length) {
    const id = queue.shift()!;
    for (const to of next.get(id) ?? []) {
      depth.set(to, Math.max(depth.get(to) ?? 0, (depth.get(id) ?? 0) + 1));
      incoming.set(to, (incoming.get(to) ?? 0) - 1);
      if (incoming.get(to) === 0) queue.push(to);
    }
  }
  const deepest = Math.max(0, ...depth.values());
  for (const n of nodes) if (!depth.has(n.id)) depth.set(n.id, deepest + 1);
  const layers = new Map<number, CanvasNode[]>();
  for (const n of nodes) {
    const d = depth.get(n.id)!;
    layers.set(d, [...(layers.get(d) ?? []), n]);
  }
  const out = new Map<string, { x: number; y: number }>();
  for (const [d, layer] of layers) {
    layer.sort((a, b) => a.position.y - b.position.y || a.position.x - b.position.x);
    layer.forEach((n, i) => out.set(n.id, { x: d * COL, y: (i - (layer.length - 1) / 2) * ROW }));
  }
  return out;
}

function Fit({ count }: { count: number }) {
  const flow = useReactFlow();
  useEffect(() => {
    const t = setTimeout(() => void flow.fitView({ padding: 0.2, duration: 150 }), 30);
    return () => clearTimeout(t);
  }, [count, flow]);
  return null;
}

export function CanvasGraph(props: {
  nodes: CanvasNode[];
  edges: CanvasEdge[];
  layout: "layered" | "canvas";
  fresh: ReadonlySet<string>;
  selected?: string;
  onSelect: (id: string | undefined) => void;
}) {
  const { nodes, edges, layout, fresh, selected, onSelect } = props;
  // xyflow keeps a node's measured size on the node object and hides a node until it has one. The
  // nodes are rebuilt here whenever the canvas grows or a highlight ends; without their size a node
  // must be measured again, and when two rebuilds come before that measurement xyflow never looks
  // again: the node stays hidden (a blank canvas while the Builder builds). So sizes are kept.
  const sizes = useRef(new Map<string, { width: number; height: number }>());
  const onNodesChange = useCallback((changes: NodeChange<CbNode>[]) => {
    for (const c of changes) {
      if (c.type === "dimensions" && c.dimensions) sizes.current.set(c.id, c.dimensions);
      else if (c.type === "remove") sizes.current.delete(c.id);
    }
  }, []);
  const flowNodes = useMemo<CbNode[]>(() => {
    const spots = layout === "layered" ? layered(nodes, edges) : undefined;
    return nodes.map((n) => ({
      id: n.id,
      type: "cb",
      position: spots?.get(n.id) ?? n.position,
      data: { label: n.label, kind: n.type, fresh: fresh.has(n.id), selected: n.id === selected },
      draggable: false,
      connectable: false,
      measured: sizes.current.get(n.id),
    }));
  }, [nodes, edges, layout, fresh, selected]);
  const flowEdges = useMemo<Edge[]>(
    () =>
      edges.map((e) => ({ id: e.id, source: e.from, target: e.to, className: fresh.has(e.id) ? "fresh" : undefined })),
    [edges, fresh],
  );
  return (
    <div className="canvas" data-testid="canvas" data-nodes={nodes.length} data-edges={edges.length}>
      <ReactFlowProvider>
        <ReactFlow
          nodes={flowNodes}
          edges={flowEdges}
          onNodesChange={onNodesChange}
          nodeTypes={nodeTypes}
          nodesConnectable={false}
          nodesDraggable={false}
          elementsSelectable
          fitView
          minZoom={0.2}
          onNodeClick={(_e, n) => onSelect(n.id)}
          onPaneClick={() => onSelect(undefined)}
        >
          <Background />
          <Controls showInteractive={false} />
          <Fit count={nodes.length + edges.length} />
        </ReactFlow>
      </ReactFlowProvider>
    </div>
  );
}
