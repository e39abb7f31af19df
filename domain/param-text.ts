/**
 * A sweep point's parameter value as gpuctl and the console print it: a number to 4 significant
 * digits (a log-uniform draw is 0.0031622776601683794; people read 0.003162), an integer whole,
 * a string as it is, anything else as JSON. The API and `--json` keep the full value.
 */
export const PARAM_DIGITS = 4;

export function paramText(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) || !Number.isFinite(v) ? String(v) : String(Number(v.toPrecision(PARAM_DIGITS)));
  return typeof v === 'string' ? v : JSON.stringify(v);
}
