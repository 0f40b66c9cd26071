/**
 * A turn's images (`TurnInput.images`) for the CLIs that take an image only as a file: `codex exec
 * --image`, Gemini CLI's `@<path>` reference, `opencode run --file`. (Their warm modes take the
 * bytes in the request itself — Codex's `image` input item, ACP image blocks, OpenCode's data URL
 * file parts — and need no file; see `imageDataUrl`.)
 *
 * Where: a folder per turn, `<the turn's working directory>/.clawbridge-images/turn-XXXXXX/`
 * (mode 0700), one file per image (mode 0600, never overwriting: `wx`). Inside the working
 * directory because Gemini CLI reads `@` paths only inside its workspace; a folder of its own per
 * turn so that parallel turns in one directory never share a file. The paths handed to the CLI are
 * RELATIVE to the working directory (each CLI is started there): `codex exec --image` splits its
 * value at commas, and a data directory's path may hold one.
 *
 * Names: the pipeline's own `TurnImage.name` (`image-1.png`) when it is a plain file name with the
 * extension of its media type, else `image-<n>.<ext>`; nothing of the client's request is ever in a
 * path.
 *
 * How long: removed when the turn ends (`remove()`, in the backend's `finally`). Each CLI copies the
 * image's bytes into its own session when it reads the file for the turn — Codex into the thread's
 * rollout (an `input_image` data URL), Gemini CLI into its chat recording (`inlineData`), OpenCode
 * into its session (a data URL file part) — so a later turn of a resumed session never reads the
 * file again. A folder a crashed bridge left is removed by the next turn in that directory once it
 * is an hour old; the empty `.clawbridge-images` is removed with the last turn's folder.
 * (Seen with the real CLIs: Gemini CLI's first turn of a session lists the workspace in its
 * `<session_context>`, this folder included; OpenCode says in the message that it read the file
 * with its Read tool. Neither looks at the path again.)
 */
import { mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { TurnImage } from "../contract/backend.js";

/** The folder under a turn's working directory that holds the turns' image folders. */
export const TURN_IMAGES_DIR = ".clawbridge-images";

/** A turn's folder older than this is one a turn that never ended left behind. */
const STALE_MS = 60 * 60 * 1000;
/** At most this many leftover folders are looked at per turn (the sweep stays cheap). */
const SWEEP_MAX = 64;

const EXT: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
};
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,60}\.[a-z0-9]{1,5}$/;

/** The images of a turn written as files. */
export interface TurnImageFiles {
  /** The paths relative to the working directory they were written under, in the images' order. */
  relative: string[];
  /** The same as absolute paths. */
  absolute: string[];
  /** Delete the turn's folder (safe to call more than once). */
  remove(): void;
}

/** `data:<media type>;base64,<bytes>`: an image for a CLI that takes it in its request. */
export function imageDataUrl(image: TurnImage): string {
  return `data:${image.mediaType};base64,${image.base64}`;
}

/** The file name of the `index`th image: its own name when plain and of the right extension, else `image-<n>.<ext>`. */
export function imageFileName(image: TurnImage, index: number, taken: ReadonlySet<string> = new Set()): string {
  const ext = EXT[image.mediaType] ?? "img";
  const own = image.name;
  const ok = SAFE_NAME.test(own) && path.extname(own).toLowerCase() === `.${ext}` && !taken.has(own.toLowerCase());
  if (ok) return own;
  for (let n = index + 1; ; n++) {
    const name = `image-${n}.${ext}`;
    if (!taken.has(name)) return name;
  }
}

/**
 * Write the turn's images into a folder of its own under `cwd`. Undefined when there are none;
 * `{error}` (what went wrong, the folder already removed) when they could not be written.
 */
export function writeTurnImages(
  cwd: string,
  images: readonly TurnImage[] | undefined,
): TurnImageFiles | { error: string } | undefined {
  if (!images?.length) return undefined;
  const root = path.join(cwd, TURN_IMAGES_DIR);
  let dir: string | undefined;
  const remove = () => {
    if (!dir) return;
    rmSync(dir, { recursive: true, force: true });
    dir = undefined;
    try {
      rmdirSync(root);
    } catch {
      /* another turn's folder is still there */
    }
  };
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    sweep(root);
    dir = turnFolder(root);
    const turnDir = dir;
    const taken = new Set<string>();
    const relative: string[] = [];
    const absolute: string[] = [];
    images.forEach((image, i) => {
      const name = imageFileName(image, i, taken);
      taken.add(name.toLowerCase());
      const file = path.join(turnDir, name);
      writeFileSync(file, Buffer.from(image.base64, "base64"), { mode: 0o600, flag: "wx" });
      absolute.push(file);
      relative.push(path.relative(cwd, file).split(path.sep).join("/"));
    });
    return { relative, absolute, remove };
  } catch (err) {
    remove();
    return { error: `cannot write the turn's images under ${root}: ${(err as Error).message}` };
  }
}

/** A new folder under `root`, made again when another turn's `remove()` took `root` away in between. */
function turnFolder(root: string): string {
  for (let attempt = 0; ; attempt++) {
    try {
      return mkdtempSync(path.join(root, "turn-"));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 2) throw err;
      mkdirSync(root, { recursive: true, mode: 0o700 });
    }
  }
}

/** Remove turn folders a bridge that stopped mid-turn left (older than an hour). Best effort. */
function sweep(root: string): void {
  try {
    const now = Date.now();
    for (const name of readdirSync(root).slice(0, SWEEP_MAX)) {
      if (!name.startsWith("turn-")) continue;
      const p = path.join(root, name);
      if (now - statSync(p).mtimeMs > STALE_MS) rmSync(p, { recursive: true, force: true });
    }
  } catch {
    /* a folder another turn removed meanwhile */
  }
}
