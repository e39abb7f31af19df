import { describe, expect, it } from 'vitest';
import { consoleLine } from '../cli/up-banner.ts';

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
