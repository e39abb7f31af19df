import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyPatch, diffConfigs, type AttemptConfig } from '../domain/attempt-config.ts';
import { MAX_REQUIREMENTS_BYTES, pythonEnvKey, requirementsProblem, type PythonEnv } from '../domain/python-env.ts';
import { EnvCache, lastLines, uvBuildEnv } from '../activities/gpu-host/python-env.ts';

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
    expect(requirementsProblem(`${'a'.repeat(MAX_REQUIREMENTS_BYTES)}\n`)).toMatch(/larger than 64 KiB/);
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
    expect(forged).toEqual({ problem: expect.stringMatching(/could not be built: the file's text does not match its sha256 [0-9a-f]{64}$/) });
    const options = await cache.prepare(envOf('--extra-index-url http://elsewhere\ngpuplane_demo\n'), note);
    expect(options).toEqual({ problem: expect.stringMatching(/could not be built: the requirements file line 1: options are not taken \(--extra-index-url\)/) });
    expect(notes).toHaveLength(2);
  });

  it("a failed build's reason is its last lines, in one line", () => {
    expect(lastLines('Resolved 0 packages\n  × No solution found when resolving dependencies:\n  ╰─▶ Because nope was not found in the package registry and\n      you require nope, we can conclude that your requirements\n      are unsatisfiable.\n', 3)).toBe(
      '╰─▶ Because nope was not found in the package registry and you require nope, we can conclude that your requirements are unsatisfiable.',
    );
  });
});
