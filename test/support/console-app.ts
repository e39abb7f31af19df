import type { Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { newToken } from '../../runtime/tokens.ts';
import { ensureConsoleBuilt, launchBrowser, type TestBrowser } from './browser.ts';
import { startTestApp, type TestApp } from './test-app.ts';

/** What a console test drives: a real API on PostgreSQL serving the freshly built console, and a chromium with a page open. */
export interface ConsoleApp {
  /** The API's one admin token (made at once: a test may use it at the top of its file). */
  readonly admin: string;
  /** The API (its database, for rows written as the plane writes them). */
  readonly app: TestApp;
  /** Where the API listens: the console is at `${url}/`, the API under `${url}/api/v1`. */
  readonly url: string;
  readonly browser: TestBrowser;
  /** A page opened in the browser's profile before the tests. */
  readonly page: Page;
}

/**
 * Registers the beforeAll that builds the console (before the API starts: it decides at start-up
 * whether there is a build to serve), starts the API and the browser and opens a page, and the
 * afterAll that closes them. Call it at the top of a test file; its fields are there once the
 * file's beforeAll has run.
 */
export function consoleApp(name: string, viewport?: { width: number; height: number }): ConsoleApp {
  const admin = newToken();
  let started: { app: TestApp; browser: TestBrowser; page: Page } | null = null;
  let app: TestApp | undefined;
  let browser: TestBrowser | undefined;
  beforeAll(async () => {
    ensureConsoleBuilt();
    app = await startTestApp(name, { auth: { adminTokens: [admin] }, listen: true, temporal: false });
    browser = await launchBrowser(viewport);
    started = { app, browser, page: await browser.context.newPage() };
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });
  const get = () => {
    if (!started) throw new Error(`consoleApp ${name}: used before its beforeAll ran (or that failed)`);
    return started;
  };
  return {
    admin,
    get app() {
      return get().app;
    },
    get url() {
      return get().app.url;
    },
    get browser() {
      return get().browser;
    },
    get page() {
      return get().page;
    },
  };
}
