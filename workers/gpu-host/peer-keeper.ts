/**
 * The node's peer keeper (issue 46, docs/outage-rule.md "What speaks for a node while its agent
 * restarts"): a small detached process that owns the node's peer channel (peer-channel.ts: the
 * signed heartbeats to its witnesses, what it hears of its subjects, the reports to the API), so
 * that a restarted agent is not a dead node. Like the attempts' shims it outlives the agent (its
 * own session, started by the agent); it lives on the node, so a node killed whole takes it too,
 * and its witnesses stop hearing it as before.
 *
 * The agent hands it what it needs through a private file in its run folder (peer-keeper.conf,
 * 0600: the node token is in it) and names itself there (pid and start time). The keeper reads
 * the file again every second: a restarted agent names itself and adopts the keeper instead of
 * starting a second one. It says in each report whether the agent is alive, and exits once there
 * is neither an agent nor a live attempt on the node: then there is nothing to speak for. With its
 * agent alive it never exits by itself, so the agent watches it (watchPeerKeeper) and starts a new
 * one when it is killed alone.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { processStartTime } from '../../activities/gpu-host/proc.ts';
import { openPrivateForAppend, writePrivateFile } from '../../runtime/private-files.ts';
import { startPeerChannel } from './peer-channel.ts';

const entry = fileURLToPath(new URL('./peer-keeper.mjs', import.meta.url));
/** Its heap: a socket, a timer and a few maps. */
const HEAP_MIB = 64;
/** How often the keeper looks for its agent and the node's attempts. */
const LOOK_EVERY_MS = 1000;

export interface PeerKeeperConf {
  apiUrl: string;
  nodeId: string;
  nodeToken?: string;
  host: string;
  port: number;
  /** The agent's run folder: its attempt records (`<job>.<attempt>.json`) say which attempts live. */
  runDir: string;
  agentPid: number;
  agentStartTime: string | null;
}

/** What the keeper writes once its socket is bound: who it is and where it listens. */
interface KeeperRecord {
  pid: number;
  startTime: string | null;
  addr: string;
}

/** What an agent hands its keeper: the file names the agent itself. */
export type PeerKeeperInput = Omit<PeerKeeperConf, 'agentPid' | 'agentStartTime'>;

/** A keeper that runs, as startOrAdoptPeerKeeper found or started it. */
export interface RunningPeerKeeper extends KeeperRecord {
  adopted: boolean;
}

const confFile = (runDir: string) => path.join(runDir, 'peer-keeper.conf');
const recordFile = (runDir: string) => path.join(runDir, 'peer-keeper.pid');
const logFile = (runDir: string) => path.join(runDir, 'peer-keeper.log');

function alive(pid: number, startTime: string | null): boolean {
  return startTime !== null && processStartTime(pid) === startTime;
}

/** liveAttempts says whether an attempt record in `runDir` names a process that still runs (same pid and start time). */
export function liveAttempts(runDir: string): boolean {
  for (const f of fs.readdirSync(runDir)) {
    if (!/^.+\.\d+\.json$/.test(f)) continue;
    try {
      const rec = JSON.parse(fs.readFileSync(path.join(runDir, f), 'utf8')) as { pid?: unknown; startTime?: unknown };
      if (typeof rec.pid === 'number' && typeof rec.startTime === 'string' && alive(rec.pid, rec.startTime)) return true;
    } catch {
      // Unreadable or half written: the next look reads it.
    }
  }
  return false;
}

function readKeeper(runDir: string): KeeperRecord | null {
  try {
    const r = JSON.parse(fs.readFileSync(recordFile(runDir), 'utf8')) as KeeperRecord;
    return alive(r.pid, r.startTime) ? r : null;
  } catch {
    return null;
  }
}

/**
 * startOrAdoptPeerKeeper names this agent in the keeper's file and returns the node's running
 * keeper (adopted: true), or starts one and returns it once its socket is bound.
 */
