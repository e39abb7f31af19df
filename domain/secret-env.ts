/** A job's secret variables (`secret_env`): rules on their names, shared by the API and the CLI. */

/**
 * Names the agent sets itself: a secret may not shadow them. GPUPLANE_TOKEN may be a secret: a
 * job with no run of its own (CUSTOM) uses it to register runs with its user's token; a job
 * with a run gets its run token there instead.
 */
const RESERVED = /^(GPUPLANE_(?!TOKEN$).*|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER)$/;

export function secretEnvProblem(secrets: Record<string, string>, env: Record<string, string>): string | null {
  for (const name of Object.keys(secrets)) {
    if (RESERVED.test(name)) return `secret_env: ${name} is set by the agent itself`;
    if (name in env) return `secret_env: ${name} is also in env; a variable is either secret or not`;
  }
  return null;
}
