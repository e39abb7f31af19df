#!/usr/bin/env node
// Compiles GPUPlane's processes (gpuctl and the helpers an agent spawns) into .dist/: esbuild
// bundles of the TypeScript sources, packages left to node_modules, code split at each dynamic
// import so that a command loads only what it runs. runtime/dist.mjs runs a process from here when
// every source it was built from is unchanged, and through tsx otherwise: a build is only ever
// faster, never stale. (An API start through tsx costs about twice the CPU; gpuctl --help 0.9
// CPU-s against 0.4.)
//
// `node scripts/build-dist.mjs` builds when a source changed; --force always. setup.sh and the
// tests' set-up run it.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { DIST_ENTRIES, distDir, freshBuild, repoRoot } from '../runtime/dist.mjs';

const force = process.argv.includes('--force');
if (!force && DIST_ENTRIES.every((e) => freshBuild(e))) process.exit(0);

const started = Date.now();
/**
 * Each module keeps its own import.meta.url, the URL of its source file: the sources find their
 * neighbours by it (migrations, scripts, the workflow sources, the .mjs entry points). Any other
 * use of import.meta would silently mean the bundle's: the build refuses it.
 */
const ownUrl = {
  name: 'own-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await fs.promises.readFile(args.path, 'utf8');
      const contents = source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href));
      const left = /import\.meta(?!\.url)\b/.exec(contents.replace(/\/\/.*$/gm, ''));
      if (left) throw new Error(`${path.relative(repoRoot, args.path)}: import.meta other than import.meta.url cannot be bundled`);
      const ext = path.extname(args.path);
      return { contents, loader: ext === '.ts' || ext === '.mts' || ext === '.cts' ? 'ts' : 'js' };
    });
  },
};

// Built beside, then moved in: a process that is starting never reads half a build. Chunks are
// named by their content and the old ones are kept a day, so that a process started from the
// previous build still finds the chunks it imports later.
const staging = fs.mkdtempSync(path.join(repoRoot, '.dist-build-'));
try {
  const result = await esbuild.build({
    absWorkingDir: repoRoot,
    entryPoints: DIST_ENTRIES,
    outbase: repoRoot,
    outdir: staging,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    outExtension: { '.js': '.mjs' },
    entryNames: '[dir]/[name]',
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: 'linked',
    // Class and function names stay as written: errors and logs name them.
    keepNames: true,
    metafile: true,
    logLevel: 'warning',
    plugins: [ownUrl],
  });
  const inputs = {};
  for (const file of [...Object.keys(result.metafile.inputs), 'scripts/build-dist.mjs', 'runtime/dist.mjs', 'package-lock.json']) {
    const st = fs.statSync(path.join(repoRoot, file));
    inputs[file] = [st.size, st.mtimeMs];
  }
  fs.mkdirSync(path.join(distDir, 'chunks'), { recursive: true });
  for (const chunk of fs.readdirSync(path.join(staging, 'chunks'))) {
    const to = path.join(distDir, 'chunks', chunk);
    if (!fs.existsSync(to)) fs.renameSync(path.join(staging, 'chunks', chunk), to);
  }
  for (const entry of DIST_ENTRIES) {
    const rel = entry.replace(/\.ts$/, '.mjs');
    fs.mkdirSync(path.dirname(path.join(distDir, rel)), { recursive: true });
    for (const f of [rel, `${rel}.map`]) fs.renameSync(path.join(staging, f), path.join(distDir, f));
  }
  // The manifest last: until it names these inputs, every process runs through tsx.
  fs.writeFileSync(path.join(staging, 'manifest.json'), `${JSON.stringify({ built: new Date().toISOString(), inputs })}\n`);
  fs.renameSync(path.join(staging, 'manifest.json'), path.join(distDir, 'manifest.json'));
  const kept = new Set(Object.keys(result.metafile.outputs).map((o) => path.basename(o)));
  for (const chunk of fs.readdirSync(path.join(distDir, 'chunks'))) {
    const file = path.join(distDir, 'chunks', chunk);
    if (!kept.has(chunk) && Date.now() - fs.statSync(file).mtimeMs > 24 * 3600_000) fs.rmSync(file, { force: true });
  }
  console.log(`== built .dist (${Object.keys(inputs).length} sources) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} finally {
  fs.rmSync(staging, { recursive: true, force: true });
}
