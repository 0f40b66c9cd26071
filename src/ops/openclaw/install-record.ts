/**
 * What install wrote, kept in `<stateDir>/.clawbridge-install.json` so uninstall removes exactly
 * that: per provider id, the entry's hash (to notice hand edits), the objects install created and
 * the default models it set with what was there before.
 */
import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { writeFileAtomic } from "./fsutil.js";
import type { JsonPath } from "./json5-doc.js";
import type { OpenClawPaths } from "./provider.js";

export interface DefaultModelRecord {
  /** Agent id in agents.list; absent = agents.defaults. */
  agent?: string;
  /** `primary`: we set `<model>.primary`; `string`: `model` was a plain string and we replaced it. */
  form: "primary" | "string";
  /** The ref we wrote (`<provider>/<model>`). */
  value: string;
  /** What was there before (null: nothing). Restored by uninstall if our value is still in place. */
  previous: string | null;
  /** Objects created to hold it (removed again when empty). */
  createdParents: JsonPath[];
}

export interface InstallRecord {
  providerId: string;
  configPath: string;
  installedAt: string;
  updatedAt: string;
  /** sha256 of the provider entry as written (canonical JSON), to notice later hand edits. */
  entrySha256: string;
  baseUrl: string;
  models: string[];
  /** Objects install created (e.g. `models`, `models.providers`), removed by uninstall when empty. */
  createdParents: JsonPath[];
  /** Default models install set (one per target). */
  defaultModels?: DefaultModelRecord[];
  /** The bridge config the entry was built from. */
  bridgeConfig?: string;
}

export interface InstallMarker {
  version: 1;
  installs: Record<string, InstallRecord>;
}

export function readMarker(paths: OpenClawPaths): InstallMarker {
  try {
    const data = JSON.parse(readFileSync(paths.markerPath, "utf8")) as InstallMarker;
    if (data && data.version === 1 && data.installs && typeof data.installs === "object") return data;
  } catch {
    /* none or unreadable: treated as none */
  }
  return { version: 1, installs: {} };
}

export function writeMarker(paths: OpenClawPaths, marker: InstallMarker): void {
  if (!Object.keys(marker.installs).length) {
    rmSync(paths.markerPath, { force: true });
    return;
  }
  writeFileAtomic(paths.markerPath, `${JSON.stringify(marker, null, 2)}\n`, 0o600);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

export function entryHash(entry: unknown): string {
  return createHash("sha256").update(canonical(entry)).digest("hex");
}
