/**
 * The doctor's checks of the backends (src/ops/doctor/doctor.ts runs them): each configured
 * backend's health (a CLI's `--version`, an upstream's `/models`), every configured model its CLI
 * or server does not offer, and the coding-agent CLIs installed but not used by the config.
 */
import { cliVersionHealth, KNOWN_CLIS, type KnownCli, resolveCli } from "../../backends/cli/resolve.js";
import { chooseLive } from "../../backends/catalog/choose.js";
import type { Backend } from "../../backends/contract/backend.js";
import { createBackends } from "../../backends/registry.js";
import type { Config } from "../../core/config/schema.js";
import { createLogger } from "../../core/log/logger.js";
import type { Finding } from "../../wire/admin.js";

function withTimeout<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((r) => (timer = setTimeout(() => r(fallback), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

export async function checkBackends(
  config: Config,
  findings: Finding[],
  running?: ReadonlyMap<string, Backend>,
): Promise<Set<string>> {
  const usedTypes = new Set<string>();
  let backends: ReadonlyMap<string, Backend>;
  try {
    backends = running ?? (await createBackends(config, createLogger("silent")));
  } catch (err) {
    findings.push({ id: "backends", status: "fail", title: `backends cannot be created: ${(err as Error).message}` });
    return usedTypes;
  }
  try {
    const results = await Promise.all(
      [...backends.values()].map(async (b) => ({
        b,
        h: await withTimeout(
          b.health().catch((e: Error) => ({ usable: false, detail: e.message, version: undefined })),
          20_000,
          { usable: false, detail: "health check did not finish within 20 s", version: undefined },
        ),
      })),
    );
    for (const { b, h } of results) {
      usedTypes.add(b.type);
      const models = config.models.filter((m) => m.backend === b.name).map((m) => m.id);
      const cli = KNOWN_CLIS.find((c) => c.backendType === b.type);
      const what =
        b.type === "openai"
          ? "GET <baseUrl>/models answered"
          : `\`${h.detail} --version\` answered${h.version ? ` ${h.version}` : ""}`;
      findings.push(
        h.usable
          ? {
              id: `backend:${b.name}`,
              status: "ok",
              title: `backend ${b.name} (${b.type}): usable${h.version ? `, ${h.version}` : ""}`,
              detail:
                `checked: ${what}. ${cli ? "A real turn was not tried: it needs the CLI's own login or API key." : ""}\nmodels: ${models.join(", ") || "none"}`.trim(),
            }
          : {
              id: `backend:${b.name}`,
              status: "fail",
              title: `backend ${b.name} (${b.type}): not usable`,
              detail: `${h.detail}\nmodels affected: ${models.join(", ") || "none"}`,
              fix: cli
                ? `install it (npm i -g ${cli.pkg}) or set backends.${b.name}.command to its path`
                : b.type === "openai"
                  ? `start the model server, or fix backends.${b.name}.baseUrl`
                  : `see backends.${b.name} in the config`,
            },
      );
    }
    await checkModelsOffered(
      config,
      results.filter((r) => r.h.usable).map((r) => r.b),
      findings,
    );
  } finally {
    if (!running) await Promise.all([...backends.values()].map((b) => b.close?.().catch(() => undefined)));
  }
  return usedTypes;
}

/**
 * Every configured model its CLI or server does not offer (issue 27): named with the live ones and
 * the fix, and what serves it when the backend's `remap.onMissing` allows one.
 */
async function checkModelsOffered(config: Config, usable: Backend[], findings: Finding[]): Promise<void> {
  await Promise.all(
    usable.map(async (b) => {
      const settings = config.backends[b.name]?.models;
      // Only a backend that refuses models it does not list (OpenCode, a model server) has missing ones.
      if (!b.models || !b.modelsComplete || settings?.discovery.enabled === false) return;
      let offered;
      try {
        offered = await b.models(AbortSignal.timeout(30_000));
      } catch (err) {
        findings.push({
          id: `models:${b.name}`,
          status: "info",
          title: `backend ${b.name}: its models could not be listed`,
          detail: (err as Error).message,
        });
        return;
      }
      if (!offered.length) return;
      const ids = new Set(offered.map((m) => m.id));
      const live = offered.map((m) => `${m.id}${m.free ? " (free)" : ""}`);
      const shown = `${live.slice(0, 15).join(", ")}${live.length > 15 ? `, … (${live.length} in all)` : ""}`;
      config.models.forEach((m, i) => {
        if (m.backend !== b.name || ids.has(m.backendModel)) return;
        const policy = settings?.remap.onMissing ?? "error";
        const pick = chooseLive(offered, policy);
        findings.push({
          id: `model:${m.id}`,
          status: pick ? "warn" : "fail",
          title: pick
            ? `model ${m.id}: ${b.name} does not offer ${m.backendModel}; served by ${pick.id} (remap.onMissing: ${policy})`
            : `model ${m.id}: ${b.name} does not offer ${m.backendModel}`,
          detail: `${b.name} offers: ${shown}`,
          fix: `set models[${i}].model to one of those${policy === "error" ? `, or let the bridge pick a live one: backends.${b.name}.remap.onMissing: best-free (or first)` : ""}`,
        });
      });
    }),
  );
}

export async function scanClis(
  known: readonly KnownCli[],
  skipTypes: Set<string>,
  env: NodeJS.ProcessEnv,
  findings: Finding[],
): Promise<void> {
  const results = await Promise.all(
    known
      .filter((c) => !skipTypes.has(c.backendType))
      .map(async (c) => {
        const { path: bin, tried } = await resolveCli(c.name, c.extraPlaces ?? []);
        const h = bin ? await cliVersionHealth(bin, tried, env) : undefined;
        return { c, bin, h };
      }),
  );
  for (const { c, bin, h } of results) {
    if (!bin)
      findings.push({
        id: `cli:${c.name}`,
        status: "info",
        title: `${c.name}: not installed (not used by this config)`,
        detail: `to use it: npm i -g ${c.pkg}, then add a "${c.backendType}" backend`,
      });
    else if (h?.usable)
      findings.push({
        id: `cli:${c.name}`,
        status: "info",
        title: `${c.name}: installed, ${h.version ?? "version unknown"} (not used by this config)`,
        detail: `${bin}; checked with --version only`,
      });
    else
      findings.push({
        id: `cli:${c.name}`,
        status: "info",
        title: `${c.name}: found but does not start (not used by this config)`,
        detail: h?.detail,
      });
  }
}
