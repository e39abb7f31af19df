/**
 * The requests a Temporal server's frontend has taken, by operation, from its Prometheus
 * endpoint (`temporal server start-dev --metrics-port`): the API calls clients and workers make,
 * which a cluster (or Temporal Cloud's actions) pays for. History and matching count their own
 * share of each again, so only the frontend's lines are summed.
 */
export async function frontendRequests(metricsUrl: string, namespace?: string): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('service_requests{') || !line.includes('service_name="frontend"')) continue;
    if (namespace !== undefined && !line.includes(`namespace="${namespace}"`)) continue;
    const op = /operation="([^"]+)"/.exec(line)?.[1] ?? '?';
    out.set(op, (out.get(op) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}
