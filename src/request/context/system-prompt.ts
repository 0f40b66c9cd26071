/**
 * Compressing OpenClaw's 30-50k character system prompt into a short brief: a configurable
 * preamble, then the identity, user profile and behaviour files OpenClaw loaded (IDENTITY.md,
 * USER.md, SOUL.md, AGENTS.md), shared fairly within `maxSystemChars`. No persona is built in:
 * everything personal comes from the request.
 *
 * OpenClaw sends the same system prompt on every turn of an agent, so what is read out of it (the
 * brief, the workspace line) is kept for the last few prompts seen and made again only when the
 * prompt changes (a string compare instead of splitting and searching 30-50k characters per turn).
 */
import { fairShares, truncateAtWord } from "./text.js";

/** OpenClaw's own sections that follow the project-context files. */
const TRAILING_HEADINGS =
  /^## (Silent Replies|Heartbeats|Message Priority|Output Boundaries|Context Recovery|Conversation History|Runtime|Workspace|Group Chat|Subagent Context|Reactions|Reasoning Format|Inbound Context)\b/;
const FILE_HEADING = /^## (\S[^\n]*\.md)\s*$/;

export interface ContextFile {
  path: string;
  name: string;
  content: string;
}

/** The workspace files OpenClaw put into its system prompt (`## <path>.md` sections). */
export function extractContextFiles(system: string): ContextFile[] {
  const lines = system.replace(/\r\n/g, "\n").split("\n");
  const files: ContextFile[] = [];
  let current: { path: string; lines: string[] } | undefined;
  let inFence = false;
  const flush = () => {
    if (current) {
      const name = current.path.split("/").pop() ?? current.path;
      files.push({ path: current.path, name: name.toUpperCase(), content: current.lines.join("\n").trim() });
    }
    current = undefined;
  };
  for (const line of lines) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    if (!inFence) {
      const file = FILE_HEADING.exec(line);
      if (file) {
        flush();
        current = { path: file[1]!, lines: [] };
        continue;
      }
      if (current && TRAILING_HEADINGS.test(line)) {
        flush();
        continue;
      }
    }
    current?.lines.push(line);
  }
  flush();
  return files;
}

const SECTIONS: Array<{ file: string; label: string }> = [
  { file: "IDENTITY.MD", label: "Identity" },
  { file: "USER.MD", label: "About the user" },
  { file: "SOUL.MD", label: "Personality and behaviour" },
  { file: "AGENTS.MD", label: "Operating rules" },
];

/** What was read out of one system prompt: its workspace line, and its briefs by size and preamble. */
interface Known {
  workspace?: { path: string | undefined };
  briefs: Array<{ maxChars: number; preamble: string; brief: string }>;
}

/** The last system prompts seen, least recently used first (a Map keeps insertion order). */
const known = new Map<string, Known>();
/** Prompts kept (an agent's prompt is 30-50k characters: at most ~1 MB held). */
const KNOWN_PROMPTS = 16;
/** Briefs kept per prompt (one per budget and preamble in use). */
const BRIEFS_PER_PROMPT = 4;

function knownOf(system: string): Known {
  let k = known.get(system);
  if (k) {
    if (known.size > 1) {
      // Most recently used last.
      known.delete(system);
      known.set(system, k);
    }
    return k;
  }
  k = { briefs: [] };
  known.set(system, k);
  if (known.size > KNOWN_PROMPTS) known.delete(known.keys().next().value!);
  return k;
}

/** Working directory line of OpenClaw's `## Workspace` section, if present. */
export function workspacePath(system: string): string | undefined {
  const k = knownOf(system);
  k.workspace ??= { path: /Your working directory is:?\s*`?([^\s`]+)`?/i.exec(system)?.[1] };
  return k.workspace.path;
}

/** The brief of `system` within `maxChars`, after `preamble` (made once per prompt, size and preamble). */
export function compressSystemPrompt(system: string, maxChars: number, preamble: string): string {
  const k = knownOf(system);
  const hit = k.briefs.find((b) => b.maxChars === maxChars && b.preamble === preamble);
  if (hit) return hit.brief;
  const brief = compress(system, maxChars, preamble);
  k.briefs.push({ maxChars, preamble, brief });
  if (k.briefs.length > BRIEFS_PER_PROMPT) k.briefs.shift();
  return brief;
}

function compress(system: string, maxChars: number, preamble: string): string {
  const head = preamble.trim();
  if (maxChars <= 0) return "";
  if (!system.trim()) return truncateAtWord(head, maxChars);
  const files = extractContextFiles(system);
  const parts: Array<{ label: string; content: string }> = [];
  for (const s of SECTIONS) {
    const f = files.find((x) => x.name === s.file && x.content);
    if (f) parts.push({ label: s.label, content: squeeze(f.content) });
  }
  if (!parts.length) {
    // Not an OpenClaw prompt: keep the client's own instructions, as many as fit.
    const own = squeeze(system);
    const body = head ? `${head}\n\n${own}` : own;
    return truncateAtWord(body, maxChars);
  }
  const ws = workspacePath(system);
  // The person's own files matter more than our preamble: on a small budget the preamble gets
  // at most a third of it.
  const shortHead = head.length > maxChars / 3 ? truncateAtWord(head, Math.floor(maxChars / 3)) : head;
  const fixed = [shortHead, ws && ws.length < maxChars / 4 ? `Workspace: ${ws}` : ""].filter(Boolean).join("\n");
  // Keep as many of the files as can each get a useful share, most important first.
  const room = maxChars - fixed.length - 2;
  let body = "";
  for (let k = parts.length; k >= 1; k--) {
    const chosen = parts.slice(0, k);
    const overhead = chosen.reduce((n, p) => n + p.label.length + 4, 0);
    const shares = fairShares(
      chosen.map((p) => p.content.length),
      room - overhead,
    );
    if (k > 1 && shares.some((sh, i) => sh < Math.min(chosen[i]!.content.length, 60))) continue;
    body = chosen
      .map((p, i) => (shares[i]! > 0 ? `## ${p.label}\n${truncateAtWord(p.content, shares[i]!)}` : ""))
      .filter(Boolean)
      .join("\n");
    break;
  }
  return truncateAtWord([fixed, body].filter(Boolean).join("\n\n"), maxChars);
}

/** Drop HTML comments, markdown front matter, and runs of blank lines. */
function squeeze(text: string): string {
  return text
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/^---\n[\s\S]*?\n---\n/, "")
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}
