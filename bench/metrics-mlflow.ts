/** bench/metrics, the MLflow side: `mlflow server` on SQLite, loaded by bench/mlflow-load.py in the peers venv. */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../test/support/ports.ts';
import { until } from '../test/support/poll.ts';
import { args, KEYS, QUERY_POINTS, QUERIES, MLFLOW_POINTS, MLFLOW_SECONDS, MLFLOW_BATCH, HISTORY_BUDGET_S, PART, ML_POINTS, ML_SECONDS, ML_PEER_QUERIES, root, say, note, fmt, request } from './metrics-setup.ts';
import { mlflowProtocol } from './metrics-mlflow-api.ts';
import { cpuOf, cpuDelta, cpuLine } from './proc-tree-cpu.ts';

// ---- MLflow -------------------------------------------------------------------------------------

interface MlflowOut {
  mlflow_version?: string;
  ingest?: { points: number; seconds: number; points_per_s: number; halves_points_per_s: number[]; calls: number; keys: number; stopped_by: string; call_ms: { p50: number; p95: number }; client_cpu_s: number; history?: { series_points: number; queries: number; ms: { p50: number; p95: number } } };
  history?: { series_points: number; ingest_seconds: number; returned: number; queries: number; ms: { p50: number; p95: number; first: number } };
}

function runPython(python: string, argv: string[], pids: () => Record<string, number | undefined>): Promise<{ out: MlflowOut; cpu: Record<string, number>; seconds: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(python, [path.join(root, 'bench', 'mlflow-load.py'), ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    const cpu0 = cpuOf({ ...pids(), client: child.pid });
    let last = cpu0;
    let lastT = t0;
    const timer = setInterval(() => {
      const cpu = cpuOf({ ...pids(), client: child.pid });
      const t = performance.now();
      note(`  mlflow CPU: ${cpuLine(cpuDelta(last, cpu), (t - lastT) / 1000)}`);
      last = cpu;
      lastT = t;
    }, 10_000);
    let stdout = '';
    let cpuStart = cpu0;
    let cpuEnd = cpu0;
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      // It prints `start` as its timed part begins and the result line as it ends; sample CPU
      // time at both, before the process is reaped and its CPU time folds into ours.
      if (stdout === 'start\n') cpuStart = cpuOf({ ...pids(), client: child.pid });
      else if (stdout.endsWith('\n')) cpuEnd = cpuOf({ ...pids(), client: child.pid });
    });
    child.once('exit', (code) => {
      clearInterval(timer);
      if (code !== 0) return reject(new Error(`mlflow-load.py exited ${code}`));
      resolve({ out: JSON.parse(stdout.trim().split('\n').at(-1)!) as MlflowOut, cpu: cpuDelta(cpuStart, cpuEnd), seconds: (performance.now() - t0) / 1000 });
    });
  });
}

/** The native part: bench/mlflow-load.py with MlflowClient's log_batch, one call at a time, and get_metric_history. */
async function nativeLoad(python: string, uri: string, pids: () => Record<string, number | undefined>) {
  const ing = await runPython(python, ['--uri', uri, '--points', String(MLFLOW_POINTS), '--max-seconds', String(MLFLOW_SECONDS), '--batch', String(MLFLOW_BATCH), '--keys', String(KEYS)], pids);
  const i = ing.out.ingest!;
  const cpu: Record<string, number> = { server: ing.cpu.server, client: ing.cpu.client, others: ing.cpu.others };
  const ingest = { ...i, store: 'sqlite', cpu_s: cpu, cpu_percent_of_one_core: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, (100 * v) / i.seconds])) };
  say(`MLflow ingest (log_batch of ${MLFLOW_BATCH} = ${KEYS} keys × ${MLFLOW_BATCH / KEYS} steps, SQLite, job runner off, a sample of ${fmt(i.points)} points, stopped by ${i.stopped_by === 'points' ? '--mlflow-points' : '--mlflow-seconds'}): ${i.seconds.toFixed(1)} s = ${fmt(i.points_per_s)} points/s`);
  // For context: MLflow's rate when each call carries one key (1,000 steps), a short sample.
  const one = (await runPython(python, ['--uri', uri, '--points', String(MLFLOW_POINTS), '--max-seconds', String(Math.min(20, MLFLOW_SECONDS)), '--batch', String(MLFLOW_BATCH), '--keys', '1', '--then-history', '3'], pids)).out.ingest!;
  say(`MLflow ingest, 1 key × ${MLFLOW_BATCH} steps a call (context, ${fmt(one.points)} points): ${fmt(one.points_per_s)} points/s`);
  say(`MLflow get_metric_history of that ${fmt(one.history!.series_points)}-point series (all points, no downsampling): p50 ${fmt(one.history!.ms.p50)} ms over ${one.history!.queries} calls`);
  // A single key of 1,000 steps a call ingests at about the same rate; estimate from the sample.
  const estimate = QUERY_POINTS / i.points_per_s;
  let history: MlflowOut['history'] | { skipped: string } = { skipped: `ingesting ${fmt(QUERY_POINTS)} points would take ~${estimate.toFixed(0)} s at ${fmt(i.points_per_s)} points/s (budget ${HISTORY_BUDGET_S} s, --mlflow-history-budget)` };
  if (QUERIES > 0 && estimate <= HISTORY_BUDGET_S) {
    const h = await runPython(python, ['--uri', uri, '--history-points', String(QUERY_POINTS), '--batch', String(MLFLOW_BATCH), '--keys', '1', '--queries', String(Math.min(QUERIES, 3))], pids);
    history = h.out.history!;
    say(`MLflow get_metric_history of ${fmt(history.series_points)} points (${history.returned} returned): p50 ${fmt(history.ms.p50)} ms, p95 ${fmt(history.ms.p95)} ms over ${history.queries} calls`);
  } else {
    say(`MLflow get_metric_history: skipped, ${history.skipped}`);
  }
  return { ingest, single_key_ingest: one, history };
}

