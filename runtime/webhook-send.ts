/**
 * Sending one webhook delivery (docs/webhooks.md): the URL rule, the no-SSRF address check, the
 * GitHub-style signature and the POST. The API (create, test) and the control worker's delivery
 * activity share it.
 *
 * The address check runs where the connection is made: the POST resolves the host through a
 * lookup that refuses a private address, and connects to the address it checked, so a name that
 * resolves to a public address at creation and to 127.0.0.1 later (DNS rebinding) is refused.
 */
import { createHmac } from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { PrivateAddressPolicy } from '../domain/webhooks.ts';


const loopback = new net.BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Addresses that are not on the public internet: a webhook to them could reach the plane's own network. */
const nonPublic = new net.BlockList();
for (const [a, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  nonPublic.addSubnet(a, bits, 'ipv4');
for (const [a, bits] of [
  // The IPv4 forms (::ffff:0:0/96, ::/96, 2002::/16) are classified by the address they carry,
  // before this list. Not ::/8 whole: BlockList checks an IPv4 address as ::ffff:a.b.c.d here.
  ['::', 128],
  ['::1', 128],
  ['::ffff:0:0:0', 96],
  ['100::', 64],
  ['fe80::', 10],
  ['fc00::', 7],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  nonPublic.addSubnet(a, bits, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (one net.isIP calls 6): `::` filled, a dotted IPv4 tail read, a zone (%eth0) dropped. */
function ipv6Groups(address: string): number[] {
  const s = address.replace(/%.*$/, '').replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_m, a: string, b: string, c: string, d: string) =>
    `${((Number(a) << 8) | Number(b)).toString(16)}:${((Number(c) << 8) | Number(d)).toString(16)}`,
  );
  const [head, tail] = s.split('::');
  const groupsOf = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const h = groupsOf(head);
  const t = groupsOf(tail);
  return tail === undefined ? h : [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
}

/**
 * The IPv4 address an IPv6 address carries, or null: IPv4-mapped (::ffff:0:0/96, what a
 * dual-stack socket connects to as the IPv4 address), IPv4-compatible (::/96, but for :: and
 * ::1 themselves) and 6to4 (2002::/16, the address in its second and third groups).
 */
export function embeddedIpv4(address: string): string | null {
  if (net.isIP(address) !== 6) return null;
  const g = ipv6Groups(address);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeros(5) && g[5] === 0xffff) return v4(g[6], g[7]);
  if (zeros(6) && !(g[6] === 0 && g[7] <= 1)) return v4(g[6], g[7]);
  if (g[0] === 0x2002) return v4(g[1], g[2]);
  return null;
}

/** Why an address may not be reached under `policy`, or null when it may. */
export function refusedAddress(address: string, policy: PrivateAddressPolicy): string | null {
  const family = net.isIP(address);
  if (family === 0) return `${address} is not an IP address`;
  // An IPv6 address that carries an IPv4 one (::ffff:127.0.0.1, ::127.0.0.1, 2002:7f00:1::1)
  // is classified as that IPv4 address: else a loopback or private one slips through as IPv6.
  const embedded = embeddedIpv4(address);
  const [a, type] = embedded ? [embedded, 'ipv4' as const] : [address, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
  if (!nonPublic.check(a, type)) return null;
  if (policy === 'all') return null;
  const isLoopback = loopback.check(a, type);
  if (policy === 'loopback' && isLoopback) return null;
  const what = isLoopback ? 'a loopback' : a.startsWith('169.254.') || a.toLowerCase().startsWith('fe80') ? 'a link-local' : 'a private or reserved';
  const named = embedded ? `${address} (${embedded})` : address;
  return `${named} is ${what} address: webhooks may not reach it unless GPUPLANE_WEBHOOK_ALLOW_PRIVATE is set (${policy === 'loopback' ? 'it allows loopback only now' : 'loopback or all'})`;
}

/** The refusal of a webhook URL: bad syntax, not http(s), or an address it may not reach. */
export class WebhookTargetError extends Error {}

/** Parses a webhook URL: http or https, no user:password (it would be sent to every hop in logs). */
export function parseWebhookUrl(raw: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new WebhookTargetError(`${JSON.stringify(raw)} is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new WebhookTargetError(`a webhook URL is http or https, not ${u.protocol.replace(/:$/, '')}`);
  if (u.username || u.password) throw new WebhookTargetError('a webhook URL carries no user:password; use --secret to sign instead');
  return u;
}

/** The host of a URL as the resolver takes it ([::1] → ::1). */
const hostOf = (u: URL) => u.hostname.replace(/^\[(.*)\]$/, '$1');

/** Checks every address a URL's host resolves to; throws WebhookTargetError for a refused one or a host that does not resolve. */
export async function checkWebhookTarget(raw: string, policy: PrivateAddressPolicy): Promise<URL> {
  const u = parseWebhookUrl(raw);
  const host = hostOf(u);
  let addresses: string[];
  if (net.isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true })).map((a) => a.address);
    } catch (err) {
      throw new WebhookTargetError(`cannot resolve ${host}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  for (const a of addresses) {
    const why = refusedAddress(a, policy);
    // A name says what it resolved to; an address literal is named by the reason itself.
    if (why) throw new WebhookTargetError(net.isIP(host) ? why : `${host} resolves to ${why}`);
  }
  return u;
}

/** `sha256=<hex HMAC-SHA256 of the body>`, GitHub's X-Hub-Signature-256 scheme. */
export function signatureOf(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export interface Delivery {
  url: string;
  event: string;
  deliveryId: string;
  body: string;
  secret: string;
  policy: PrivateAddressPolicy;
  timeoutMs: number;
}

/** The receiver's answer: its status, and the start of its body (for the webhook's last error). */
export interface DeliveryAnswer {
  status: number;
  body: string;
}

/** A lookup that answers only addresses the policy allows: the connection goes to the address checked. */
function guardedLookup(policy: PrivateAddressPolicy): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      for (const a of list) {
        const why = refusedAddress(a.address, policy);
        if (why) return callback(Object.assign(new WebhookTargetError(`${hostname}: ${why}`), { code: 'EWEBHOOKREFUSED' }), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}

/** POSTs one delivery; resolves with the receiver's answer (any status), rejects when none came (refused address, connection, timeout). */
export async function postWebhook(d: Delivery): Promise<DeliveryAnswer> {
  const u = await checkWebhookTarget(d.url, d.policy);
  const send = u.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(
      u,
      {
        method: 'POST',
        lookup: guardedLookup(d.policy),
        timeout: d.timeoutMs,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'GPUPlane-Webhook/1',
          'x-gpuplane-event': d.event,
          'x-gpuplane-delivery': d.deliveryId,
          'x-gpuplane-signature': signatureOf(d.secret, d.body),
          'content-length': Buffer.byteLength(d.body),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (body.length < 500) body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: body.slice(0, 500) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${d.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(d.body);
  });
}
