/** The backend types this bridge knows. One file per backend; add new types here. */
import type { BackendModule } from "./module.js";
import { opencodeBackend } from "./opencode.js";
import { openaiBackend } from "./openai.js";
import { claudeCodeBackend } from "./claude-code.js";
import { geminiCliBackend } from "./gemini-cli.js";
import { qwenCodeBackend } from "./qwen-code.js";
import { codexBackend } from "./codex.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const modules: BackendModule<any>[] = [opencodeBackend, openaiBackend, claudeCodeBackend, geminiCliBackend, qwenCodeBackend, codexBackend];

export function backendModule(type: string): BackendModule<unknown> | undefined {
  return modules.find((m) => m.type === type);
}

export function backendTypes(): string[] {
  return modules.map((m) => m.type);
}
