import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a receiver took, with the time it arrived. */
export interface Received {
  event: string;
  delivery: string;
  signature: string;
  body: string;
  json: Record<string, unknown>;
  at: number;
}

/**
 * A webhook receiver on 127.0.0.1 (a plain node:http server), as a user would write one: it
 * verifies X-GPUPlane-Signature and keeps every request. `down()` closes it (connections refused),
 * `up()` listens again on the same port.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  /** Requests whose signature did not verify. */
  badSignatures = 0;
  port = 0;
  private server: http.Server | null = null;

  constructor(private readonly secret: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async up(): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const expected = Buffer.from(`sha256=${createHmac('sha256', this.secret).update(raw).digest('hex')}`);
        const got = Buffer.from(String(req.headers['x-gpuplane-signature'] ?? ''));
        if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
          this.badSignatures++;
          res.writeHead(401).end('bad signature');
          return;
        }
        const body = raw.toString('utf8');
        this.received.push({ event: String(req.headers['x-gpuplane-event']), delivery: String(req.headers['x-gpuplane-delivery']), signature: got.toString(), body, json: JSON.parse(body) as Record<string, unknown>, at: Date.now() });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
}
