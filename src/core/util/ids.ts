/** Random ids of letters and digits: request ids, completion ids, tool-call ids. */
import { randomBytes } from "node:crypto";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * Random bytes are drawn from the CSPRNG in blocks: one `randomBytes()` call per id cost ~5 µs and
 * showed up in the bridge's CPU profile (several ids per request). Same source, same output.
 */
const RANDOM_BLOCK = 4096;
let randomPool = Buffer.alloc(0);
let randomPos = 0;

/** Random id of letters and digits only (OpenClaw rewrites other characters on replay). */
export function alnumId(prefix: string, length = 24): string {
  if (randomPos + length > randomPool.length) {
    randomPool = randomBytes(Math.max(RANDOM_BLOCK, length));
    randomPos = 0;
  }
  let out = prefix;
  for (let i = 0; i < length; i++) out += ALNUM[randomPool[randomPos++]! % ALNUM.length];
  return out;
}

/** A tool-call id: `call` + 24 random letters and digits. */
export function newCallId(): string {
  return alnumId("call", 24);
}
