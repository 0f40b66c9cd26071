/**
 * The seed's human-readable debug log, at a configurable path:
 *   [08:40:51] Intent detected: web_search
 *   [08:40:54] Prompt built: 1434 chars, tool_context: true, history_entries: 3
 *   [08:41:28] LLM response (1375 chars): ## Estonian News for Today...
 *   [08:41:28] HTTP: "POST /v1/chat/completions HTTP/1.1" 200 -
 */
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import path from "node:path";

export class DebugLog {
  private stream: WriteStream | undefined;

  constructor(file: string | null) {
    if (!file) return;
    mkdirSync(path.dirname(file), { recursive: true });
    this.stream = createWriteStream(file, { flags: "a", mode: 0o600 });
    this.stream.on("error", () => {
      this.stream = undefined; // a full disk must not take the bridge down
    });
  }

  get enabled(): boolean {
    return this.stream !== undefined;
  }

  line(text: string): void {
    if (!this.stream) return;
    const t = new Date().toTimeString().slice(0, 8);
    this.stream.write(`[${t}] ${text.replace(/\s*\n\s*/g, " ")}\n`);
  }

  close(): Promise<void> {
    const s = this.stream;
    this.stream = undefined;
    return new Promise((resolve) => (s ? s.end(resolve) : resolve()));
  }
}