export async function startOrAdoptPeerKeeper(o: PeerKeeperInput, timeoutMs = 30_000): Promise<RunningPeerKeeper> {
  const conf: PeerKeeperConf = { ...o, agentPid: process.pid, agentStartTime: processStartTime(process.pid) };
  // Written whole, then renamed: the keeper never reads half of it.
  const tmp = `${confFile(o.runDir)}.tmp`;
  writePrivateFile(tmp, JSON.stringify(conf));
  fs.renameSync(tmp, confFile(o.runDir));
  const running = readKeeper(o.runDir);
  if (running) return { ...running, adopted: true };
  fs.rmSync(recordFile(o.runDir), { force: true });
  const log = openPrivateForAppend(logFile(o.runDir));
  let child;
  try {
    // Its own session (detached), so that the agent's end does not take it; a bare environment, as the packer's.
    child = spawn(process.execPath, [`--max-old-space-size=${HEAP_MIB}`, entry, confFile(o.runDir)], { cwd: '/', env: { PATH: '/usr/bin:/bin', LANG: 'C' }, detached: true, stdio: ['ignore', log, log] });
  } finally {
    fs.closeSync(log);
  }
  child.unref();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = readKeeper(o.runDir);
    if (r && r.pid === child.pid) return { ...r, adopted: false };
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      const tail = fs.existsSync(logFile(o.runDir)) ? fs.readFileSync(logFile(o.runDir), 'utf8').slice(-2000) : '';
      throw new Error(`the peer keeper did not start (${child.exitCode ?? child.signalCode ?? 'no socket in time'}): ${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface PeerKeeperWatch {
  /** Stops watching; resolves once a keeper it was starting has started (or failed to). */
  stop(): Promise<void>;
}

/** After a keeper that did not start, how long until the next try (a fixed port taken by something else stays taken). */
const RETRY_START_MS = 5000;

/**
 * watchPeerKeeper looks every second whether `keeper` (pid and start time, as startOrAdoptPeerKeeper
 * returned it) still runs, and when it is gone (SIGKILL, the OOM killer) starts a new one, saying
 * `peer keeper N gone: started M`. Without it the node would fall silent to its witnesses while it
 * lives, and be declared dead. A keeper never exits by itself while its agent lives, so one gone
 * was killed; once the agent shuts down it calls stop() first, and nothing is started after.
 * The new keeper may listen on another port (port 0): its reports carry its address, and the nodes
 * that heartbeat to it learn the address from their next answers of the API.
 */
export function watchPeerKeeper(o: PeerKeeperInput, keeper: RunningPeerKeeper, say: (line: string) => void, everyMs = LOOK_EVERY_MS): PeerKeeperWatch {
  let current: KeeperRecord = keeper;
  let stopped = false;
  let starting: Promise<void> | null = null;
  let nextTry = 0;
  let lastFailureSaid = 0;
  const look = () => {
    if (stopped || starting || Date.now() < nextTry || alive(current.pid, current.startTime)) return;
    const gone = current.pid;
    starting = startOrAdoptPeerKeeper(o)
      .then(
        (k) => {
          current = k;
          nextTry = 0;
          say(`peer keeper ${gone} gone: ${k.adopted ? 'adopted' : 'started'} ${k.pid}, heartbeats from ${k.addr}`);
        },
        (err: unknown) => {
          nextTry = Date.now() + RETRY_START_MS;
          if (Date.now() - lastFailureSaid < 60_000) return;
          lastFailureSaid = Date.now();
          say(`peer keeper ${gone} gone, and a new one did not start (trying every ${RETRY_START_MS / 1000} s; the node is silent to its witnesses meanwhile): ${(err as Error).message}`);
        },
      )
      .finally(() => {
        starting = null;
      });
  };
  const timer = setInterval(look, everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await starting;
    },
  };
}

/**
 * startAndWatchPeerKeeper is the agent's side: it starts or adopts the node's keeper, says which,
 * and watches it (watchPeerKeeper); the agent stops the watch first when it shuts down.
 */
export async function startAndWatchPeerKeeper(o: PeerKeeperInput, log: { info(line: string): void; warn(line: string): void }): Promise<PeerKeeperWatch> {
  const keeper = await startOrAdoptPeerKeeper(o);
  log.info(`peer keeper ${keeper.pid} ${keeper.adopted ? 'adopted' : 'started'}, heartbeats from ${keeper.addr}`);
  return watchPeerKeeper(o, keeper, (line) => log.warn(line));
}

function readConf(file: string): PeerKeeperConf {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as PeerKeeperConf;
}

/** runPeerKeeper is the keeper process: it keeps the node's peer channel until there is neither an agent nor a live attempt. */
export async function runPeerKeeper(file: string): Promise<void> {
  let conf = readConf(file);
  const say = (line: string) => process.stderr.write(`${new Date().toISOString()} peer keeper ${conf.nodeId}: ${line}\n`);
  const agentAlive = () => alive(conf.agentPid, conf.agentStartTime);
  const channel = await startPeerChannel({ apiUrl: conf.apiUrl, nodeId: conf.nodeId, nodeToken: conf.nodeToken, host: conf.host, port: conf.port, warn: say, agentAlive });
  writePrivateFile(recordFile(conf.runDir), JSON.stringify({ pid: process.pid, startTime: processStartTime(process.pid), addr: channel.addr } satisfies KeeperRecord));
  say(`listening at ${channel.addr} for agent ${conf.agentPid}`);
  let agentWas = true;
  const timer = setInterval(() => {
    try {
      const next = readConf(file);
      if (next.agentPid !== conf.agentPid) say(`adopted by agent ${next.agentPid}`);
      conf = next;
    } catch {
      // Being replaced: the last one read holds.
    }
    const a = agentAlive();
    if (a !== agentWas) say(a ? 'agent back' : 'agent gone: speaking for the node while its attempts run');
    agentWas = a;
    if (a || liveAttempts(conf.runDir)) return;
    say('no agent and no live attempt: nothing to speak for, exiting');
    clearInterval(timer);
    channel.stop();
    fs.rmSync(recordFile(conf.runDir), { force: true });
  }, LOOK_EVERY_MS);
}

/** GPUPLANE_PEER_PORT: the peer channel's UDP port; absent or 0: any free one; `off`: none. */
export function peerPortFromEnv(raw = process.env.GPUPLANE_PEER_PORT): number | null {
  if (raw === undefined || raw === '') return 0;
  if (raw === 'off') return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`GPUPLANE_PEER_PORT must be a port (0-65535) or off, got "${raw}"`);
  return n;
}
