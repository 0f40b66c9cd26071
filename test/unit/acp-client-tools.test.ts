/**
 * The client's tools over ACP (gemini --acp): the MCP entry of the sessions, gemini's names for the
 * tools, the permission policy that allows OUR tools' calls only, and the pending-call limit.
 * Formats observed with gemini 0.61.0 (test/integration/client-tools-gemini.test.ts runs the real CLI).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type * as acp from "@agentclientprotocol/sdk";
import {
  geminiClientToolsPermission,
  geminiMcpServer,
  geminiMcpToolName,
  geminiPendingTimeoutSeconds,
  geminiToolName,
} from "../../src/backends/gemini-cli/warm.js";
import { acpPermissionPolicy } from "../../src/backends/gemini-cli/acp-worker.js";

const tools = [
  { name: "session_status", parameters: { type: "object", properties: {} } },
  { name: "memory_search", parameters: { type: "object", properties: {} } },
];

/** A permission request as gemini 0.61 sends it (observed), for a call id and kind. */
function request(
  toolCallId: string,
  kind: string,
  title = "session_status (openclaw MCP Server)",
): acp.RequestPermissionRequest {
  return {
    sessionId: "s1",
    toolCall: { toolCallId, kind: kind as acp.ToolKind, status: "pending", title, content: [], locations: [] },
    options: [
      { optionId: "proceed_always_server", name: "Allow all server tools for this session", kind: "allow_always" },
      { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
      { optionId: "cancel", name: "Reject", kind: "reject_once" },
    ],
  };
}

describe("gemini --acp and the client's tools", () => {
  test("the sessions' MCP entry: type http, the server name, the token as a header", () => {
    assert.deepEqual(
      geminiMcpServer({ url: "http://127.0.0.1:1/mcp/client-tools", headers: { Authorization: "Bearer cbtX" } }),
      {
        type: "http",
        name: "openclaw",
        url: "http://127.0.0.1:1/mcp/client-tools",
        headers: [{ name: "Authorization", value: "Bearer cbtX" }],
      },
    );
  });

  test("gemini's names for MCP tools (generateValidName of <server>_<tool>)", () => {
    assert.equal(geminiMcpToolName("openclaw", "session_status"), "mcp_openclaw_session_status");
    assert.equal(geminiMcpToolName("openclaw", "a b/c"), "mcp_openclaw_a_b_c");
    const long = geminiMcpToolName("openclaw", "x".repeat(70));
    assert.equal(long.length, 63);
    assert.ok(long.startsWith("mcp_openclaw_xxxxxxxxxxxxxxxxx") && long.includes("..."));
  });

  test("tool names of tool_activity from gemini's call ids", () => {
    assert.equal(
      geminiToolName({
        toolCallId: "mcp_openclaw_session_status__mcp_openclaw_session_status_1795586037799_0",
        kind: "other",
      }),
      "mcp_openclaw_session_status",
    );
    assert.equal(geminiToolName({ toolCallId: "read_file-1795568625652-5db0a", kind: "read" }), "read_file");
    assert.equal(geminiToolName({ toolCallId: "weird", kind: "search" }), "search");
  });

  test("permission: a call of one of OUR tools is allowed; every other request keeps the approval mode's answer", () => {
    const p = geminiClientToolsPermission(acpPermissionPolicy("read-only"), tools);
    assert.equal(
      p(request("mcp_openclaw_session_status__mcp_openclaw_session_status_1795586037799_0", "other")),
      "allow",
    );
    assert.equal(p(request("mcp_openclaw_memory_search__abc", "other")), "allow");
    // Another MCP server's tool, a tool of ours not offered, a shell command made to look like ours.
    assert.equal(p(request("mcp_other_session_status__x", "other")), "reject");
    assert.equal(p(request("mcp_openclaw_message__x", "other")), "reject");
    assert.equal(
      p(request("run_shell_command__mcp_openclaw_session_status__1", "execute", "echo (openclaw MCP Server)")),
      "reject",
    );
    assert.equal(p(request("mcp_openclaw_session_statusX__1", "other")), "reject");
    // Only an `other`-kind tool (what gemini calls every MCP tool) can be ours.
    assert.equal(p(request("mcp_openclaw_session_status__1", "execute")), "reject");
    // Read-only tools stay allowed as before.
    assert.equal(p(request("read_file__1", "read")), "allow");
    // No tools: nothing extra allowed.
    assert.equal(
      geminiClientToolsPermission(
        acpPermissionPolicy("read-only"),
        [],
      )(request("mcp_openclaw_session_status__1", "other")),
      "reject",
    );
  });

  test("a pending call is given up before gemini's own 10-minute MCP call limit", () => {
    assert.equal(geminiPendingTimeoutSeconds(2), 2);
    assert.equal(geminiPendingTimeoutSeconds(600), 585);
    assert.equal(geminiPendingTimeoutSeconds(86_400), 585);
  });
});
