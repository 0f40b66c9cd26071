/**
 * What a system built by chat may reach once deployed. The person typing in a chat is not the
 * operator who wrote the config, so a canvas may not turn into a shell or a way into the private
 * network:
 * - a `command` node, and an `mcp` node with a stdio server, may run only programs the operator
 *   listed in the builder's `allowCommands` (by name or path, compared as given);
 * - a `webhook` node, and an `mcp` node over HTTP, may reach only public addresses, or hosts and
 *   CIDRs the operator listed in `allowHosts` (the same rules as the live-data tools' guard,
 *   src/core/net/netguard.ts; a hostname is resolved at deploy time).
 * Systems in the config file or written by hand in `<dataDir>/systems/` are the operator's and are
 * not checked here.
 */
import { NetGuard, systemResolve, type ResolveFn } from "../../core/net/netguard.js";
import { isIpLiteral } from "../../core/net/ip.js";

export interface DeployPolicy {
  allowCommands: string[];
  allowHosts: string[];
  /** Injectable for tests. */
  resolve?: ResolveFn;
}

/** Problems of a compiled system under the policy, each naming the step. */
export async function policyProblems(system: Record<string, unknown>, policy: DeployPolicy): Promise<string[]> {
  const problems: string[] = [];
  const run = system.run as { steps?: Array<{ id: string; uses: string; with: Record<string, unknown> }> } | undefined;
  const guard = new NetGuard({ allowPrivateAddresses: false, allowHosts: policy.allowHosts });
  const program = (p: unknown) => (typeof p === "string" ? p : "");
  // Compared as given: allowing "node" allows the program found as `node` on PATH, not ./node.
  const commandOk = (p: string) => policy.allowCommands.includes(p);
  const urlProblem = async (raw: string): Promise<string | undefined> => {
    // References may sit in the path and query only (checked by the library); a placeholder stands in.
    const literal = raw.replace(/\$\{[^}]*\}/g, "x");
    try {
      const url = guard.checkUrl(literal);
      const host = url.hostname.replace(/^\[|\]$/g, "");
      if (isIpLiteral(host) || guard.hostAllowed(host)) return undefined;
      const addrs = await (policy.resolve ?? systemResolve)(host);
      for (const a of addrs) {
        const p = guard.addressProblem(a.address);
        if (p) return `${host} resolves to a ${p.replace(/ is not allowed$/, "")}`;
      }
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  };
  const hint = "; the operator can allow it under the builder's allowHosts";
  for (const step of run?.steps ?? []) {
    const w = step.with ?? {};
    if (step.uses === "command") {
      const argv = Array.isArray(w.argv) ? w.argv : [];
      const prog = program(argv[0]);
      if (!commandOk(prog))
        problems.push(
          `step ${step.id}: the program "${prog}" is not in the builder's allowCommands (${policy.allowCommands.join(", ") || "none"}); a system built by chat runs only programs the operator allowed`,
        );
      if (typeof w.cwd === "string")
        problems.push(`step ${step.id}: a command built by chat runs in its run directory; remove cwd`);
    } else if (step.uses === "mcp") {
      const server = (w.server ?? {}) as Record<string, unknown>;
      if (server.transport === "stdio") {
        if (typeof server.cwd === "string")
          problems.push(`step ${step.id}: an MCP server built by chat runs in its run directory; remove server.cwd`);
        const prog = program(server.command);
        if (!commandOk(prog))
          problems.push(
            `step ${step.id}: the MCP server program "${prog}" is not in the builder's allowCommands (${policy.allowCommands.join(", ") || "none"})`,
          );
      } else if (typeof server.url === "string") {
        const p = await urlProblem(server.url);
        if (p) problems.push(`step ${step.id}: the MCP server URL is refused: ${p}${hint}`);
      }
    } else if (step.uses === "webhook" && typeof w.url === "string") {
      const p = await urlProblem(w.url);
      if (p) problems.push(`step ${step.id}: the webhook URL is refused: ${p}${hint}`);
    }
  }
  return problems;
}
