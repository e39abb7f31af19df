import { diffConfigs } from '../domain/attempt-config.ts';
import type { GangMemberRow, GpuNode, GpuSlot, Job, JobAttempt, JobTransition, RunEvent } from '../db/schema.ts';
import type { RunWithNames } from '../db/queries/runs.ts';
import type { WitnessHeard } from '../db/queries/peers.ts';
import { pythonEnvJson } from './python-env.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A gang's members in rank order, as the API shows them. */
function membersJson(ms: GangMemberRow[]) {
  return ms.map((m, rank) => ({ rank, node_id: m.node_id, gpu_indices: m.gpu_indices, ...(m.pid ? { pid: m.pid, log_path: m.log_path ?? null, started_at: m.started_at ?? null } : {}) }));
}

/** `stalledAt`: when its running attempt was found stalled (domain/stall.ts), or null. */
export function jobJson(j: Job, stalledAt: Date | null = null) {
  return {
    id: j.id,
    type: j.type,
    state: j.state,
    attempt: j.attempt,
    project_id: j.projectId,
    experiment_id: j.experimentId,
    priority: j.priority,
    gpus: j.gpus,
    nodes: j.nodes,
    memory_mb: j.memoryMb ?? null,
    selector: j.selector,
    command: j.command,
    working_dir: j.workingDir,
    code: j.code ?? null,
    python_env: pythonEnvJson(j.pythonEnv),
    image: j.image ?? null,
    env: j.env,
    secret_env: j.secretNames ?? [],
    params: j.params,
    on_lost: j.onLost,
    max_lost_requeues: j.maxLostRequeues,
    lost_count: j.lostCount,
    preemptible: j.preemptible,
    preempt_grace_s: j.preemptGraceS,
    stall_after_s: j.stallAfterS,
    on_stall: j.onStall,
    stalled_at: j.state === 'RUNNING' ? iso(stalledAt) : null,
    watch_dir: j.watchDir,
    resume_from: j.resumeFrom,
    eval_policy: j.evalPolicy,
    checkpoint_id: j.checkpointId,
    parent_job_id: j.parentJobId,
    node_id: j.nodeId,
    gpu_indices: j.gpuIndices,
    members: j.members ? membersJson(j.members) : null,
    exit_code: j.exitCode,
    signal: j.signal,
    reason: j.reason,
    created_at: j.createdAt.toISOString(),
    queued_at: iso(j.queuedAt),
    started_at: iso(j.startedAt),
    ended_at: iso(j.endedAt),
  };
}

export function attemptJson(a: JobAttempt, prev?: JobAttempt) {
  return {
    attempt: a.attempt,
    changes: prev ? diffConfigs(prev.config, a.config) : [],
    state: a.state,
    config: a.config as unknown as Record<string, unknown>,
    node_id: a.nodeId,
    gpu_indices: a.gpuIndices,
    pid: a.pid,
    log_path: a.logPath,
    members: a.members ? membersJson(a.members) : null,
    master_port: a.masterPort,
    exit_code: a.exitCode,
    signal: a.signal,
    reason: a.reason,
    stalled_at: iso(a.stalledAt),
    started_at: iso(a.startedAt),
    ended_at: iso(a.endedAt),
  };
}

export function transitionJson(t: JobTransition) {
  return { attempt: t.attempt, from: t.fromState, to: t.toState, detail: t.detail, at: t.at.toISOString() };
}

/** A slot's `busy` is whether a job holds it, told apart from its owner, which the caller may not be shown. */
export function nodeJson(n: GpuNode & { slots: (GpuSlot & { busy?: boolean })[]; witnesses?: WitnessHeard[] }) {
  return {
    id: n.id,
    hostname: n.hostname,
    address: n.address,
    labels: n.labels,
    status: n.status,
    last_seen_at: n.lastSeenAt.toISOString(),
    drained: n.drainedAt ? { at: n.drainedAt.toISOString(), reason: n.drainReason, by: n.drainedBy ?? '' } : null,
    gpus: n.slots.map((s) => ({
      index: s.index,
      uuid: s.uuid,
      name: s.name,
      memory_mb: s.memoryMb,
      present: s.present === 1,
      busy: s.busy ?? s.ownerJobId !== null,
      owner_job_id: s.ownerJobId,
      owner_attempt: s.ownerAttempt,
    })),
    peer: n.reportedAt === null && n.peerVerdict === null ? null : {
      verdict: n.peerVerdict,
      reason: n.peerVerdictReason,
      since: n.peerVerdictAt?.toISOString() ?? null,
      reported_at: n.reportedAt?.toISOString() ?? null,
      addr: n.peerAddr,
      witnesses: (n.witnesses ?? []).filter((w) => Date.now() - w.receivedAt.getTime() < 60_000).sort((a, b) => a.witness.localeCompare(b.witness)).map((w) => ({ node: w.witness, last_heard_at: w.lastHeardAt.toISOString(), reported_at: w.receivedAt.toISOString() })),
      ignored_packets: n.peerIgnored,
      agent_alive: n.agentAlive,
      agent_gone_since: n.agentAlive === false ? (n.agentAliveAt?.toISOString() ?? null) : null,
    },
  };
}

export function runJson(r: RunWithNames) {
  return {
    id: r.id,
    project: r.projectName,
    experiment: r.experimentName,
    project_id: r.projectId,
    experiment_id: r.experimentId,
    job_id: r.jobId,
    attempt: r.attempt,
    source: r.source,
    name: r.name,
    status: r.status,
    params: r.params,
    tags: r.tags,
    system_tags: r.systemTags,
    external_key: r.externalKey,
    created_at: r.createdAt.toISOString(),
    started_at: r.startedAt.toISOString(),
    ended_at: iso(r.endedAt),
    heartbeat_at: r.heartbeatAt.toISOString(),
    evaluates: r.evaluates ? { checkpoint_id: r.evaluates.checkpointId, run_id: r.evaluates.runId, step: r.evaluates.step } : null,
    forked_from: r.forkedFrom ? { checkpoint_id: r.forkedFrom.checkpointId, run_id: r.forkedFrom.runId, step: r.forkedFrom.step } : null,
  };
}

export function eventJson(e: RunEvent) {
  return { id: e.id, run_id: e.runId, job_id: e.jobId, attempt: e.attempt, kind: e.kind, level: e.level, message: e.message, data: e.data, at: e.at.toISOString() };
}