export async function mlflow(scratch: string) {
  const python = args.python ?? path.join(execFileSync('bash', [path.join(root, 'scripts', 'peers-venv.sh')], { stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim(), 'bin', 'python');
  const bin = path.join(path.dirname(python), 'mlflow');
  const version = execFileSync(python, ['-c', 'import mlflow; print(mlflow.__version__)']).toString().trim();
  const port = await freePort();
  const uri = `http://127.0.0.1:${port}`;
  const db = path.join(scratch, 'mlflow.db');
  const server = spawn(bin, ['server', '--backend-store-uri', `sqlite:///${db}`, '--default-artifact-root', path.join(scratch, 'mlartifacts'), '--host', '127.0.0.1', '--port', String(port), '--workers', '1'], {
    stdio: ['ignore', fs.openSync(path.join(scratch, 'mlflow-server.log'), 'a'), fs.openSync(path.join(scratch, 'mlflow-server.log'), 'a')],
    // MLflow 3's GenAI job runner (7 huey consumers polling, ~70% of a core here while idle) has
    // nothing to do with metrics; off, so MLflow's log_batch gets the cores it would alone.
    env: { ...process.env, MLFLOW_SERVER_ENABLE_JOB_EXECUTION: 'false' },
    detached: true,
  });
  try {
    await until('mlflow server answering', async () => {
      if (server.exitCode !== null) throw new Error(`mlflow server exited ${server.exitCode}: ${fs.readFileSync(path.join(scratch, 'mlflow-server.log'), 'utf8').slice(-2000)}`);
      return request(`${uri}/health`, 'GET').then((r) => r.status === 200, () => false);
    }, 180_000, 500);
    const pids = () => ({ server: server.pid });
    const native = PART !== 'mlflow-api' ? await nativeLoad(python, uri, pids) : undefined;
    // MLflow's protocol, the same requests GPUPlane's /mlflow gets; the search's runs are written
    // straight into the store (through HTTP, 10,000 runs would take this server minutes).
    const protocol = PART !== 'native'
      ? await mlflowProtocol({
          base: uri, pids, server: ['server'], points: ML_POINTS, seconds: ML_SECONDS, queries: ML_PEER_QUERIES,
          seedRuns: async (experimentId, n) => {
            execFileSync(python, [path.join(root, 'bench', 'mlflow-load.py'), '--seed-runs', String(n), '--sqlite', db, '--experiment-id', experimentId, '--artifact-root', path.join(scratch, 'mlartifacts')], { stdio: ['ignore', 'ignore', 'inherit'] });
          },
        }, `MLflow ${version}`)
      : undefined;
    return { version, server: 'mlflow server --workers 1, SQLite, MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false', native, protocol };
  } catch (err) {
    note(`mlflow server's log, the end:\n${fs.readFileSync(path.join(scratch, 'mlflow-server.log'), 'utf8').slice(-3000)}`);
    throw err;
  } finally {
    if (server.exitCode === null) {
      const gone = new Promise((r) => server.once('exit', r));
      process.kill(-server.pid!, 'SIGTERM');
      const t = setTimeout(() => process.kill(-server.pid!, 'SIGKILL'), 10_000);
      await gone;
      clearTimeout(t);
    }
  }
}
