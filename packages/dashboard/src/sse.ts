/** A text/event-stream parser with no dependencies (the dashboard reads `/v1/events` with fetch, not EventSource). */

export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/**
 * The text/event-stream format (WHATWG HTML, "server-sent events"): lines ended by CRLF, LF or CR;
 * `field: value`; a blank line ends a message; `:` starts a comment; `data` lines join with "\n".
 */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;

  constructor(private readonly onMessage: (m: SseMessage) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) return;
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (m[0] === "\r" && m.index === this.buffer.length - 1) return;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length) this.onMessage({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      this.data = [];
      this.event = "";
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }
}
