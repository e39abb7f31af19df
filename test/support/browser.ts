import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { consoleDist } from '../../api/routes/console.ts';

/** Debian's chromium (scripts/setup.sh installs it); playwright-core downloads no browser. */
export const CHROMIUM = process.env.GPUPLANE_CHROMIUM ?? '/usr/bin/chromium';

const ARGS = ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A headless chromium with a fresh profile; a missing binary is a failure that says what to do, never a skip. */
export async function launchBrowser(viewport = { width: 1400, height: 900 }): Promise<TestBrowser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`no chromium at ${CHROMIUM}: run the setup (bash scripts/setup.sh, which runs apt-get install chromium) or set GPUPLANE_CHROMIUM to a chromium binary`);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-chromium-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: ARGS, headless: true, viewport });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Builds the console into web/dist, every time (about 0.3 s): a build left from before an edit
 * of web/src would otherwise be what the test drives. Run it before starting the plane, which
 * decides at start-up whether there is a build to serve.
 */
export function ensureConsoleBuilt(): void {
  execFileSync(process.execPath, [path.resolve('node_modules/vite/bin/vite.js'), 'build', '--config', 'web/vite.config.ts', '--logLevel', 'warn'], {
    stdio: 'inherit',
    // vitest sets NODE_ENV=test, which would make Vite build the development bundle.
    env: { ...process.env, NODE_ENV: 'production' },
  });
  if (!fs.existsSync(path.join(consoleDist, 'index.html'))) throw new Error(`vite build wrote no ${path.join(consoleDist, 'index.html')}`);
}
