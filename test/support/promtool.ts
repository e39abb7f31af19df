import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Debian's promtool (scripts/setup.sh --with-postgres installs the prometheus package). */
const PROMTOOL = process.env.GPUPLANE_PROMTOOL ?? '/usr/bin/promtool';

/** promtool check metrics on a scrape: its complaints, '' when it has none. */
export function promtoolCheck(text: string): Promise<string> {
  if (!existsSync(PROMTOOL)) throw new Error(`no promtool at ${PROMTOOL}: run the setup (bash scripts/setup.sh --with-postgres, which runs apt-get install prometheus) or set GPUPLANE_PROMTOOL`);
  return new Promise((resolve) => {
    const child = execFile(PROMTOOL, ['check', 'metrics'], (err, stdout, stderr) => resolve(err ? `${stdout}${stderr}`.trim() || String(err) : `${stdout}${stderr}`.trim()));
    child.stdin!.end(text);
  });
}

