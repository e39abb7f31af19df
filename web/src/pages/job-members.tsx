/**
 * A gang's members on the job page: one row per rank of an attempt (the current one, or an
 * earlier one picked from the list), with its node, cards, process and start, and the attempt's
 * rendezvous port. Nothing for a job that was never a gang.
 */
import { useState } from 'preact/hooks';
import { Section, When } from '../components.tsx';
import { href } from '../router.ts';
import type { Attempt, JobDetail } from '../types.ts';

type Member = NonNullable<Attempt['members']>[number];

function MemberRows({ members }: { members: Member[] }) {
  return (
    <table class="members">
      <thead>
        <tr>
          <th>rank</th>
          <th>node</th>
          <th>cards</th>
          <th>pid</th>
          <th>started</th>
        </tr>
      </thead>
      <tbody>
        {members.map((m) => (
          <tr key={m.rank} data-rank={m.rank}>
            <td>{m.rank}</td>
            <td data-column="node">
              <a href={href(['cluster'], { node: m.node_id })}>{m.node_id}</a>
            </td>
            <td>[{m.gpu_indices.join(',')}]</td>
            <td data-column="pid">{m.pid ?? ''}</td>
            <td>{m.started_at ? <When at={m.started_at} /> : <span class="muted">not started</span>}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Members({ job }: { job: JobDetail }) {
  const [picked, setPicked] = useState<number | null>(null);
  const gangAttempts = job.attempts.filter((a) => a.members);
  if (job.nodes <= 1 && gangAttempts.length === 0) return null;
  // The attempts that were gangs, and the current one while it is a gang (placed or not).
  const choices = gangAttempts.map((a) => a.attempt);
  if (job.nodes > 1 && !choices.includes(job.attempt)) choices.push(job.attempt);
  const shown = picked ?? choices[choices.length - 1];
  const attempt = job.attempts.find((a) => a.attempt === shown);
  // The current attempt's row has no members until it begins; the job's placement is known at dispatch.
  const members = attempt?.members ?? (shown === job.attempt ? job.members : null);
  const rank0 = members?.[0]?.node_id;
  return (
    <Section
      title="Members"
      actions={
        choices.length > 1 && (
          <select value={String(shown)} onChange={(e) => setPicked(Number((e.target as HTMLSelectElement).value))} aria-label="members of attempt">
            {choices.map((n) => (
              <option key={n} value={String(n)}>
                attempt {n}
              </option>
            ))}
          </select>
        )
      }
    >
      {members ? (
        <>
          <p class="muted" data-testid="master-port">
            attempt {shown} · {members.length} members ·{' '}
            {attempt?.master_port ? `rendezvous on ${rank0}:${attempt.master_port}` : 'no rendezvous port yet'}
          </p>
          <MemberRows members={members} />
        </>
      ) : (
        <p class="muted">attempt {shown} is not placed{shown === job.attempt ? ' yet' : ''}</p>
      )}
    </Section>
  );
}
