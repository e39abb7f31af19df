import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { whoLabel } from '../web/src/format.ts';

describe('the console header', () => {
  it("names the token once: gpuctl up's admin token reads admin, its home in the tooltip", () => {
    expect(whoLabel('admin (first start, /root/.gpuplane)', 'admin')).toEqual({ label: 'admin', detail: 'first start, /root/.gpuplane' });
    expect(whoLabel('web-member', 'member')).toEqual({ label: 'web-member · member', detail: null });
    expect(whoLabel('ci (nightly)', 'viewer')).toEqual({ label: 'ci · viewer', detail: 'nightly' });
    expect(whoLabel('(odd)', 'admin')).toEqual({ label: '(odd) · admin', detail: null });
  });

  it('has a favicon, an SVG the build copies beside index.html', () => {
    expect(fs.readFileSync(new URL('../web/index.html', import.meta.url), 'utf8')).toContain('<link rel="icon" type="image/svg+xml" href="/favicon.svg">');
    expect(fs.readFileSync(new URL('../web/public/favicon.svg', import.meta.url), 'utf8')).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  });
});
