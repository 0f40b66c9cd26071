/** Small pieces the views share. */
import type { ReactNode } from "react";

export function Badge({ status, children }: { status: string; children?: ReactNode }) {
  return (
    <span className={`badge badge-${status.replace(/[^a-z_-]/gi, "")}`} data-testid="status" data-status={status}>
      {children ?? status}
    </span>
  );
}

export function Failure({ error }: { error: string | undefined }) {
  if (!error) return null;
  return (
    <div className="error" data-testid="error">
      {error}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export function Section({
  title,
  actions,
  children,
  testid,
}: {
  title: string;
  actions?: ReactNode;
  children: ReactNode;
  testid?: string;
}) {
  return (
    <section className="section" data-testid={testid}>
      <header>
        <h2>{title}</h2>
        <div className="actions">{actions}</div>
      </header>
      {children}
    </section>
  );
}
