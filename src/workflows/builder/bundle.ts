/**
 * A system as one file: a `.tar.gz` holding
 *   <id>/manifest.json   format, version, the system id, its required inputs, the file list
 *   <id>/system.yaml     the system as the library loads it (compiled from its canvas when it has one)
 *   <id>/canvas.json     the canvas (nodes, edges, settings), when it was built on one
 *   <id>/sandbox/…       the sandbox files its agents see
 * Import reads it back into the same canvas and the same files (a draft, to be deployed), or, for a
 * system with no canvas, into `<dataDir>/systems/<id>.yaml`. Entries are untrusted: only regular
 * files are taken, every sandbox path goes through the sandbox's own checks (no `..`, no absolute
 * path, size limits), and the archive's total size is bounded before anything is written.
 * A secret's value found in any entry (a token pasted into a prompt or a sandbox file) is written
 * as `[secret NAME]` (src/core/secrets/redactor.ts); `${secrets.NAME}` references stay as they are.
 */
import { createGunzip, gzipSync } from "node:zlib";
import { Readable } from "node:stream";
import { pack as tarPack, extract as tarExtract } from "tar-stream";
import { parse as parseYaml } from "yaml";
import type { Canvas } from "../../wire/canvas.js";
import { parseSystemText, SystemFileError, systemFileText } from "../systems/system-files.js";
import { secretRedactor } from "../../core/secrets/redactor.js";

/** An entry's content with secrets' values replaced (a binary file without one is kept byte for byte). */
function redacted(content: Buffer | string): Buffer | string {
  if (typeof content === "string") return secretRedactor.text(content);
  const text = content.toString("utf8");
  const out = secretRedactor.text(text);
  return out === text ? content : Buffer.from(out);
}

export const BUNDLE_FORMAT = "clawbridge-system-bundle";
const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
const MAX_ENTRIES = 2000;

export interface BundleContents {
  system: string;
  /** The system's YAML text. */
  yaml: string;
  canvas?: Canvas;
  files: Array<{ path: string; content: Buffer }>;
}

export interface BundleManifest {
  format: typeof BUNDLE_FORMAT;
  version: 1;
  system: string;
  createdAt: string;
  requiredInputs: string[];
  files: string[];
}

export async function writeBundle(b: BundleContents): Promise<Buffer> {
  const parsed = parseYaml(b.yaml) as { inputs?: { required?: unknown } } | null;
  const required = Array.isArray(parsed?.inputs?.required) ? (parsed!.inputs!.required as unknown[]).map(String) : [];
  const manifest: BundleManifest = {
    format: BUNDLE_FORMAT,
    version: 1,
    system: b.system,
    createdAt: new Date().toISOString(),
    requiredInputs: required,
    files: b.files.map((f) => f.path),
  };
  const p = tarPack();
  const chunks: Buffer[] = [];
  p.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    p.on("end", () => resolve());
    p.on("error", reject);
  });
  const mtime = new Date();
  const add = (name: string, content: Buffer | string) =>
    p.entry({ name: `${b.system}/${name}`, mode: 0o600, mtime }, Buffer.from(redacted(content)));
  add("manifest.json", `${JSON.stringify(manifest, null, 2)}\n`);
  add("system.yaml", b.yaml);
  if (b.canvas) add("canvas.json", `${JSON.stringify(b.canvas, null, 2)}\n`);
  for (const f of b.files) add(`sandbox/${f.path}`, f.content);
  p.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

export class BundleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BundleError";
  }
}

export async function readBundle(data: Buffer): Promise<BundleContents> {
  if (data.length > MAX_BUNDLE_BYTES)
    throw new BundleError(
      `the bundle is ${data.length} bytes; a bundle may be at most ${MAX_BUNDLE_BYTES} bytes (${MAX_BUNDLE_BYTES / 1048576} MiB)`,
    );
  const entries = new Map<string, Buffer>();
  let total = 0;
  const ex = tarExtract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on("entry", (header, stream, next) => {
      const parts: Buffer[] = [];
      stream.on("data", (chunk: unknown) => {
        const c = chunk as Buffer;
        total += c.length;
        if (total > MAX_BUNDLE_BYTES * 2) {
          stream.destroy(
            new BundleError(
              `the bundle unpacks to more than ${MAX_BUNDLE_BYTES * 2} bytes (${(MAX_BUNDLE_BYTES * 2) / 1048576} MiB), the limit`,
            ),
          );
          return;
        }
        parts.push(c);
      });
      stream.on("end", () => {
        if (header.type === "file") {
          if (entries.size >= MAX_ENTRIES)
            return next(new BundleError(`the bundle has more than ${MAX_ENTRIES} files`));
          entries.set(header.name, Buffer.concat(parts));
        }
        next();
      });
      stream.on("error", reject);
    });
    ex.on("finish", () => resolve());
    ex.on("error", reject);
  });
  const gunzip = createGunzip();
  gunzip.on("error", (err) => ex.destroy(new BundleError(`not a gzip archive: ${err.message}`)));
  Readable.from([data]).pipe(gunzip).pipe(ex);
  await done;

  const manifestName = [...entries.keys()].find((n) => /^[^/]+\/manifest\.json$/.test(n));
  if (!manifestName) throw new BundleError("the archive has no <id>/manifest.json; is it a clawbridge system bundle?");
  let manifest: BundleManifest;
  try {
    manifest = JSON.parse(entries.get(manifestName)!.toString("utf8")) as BundleManifest;
  } catch {
    throw new BundleError("manifest.json is not JSON");
  }
  if (manifest.format !== BUNDLE_FORMAT || manifest.version !== 1)
    throw new BundleError(`unknown bundle format ${String(manifest.format)} v${String(manifest.version)}`);
  const root = manifestName.slice(0, manifestName.indexOf("/"));
  if (root !== manifest.system)
    throw new BundleError(`the archive's folder ${root} does not match the system ${manifest.system}`);
  const yaml = entries.get(`${root}/system.yaml`);
  if (!yaml) throw new BundleError("the bundle has no system.yaml");
  // The same checks as a file of <dataDir>/systems/: at most 1 MiB, UTF-8, one YAML mapping.
  let yamlText: string;
  try {
    yamlText = systemFileText(yaml);
    const value = parseSystemText(yamlText);
    if ("id" in value && value.id !== manifest.system)
      throw new SystemFileError(`its id ${JSON.stringify(value.id)} is not the bundle's system "${manifest.system}"`);
  } catch (err) {
    if (err instanceof SystemFileError) throw new BundleError(`system.yaml: ${err.message}`);
    throw err;
  }
  const canvasRaw = entries.get(`${root}/canvas.json`);
  let canvas: Canvas | undefined;
  if (canvasRaw) {
    try {
      canvas = JSON.parse(canvasRaw.toString("utf8")) as Canvas;
    } catch {
      throw new BundleError("canvas.json is not JSON");
    }
    if (!canvas || canvas.system !== manifest.system || !Array.isArray(canvas.nodes) || !Array.isArray(canvas.edges))
      throw new BundleError("canvas.json is not a canvas of this system");
  }
  const prefix = `${root}/sandbox/`;
  const files = [...entries]
    .filter(([n]) => n.startsWith(prefix))
    .map(([n, content]) => ({ path: n.slice(prefix.length), content }));
  return { system: manifest.system, yaml: yamlText, canvas, files };
}
