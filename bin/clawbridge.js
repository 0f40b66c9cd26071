#!/usr/bin/env node
// Entry point for `npx clawbridge`: runs the TypeScript sources through tsx's loader.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
