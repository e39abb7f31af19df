import fs from 'node:fs';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import { livenessPlan, PROBE_INTERVAL_MS } from '../../../domain/liveness.ts';
import { makePrivateDir } from '../../../runtime/private-files.ts';
import type { AttemptRef, GpuHostActivities } from '../../../workflows/gpu-host-activities.ts';
import { attemptStartedSignal } from '../../../workflows/job-messages.ts';
import { jobWorkflowId } from '../../../workflows/names.ts';
import type { AttemptSpec, ProcessExit } from '../../../workflows/types.ts';
import { attemptEnv, writeHostfile } from '../attempt-env.ts';
import { agentStopped, checkAttemptIds, fencedHere, stoppedHere, unknownHere, vanished } from '../attempt-failures.ts';
import type { Live } from '../attempt-record.ts';
import { attemptEnd } from '../checkpoint-watching.ts';
import { withLocalCopies } from '../checkpoint-fetch.ts';
import { codeCacheDirFromEnv, CodeCache } from '../code-fetch.ts';
import { envCacheDirFromEnv, EnvCache, venvVars } from '../python-env.ts';
import { jobUserFor, workingDirProblemFor, type JobUser } from '../job-users.ts';
import { confirmLaunch, reportStarted } from '../launch.ts';
import { ImagePulls } from '../image-pull.ts';
import { cardDevices, containerCommand, containerFileText, containerMounts, containerName, podmanEnv } from '../container-run.ts';
import { workingDirProblem } from '../proc.ts';
import { retryWhile } from '../retry-while.ts';
import { SpawnFailed } from '../shim.ts';
import { createSupervisor } from '../supervise.ts';
import { watchFolderProblem } from '../watch-folder.ts';
import type { GpuHostContext } from './context.ts';

/** What an attempt holds until its process ended (its Python environment's cache key, its image), and its process once started. */
interface EnvHold {
  key: string | null;
  image: string | null;
  entry: Live | null;
}

