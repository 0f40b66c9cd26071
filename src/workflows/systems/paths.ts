/**
 * Where systems live on disk, and whether a bridge needs the systems runtime at all — light on
 * purpose: start-up reads it before deciding to load the systems and router code.
 */
import { existsSync } from "node:fs";
import path from "node:path";

export const SYSTEMS_DIR = "systems";

/** `<dataDir>/systems`: one YAML file per system (the builder writes there too). */
export function systemsDir(dataDir: string): string {
  return path.join(dataDir, SYSTEMS_DIR);
}

/** `<dataDir>/sandboxes/<id>`: a system's own files, the working directory of its model steps (the builder writes there). */
export function sandboxDir(dataDir: string, systemId: string): string {
  return path.join(dataDir, "sandboxes", systemId);
}

/** Whether systems are configured (the config's list or files) or a router or builder backend exists. */
export function wantsSystems(config: {
  systems: unknown[];
  backends: Record<string, { type: string }>;
  dataDir: string;
}): boolean {
  return (
    config.systems.length > 0 ||
    Object.values(config.backends).some((b) => b.type === "router" || b.type === "builder") ||
    existsSync(systemsDir(config.dataDir))
  );
}
