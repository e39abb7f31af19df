// Where GPUPlane's processes load their code from: the build in .dist/ (scripts/build-dist.mjs)
// when every source it was built from is as it was then, else the TypeScript sources through tsx.
// GPUPLANE_NO_DIST=1 always takes the sources.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = fileURLToPath(new URL('..', import.meta.url));
export const distDir = path.join(repoRoot, '.dist');
/** The processes built: gpuctl (every command, the API, workers and agents among them) and what an agent spawns. */
export const DIST_ENTRIES = ['cli/main.ts', 'activities/gpu-host/checkpoint-packer.ts', 'activities/gpu-host/checkpoint-scanner.ts', 'workers/gpu-host/peer-keeper.ts'];

/**
 * The built file of `entry` (a source path from the repository's root), or null where the build
 * is missing or any source it was built from changed since (its size or time of change).
 */
export function freshBuild(entry, dir = distDir, root = repoRoot) {
  if (process.env.GPUPLANE_NO_DIST === '1') return null;
  const built = path.join(dir, entry.replace(/\.ts$/, '.mjs'));
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    if (!manifest.inputs[entry] || !fs.existsSync(built)) return null;
    for (const [file, [size, mtimeMs]] of Object.entries(manifest.inputs)) {
      const st = fs.statSync(path.join(root, file), { throwIfNoEntry: false });
      if (!st || st.size !== size || st.mtimeMs !== mtimeMs) return null;
    }
    return built;
  } catch {
    return null;
  }
}

/** Imports `entry`'s module: built where fresh, through tsx where not. */
export async function loadEntry(entry) {
  const built = freshBuild(entry);
  if (built) return import(pathToFileURL(built).href);
  const { register } = await import('tsx/esm/api');
  register();
  return import(pathToFileURL(path.join(repoRoot, entry)).href);
}
