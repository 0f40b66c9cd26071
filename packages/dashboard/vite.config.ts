// The dashboard is served by the bridge under /dashboard/ (src/request/http/dashboard-route.ts). Everything
// is bundled: no CDN, no web fonts, nothing fetched from anywhere but the bridge itself.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  base: "/dashboard/",
  // React's automatic JSX runtime through esbuild: no Babel, no plugin.
  esbuild: { jsx: "automatic" },
  // The shapes the bridge sends (src/wire, also tsconfig.json's `paths`). Imported as types only, so
  // nothing of them reaches the bundle; the alias lets a value (EVENT_TYPES) be imported too.
  resolve: { alias: { "@wire": fileURLToPath(new URL("../../src/wire", import.meta.url)) } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    // Inline nothing as data: URLs beyond tiny files; the CSP allows 'self' (and data: images) only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
    rollupOptions: {
      // @xyflow/react marks itself "use client" (for React Server Components): nothing to do here.
      onwarn(warning, warn) {
        if (warning.code !== "MODULE_LEVEL_DIRECTIVE") warn(warning);
      },
    },
  },
  server: {
    // `npm run dev` in this folder: the bridge's API on its usual port behind Vite's dev server.
    proxy: { "/v1": "http://127.0.0.1:4097", "/health": "http://127.0.0.1:4097" },
  },
});
