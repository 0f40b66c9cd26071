// A third test reporter: prints nothing while the tests run, then the slowest test files of the
// tier with the time their tests took (in a parallel tier the sum is more than the tier's time),
// so a CI log says where the suite's time goes.
export default async function* timings(source) {
  const byFile = new Map();
  for await (const event of source) {
    if ((event.type !== "test:pass" && event.type !== "test:fail") || event.data.nesting !== 0) continue;
    // In the one-process unit tier (scripts/unit-tier.mjs) each file is a suite named after it.
    const file = event.data.file?.endsWith("unit-tier.mjs") ? event.data.name : (event.data.file ?? "?");
    byFile.set(file, (byFile.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
  }
  const root = `${process.cwd()}/`;
  const rows = [...byFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, ms]) => s + ms, 0);
  const top = rows
    .slice(0, 12)
    .map(([file, ms]) => `#   ${(ms / 1000).toFixed(1).padStart(7)} s  ${file.replace(root, "")}`);
  yield `\n# slowest files (${rows.length} files, ${(total / 1000).toFixed(0)} s of tests in all):\n${top.join("\n")}\n`;
}
