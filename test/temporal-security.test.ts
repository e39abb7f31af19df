import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { temporalSecurityFromEnv } from '../temporal/security.ts';

/** The Temporal connection options every process takes from its environment (mTLS, CA, API key). */
describe('Temporal TLS and API key options', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-tls-'));
  const file = (name: string, text: string) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  };
  const crt = file('client.pem', 'CERT');
  const key = file('client.key', 'KEY');
  const ca = file('ca.pem', 'CA');

  it('is plain (no TLS) when nothing is set', () => {
    expect(temporalSecurityFromEnv({})).toEqual({});
  });
  it('mTLS: client certificate, key, server CA and server name', () => {
    const s = temporalSecurityFromEnv({ TEMPORAL_TLS_CERT: crt, TEMPORAL_TLS_KEY: key, TEMPORAL_TLS_CA: ca, TEMPORAL_TLS_SERVER_NAME: 'temporal.internal' });
    expect(s).toEqual({
      tls: { clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') }, serverRootCACertificate: Buffer.from('CA'), serverNameOverride: 'temporal.internal' },
    });
  });
  it('an API key implies TLS with the system CAs', () => {
    expect(temporalSecurityFromEnv({ TEMPORAL_API_KEY: 'k' })).toEqual({ tls: true, apiKey: 'k' });
    expect(temporalSecurityFromEnv({ TEMPORAL_TLS: 'true' })).toEqual({ tls: true });
  });
  it('refuses half a client pair and names a missing file', () => {
    expect(() => temporalSecurityFromEnv({ TEMPORAL_TLS_CERT: crt })).toThrow(/go together/);
    expect(() => temporalSecurityFromEnv({ TEMPORAL_TLS_CA: path.join(dir, 'nope.pem') })).toThrow(/TEMPORAL_TLS_CA=.*nope\.pem/);
  });
});
