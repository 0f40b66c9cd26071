/**
 * Who holds a port: nothing, a clawbridge (GET /health answers `name: "clawbridge"`), or another
 * program. Only ever asks the given loopback/configured address; reads no files or environment.
 */

/**
 * @param {string} host
 * @param {number} port
 * @param {{ apiKey?: string, timeoutMs?: number }} [opts]
 * @returns {Promise<{ state: "free" } | { state: "clawbridge", version?: string, status?: string } | { state: "other", detail: string }>}
 */
export async function probePort(host, port, opts = {}) {
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const target = h === "0.0.0.0" ? "127.0.0.1" : h === "[::]" ? "[::1]" : h;
  const headers = opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {};
  let res;
  try {
    res = await fetch(`http://${target}:${port}/health`, {
      headers,
      signal: AbortSignal.timeout(opts.timeoutMs ?? 2000),
    });
  } catch (err) {
    const code = err?.cause?.code ?? err?.code;
    if (code === "ECONNREFUSED" || code === "EADDRNOTAVAIL") return { state: "free" };
    return { state: "other", detail: `it does not answer HTTP (${code ?? err?.name ?? "error"})` };
  }
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (body && typeof body === "object" && body.name === "clawbridge")
    return { state: "clawbridge", version: body.version, status: body.status };
  return {
    state: "other",
    detail: `GET /health answered ${res.status}${res.headers.get("server") ? ` (server: ${res.headers.get("server")})` : ""}, not clawbridge`,
  };
}
