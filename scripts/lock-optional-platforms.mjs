#!/usr/bin/env node
// Some registries serve only the platform packages of the machine that resolved the lock file
// (opencode-*, @teddyzhu/clipboard-*): npm then leaves the others out of package-lock.json and
// `npm ci` refuses the lock as "out of sync". This adds a lock entry, with the platform (os, cpu,
// libc) read from the package name, for every optional dependency the lock lacks, so `npm ci`
// skips those packages on other platforms exactly as it does with a complete lock.
// Run after `npm install` changes the lock: node scripts/lock-optional-platforms.mjs
import { readFileSync, writeFileSync } from "node:fs";

const file = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(file, "utf8"));
const pkgs = lock.packages;

function platformOf(name) {
  const n = name.toLowerCase();
  const os = /darwin|macos/.test(n)
    ? "darwin"
    : /win32|windows/.test(n)
      ? "win32"
      : /linux/.test(n)
        ? "linux"
        : /freebsd/.test(n)
          ? "freebsd"
          : undefined;
  const cpu = /arm64|aarch64/.test(n)
    ? "arm64"
    : /x64|x86_64|amd64/.test(n)
      ? "x64"
      : /ia32/.test(n)
        ? "ia32"
        : undefined;
  const libc = /musl/.test(n) ? "musl" : /gnu/.test(n) ? "glibc" : undefined;
  return { os, cpu, libc };
}

let added = 0;
for (const [where, meta] of Object.entries(pkgs)) {
  for (const [dep, range] of Object.entries(meta.optionalDependencies ?? {})) {
    // Where npm would look for it: next to the dependent, then up the tree.
    const base = where ? `${where}/node_modules/` : "node_modules/";
    let found = false;
    for (let dir = base; ; ) {
      if (pkgs[`${dir}${dep}`]) {
        found = true;
        break;
      }
      const up = dir.lastIndexOf("/node_modules/", dir.length - "/node_modules/".length - 1);
      if (up < 0) break;
      dir = dir.slice(0, up + "/node_modules/".length);
    }
    if (found || pkgs[`node_modules/${dep}`]) continue;
    const { os, cpu, libc } = platformOf(dep);
    if (!os && !cpu) continue; // not a platform package: leave it to npm
    const version = String(range).replace(/^[\^~=]/, "");
    pkgs[`node_modules/${dep}`] = {
      version,
      ...(meta.dev ? { dev: true } : {}),
      optional: true,
      ...(cpu ? { cpu: [cpu] } : {}),
      ...(os ? { os: [os] } : {}),
      ...(libc ? { libc: [libc] } : {}),
    };
    added++;
  }
}
const sorted = Object.fromEntries(
  Object.entries(pkgs).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))),
);
lock.packages = sorted;
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} platform entries to package-lock.json`);
