/** Asked for when the bridge answers 401: the key is kept in session storage (this tab, until it closes). */
import { useState } from "react";
import { tryKey } from "./api";

export function KeyPrompt() {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  return (
    <div className="overlay">
      <form
        className="key-prompt"
        data-testid="key-prompt"
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          const r = await tryKey(value);
          setBusy(false);
          if (r === "refused") setError("That key was refused. Use one of server.apiKeys from the bridge's config.");
          else if (r !== "ok") setError(r);
        }}
      >
        <h2>API key</h2>
        <p>
          This bridge has <code>server.apiKeys</code> set. Enter one of them; it is kept in this tab's session storage
          and sent as a bearer header, never in a URL.
        </p>
        <input
          type="password"
          autoFocus
          autoComplete="off"
          placeholder="key"
          value={value}
          data-testid="key-input"
          onChange={(e) => {
            setValue(e.target.value);
            setError(undefined);
          }}
        />
        <button type="submit" disabled={busy || !value.trim()} data-testid="key-submit">
          {busy ? "checking…" : "Use this key"}
        </button>
        {error && (
          <div className="error" data-testid="key-error">
            {error}
          </div>
        )}
      </form>
    </div>
  );
}
