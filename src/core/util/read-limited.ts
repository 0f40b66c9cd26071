/** Reading a whole body (an HTTP request, or a response read in one go) under a size limit. */
import type { Readable } from "node:stream";

/**
 * A stream's bytes, read with plain stream events (one promise per body, none per chunk), or
 * `undefined` once they pass `limit` bytes: reading stops there and the stream is paused (the
 * caller decides whether to drain or destroy it). Rejects on a stream error, or when the stream
 * closes before its end (the peer went away). `onChunk` runs after every chunk kept (idle timers).
 */
export function readLimited(stream: Readable, limit: number, onChunk?: () => void): Promise<Buffer | undefined> {
  return new Promise<Buffer | undefined>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("error", onError);
      stream.off("close", onClose);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        cleanup();
        stream.pause();
        resolve(undefined);
        return;
      }
      chunks.push(c);
      onChunk?.();
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => {
      cleanup();
      reject(new Error("the stream closed before its end"));
    };
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
    stream.on("close", onClose);
  });
}
