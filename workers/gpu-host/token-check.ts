/**
 * The agent's node token, checked against the API at start: an agent whose token is missing,
 * unknown, revoked or another node's would run but never be given work (activities/control/nodes.ts
 * takes a node into the pool only with a live token of its own, and the API refuses a node
 * token's calls about another node's attempts), so it refuses to start, in one line.
 */

/** The command that makes a node's token, as an admin types it. */
export const makeNodeTokenCommand = (nodeId: string) => `gpuctl token create --name ${nodeId} --role node --node ${nodeId}`;

/** Why an agent without a node token does not start (`--no-token` starts it anyway). */
export const noTokenRefusal = (nodeId: string) =>
  `agent ${nodeId} has no node token, so the plane would never give it work: make one with \`${makeNodeTokenCommand(nodeId)}\` and start the agent with --token-file FILE (or GPUPLANE_NODE_TOKEN)`;

/** ok: the token is this node's; refused: why the agent must not run; unanswered: the API could not say (not reachable, 5xx). */
export type TokenCheck = { kind: 'ok' } | { kind: 'refused'; message: string } | { kind: 'unanswered'; message: string };

/** Asks the API (GET /whoami) whose the token is. */
export async function checkNodeToken(apiUrl: string, nodeId: string, token: string): Promise<TokenCheck> {
  let res: Response;
  let body: { kind?: string; role?: string; node_id?: string | null };
  try {
    res = await fetch(`${apiUrl.replace(/\/$/, '')}/api/v1/whoami`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5_000) });
    body = res.ok ? ((await res.json()) as typeof body) : {};
  } catch (err) {
    return { kind: 'unanswered', message: `the API at ${apiUrl} did not answer (${(err as Error).message})` };
  }
  if (res.status === 401) return { kind: 'refused', message: `agent ${nodeId}: the API at ${apiUrl} does not know its node token (unknown or revoked): make a new one with \`${makeNodeTokenCommand(nodeId)}\`` };
  if (!res.ok) return { kind: 'unanswered', message: `the API at ${apiUrl} answered HTTP ${res.status}` };
  if (body.kind !== 'node') return { kind: 'refused', message: `agent ${nodeId}: its node token is a${body.role === 'admin' ? 'n' : ''} ${body.role ?? body.kind} token, not a node's: make one with \`${makeNodeTokenCommand(nodeId)}\`` };
  if (body.node_id !== nodeId) return { kind: 'refused', message: `agent ${nodeId}: its node token is node ${body.node_id}'s, not ${nodeId}'s: give each node its own (\`${makeNodeTokenCommand(nodeId)}\`)` };
  return { kind: 'ok' };
}
