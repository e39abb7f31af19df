import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface TestCerts {
  caFile: string;
  /** The server's certificate and key, good for server and client auth, for 127.0.0.1 and `serverName`. */
  serverCert: string;
  serverKey: string;
  /** A client certificate and key signed by the same CA. */
  clientCert: string;
  clientKey: string;
  serverName: string;
}

/** A throwaway CA with a server and a client certificate (openssl), in `dir`. */
export function makeTestCerts(dir: string, serverName = 'temporal.gpuplane.test'): TestCerts {
  fs.mkdirSync(dir, { recursive: true });
  const f = (n: string) => path.join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=gpuplane test CA', '-keyout', f('ca.key'), '-out', f('ca.pem'));
  const leaf = (name: string, cn: string, ext: string) => {
    fs.writeFileSync(f(`${name}.ext`), ext);
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f(`${name}.ext`), '-out', f(`${name}.pem`));
  };
  leaf('server', serverName, `subjectAltName=DNS:${serverName},IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n`);
  leaf('client', 'gpuplane client', 'extendedKeyUsage=clientAuth\n');
  return { caFile: f('ca.pem'), serverCert: f('server.pem'), serverKey: f('server.key'), clientCert: f('client.pem'), clientKey: f('client.key'), serverName };
}
