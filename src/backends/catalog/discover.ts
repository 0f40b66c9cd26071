/**
 * The models one backend type offers with given options, asked outside a running bridge
 * (`clawbridge init`, `doctor`): the backend is made for the question and closed after it.
 */
import type { Logger } from "pino";
import type { DiscoveredModel } from "../contract/backend.js";
import { backendDescriptor, loadBackendModule } from "../registry.js";

/**
 * What a backend of `type` with `options` (raw, as in a config file) offers now. Rejects when the
 * type is unknown, the options are invalid, or its CLI or server cannot list them; resolves with
 * [] for a type that lists none (the router, the builder).
 */
export async function discoverModels(
  type: string,
  options: unknown,
  deps: { dataDir: string; logger: Logger },
  signal: AbortSignal = AbortSignal.timeout(30_000),
): Promise<DiscoveredModel[]> {
  const desc = backendDescriptor(type);
  if (!desc) throw new Error(`unknown backend type "${type}"`);
  const parsed = desc.schema.safeParse(options ?? {});
  if (!parsed.success) throw new Error(`invalid options for ${type}: ${parsed.error.issues[0]?.message ?? "?"}`);
  const mod = (await loadBackendModule(type))!;
  let backend: ReturnType<typeof mod.create>;
  try {
    backend = mod.create(`discover-${type}`, parsed.data, deps);
  } catch {
    return []; // a type that needs a running bridge (the router, the builder) lists no models of its own
  }
  try {
    return backend.models ? await backend.models(signal) : [];
  } finally {
    await backend.close?.().catch(() => undefined);
  }
}
