import { createHash } from "node:crypto";
import path from "node:path";

/** The working directory of one conversation: `<dataDir>/work/<first 24 hex of sha256(key)>`. */
export function conversationWorkDir(dataDir: string, key: string): string {
  return path.join(dataDir, "work", createHash("sha256").update(key).digest("hex").slice(0, 24));
}
