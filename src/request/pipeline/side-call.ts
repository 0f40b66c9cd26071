/**
 * One model call that is not a client's turn: the router's classifier, and a system's `model`
 * step. The model is reached by id like any request (routing, remap), answered statelessly under
 * the backend contract and its own deadline, and never queued behind client turns: a router turn
 * that holds the only slot (`maxConcurrent: 1`) can still ask its classifier, so routing can never
 * deadlock on itself.
 */
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { ChatRequest } from "../chat-api/schema.js";
import type { Route } from "../models/routes.js";
import { Cancellation } from "../../core/util/cancel.js";
import { armDeadline, contract } from "./enforce-contract.js";
import { BackendInput } from "./turn.js";

export interface SideCall {
  model: string;
  prompt: string;
  system?: string;
  cancel: Cancellation;
  /** Default: the backend's own `timeoutSeconds`. */
  timeoutSeconds?: number;
  /** The CLI agent's working directory (a system's sandbox). */
  cwd?: string;
}

export function sideCaller(
  resolve: (id: string) => Route | undefined,
): (call: SideCall) => AsyncGenerator<BackendEvent> {
  return async function* sideCall(call: SideCall): AsyncGenerator<BackendEvent> {
    const route = resolve(call.model);
    if (!route) {
      yield {
        type: "error",
        error: { code: "backend_unavailable", message: `no configured model "${call.model}"`, status: 502 },
      };
      return;
    }
    const messages: ChatRequest["messages"] = [];
    if (call.system) messages.push({ role: "system", content: call.system });
    messages.push({ role: "user", content: call.prompt });
    const request = { model: route.model.backendModel, messages, stream: true } as ChatRequest;
    // Its own cancellation: follows the caller's, and also ends at this call's deadline.
    const cancel = new Cancellation();
    const unfollow = call.cancel.onAbort(() => cancel.abort(call.cancel.reason));
    const disarm = armDeadline(cancel, call.timeoutSeconds ?? route.backend.timeoutSeconds);
    try {
      const input = new BackendInput(
        route.model.backendModel,
        { system: call.system ?? "", text: call.prompt },
        request,
        { key: `side:${route.model.id}`, turn: 0, ...(call.cwd ? { cwd: call.cwd } : {}) },
        cancel,
      );
      yield* contract(route.backend, input, () => `${call.system ?? ""}\n${call.prompt}`);
    } finally {
      disarm();
      unfollow();
    }
  };
}
