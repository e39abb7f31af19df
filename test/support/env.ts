/** NUL-separated NAME=value entries, as `env -0` and /proc/<pid>/environ write them. */
export function parseEnv(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\0')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}
