import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyPatch, diffConfigs, type AttemptConfig } from '../domain/attempt-config.ts';
import { latestBuiltPythonEnv, MAX_PYTHON_ENV_BYTES, packageDiff, pylockRequirements, pythonEnvKey, requirementsProblem, type PythonEnv } from '../domain/python-env.ts';
import { pylockRequirementsOf, pythonEnvFrom, pythonEnvProblem } from '../runtime/python-env-files.ts';
import { EnvCache, lastLines, uvBuildEnv } from '../activities/gpu-host/python-env.ts';
import { readSweepFile } from '../cli/commands/sweep.ts';
import { standaloneProject } from '../runtime/python-env-files.ts';
import { pythonEnvArtifact } from '../api/python-env.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const envOf = (text: string): PythonEnv => ({ kind: 'requirements', text, sha256: sha256(text) });
const target = { python: '3.11.2', platform: 'linux-x86_64-glibc-2.36', uv: 'uv 0.9.5' };

describe('python environments (issue 45): the pure parts', () => {
  it('one cache key per content, Python version, platform and uv version', () => {
    const a = pythonEnvKey(envOf('gpuplane_demo==1.0\n'), target, sha256);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(pythonEnvKey(envOf('gpuplane_demo==1.0\n'), { ...target }, sha256)).toBe(a);
    const others = [
      pythonEnvKey(envOf('gpuplane_demo==2.0\n'), target, sha256),
      pythonEnvKey(envOf('gpuplane_demo==1.0\n'), { ...target, python: '3.12.1' }, sha256),
      pythonEnvKey(envOf('gpuplane_demo==1.0\n'), { ...target, platform: 'linux-aarch64-glibc-2.36' }, sha256),
      pythonEnvKey(envOf('gpuplane_demo==1.0\n'), { ...target, uv: 'uv 0.9.6' }, sha256),
    ];
    expect(new Set([a, ...others]).size).toBe(5);
  });

  it('a requirements file with options, nothing, NUL bytes or too many bytes is refused; hashes after a requirement and comments are kept', () => {
    expect(requirementsProblem('numpy==2.0  # pinned\n\n# a comment\ntorch>=2 --hash=sha256:abc\n')).toBeNull();
    expect(requirementsProblem('--index-url http://elsewhere/simple\nnumpy\n')).toMatch(/^line 1: options are not taken \(--index-url\)/);
    expect(requirementsProblem('numpy\n  -r other.txt\n')).toMatch(/^line 2: options are not taken \(-r\)/);
    expect(requirementsProblem('numpy \\\n  -e .\n')).toMatch(/^line 1: options are not taken \(-e\)/);
    expect(requirementsProblem('torch==2.1 \\\n    --hash=sha256:abc \\\n    --hash sha256:def\n')).toBeNull();
    expect(requirementsProblem('# nothing\n\n')).toBe('names no package');
    expect(requirementsProblem('numpy\0')).toMatch(/NUL/);
    expect(requirementsProblem(`${'a'.repeat(MAX_PYTHON_ENV_BYTES)}\n`)).toMatch(/larger than 512 KiB/);
    // A local path: the node has none of the job's files.
    expect(requirementsProblem('numpy\n./mypkg\n')).toMatch(/^line 2: a local path is not taken \(\.\/mypkg\)/);
    expect(requirementsProblem('/srv/pkg.whl\n')).toMatch(/^line 1: a local path is not taken/);
    expect(requirementsProblem('pkg @ file:///srv/pkg.whl\n')).toMatch(/^line 1: a local path is not taken/);
    expect(requirementsProblem('pkg>=1 ; python_version >= "3.8"  # ./not-a-path\n')).toBeNull();
    expect(requirementsProblem('torch @ https://download.pytorch.org/whl/torch-2.5.1.whl\n')).toMatch(/^line 1: a direct URL is not taken \(torch…\)/);
    expect(requirementsProblem('pkg[extra]@git+https://g/pkg\n')).toMatch(/^line 1: a direct URL is not taken/);
    expect(requirementsProblem('git+https://g/pkg#egg=pkg\n')).toMatch(/^line 1: a direct URL is not taken/);
    expect(requirementsProblem('pkg[extra]>=1 ; sys_platform == "linux" and python_version >= "3.9"\n')).toBeNull();
  });

  it('a retry keeps the environment unless it gives another, or null for none; a diff names it by its hash', () => {
    const one = envOf('gpuplane_demo==1.0\n');
    const two = envOf('gpuplane_demo==2.0\n');
    const prev: AttemptConfig = { command: ['python', '-m', 'gpuplane_demo'], workingDir: '/tmp', env: {}, gpus: 0, nodes: 1, selector: {}, priority: 0, params: {}, pythonEnv: one };
    expect(applyPatch(prev, {}).pythonEnv).toEqual(one);
    expect(applyPatch(prev, { workingDir: '/srv' }).pythonEnv).toEqual(one);
    expect(applyPatch(prev, { pythonEnv: two }).pythonEnv).toEqual(two);
    expect('pythonEnv' in applyPatch(prev, { pythonEnv: null })).toBe(false);
    expect(diffConfigs(prev, applyPatch(prev, { pythonEnv: two }))).toEqual([{ key: 'pythonEnv.sha256', from: one.sha256, to: two.sha256 }]);
  });

  it("a build takes the agent's package index and network settings, never where uv keeps its own things", () => {
    const env = uvBuildEnv({ PATH: '/usr/bin', UV_INDEX_URL: 'http://mirror/simple', UV_FIND_LINKS: '/wheels', UV_NO_INDEX: '1', UV_CACHE_DIR: '/elsewhere', UV_PYTHON: '/x', HTTPS_PROXY: 'http://proxy:3128', SECRET: 'no' }, '/cache/.build-home');
    expect(env).toMatchObject({ UV_INDEX_URL: 'http://mirror/simple', UV_FIND_LINKS: '/wheels', UV_NO_INDEX: '1', HTTPS_PROXY: 'http://proxy:3128', UV_CACHE_DIR: '/cache/.build-home/cache', HOME: '/cache/.build-home', UV_PYTHON_DOWNLOADS: 'never' });
    expect(env.UV_PYTHON).toBeUndefined();
    expect(env.SECRET).toBeUndefined();
  });

  it('a node builds nothing for a text that is not its hash, or that has options, whatever the spec says', async () => {
    const cache = new EnvCache('/nonexistent/gpuplane-env-cache', { uv: '/nonexistent/uv', python: 'python3', buildUser: 'nobody' }, {});
    const notes: string[] = [];
    const note = async (m: string) => void notes.push(m);
    const forged = await cache.prepare({ ...envOf('gpuplane_demo==2.0\n'), sha256: sha256('gpuplane_demo==1.0\n') }, note);
    expect(forged).toEqual({ problem: expect.stringMatching(/could not be built: the files' text does not match their sha256 [0-9a-f]{64}$/) });
    const options = await cache.prepare(envOf('--extra-index-url http://elsewhere\ngpuplane_demo\n'), note);
    expect(options).toEqual({ problem: expect.stringMatching(/could not be built: requirements.txt line 1: options are not taken \(--extra-index-url\)/) });
    expect(notes).toHaveLength(2);
  });

  it("a failed build's reason is its last lines, in one line", () => {
    expect(lastLines('Resolved 0 packages\n  × No solution found when resolving dependencies:\n  ╰─▶ Because nope was not found in the package registry and\n      you require nope, we can conclude that your requirements\n      are unsatisfiable.\n', 3)).toBe(
      '╰─▶ Because nope was not found in the package registry and you require nope, we can conclude that your requirements are unsatisfiable.',
    );
  });

  it("a pylock.toml is installed as its packages pinned, with their markers and every file's hashes, from the node's index", () => {
    const lock = [
      'lock-version = "1.0"',
      'created-by = "uv"',
      '[[packages]]',
      'name = "numpy"',
      'version = "2.1.3"',
      'index = "https://elsewhere.example/simple"',
      `sdist = { url = "https://elsewhere.example/numpy-2.1.3.tar.gz", hashes = { sha256 = "${'AA11'.repeat(16)}" } }`,
      `wheels = [{ url = "https://elsewhere.example/numpy-2.1.3-cp311.whl", hashes = { sha256 = "${'bb22'.repeat(16)}", md5 = "cc" } }]`,
      '[[packages]]',
      'name = "colorama"',
      'version = "0.4.6"',
      'marker = "sys_platform == \'win32\'"',
      'wheels = [{ url = "https://elsewhere.example/colorama.whl", hashes = {} }]',
    ].join('\n');
    const r = pylockRequirementsOf(lock);
    expect(r).toEqual({ text: expect.stringContaining(`numpy==2.1.3 --hash=sha256:${'aa11'.repeat(16)} --hash=sha256:${'bb22'.repeat(16)}\ncolorama==0.4.6 ; sys_platform == 'win32'\n`) });
    // Nothing of the lock's URLs or index reaches the node's requirements.
    expect((r as { text: string }).text).not.toContain('elsewhere');
    expect(requirementsProblem((r as { text: string }).text)).toBeNull();
  });

  it('a pylock.toml that is not one, or names a VCS, folder or archive, or words a name could smuggle an option in, is refused in one line', () => {
    expect(pylockRequirementsOf('lock-version = [')).toEqual({ problem: expect.stringMatching(/^pylock\.toml is not valid TOML \(line 1, column \d+\): /) });
    expect(pylockRequirements({ 'lock-version': '2.0', packages: [] })).toEqual({ problem: expect.stringMatching(/not a PEP 751 lock of version 1/) });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [] })).toEqual({ problem: 'names no package ([[packages]])' });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x', vcs: { type: 'git', url: 'https://g/x' } }] })).toEqual({ problem: expect.stringMatching(/^package x comes from a VCS: only packages from a package index are built/) });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x', directory: { path: '.' } }] })).toEqual({ problem: expect.stringMatching(/comes from a folder/) });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x --index-url http://evil', version: '1' }] })).toEqual({ problem: 'packages[0] has no valid name' });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x', version: '1 --index-url=http://evil' }] })).toEqual({ problem: expect.stringMatching(/no valid version/) });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x', version: '1', marker: 'python_version > "3" --index-url http://evil' }] })).toEqual({ problem: 'package x has a marker that is not one' });
    expect(pylockRequirements({ 'lock-version': '1.0', packages: [{ name: 'x', version: '1', wheels: [{ hashes: { sha256: 'not hex' } }] }] })).toEqual({ problem: 'package x has a sha256 hash that is not hex' });
  });

  it("a uv project is its two files, hashed together; either half alone, or one that is not TOML, is refused", () => {
    const pyproject = '[project]\nname = "trainer"\nversion = "0.1.0"\n';
    const lock = 'version = 1\nrevision = 3\n[[package]]\nname = "trainer"\nversion = "0.1.0"\nsource = { virtual = "." }\n';
    const env = pythonEnvFrom('uv-lock', lock, pyproject);
    expect(env).toMatchObject({ kind: 'uv-lock', text: lock, pyproject });
    expect(pythonEnvFrom('uv-lock', lock, `${pyproject}# changed\n`).sha256).not.toBe(env.sha256);
    expect(pythonEnvFrom('requirements', 'numpy\n').sha256).toBe(sha256('numpy\n'));
    expect(pythonEnvProblem({ kind: 'uv-lock', text: lock })).toBe('a uv project needs its pyproject.toml beside its uv.lock');
    expect(pythonEnvProblem({ kind: 'uv-lock', text: 'version = 1\n', pyproject })).toBe('uv.lock lists no package ([[package]])');
    expect(pythonEnvProblem({ kind: 'uv-lock', text: lock, pyproject: 'name = "x"\n' })).toBe('pyproject.toml has neither a [project] nor a [tool.uv] table');
    expect(pythonEnvProblem({ kind: 'uv-lock', text: '[[package]\n', pyproject })).toMatch(/^uv\.lock is not valid TOML/);
    expect(pythonEnvProblem({ kind: 'pylock', text: 'x'.repeat(MAX_PYTHON_ENV_BYTES + 1) })).toBe('pylock.toml is larger than 512 KiB');
  });

  it("a sweep file's python_env is a path, read by gpuctl relative to the code folder where it is there, else to the file", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sweep-env-'));
    try {
      fs.mkdirSync(path.join(dir, 'src'));
      fs.writeFileSync(path.join(dir, 'src', 'requirements.txt'), 'numpy==2.1.3\n');
      fs.writeFileSync(path.join(dir, 'beside.txt'), 'torch==2.5.1\n');
      const sweep = (extra: string) => {
        fs.writeFileSync(path.join(dir, 'sweep.yaml'), `command: python train.py\nmethod: grid\nparameters:\n  lr: {values: [1]}\n${extra}`);
        return readSweepFile(path.join(dir, 'sweep.yaml'));
      };
      expect((await sweep('code: src\npython_env: requirements.txt\n')).python_env).toEqual({ requirements: 'numpy==2.1.3\n' });
      expect((await sweep('code: src\npython_env: beside.txt\n')).python_env).toEqual({ requirements: 'torch==2.5.1\n' });
      await expect(sweep('python_env: nope.txt\n')).rejects.toThrow(/sweep\.yaml: python_env: nope\.txt: no such file$/);
      fs.writeFileSync(path.join(dir, 'opts.txt'), '-e .\n');
      await expect(sweep('python_env: opts.txt\n')).rejects.toThrow(/python_env: opts\.txt: requirements\.txt line 1: options are not taken \(-e\)/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a uv project is exported as a workspace root of its own: a pyproject.toml above it is never read', () => {
    const made = standaloneProject('[project]\nname = "trainer"\nversion = "0.1.0"\n[tool.uv]\ndev-dependencies = []\n');
    expect(made).toMatch(/\[tool\.uv\.workspace\]\s*members = \[\s*\]/);
    expect(made).toMatch(/name = "trainer"/);
    const rooted = '[project]\nname = "x"\n[tool.uv.workspace]\nmembers = ["pkgs/*"]\n';
    expect(standaloneProject(rooted)).toBe(rooted);
  });

  it("a run's environment is its latest env.built event's; two freeze lists differ by name, version or URL", () => {
    const data = { python_env: { kind: 'requirements', sha256: 'c'.repeat(64), key: 'k', python: '3.11.2', platform: 'linux', uv: 'uv 0.9.5', packages: 'numpy==2.3.5\n' } };
    expect(latestBuiltPythonEnv([{ kind: 'env.built', data: null }, { kind: 'env.built', data }, { kind: 'code.fetched', data: null }])).toEqual({ kind: 'requirements', sha256: 'c'.repeat(64), python: '3.11.2', uv: 'uv 0.9.5', packages: 'numpy==2.3.5\n' });
    expect(latestBuiltPythonEnv([{ kind: 'env.built', data: { python_env: 'no' } }])).toBeNull();
    expect(packageDiff('Numpy==2.1.3\nsix==1.16.0\ntorch @ https://x/torch.whl\n# c\n', 'numpy==2.3.5\ntorch @ https://y/torch.whl\nzeta_pkg==1\n')).toEqual([
      { name: 'numpy', from: '2.1.3', to: '2.3.5' },
      { name: 'six', from: '1.16.0', to: null },
      { name: 'torch', from: '@ https://x/torch.whl', to: '@ https://y/torch.whl' },
      { name: 'zeta_pkg', from: null, to: '1' },
    ]);
    expect(packageDiff('a==1\n', 'A==1\n')).toEqual([]);
    expect(pythonEnvArtifact(data)).toBe(`# python_env requirements ${'c'.repeat(64)}, built by its node with uv 0.9.5 for Python 3.11.2 (linux)\nnumpy==2.3.5\n`);
    expect(pythonEnvArtifact({ python_env: { ...data.python_env, packages: null } })).toBeNull();
  });
});
