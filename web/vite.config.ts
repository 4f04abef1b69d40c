import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The dashboard build: web/ to dist/web, served by `burrow server` under /dashboard/ (the page
 * itself at /). Everything is bundled; nothing is fetched from another origin at run time.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    // The API's CSP allows no inline script; keep every asset a file of its own.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
