// A second test reporter beside TAP: prints nothing while the tests run, then, at the end, every
// failed test with its file and error, so the tail of a long CI log says what failed.
import { inspect } from "node:util";

export default async function* failures(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type !== "test:fail") continue;
    const { name, file, line, details } = event.data;
    const error = details?.error;
    // A suite fails when one of its tests does; the tests themselves are listed.
    if (error?.failureType === "subtestsFailed") continue;
    const cause = error?.cause ?? error;
    const text = cause instanceof Error ? (cause.stack ?? cause.message) : inspect(cause, { depth: 4 });
    failed.push(
      `✖ ${file ?? "?"}${line ? `:${line}` : ""}\n  ${name}\n  ${String(text).split("\n").slice(0, 12).join("\n  ")}`,
    );
  }
  yield failed.length === 0 ? "\n# failures: none\n" : `\n# failures (${failed.length}):\n${failed.join("\n\n")}\n`;
}
