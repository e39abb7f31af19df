import type { Command } from 'commander';
import { ImportClient } from '../client-runs-import.ts';
import { clientOf, out } from '../client-of.ts';
import { readStore } from '../import/index.ts';
import { pointCount } from '../import/types.ts';
import { runRequest, uploadRun, type UploadResult } from '../import/upload.ts';
import { table } from '../table.ts';

const STORE_NAMES = { 'mlflow-file': 'mlflow (mlruns)', 'mlflow-sqlite': 'mlflow (sqlite)', tensorboard: 'tensorboard', jsonl: 'jsonl' } as const;

/** Progress on stderr: rewritten in place on a terminal, a line every few seconds otherwise. */
function progress(totalRuns: number, totalPoints: number) {
  const tty = process.stderr.isTTY;
  const started = Date.now();
  let last = 0;
  let shown = false;
  let runs = 0;
  let points = 0;
  const line = () => `importing: ${runs}/${totalRuns} runs, ${points}/${totalPoints} points sent`;
  const show = (force = false) => {
    const now = Date.now();
    // Quick imports print nothing; long ones every second (terminal) or five (log file).
    if (!force && (now - started < 2000 || now - last < (tty ? 200 : 5000))) return;
    last = now;
    shown = true;
    process.stderr.write(tty ? `\r${line()}` : `${line()}\n`);
  };
  return {
    points(n: number) {
      points += n;
      show();
    },
    run() {
      runs++;
      show();
    },
    done() {
      if (shown) {
        show(true);
        if (tty) process.stderr.write('\n');
      }
    },
  };
}

function render(results: UploadResult[]): string {
  return table(
    ['ID', 'NAME', 'STORE', 'POINTS', 'RESULT'],
    results.map((r) => [r.id, r.name ?? '', STORE_NAMES[r.store], r.points, r.created ? 'new' : r.stored > 0 ? `resumed (+${r.stored})` : 'existing']),
    { NAME: 40 },
  );
}

/** `gpuctl import-run PATH`. */
export function registerImportCommand(program: Command): void {
  program
    .command('import-run')
    .description('import runs from an MLflow store (mlruns/ or mlflow.db), TensorBoard event files or a GPUPlane JSONL file; safe to repeat')
    .argument('<path>', 'an mlruns/ folder, an MLflow run folder, mlflow.db, an event file or a folder of them, a .jsonl run')
    .option('--project <name>', "put the runs in this project (default: the MLflow experiment's name, the TensorBoard folder's, the JSONL run line's)")
    .option('--experiment <name>', 'put the runs in this experiment (default: as for --project)')
    .option('--json', 'print the imported runs as JSON (store, runs, skipped_deleted)')
    .action(async (p: string, o: { project?: string; experiment?: string; json?: boolean }, cmd: Command) => {
      const { store, runs, skippedDeleted } = await readStore(p);
      const warn = (s: string) => process.stderr.write(`gpuctl: warning: ${s}\n`);
      // Every run is checked before the first is sent: a bad file stops the import before it starts.
      for (const r of runs) runRequest(r, { ...o, warn: () => {} });
      if (skippedDeleted) warn(`${skippedDeleted} run(s) marked deleted in ${p} left out`);
      const base = clientOf(cmd);
      const client = new ImportClient(base.baseUrl, base.opts);
      const prog = progress(runs.length, runs.reduce((n, r) => n + pointCount(r), 0));
      const results: UploadResult[] = [];
      for (const r of runs) {
        results.push(await uploadRun(client, r, { project: o.project, experiment: o.experiment, warn, onPoints: (n) => prog.points(n) }));
        prog.run();
      }
      prog.done();
      if (o.json) {
        const runsJson = results.map(({ externalKey, ...r }) => ({ ...r, external_key: externalKey }));
        out(JSON.stringify({ store, runs: runsJson, skipped_deleted: skippedDeleted }, null, 2));
      }
      else if (results.length) out(render(results));
      else warn(`no runs to import in ${p}`);
    });
}
