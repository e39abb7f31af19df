/** Client calls for the model registry's GPUPlane side: promoting a checkpoint (POST /checkpoints/:id/register). */
import type { Static } from '@sinclair/typebox';
import type { RegisterCheckpointBody, RegisteredVersionSchema } from '../api/schemas/registry.ts';
import type { GpuplaneClient } from './client.ts';

export type RegisteredVersionJson = Static<typeof RegisteredVersionSchema>;

export function registerCheckpoint(c: GpuplaneClient, id: string, body: Static<typeof RegisterCheckpointBody>): Promise<RegisteredVersionJson> {
  return c.request('POST', `/checkpoints/${encodeURIComponent(id)}/register`, body);
}

/** One line for people: the model, its new version, the alias, and what justified it. */
export function renderRegistered(r: RegisteredVersionJson): string {
  const j = r.justification;
  const why = j ? `${j.metric} = ${j.value} (${j.fallback ? 'training-time value, no evaluation' : `evaluation ${r.evaluation_id ?? '?'}`}; ${j.goal === 'min' ? 'minimise' : 'maximise'}, from the ${j.level === 'default' ? 'global default' : j.level})` : 'no value of the primary metric';
  return `registered ${r.model} version ${r.version}${r.alias ? ` (alias ${r.alias})` : ''}: checkpoint ${r.checkpoint_id}, step ${r.step ?? '-'}, ${why}`;
}
