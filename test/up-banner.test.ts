import { describe, expect, it } from 'vitest';
import { consoleLine, nodesLine, quarantinedLine, tryLines, webhooksLine } from '../cli/up-banner.ts';

/** `gpuctl up` prints the console link that signs in as admin only to a terminal (issue 28: it ended up in a log file). */
describe('gpuctl up: the console line', () => {
  const token = 'gpt_secretsecret';
  it('on a terminal: the link with the token, and where it is kept', () => {
    expect(consoleLine('http://127.0.0.1:8787', token, '/h/.gpuplane/admin-token', true)).toBe(
      'http://127.0.0.1:8787/?token=gpt_secretsecret   (signs you in as admin; the token is also in /h/.gpuplane/admin-token)',
    );
  });
  it('piped or redirected: no token, the file that keeps it', () => {
    const line = consoleLine('http://127.0.0.1:8787', token, '/h/.gpuplane/admin-token', false);
    expect(line).not.toContain(token);
    expect(line).toBe('http://127.0.0.1:8787/   (sign in with the admin token kept in /h/.gpuplane/admin-token; stdout is not a terminal, so it is not printed)');
  });
  it('a token from GPUPLANE_ADMIN_TOKEN is named by its variable; no token known, no link with one', () => {
    expect(consoleLine('http://a', token, null, false)).toContain('kept in GPUPLANE_ADMIN_TOKEN');
    expect(consoleLine('http://a', null, '/h/admin-token', true)).toBe('http://a/   (sign in with an admin token)');
  });
});

/** The try-line works from any folder (a newcomer's first hour: `node cli/gpuctl.mjs` worked only inside the clone). */
describe('gpuctl up: the command to try', () => {
  const script = '/home/ann/gpuplane/cli/gpuctl.mjs';
  const example = 'nvidia-smi -L';
  it('is `gpuctl` where the gpuctl on PATH is this checkout\'s (npm link), on a line of its own; then how to stop, on its own', () => {
    expect(tryLines(script, script, example)).toEqual(['Try:', '  gpuctl submit --gpus 1 -- nvidia-smi -L', 'Ctrl-C stops everything.']);
  });
  it("is node with the script's absolute path where no gpuctl is on PATH, or another checkout's is", () => {
    expect(tryLines(script, null, example)[1]).toBe('  node /home/ann/gpuplane/cli/gpuctl.mjs submit --gpus 1 -- nvidia-smi -L');
    expect(tryLines(script, '/opt/other/cli/gpuctl.mjs', example)[1]).toBe('  node /home/ann/gpuplane/cli/gpuctl.mjs submit --gpus 1 -- nvidia-smi -L');
  });
  it('quotes a path a shell would split', () => {
    expect(tryLines('/home/ann/my code/cli/gpuctl.mjs', null, example)[1]).toBe("  node '/home/ann/my code/cli/gpuctl.mjs' submit --gpus 1 -- nvidia-smi -L");
  });
});

/** The local nodes, one line however many (gpuctl up --fake-nodes N). */
describe('gpuctl up: the nodes line', () => {
  it('names one node and its cards, as it has them', () => {
    expect(nodesLine(['gpu-a'], 8, 'nvidia-smi')).toBe('gpu-a: 8 cards (nvidia-smi)');
    expect(nodesLine(['gpu-a'], 1, 'fake')).toBe('gpu-a: 1 card (fake)');
  });
  it('names up to three fake nodes, the first and last of more', () => {
    expect(nodesLine(['gpu-a-1', 'gpu-a-2', 'gpu-a-3'], 4, 'fake')).toBe('gpu-a-1, gpu-a-2, gpu-a-3: 4 cards each (fake)');
    expect(nodesLine(Array.from({ length: 16 }, (_, i) => `gpu-a-${i + 1}`), 2, 'fake')).toBe('gpu-a-1 … gpu-a-16 (16 nodes): 2 cards each (fake)');
  });
});

/** Where webhooks may POST (issue 39: gpuctl up allowed loopback by default, so a member's webhook reached Temporal's HTTP API). */
describe('gpuctl up: the webhooks line', () => {
  it('public addresses only by default, with the setting that allows a receiver on this machine', () => {
    expect(webhooksLine('none')).toBe('to public addresses only; for a receiver on this machine start with GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback');
  });
  it('names the setting in force when one is', () => {
    expect(webhooksLine('loopback')).toBe('to public addresses and this machine (GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback)');
    expect(webhooksLine('all')).toBe('to any address, private ones too (GPUPLANE_WEBHOOK_ALLOW_PRIVATE=all)');
  });
});

/** A local node quarantined in an earlier life: the banner says so, and how to end it. */
describe('gpuctl up: the quarantined line', () => {
  const why = 'quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h (job-c#1 LOST, job-b#1 LOST, job-a#1 LOST); gpuctl node resume once it is fixed';
  it('names the quarantined node and gpuctl node resume; none when no node is', () => {
    expect(quarantinedLine([{ id: 'vm', drainReason: why }])).toBe('vm (quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h); no other node takes jobs, so they all wait for it: gpuctl node resume vm once it is fixed');
    expect(quarantinedLine([{ id: 'fk-1', drainReason: null }, { id: 'fk-2', drainReason: why }])).toBe('fk-2 (quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h): gpuctl node resume fk-2 once it is fixed');
    expect(quarantinedLine([{ id: 'vm', drainReason: 'disk swap' }])).toBeNull();
    expect(quarantinedLine([{ id: 'vm', drainReason: null }])).toBeNull();
  });
});
