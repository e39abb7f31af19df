import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderReadme } from '../scripts/gen-docs.ts';

describe('README', () => {
  it('has the CLI and API reference generated from the current code (npm run docs)', async () => {
    const current = fs.readFileSync('README.md', 'utf8');
    expect(await renderReadme(current)).toBe(current);
  });
});
