/** The shell: a left nav with the six views, the live feed's state, and the key prompt. */
import { useEffect, useState, type ReactNode } from "react";
import { clearKey, hasKey, onPrompt } from "./api";
import { navigate, useFeedStatus, useRoute } from "./hooks";
import { KeyPrompt } from "./KeyPrompt";
import { Backends } from "./views/Backends";
import { Conversations } from "./views/Conversations";
import { Live } from "./views/Live";
import { Router } from "./views/Router";
import { Runs } from "./views/Runs";
import { Systems } from "./views/Systems";

const VIEWS: Array<{ id: string; title: string; render: (id?: string) => ReactNode }> = [
  { id: "live", title: "Live", render: () => <Live /> },
  { id: "conversations", title: "Conversations", render: () => <Conversations /> },
  { id: "backends", title: "Backends", render: () => <Backends /> },
  { id: "systems", title: "Systems", render: (id) => <Systems selected={id} /> },
  { id: "runs", title: "Runs", render: (id) => <Runs selected={id} /> },
  { id: "router", title: "Router", render: () => <Router /> },
];

function FeedBadge() {
  const { status, detail } = useFeedStatus();
  const label =
    status === "live"
      ? "live"
      : status === "unavailable"
        ? "no live feed"
        : status === "reconnecting"
          ? "reconnecting…"
          : "connecting…";
  return (
    <div className={`feed feed-${status}`} data-testid="events-status" data-status={status} title={detail ?? ""}>
      <span className="dot" /> {label}
    </div>
  );
}

export function App() {
  const [view, id] = useRoute();
  const [prompt, setPrompt] = useState(false);
  useEffect(() => onPrompt(setPrompt), []);
  const current = VIEWS.find((v) => v.id === view) ?? VIEWS[0]!;
  useEffect(() => {
    document.title = `${current.title} · clawbridge`;
  }, [current]);
  return (
    <div className="shell">
      <nav className="nav" data-testid="nav">
        <div className="brand">clawbridge</div>
        {VIEWS.map((v) => (
          <a
            key={v.id}
            href={`/dashboard/${v.id}`}
            className={v.id === current.id ? "active" : ""}
            data-testid={`nav-${v.id}`}
            onClick={(e) => {
              e.preventDefault();
              navigate(v.id);
            }}
          >
            {v.title}
          </a>
        ))}
        <div className="nav-foot">
          <FeedBadge />
          {!prompt && hasKey() && (
            <button
              className="link"
              data-testid="key-clear"
              onClick={() => {
                clearKey();
                location.reload();
              }}
            >
              forget key
            </button>
          )}
        </div>
      </nav>
      <main className="main" key={current.id}>
        {current.render(id)}
      </main>
      {prompt && <KeyPrompt />}
    </div>
  );
}
