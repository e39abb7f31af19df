import { defineConfig } from 'vite';

/** This folder, whatever the working directory of the build. */
const root = decodeURIComponent(new URL('.', import.meta.url).pathname);

/**
 * The web console: `npx vite build --config web/vite.config.ts` writes web/dist, which the API
 * serves at `/`. Everything is bundled (Preact, uPlot and its CSS): the page loads nothing from
 * outside the plane. `npx vite --config web/vite.config.ts` serves it with hot reload, proxying
 * /api to a plane on the default port.
 */
export default defineConfig({
  root,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022' },
  server: { proxy: { '/api': 'http://127.0.0.1:8787' } },
});
