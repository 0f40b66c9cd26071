/** Raw sockets for HTTP tests where an HTTP client would hide the behaviour. */
import net from "node:net";

export interface Conn {
  socket: net.Socket;
  /** Everything received so far (latin1). */
  received(): string;
  /** Resolves when the server ended or reset the connection (true), or after `ms` (false). */
  closed(ms: number): Promise<boolean>;
  /** Resolves when `re` matches what was received, or after `ms` (false). */
  waitFor(re: RegExp, ms: number): Promise<boolean>;
  /** Has the server ended or reset the connection? */
  isClosed(): boolean;
}

/** A connection to 127.0.0.1:`port`, once it is established. */
export async function connect(port: number): Promise<Conn> {
  const socket = net.connect(port, "127.0.0.1");
  let raw = "";
  let ended = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  socket.on("data", (d) => {
    raw += d.toString("latin1");
    wake();
  });
  const onEnd = () => {
    ended = true;
    wake();
  };
  socket.on("end", onEnd);
  socket.on("error", onEnd); // a reset after the answer is a close too
  socket.on("close", onEnd);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const until = (check: () => boolean, ms: number) =>
    new Promise<boolean>((resolve) => {
      if (check()) return resolve(true);
      const timer = setTimeout(() => done(false), ms);
      const w = () => check() && done(true);
      const done = (v: boolean) => {
        clearTimeout(timer);
        waiters.delete(w);
        resolve(v);
      };
      waiters.add(w);
    });
  return {
    socket,
    received: () => raw,
    closed: (ms) => until(() => ended, ms),
    waitFor: (re, ms) => until(() => re.test(raw), ms),
    isClosed: () => ended,
  };
}
