/**
 * The dashboard's SSE parser (packages/dashboard/src/sse.ts): it reads `/v1/events` through fetch()
 * (EventSource cannot send the key in a header), so it must cut frames as the format says wherever
 * the network splits the bytes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser, type SseMessage } from "../../packages/dashboard/src/sse.js";

function parse(chunks: string[]): SseMessage[] {
  const out: SseMessage[] = [];
  const p = new SseParser((m) => out.push(m));
  for (const c of chunks) p.push(c);
  return out;
}

const STREAM =
  "retry: 3000\n\n" +
  ": heartbeat\n\n" +
  'id: 1\nevent: turn.started\ndata: {"type":"turn.started","turnId":"t1"}\n\n' +
  "id: 2\r\nevent: run.output\r\ndata: line one\r\ndata: line two\r\n\r\n" +
  'id: 3\revent: gap\rdata:{"missed":4}\r\r' +
  "data: no id or type\n\n" +
  "id\nevent: x\ndata\n\n";

const EXPECTED: SseMessage[] = [
  { id: "1", event: "turn.started", data: '{"type":"turn.started","turnId":"t1"}' },
  { id: "2", event: "run.output", data: "line one\nline two" },
  { id: "3", event: "gap", data: '{"missed":4}' },
  // The last event id stays until another one is set; the type does not.
  { id: "3", event: "message", data: "no id or type" },
  // `id` alone sets an empty id; `data` alone is an empty data line.
  { id: "", event: "x", data: "" },
];

test("frames, comments, CRLF / LF / CR line ends, multi-line data, id kept across events", () => {
  assert.deepEqual(parse([STREAM]), EXPECTED);
});

test("the same whatever the chunking: every split point, and one character at a time", () => {
  for (let i = 1; i < STREAM.length; i++)
    assert.deepEqual(parse([STREAM.slice(0, i), STREAM.slice(i)]), EXPECTED, `split at ${i}`);
  assert.deepEqual(parse([...STREAM]), EXPECTED);
});

test("an unfinished frame waits for its blank line", () => {
  const out: SseMessage[] = [];
  const p = new SseParser((m) => out.push(m));
  p.push('id: 9\ndata: {"a":1}\n');
  assert.equal(out.length, 0);
  p.push("\n");
  assert.deepEqual(out, [{ id: "9", event: "message", data: '{"a":1}' }]);
});
