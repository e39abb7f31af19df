import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import * as workflows from '../workflows/index.ts';

/**
 * Job workflows live for days, so a deploy meets runs that began on older code. Each recorded
 * history (scripts/record-histories.ts) must replay against the current bundle without a
 * DeterminismViolationError; test/histories/README.md says what to do when one does not.
 */
const { History } = proto.temporal.api.history.v1;
const dir = fileURLToPath(new URL('./histories/', import.meta.url));
const files = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

/** A file is `History.toJSON()`, one event a line (scripts/record-histories.ts writes it). */
function load(file: string): { workflowId: string; history: proto.temporal.api.history.v1.History; type: string } {
  const history = History.fromObject(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Record<string, unknown>);
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  if (!started) throw new Error(`${file}: the first event is not WorkflowExecutionStarted`);
  // The server records the workflow id in the started event; it is what the workflow saw.
  return { workflowId: started.workflowId || file, history, type: started.workflowType?.name ?? '' };
}

// A replay worker logs every state change at INFO; a broken history is reported below anyway.
Runtime.install({ logger: new DefaultLogger('WARN') });

describe('recorded workflow histories replay against the current workflow code', () => {
  const histories = files.map((f) => ({ file: f, ...load(f) }));

  it('has a history of every workflow kind the control worker registers', () => {
    const kinds = new Set(histories.map((h) => h.type));
    expect([...kinds].sort()).toEqual(Object.keys(workflows).sort());
  });

  it('replays every history without a determinism violation', async () => {
    const broken: string[] = [];
    let replayed = 0;
    // One replay worker for all of them; results come back one per history, in order.
    const results = Worker.runReplayHistories({ workflowBundle: { codePath: inject('workflowBundle') } }, histories);
    for await (const r of results) {
      const file = histories[replayed++].file;
      // Core's message wraps the one line that says what differed, e.g. "[TMPRL1100] … LocalActivity(1)".
      if (r.error) broken.push(`${file}: ${r.error.name}: ${/\[TMPRL\d+\][^"]*/.exec(r.error.message)?.[0] ?? r.error.message}`);
    }
    expect(broken, `histories that no longer replay (see test/histories/README.md):\n${broken.join('\n')}`).toEqual([]);
    expect(replayed).toBe(histories.length);
  });
});
