/**
 * Tiny pure-Python wheels and the pinned uv, for tests of jobs' Python environments (issue 45):
 * no package index, no internet, only a folder of wheels that agents get as UV_FIND_LINKS.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// A wheel is a zip of the package, its METADATA, WHEEL and a RECORD of every file's hash.
const WHEEL_SCRIPT = `
import base64, hashlib, sys, zipfile
out, name, version = sys.argv[1], sys.argv[2], sys.argv[3]
files = {
    f"{name}/__init__.py": f'__version__ = "{version}"\\n',
    f"{name}/__main__.py": f'from {name} import __version__\\nprint("{name}", __version__)\\n',
    f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n",
    f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: gpuplane-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = f"{name}-{version}.dist-info/RECORD"
lines = []
for p, text in files.items():
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    lines.append(f"{p},sha256={digest},{len(data)}")
lines.append(f"{record},,")
files[record] = "\\n".join(lines) + "\\n"
with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as z:
    for p, text in files.items():
        z.writestr(p, text)
`;

/** Writes a wheel of package `name` at each version into `dir` (a module whose `python -m name` prints its version). */
export function writeDemoWheels(dir: string, name: string, versions: string[]): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const v of versions) execFileSync('python3', ['-c', WHEEL_SCRIPT, dir, name, v], { stdio: 'pipe' });
}

/**
 * A copy of the pinned uv (scripts/uv-venv.sh, cached outside the checkout) at `dir`/uv, where
 * the user builds run as (nobody, where the agent is root) can run it: the cache is under root's
 * home. Returns its path.
 */
export function uvBinaryIn(dir: string): string {
  const venv = execFileSync('bash', [path.join(import.meta.dirname, '..', '..', 'scripts', 'uv-venv.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const uv = path.join(dir, 'uv');
  fs.copyFileSync(path.join(venv, 'bin', 'uv'), uv);
  fs.chmodSync(uv, 0o755);
  return uv;
}

/**
 * Copies into `dir` the wheel of `requirement` (`numpy==2.3.5`) for the Python `python`
 * (its version; this machine's platform), downloaded once by pip from the package registry into a
 * cache outside the checkout (~/.cache/gpuplane/wheels), so agents given `dir` as UV_FIND_LINKS
 * install a real package without an index.
 */
export function copyRealWheel(requirement: string, python: string, dir: string): void {
  const cache = path.join(process.env.HOME ?? '/root', '.cache', 'gpuplane', 'wheels');
  const version = execFileSync(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' }).trim();
  const [name, pinned] = requirement.split('==');
  const want = (f: string) => f.startsWith(`${name}-${pinned}-cp${version.replace('.', '')}-`) && f.endsWith('.whl');
  let wheel = fs.existsSync(cache) ? fs.readdirSync(cache).find(want) : undefined;
  if (!wheel) {
    execFileSync('python3', ['-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:', '--python-version', version, '-d', cache, requirement], { stdio: ['ignore', 'ignore', 'inherit'] });
    wheel = fs.readdirSync(cache).find(want);
    if (!wheel) throw new Error(`pip downloaded no wheel of ${requirement} for Python ${version} into ${cache}`);
  }
  fs.copyFileSync(path.join(cache, wheel), path.join(dir, wheel));
  fs.chmodSync(path.join(dir, wheel), 0o644);
}

// An sdist whose in-tree build backend (PEP 517, no requirements) sleeps before it writes its wheel.
const SLOW_SDIST_SCRIPT = `
import io, sys, tarfile
out, name, version, seconds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
backend = f'''
import base64, hashlib, time, zipfile
def get_requires_for_build_wheel(config_settings=None):
    return []
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    time.sleep({seconds})
    wheel = "{name}-{version}-py3-none-any.whl"
    files = {{"{name}/__init__.py": "", "{name}-{version}.dist-info/METADATA": "Metadata-Version: 2.1\\\\nName: {name}\\\\nVersion: {version}\\\\n", "{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\\\\nGenerator: gpuplane-test\\\\nRoot-Is-Purelib: true\\\\nTag: py3-none-any\\\\n"}}
    record = "{name}-{version}.dist-info/RECORD"
    lines = [p + ",sha256=" + base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode() + "," + str(len(t)) for p, t in files.items()] + [record + ",,"]
    files[record] = "\\\\n".join(lines) + "\\\\n"
    with zipfile.ZipFile(wheel_directory + "/" + wheel, "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
    return wheel
'''
files = {
    "pyproject.toml": f'[build-system]\\nrequires = []\\nbuild-backend = "slow_backend"\\nbackend-path = ["."]\\n[project]\\nname = "{name}"\\nversion = "{version}"\\n',
    "slow_backend.py": backend,
    "PKG-INFO": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n",
}
with tarfile.open(f"{out}/{name}-{version}.tar.gz", "w:gz") as t:
    for p, text in files.items():
        data = text.encode()
        info = tarfile.TarInfo(f"{name}-{version}/{p}")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
`;

/** Writes into `dir` an sdist of package `name` whose build sleeps `seconds` (a build that takes its time: cancelled while it runs). */
export function writeSlowSdist(dir: string, name: string, version: string, seconds: number): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  execFileSync('python3', ['-c', SLOW_SDIST_SCRIPT, dir, name, version, String(seconds)], { stdio: 'pipe' });
}

/** Removes a test's folder with the read-only environments in it (writable again first: they are read-only to their owner too). */
export function removeEnvTree(dir: string): void {
  execFileSync('chmod', ['-R', 'u+w', dir]);
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Writes `text` to `name` under `dir` (its folders made), and gives its path: a test's requirements files. */
export function writeFileIn(dir: string, name: string, text: string): string {
  const p = path.join(dir, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, text);
  return p;
}