/** Running an attempt's process on this node and watching it to its end: runJob, and watchJob to take an attempt over. */
export function runWatchActivities({ deps, roots }: GpuHostContext): Pick<GpuHostActivities, 'runJob' | 'watchJob'> {
  const pt = deps.processes;
  const live = pt.live;
  const { supervise, endedExit } = createSupervisor(deps);
  // The node's code snapshots: from the plane's store, or through the API where the agent has none.
  const code = new CodeCache(codeCacheDirFromEnv(deps.nodeId), { store: deps.store ?? null, api: deps });
  // The node's Python environments, built with uv once per content, Python and platform (the agent's, bounded; a cache of their own for activities built without one).
  const pythonEnvs = deps.pythonEnvs ?? new EnvCache(envCacheDirFromEnv(deps.nodeId));
  // The images its image jobs run in, pulled as a step of their own where the node has none (image-pull.ts; the agent's, bounded).
  const images = deps.images ?? (deps.podman ? new ImagePulls(deps.podman) : null);

  const logPathOf = (jobId: string, attempt: number) => path.join(deps.logDir, jobId, `attempt-${attempt}.log`);
  const spawnError = (logPath: string, message: string): ProcessExit => ({ exitCode: null, signal: null, spawnError: message, logTail: '', logPath });

  /** Why the attempt may not work where its spec says (outside the allowed roots), or null. */
  function confinementProblem(spec: AttemptSpec): string | null {
    if (!roots) return null;
    // What the watcher reads, and retention later deletes from (checkpoint-watching.ts watchedDirOf).
    const watched = spec.watchDir ? path.resolve(spec.workingDir, spec.watchDir) : null;
    return roots.problem('working dir', spec.workingDir) ?? (watched ? roots.problem('checkpoint folder', watched) : null);
  }

  /**
   * Starts the attempt; the Python environment it took (EnvCache.prepare) and its image
   * (ImagePulls.prepare) are given back once its process ended, or at once when none started
   * (they may be evicted only then).
   */
  async function startAttempt(spec: AttemptSpec): Promise<ProcessExit> {
    const held: EnvHold = { key: null, image: null, entry: null };
    try {
      return await startHolding(spec, held);
    } finally {
      const whenEnded = (give: () => void) => (held.entry ? void held.entry.exited.finally(give) : give());
      const { key, image } = held;
      if (key !== null) whenEnded(() => pythonEnvs.release(key));
      if (image !== null) whenEnded(() => images?.release(image));
    }
  }

  /** Aborts when the workflow cancels the attempt (not when the server merely forgets it, in an outage): what its preparations listen to. */
  function cancelOf(ctx: Context): AbortController {
    const c = new AbortController();
    ctx.cancelled.catch((err: unknown) => {
      if (ctx.cancellationDetails?.cancelRequested) c.abort(err);
    });
    return c;
  }

  async function startHolding(spec: AttemptSpec, held: EnvHold): Promise<ProcessExit> {
    checkAttemptIds(spec);
    // An agent on its way out starts nothing: the attempt is LOST to the stop, and re-queued.
    if (pt.draining) throw agentStopped();
    const logPath = logPathOf(spec.jobId, spec.attempt);
    const existing = live.get(spec.jobId);
    // The same attempt again (a reset workflow, a duplicate task): watch it, never start a twin.
    if (existing && existing.attempt === spec.attempt && !existing.fenced) return supervise(existing, logPath);
    const fencedMark = fs.existsSync(pt.file(spec.jobId, spec.attempt, 'fenced'));
    const ended = pt.endedStatus(spec.jobId, spec.attempt);
    // A new process only for an attempt the control plane confirms: a forged task neither
    // starts anything nor fences the attempt that runs (checked before the fence below).
    const launched = fencedMark || ended ? null : await confirmLaunch(deps, spec);
    if (launched && 'refused' in launched) {
      makePrivateDir(path.dirname(logPath));
      return spawnError(logPath, launched.refused);
    }
    // Fencing: an older attempt of the same job must never run beside this one.
    if (existing) await pt.fence(existing);
    // An attempt fenced here is never started again (a Reset replaying its runJob): it is LOST.
    if (fencedMark) throw pt.stoppedWithAgent(spec.jobId, spec.attempt) ? stoppedHere() : fencedHere();
    if (ended) return endedExit(spec.jobId, spec.attempt, logPath, ended);

    makePrivateDir(path.dirname(logPath));
    const cancel = cancelOf(Context.current());
    let user: JobUser | null = null;
    try {
      user = jobUserFor(deps.jobUsers ?? null, spec, deps.warn);
    } catch (err) {
      return spawnError(logPath, (err as Error).message);
    }
    // A job's code is unpacked into a working dir of its own (code-fetch.ts), which the agent makes: no root confines it.
    if (spec.code) {
      const noteCode = (message: string, level: 'info' | 'warning') => deps.note?.(spec, { kind: 'code.fetched', level, message }) ?? Promise.resolve();
      const codeProblem = await code.prepare(spec, user ? { uid: user.uid, gid: user.gid } : null, noteCode);
      if (codeProblem) return spawnError(logPath, codeProblem);
    }
    // Its Python environment (python-env.ts), after its code: a build that fails fails the attempt, with the build's last lines.
    let venv: string | null = null;
    if (spec.pythonEnv) {
      const noteEnv = (message: string, level: 'info' | 'warning', data?: Record<string, unknown>) => deps.note?.(spec, { kind: 'env.built', level, message, ...(data ? { data } : {}) }) ?? Promise.resolve();
      const ready = await pythonEnvs.prepare(spec.pythonEnv, noteEnv, cancel.signal);
      // Cancelled during the build: nothing starts, and the cancel ends the activity.
      if (cancel.signal.aborted) throw cancel.signal.reason;
      if ('problem' in ready) return spawnError(logPath, ready.problem);
      venv = ready.dir;
      held.key = ready.key;
    }
    // Its image (never with a Python environment), pulled where the node has none: said in its events, and a pull that fails fails the attempt.
    if (spec.image && images) {
      held.image = spec.image;
      const pullProblem = await images.prepare(spec.image, (message, level) => deps.note?.(spec, { kind: 'image.pulled', level, message }) ?? Promise.resolve(), cancel.signal);
      if (cancel.signal.aborted) throw cancel.signal.reason;
      if (pullProblem) return spawnError(logPath, pullProblem);
    }
    // Confinement first: a job user makes a missing working dir only inside the allowed roots.
    const dirProblem = (spec.code ? null : confinementProblem(spec)) ?? (user ? workingDirProblemFor(spec.workingDir, user) : workingDirProblem(spec.workingDir));
    if (dirProblem) return spawnError(logPath, dirProblem);
    // A gang's checkpoints are watched on rank 0's node (the folder is assumed shared, or rank 0's).
    const watching = !!spec.watchDir && (!spec.gang || spec.gang.rank === 0);
    // Nothing the job made (a link to another tenant's folder, a folder it does not own) is watched as its own.
    const watchProblem = watching ? watchFolderProblem(spec.workingDir, spec.watchDir!, user?.uid ?? process.getuid?.() ?? 0) : null;
    if (watchProblem) return spawnError(logPath, watchProblem);
    const secrets = launched && 'secrets' in launched ? launched.secrets : {};
    const plan = livenessPlan(spec.lostAfterMs, pt.killGraceMs);
    const hostfile = spec.gang ? writeHostfile({ ...spec, gang: spec.gang }) : undefined;
    // What it reads that the plane's store keeps: copies in this node's cache, fetched as the job's user and checked.
    const note = (message: string, level: 'info' | 'warning') => deps.note?.(spec, { kind: 'checkpoint.fetched', level, message }) ?? Promise.resolve();
    const local = deps.resumeCache ? await withLocalCopies(deps.resumeCache, spec, user ? { uid: user.uid, gid: user.gid } : null, note) : { spec, env: {} };
    // Cancelled while its code, environment or checkpoint was made ready: nothing starts.
    if (cancel.signal.aborted) throw cancel.signal.reason;
    const env = { ...attemptEnv(deps, local.spec, secrets, hostfile), ...local.env };
    if (user) {
      // The agent's home is not the job's: its own working dir is, unless the job says otherwise.
      env.HOME = spec.env.HOME ?? spec.workingDir;
      env.USER = env.LOGNAME = user.name;
    }
    if (venv) {
      Object.assign(env, venvVars(venv, env.PATH));
      // A PYTHONHOME would take its Python out of the environment.
      delete env.PYTHONHOME;
    }
    // Taken before the process starts (by the scanner, as the job's user): whatever is there already is not this attempt's checkpoint.
    const before = watching ? ((await deps.checkpoints?.begin(spec)) ?? {}) : {};
    // An image job: `podman run` in its place, as root; the container's process is the job's user (container-run.ts).
    let container: { command: string[]; file: string; env: NodeJS.ProcessEnv } | null = null;
    if (spec.image) {
      const podman = deps.podman ?? null;
      if (!podman) {
        deps.checkpoints?.abandon(spec);
        return spawnError(logPath, `the job runs in image ${spec.image}, and node ${deps.nodeId} has no container runtime (podman; GPUPLANE_PODMAN names it)`);
      }
      const name = containerName(spec.jobId, spec.attempt);
      const mounts = containerMounts(spec.workingDir, watching ? path.resolve(spec.workingDir, spec.watchDir!) : null, env, hostfile ? [hostfile] : []);
      container = { command: containerCommand({ podman, name, image: spec.image, command: spec.command, workingDir: spec.workingDir, env, mounts, devices: cardDevices(spec.gpuIndices), user, secretNames: Object.keys(secrets), memoryMb: spec.memoryMb, maxPids: pt.cgroups?.pidsBase ? pt.cgroups.maxPids : null, cgroupParent: pt.cgroups?.containerParent(spec.jobId, spec.attempt) ?? null }), file: containerFileText(podman, name), env: podmanEnv(env) };
    }
    let entry: Live;
    try {
      entry = pt.spawn(spec, env, logPath, plan, container ? null : user, before, container);
      held.entry = entry;
    } catch (err) {
      deps.checkpoints?.abandon(spec);
      const why = err instanceof SpawnFailed ? await err.error : (err as Error);
      return spawnError(logPath, `could not start the attempt: ${why.message}`);
    }
    deps.logs?.ship(spec.jobId, spec.attempt, logPath, entry.exited, true, spec.gang?.rank ?? 0);
    if (watching) deps.checkpoints?.follow(spec, attemptEnd(entry.exited));
    // RUNNING is recorded from this report, sent before the exit can be: to the API with the
    // node token (one request), or, by an agent without one, as a signal to the job's workflow.
    // A blip must not kill a job that started: on failure it is retried in the background, and
    // without it the attempt still ends right, from DISPATCHING.
    const started = entry;
    const report = deps.nodeToken ? () => reportStarted(deps, spec, started.pid, logPath) : () => deps.client.workflow.getHandle(jobWorkflowId(spec.jobId)).signal(attemptStartedSignal, { attempt: spec.attempt, pid: started.pid, logPath, ...(spec.gang ? { nodeId: deps.nodeId } : {}) });
    await report().catch(() => {
      void retryWhile(() => live.get(spec.jobId) === started && !started.fenced, report);
    });
    return supervise(entry, logPath);
  }

  return {
    async runJob(spec: AttemptSpec): Promise<ProcessExit> {
      // Heartbeats from the first moment: fencing an older attempt or a slow start must not
      // look like a silent node.
      const ctx = Context.current();
      ctx.heartbeat();
      const early = setInterval(() => ctx.heartbeat(), PROBE_INTERVAL_MS);
      try {
        return await startAttempt(spec);
      } finally {
        clearInterval(early);
      }
    },

    /**
     * Takes over watching an attempt on this node: after the agent restarted, or after the
     * server stopped hearing runJob's heartbeats (a control-plane outage). An attempt that
     * ended meanwhile reports its status from the shim's file.
     */
    async watchJob(a: AttemptRef): Promise<ProcessExit> {
      checkAttemptIds(a);
      const logPath = logPathOf(a.jobId, a.attempt);
      const entry = live.get(a.jobId);
      if (entry && entry.attempt === a.attempt && !entry.fenced) return supervise(entry, logPath);
      const ended = pt.endedStatus(a.jobId, a.attempt);
      if (ended) return endedExit(a.jobId, a.attempt, logPath, ended);
      if (fs.existsSync(pt.file(a.jobId, a.attempt, 'fenced'))) throw pt.stoppedWithAgent(a.jobId, a.attempt) ? stoppedHere() : fencedHere();
      if (!fs.existsSync(pt.file(a.jobId, a.attempt, 'json'))) throw unknownHere();
      throw vanished();
    },
  };
}
