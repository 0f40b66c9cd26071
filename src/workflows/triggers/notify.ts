/**
 * A schedule's `notify`: when its run ends, the outcome is POSTed to the URL, sent by the webhook
 * step's own code (src/workflows/systems/executors/webhook.ts: the URL checked at load, no
 * redirects followed, the timeout, errors that never quote headers). The body is the webhook's
 * `{system, inputs, runId, conversation}` plus `event: "run.ended"` and `run`: the run's status,
 * output, error, failed step, trigger and times. Its headers may name `${secrets.NAME}` (a token for
 * the receiving service), like a webhook step's.
 */
import type { Logger } from "pino";
import { Cancellation } from "../../core/util/cancel.js";
import type { RunRecord } from "../systems/db.js";
import { runWebhook } from "../systems/executors/webhook.js";
import type { Trigger } from "../systems/schema.js";

const NOTIFY_TIMEOUT_SECONDS = 30;

export async function notifyRun(
  run: RunRecord,
  notify: NonNullable<Trigger["notify"]>,
  log: Logger,
  secret?: (name: string) => string | undefined,
): Promise<void> {
  const outcome = {
    id: run.id,
    status: run.status,
    output: run.output ?? null,
    error: run.error ?? null,
    failed_step: run.failedStep ?? null,
    trigger: run.trigger ?? null,
    started_at: run.startedAt ?? null,
    ended_at: run.endedAt ?? null,
  };
  await runWebhook(
    {
      kind: "webhook",
      url: notify.url,
      method: "POST",
      headers: notify.headers,
      // One reference: the outcome goes in as it is (a `${` inside the output is never read as a template).
      body: { event: "run.ended", run: "${steps.run.output}" },
      timeoutSeconds: NOTIFY_TIMEOUT_SECONDS,
      maxResponseBytes: 64 * 1024,
    },
    {
      runId: run.id,
      systemId: run.system,
      conversation: run.conversation,
      scope: { inputs: run.inputs, steps: { run: { output: outcome } }, runId: run.id, secret },
      cancel: new Cancellation(),
      output: () => {},
      log,
      workDir: () => {
        throw new Error("a notify call has no working directory");
      },
      callModel: () => {
        throw new Error("a notify call calls no model");
      },
    },
  );
}
