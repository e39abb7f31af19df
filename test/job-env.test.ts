import { describe, expect, it } from 'vitest';
import { BASE_ENV, baseJobEnv, isSecretName } from '../domain/job-env.ts';

const agentEnv = {
  PATH: '/usr/bin:/bin',
  HOME: '/home/agent',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  DATABASE_URL: 'postgres://u:p@db/gpuplane',
  TEMPORAL_ADDRESS: 'temporal:7233',
  GPUPLANE_HOME: '/var/lib/gpuplane',
  MY_SERVICE_TOKEN: 'sekrit',
  HF_HOME: '/x',
  HF_TOKEN: 'hf_secret',
  AWS_SECRET_ACCESS_KEY: 'aws',
  WANDB_API_KEY: 'agent-wandb',
  NCCL_DEBUG: 'INFO',
  UNSET: undefined,
};

describe('a job environment built from the agent environment', () => {
  it('keeps only the documented base (and LC_*) when nothing is passed through', () => {
    expect(baseJobEnv(agentEnv, [])).toEqual({ PATH: '/usr/bin:/bin', HOME: '/home/agent', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' });
  });

  it('adds the names passed through (gpuctl agent --pass-env NAME)', () => {
    const env = baseJobEnv(agentEnv, ['HF_HOME', 'NCCL_DEBUG', 'NOT_SET_ANYWHERE', 'UNSET']);
    expect(env.HF_HOME).toBe('/x');
    expect(env.NCCL_DEBUG).toBe('INFO');
    expect(env).not.toHaveProperty('NOT_SET_ANYWHERE');
    expect(env).not.toHaveProperty('UNSET');
    expect(env).not.toHaveProperty('TEMPORAL_ADDRESS');
  });

  it('never passes a secret of the agent, even when asked to', () => {
    const env = baseJobEnv(agentEnv, ['DATABASE_URL', 'MY_SERVICE_TOKEN', 'HF_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'WANDB_API_KEY', 'HF_HOME']);
    expect(Object.keys(env).sort()).toEqual(['HF_HOME', 'HOME', 'LANG', 'LC_ALL', 'PATH']);
  });

  it('names secrets by their look, case-insensitively', () => {
    for (const n of ['DATABASE_URL', 'database_url', 'GITHUB_TOKEN', 'client_secret', 'PGPASSWORD', 'WANDB_API_KEY', 'AWS_ACCESS_KEY_ID', 'AWS_PROFILE', 'AWS_SHARED_CREDENTIALS_FILE']) expect(isSecretName(n)).toBe(true);
    for (const n of ['HF_HOME', 'KEYBOARD', 'PATH', 'CUDA_VISIBLE_DEVICES']) expect(isSecretName(n)).toBe(false);
    // No base name is ever dropped as a secret.
    expect(BASE_ENV.filter(isSecretName)).toEqual([]);
  });
});
