/**
 * System files on disk (`<dataDir>/systems/*.yaml|yml|json`): read within a size cap (checked before
 * a byte is read), decoded as strict UTF-8 (never U+FFFD), parsed as one YAML mapping; each problem
 * names its file. A bad file is left out of the library, never the bridge's start (library.ts); the
 * same checks refuse a bundle's system file at import.
 */
import { closeSync, fstatSync, openSync, readdirSync, readSync, statSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";

export interface LibraryProblem {
  /** `config` (the `systems:` list) or the YAML file's path. */
  where: string;
  /** The offending key, e.g. `systems[2].run.steps[1].uses` or `inputs.properties.tone`. */
  key: string;
  message: string;
}

/**
 * A file of `<dir>` left out of the library, with every problem that names it. One bad file never
 * stops the bridge: it starts without that system and names it (log, `/health`, `doctor`, the
 * dashboard's Systems view, `clawbridge systems validate`).
 */
export interface LeftOutFile {
  /** The file's path (or the directory's, when it cannot be listed). */
  file: string;
  /** The system's id when the file got far enough to have one. */
  id?: string;
  problems: LibraryProblem[];
}

/** A system file larger than this is refused before it is read (a 64 MiB file never finished validating). */
export const MAX_SYSTEM_FILE_BYTES = 1024 * 1024;

export class SystemFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SystemFileError";
  }
}

const mib = (n: number) => `${(n / 1048576).toFixed(n % 1048576 ? 1 : 0)} MiB`;

/** The refusal of a system file of `size` bytes, or undefined when it is within the cap. */
export function systemFileTooLarge(size: number): string | undefined {
  return size > MAX_SYSTEM_FILE_BYTES
    ? `it is ${size} bytes (${mib(size)}); a system file may be at most ${MAX_SYSTEM_FILE_BYTES} bytes (${mib(MAX_SYSTEM_FILE_BYTES)})`
    : undefined;
}

/**
 * A system file's bytes as text: refused (SystemFileError) when larger than the cap or when not
 * UTF-8 — never silently turned into U+FFFD.
 */
export function systemFileText(bytes: Uint8Array): string {
  const big = systemFileTooLarge(bytes.length);
  if (big) throw new SystemFileError(big);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new SystemFileError("it is not valid UTF-8 text");
  }
}

/** Parse a system file's text: one mapping, or SystemFileError saying why not. */
export function parseSystemText(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseYaml(text) as unknown;
  } catch (err) {
    throw new SystemFileError(`it is not valid YAML: ${(err as Error).message}`);
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new SystemFileError("a system file holds one mapping (id, description, inputs, run…)");
  return value as Record<string, unknown>;
}

/** Read a file of at most the cap (and one byte more, which `systemFileText` refuses): its size is checked before a byte is read. */
function readCapped(file: string): Buffer {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    const big = systemFileTooLarge(size);
    if (big) throw new SystemFileError(big);
    const buf = Buffer.alloc(MAX_SYSTEM_FILE_BYTES + 1);
    let n = 0;
    for (let r = 1; r > 0 && n < buf.length; n += r) r = readSync(fd, buf, n, buf.length - n, null);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** A system as read, before it is checked. */
export interface Raw {
  where: string;
  /** Key prefix (`systems[2]` for the config, "" for a file). */
  prefix: string;
  value: unknown;
}

/**
 * Read `<dir>/*.yaml|yml|json`; a file's id defaults to its name. A file larger than the cap is
 * refused before it is read, one that is not UTF-8 or does not parse is a problem of that file.
 */
export function readDir(dir: string | undefined, problems: LibraryProblem[], files: Set<string>): Raw[] {
  if (!dir) return [];
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => /\.(ya?ml|json)$/i.test(n))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    files.add(dir);
    problems.push({ where: dir, key: "(directory)", message: (err as Error).message });
    return [];
  }
  const out: Raw[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      if (!statSync(file).isFile()) continue;
      files.add(file);
      const value = parseSystemText(systemFileText(readCapped(file)));
      const withId = "id" in value ? value : { id: name.replace(/\.(ya?ml|json)$/i, ""), ...value };
      out.push({ where: file, prefix: "", value: withId });
    } catch (err) {
      files.add(file);
      const message = (err as Error).message;
      if (err instanceof SystemFileError)
        problems.push({ where: file, key: /one mapping/.test(message) ? "(top)" : "(file)", message });
      else problems.push({ where: file, key: "(file)", message: `cannot read it: ${message}` });
    }
  }
  return out;
}

/** A left-out file as one line per problem (`<file>: <key>: <message>`). */
export function leftOutLines(leftOut: LeftOutFile[]): string[] {
  return leftOut.flatMap((l) => l.problems.map((p) => `${p.where}: ${p.key}: ${p.message}`));
}
