/**
 * bench/idle's agent host: runs `--count` fake agents (n<from> … n<from+count-1>) in this one
 * process, each its own Temporal worker on its own task queue holding its node's lease, as
 * `gpuctl agent --fake-gpus 8` would. Reads the node tokens from `--tokens` (a JSON file
 * the bench wrote), prints `ready` once every agent has started, and shuts them down on SIGTERM.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger } from '../runtime/logger.ts';
import { connectClient } from '../temporal/setup.ts';
import { connectWorker } from '../temporal/worker-runtime.ts';
import { startAgent, type Agent } from '../workers/gpu-host/agent.ts';

const { values } = parseArgs({
  options: {
    from: { type: 'string' },
    count: { type: 'string' },
    temporal: { type: 'string' },
    namespace: { type: 'string' },
    api: { type: 'string' },
    tokens: { type: 'string' },
    scratch: { type: 'string' },
    'heartbeat-timeout-ms': { type: 'string' },
    'lost-after-ms': { type: 'string' },
  },
  strict: true,
});

async function main() {
  const from = Number(values.from);
  const count = Number(values.count);
  const tokens = JSON.parse(fs.readFileSync(values.tokens!, 'utf8')) as Record<string, string>;
  const t = await connectClient(values.temporal!, values.namespace!);
  const connection = await connectWorker(values.temporal!, createLogger('error'));
  const logger = createLogger('error');
  const agents: Agent[] = [];
  for (let i = from; i < from + count; i++) {
    const nodeId = `n${i}`;
    agents.push(
      await startAgent({
        // What this measures is the agent's load on Temporal: no peer channel (issue 46).
        peerPort: null,
        nodeToken: tokens[nodeId],
        nodeId,
        labels: {},
        fakeGpus: 8,
        client: t.client,
        connection,
        namespace: values.namespace!,
        apiUrl: values.api!,
        dataDir: path.join(values.scratch!, nodeId),
        heartbeatTimeoutMs: Number(values['heartbeat-timeout-ms']),
        lostAfterMs: Number(values['lost-after-ms']),
        killGraceMs: 1000,
        logger,
      }),
    );
  }
  process.stdout.write('ready\n');
  await new Promise<void>((r) => process.once('SIGTERM', () => r()));
  await Promise.all(agents.map((a) => a.shutdown()));
  await connection.close();
  await t.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
