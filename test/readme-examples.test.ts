import fs from 'node:fs';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { localNodeIds } from '../cli/up-nodes.ts';
import { checkWebhookTarget } from '../runtime/webhook-send.ts';

const readme = fs.readFileSync('README.md', 'utf8');

/** The README's examples outside the tour (which test/readme-tour.e2e runs) work as written on a machine with no network. */
describe("the README's examples", () => {
  it('adds a webhook whose URL needs no DNS, and that the SSRF rule takes', async () => {
    const url = /gpuctl webhook add (\S+)/.exec(readme)?.[1];
    expect(url).toBeDefined();
    await expect(checkWebhookTarget(url!, 'none')).resolves.toBeInstanceOf(URL);
  });

  it("drains a node gpuctl up would have made: the host's name", () => {
    const drained = /gpuctl node drain (\S+)/.exec(readme)?.[1];
    expect(drained).toBe('"$(hostname)"');
    // gpuctl up names its one agent after the host (cli/up.ts), its fake ones HOST-1 ….
    expect(localNodeIds(os.hostname(), 3)).toEqual([1, 2, 3].map((i) => `${os.hostname()}-${i}`));
  });

  it('says ASHA stops the trials that fall behind at its first rung, not at 10 and 30', () => {
    expect(readme).not.toContain('at steps 10 and 30');
    expect(readme).toContain('at its first rung, step 10');
  });
});
