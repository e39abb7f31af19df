/**
 * Who a request is (runtime/tokens.ts makes the tokens): an admin; a member (read and write in
 * its projects) or a viewer (read in its projects), `*` standing for every project; a node (an
 * agent: ships logs of the attempts dispatched to it); a run token (a job process: writes its
 * own run); a metrics token (Prometheus: scrapes GET /metrics, nothing else).
 */
export type Principal =
  | { kind: 'admin'; tokenId: string | null; name: string }
  | { kind: 'user'; tokenId: string; name: string; role: 'member' | 'viewer'; projects: string[] }
  | { kind: 'node'; tokenId: string; name: string; nodeId: string }
  | { kind: 'run'; runId: string; nodeId: string }
  | { kind: 'metrics'; tokenId: string; name: string };

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** A principal in words, for the message of a refusal. */
export function describe(p: Principal): string {
  if (p.kind === 'admin') return 'an admin token';
  if (p.kind === 'user') return `${p.role} token "${p.name}" (projects: ${p.projects.join(', ') || 'none'})`;
  if (p.kind === 'node') return `the node token of ${p.nodeId}`;
  if (p.kind === 'metrics') return `metrics token "${p.name}"`;
  return `the run token of ${p.runId}`;
}
