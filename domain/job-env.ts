/**
 * A job's environment is not the agent's. It is a documented base taken from the agent's
 * environment, plus the names the operator passes through (`gpuctl agent --pass-env NAME`),
 * minus anything that looks like a secret of the agent or the control plane, plus the job's
 * own `env`, plus what GPUPlane sets for it.
 */
export const BASE_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR', 'TERM'] as const;

/**
 * GPUPlane's own credentials, as an agent may hold them: its node token, and a user's or admin's
 * token in the environment it was started from. A job gets its run token from the agent
 * (GPUPLANE_TOKEN, derived for its run only), never any of these.
 */
export const AGENT_CREDENTIALS = ['GPUPLANE_TOKEN', 'GPUPLANE_NODE_TOKEN', 'GPUPLANE_ADMIN_TOKEN'] as const;

/** DATABASE_URL, GPUPlane's credentials and anything named like a credential never reach a job from the agent. */
export function isSecretName(name: string): boolean {
  const n = name.toUpperCase();
  // AWS_*: the object store's credential chain (runtime/object-store.ts), the API's and agents' only.
  return (AGENT_CREDENTIALS as readonly string[]).includes(n) || n === 'DATABASE_URL' || n.startsWith('AWS_') || n.includes('TOKEN') || n.includes('SECRET') || n.includes('PASSWORD') || n.endsWith('_KEY');
}

/** Why `name` may not be passed through to jobs (`--pass-env NAME`), or null when it may. */
export function passEnvRefusal(name: string): string | null {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return `"${name}" is not an environment variable name`;
  if ((AGENT_CREDENTIALS as readonly string[]).includes(name.toUpperCase())) return `${name} is a GPUPlane credential of the agent; a job gets its own run token (GPUPLANE_TOKEN) from the agent`;
  if (isSecretName(name)) return `${name} looks like a secret (DATABASE_URL, AWS_*, *TOKEN*, *SECRET*, *PASSWORD*, *_KEY); give it to the job as a secret variable instead (gpuctl submit --secret-env NAME)`;
  return null;
}

export function baseJobEnv(agentEnv: NodeJS.ProcessEnv, passThrough: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(agentEnv)) {
    if (v === undefined) continue;
    const wanted = (BASE_ENV as readonly string[]).includes(k) || k.startsWith('LC_') || passThrough.includes(k);
    if (wanted && !isSecretName(k)) out[k] = v;
  }
  return out;
}
