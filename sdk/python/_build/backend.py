"""A PEP 517 build backend in the standard library, so `pip install ./sdk/python` needs no network.

setuptools would need setuptools and wheel in the build environment, which pip downloads; the
package is pure Python and tiny, so a wheel is a zip file we can write ourselves. Implements
build_wheel, build_sdist and build_editable (a .pth file pointing at this folder).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "gpuplane"


def _project() -> Dict[str, str]:
    """name, version, description, requires-python from pyproject.toml's [project] (simple key = "value" lines)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not section:
        raise RuntimeError("pyproject.toml has no [project] table")
    out = dict(re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', section.group(1), re.M))
    for k in ("name", "version"):
        if k not in out:
            raise RuntimeError(f"pyproject.toml [project] needs {k}")
    return out


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _dist_info() -> str:
    p = _project()
    return f"{p['name'].replace('-', '_')}-{p['version']}.dist-info"


def _sources() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of the package's .py files."""
    out = []
    pkg = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                full = os.path.join(dirpath, name)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    p = _project()
    name = f"{p['name'].replace('-', '_')}-{p['version']}-py3-none-any.whl"
    info = _dist_info()
    files = files + [
        (f"{info}/METADATA", _metadata().encode("utf-8")),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: gpuplane-build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = []
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(arc, _read(full)) for arc, full in _sources()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = f"{p['name'].replace('-', '_')}-{p['version']}"
    path = os.path.join(sdist_directory, f"{base}.tar.gz")
    extra = ["pyproject.toml", "README.md", "_build/backend.py"]
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, full in _sources() + [(e, os.path.join(ROOT, e)) for e in extra if os.path.exists(os.path.join(ROOT, e))]:
            t.add(full, arcname=f"{base}/{arc}")
        data = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return os.path.basename(path)


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []
