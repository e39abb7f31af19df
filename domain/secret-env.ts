/** A job's secret variables (`secret_env`): rules on their names, shared by the API and the CLI. */

/**
 * Names the agent sets itself: a secret may not shadow them. GPUPLANE_TOKEN may be a secret: a
 * job with no run of its own (CUSTOM) uses it to register runs with its user's token; a job
 * with a run gets its run token there instead.
 */
export const RESERVED_SECRET_NAME = '^(?:GPUPLANE_(?:[^T].*|T(?:[^O].*)?|TO(?:[^K].*)?|TOK(?:[^E].*)?|TOKE(?:[^N].*)?|TOKEN.+)?|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER)$';
/*
 * GPUPLANE_* but GPUPLANE_TOKEN itself, spelt without lookahead (the API's schema states it as
 * `propertyNames: { not: { pattern } }`, and generators of values from patterns often lack
 * lookahead): the same rule as /^(GPUPLANE_(?!TOKEN$).*|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER)$/.
 */
const RESERVED = new RegExp(RESERVED_SECRET_NAME);

/** Whether the agent sets `name` itself, so that a secret may not. */
export const isReservedSecretName = (name: string) => RESERVED.test(name);

/** Why a reserved name is refused, in the words the API answers. */
export const reservedSecretMessage = (name: string) => `secret_env: ${name} is set by the agent itself`;

export function secretEnvProblem(secrets: Record<string, string>, env: Record<string, string>): string | null {
  for (const name of Object.keys(secrets)) {
    if (RESERVED.test(name)) return reservedSecretMessage(name);
    if (name in env) return `secret_env: ${name} is also in env; a variable is either secret or not`;
  }
  return null;
}
