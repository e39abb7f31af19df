import fs from 'node:fs';

/**
 * TLS and API key for a real Temporal cluster or Temporal Cloud, from the environment, the same
 * in every process (API, control worker, agents, gpuctl up): TEMPORAL_TLS_CERT and
 * TEMPORAL_TLS_KEY (a client certificate and its key, PEM files: mTLS), TEMPORAL_TLS_CA (the
 * server's CA, PEM), TEMPORAL_TLS_SERVER_NAME (the name the server's certificate carries),
 * TEMPORAL_TLS=true (TLS with the system's CAs and nothing else), TEMPORAL_API_KEY (an API key,
 * as Temporal Cloud takes; implies TLS).
 */
export interface TemporalSecurity {
  tls?: { clientCertPair?: { crt: Buffer; key: Buffer }; serverRootCACertificate?: Buffer; serverNameOverride?: string } | true;
  apiKey?: string;
}

export function temporalSecurityFromEnv(env: NodeJS.ProcessEnv = process.env): TemporalSecurity {
  const read = (name: string) => {
    const file = env[name];
    if (!file) return undefined;
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new Error(`${name}=${file}: ${(err as Error).message}`);
    }
  };
  const crt = read('TEMPORAL_TLS_CERT');
  const key = read('TEMPORAL_TLS_KEY');
  if (Boolean(crt) !== Boolean(key)) throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together (a client certificate and its key)');
  const ca = read('TEMPORAL_TLS_CA');
  const serverName = env.TEMPORAL_TLS_SERVER_NAME || undefined;
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  const wantTls = Boolean(crt || ca || serverName || apiKey) || env.TEMPORAL_TLS === 'true';
  if (!wantTls) return {};
  const tls = crt || ca || serverName ? { ...(crt && key ? { clientCertPair: { crt, key } } : {}), ...(ca ? { serverRootCACertificate: ca } : {}), ...(serverName ? { serverNameOverride: serverName } : {}) } : true;
  return { tls, ...(apiKey ? { apiKey } : {}) };
}
