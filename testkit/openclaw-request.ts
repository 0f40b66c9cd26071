/**
 * OpenClaw-shaped requests for tests: a ~30-50 KB system prompt with Project Context files, ~20 tool
 * definitions, metadata-wrapped user messages, for the two generations users run today.
 */
export type Generation = "2026.5" | "2026.9";

export interface OpenClawTurn {
  role: "user" | "assistant";
  text: string;
}

const FILLER = "Follow the tool call style guide. Prefer small, verifiable steps. ".repeat(40);

export function openclawSystemPrompt(
  opts: { identity?: string; user?: string; soul?: string; workspace?: string } = {},
): string {
  const ws = opts.workspace ?? "/home/someone/.openclaw/workspace";
  return [
    "You are a personal assistant running inside OpenClaw.",
    "## Tooling",
    FILLER,
    "## Tool Call Style",
    FILLER,
    "## Skills (mandatory)",
    "<available_skills>\n" +
      Array.from(
        { length: 40 },
        (_, i) => `  <skill name="skill-${i}">Does thing number ${i} for the user in a careful way.</skill>`,
      ).join("\n") +
      "\n</available_skills>",
    "## Workspace",
    `Your working directory is: ${ws}`,
    "# Project Context",
    "",
    "The following project context files have been loaded:",
    "If SOUL.md is present, embody its persona and tone.",
    "",
    `## ${ws}/AGENTS.md`,
    "",
    "# AGENTS.md - Your Workspace\n\n## Every Session\n\nRead SOUL.md and USER.md first.\n" +
      "Keep memory files tidy. ".repeat(200),
    "",
    `## ${ws}/SOUL.md`,
    "",
    opts.soul ?? "# SOUL.md\n\nBe genuinely helpful, not performatively helpful. Have opinions. Be concise.",
    "",
    `## ${ws}/IDENTITY.md`,
    "",
    opts.identity ?? "# IDENTITY.md\n\n- **Name:** Pebble\n- **Creature:** a small helpful otter\n- **Emoji:** 🦦",
    "",
    `## ${ws}/USER.md`,
    "",
    opts.user ?? "# USER.md\n\n- **Name:** Alex Example\n- **Timezone:** Europe/Tallinn\n- Prefers short answers.",
    "",
    "## Silent Replies",
    "When you have nothing to say, respond with ONLY: NO_REPLY",
    FILLER,
    "## Heartbeats",
    FILLER,
    "## Runtime",
    "Runtime: agent=main | host=box | os=linux | model=clawbridge/fake | channel=telegram",
  ].join("\n");
}

export function openclawTools(count = 20) {
  return Array.from({ length: count }, (_, i) => ({
    type: "function",
    function: {
      name: i === 0 ? "read" : i === 1 ? "exec" : i === 2 ? "web_search" : `tool_${i}`,
      description: `Tool ${i}: ` + "does a useful thing with its arguments. ".repeat(30),
      parameters: {
        type: "object",
        properties: { path: { type: "string", description: "a path" }, n: { type: "number" } },
        required: ["path"],
      },
    },
  }));
}

export function wrapUserText(text: string, gen: Generation, stamp = "Sat 2026-11-21 09:13 UTC"): string {
  if (gen === "2026.9") return `[${stamp}] ${text}`;
  return [
    "Conversation info (untrusted metadata):",
    "```json",
    JSON.stringify({ message_id: "4542", sender_id: "5003590611", sender: "Alex", timestamp: stamp }, null, 2),
    "```",
    "",
    "Sender (untrusted metadata):",
    "```json",
    JSON.stringify({ label: "Alex (5003590611)", id: "5003590611", name: "Alex" }, null, 2),
    "```",
    "",
    text,
  ].join("\n");
}

/** A full OpenClaw request body for a conversation whose last entry is the new user message. */
export function openclawRequest(
  model: string,
  turns: OpenClawTurn[],
  gen: Generation,
  extra: { sessionKey?: string; sessionId?: string; internalAfter?: string } = {},
) {
  const messages: Array<Record<string, unknown>> = [{ role: "system", content: openclawSystemPrompt() }];
  turns.forEach((t, i) => {
    if (t.role === "assistant") {
      messages.push({ role: "assistant", content: t.text });
      return;
    }
    let text = wrapUserText(t.text, gen);
    if (gen === "2026.9" && i === 0) {
      text = `Runtime: agent=main | session=${extra.sessionKey ?? "agent:main:main"} | sessionId=${extra.sessionId ?? "6f1c2a7e-1111-4222-8333-944455556666"} | channel=telegram\n${text}`;
    }
    messages.push({ role: "user", content: text });
  });
  if (extra.internalAfter) {
    messages.push({
      role: "user",
      content: `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n${extra.internalAfter}\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>`,
    });
  }
  const body: Record<string, unknown> = { model, messages, stream: true, tools: openclawTools() };
  if (gen === "2026.5") {
    body.max_completion_tokens = 4096;
    body.store = false;
  } else {
    body.max_completion_tokens = 8192;
    body.stream_options = { include_usage: true };
    body.tool_choice = "auto";
  }
  return body;
}
