import fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

// semver comes with npm's own tree (not a dependency of ours): what npm itself judges engines with.
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

interface LockEntry {
  version?: string;
  engines?: { node?: string } | string[];
  hasInstallScript?: boolean;
}
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { allowScripts?: Record<string, boolean> };
const lock = JSON.parse(fs.readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, LockEntry> };
const installed = Object.entries(lock.packages).filter(([at]) => at !== '');
const nameOf = (at: string) => at.slice(at.lastIndexOf('node_modules/') + 'node_modules/'.length);

/** A clean `npm ci` prints no warning: no EBADENGINE on the Node it runs on, no install script npm's allowScripts does not cover. */
describe('a clean install', () => {
  it('installs nothing whose engines refuse this Node (cookie 2 wants Node 22: light-my-request gets cookie 1)', () => {
    const refused = installed.flatMap(([at, e]) => {
      const range = Array.isArray(e.engines) ? undefined : e.engines?.node;
      return range && !semver.satisfies(process.version, range) ? [`${nameOf(at)}@${e.version} wants node ${range}`] : [];
    });
    expect(refused).toEqual([]);
  });

  it('declares every package with an install script in allowScripts', () => {
    const scripted = [...new Set(installed.filter(([, e]) => e.hasInstallScript).map(([at]) => nameOf(at)))];
    expect(scripted.length).toBeGreaterThan(0);
    expect(scripted.filter((name) => pkg.allowScripts?.[name] !== true)).toEqual([]);
  });
});
