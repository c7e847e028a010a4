"""Every installed library that imports cuda.core, with cucore standing in (issue 26).

numba-cuda has its own tests (test_numba_standin.py). This file finds the
others: each top-level package under site-packages whose Python sources say
`import cuda.core` or `from cuda.core` (cuda.core and cuda-python's own
packages aside), and imports it in a fresh interpreter with the stand-in
(tests/python/standin) first on sys.path, so its cuda.core is cucore. A
library that fails to import names what it took from cuda.core that cucore
lacks. The list it found is printed (pytest -s) for docs/python.md.
"""
import os
import re
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import cucore

STANDIN = Path(__file__).resolve().parent / "standin"
IMPORTS_CUDA_CORE = re.compile(rb"^\s*(from\s+cuda\.core[\s.]|import\s+cuda\.core\b)", re.M)
# cuda.core itself, the stand-in, and cuda-python's packages that cuda.core sits beside.
NOT_CLIENTS = {"cuda/core", "cuda/bindings", "cuda/pathfinder", "cuda/cuda", "cuda/cudart", "cuda/nvrtc",
               "cucore"}
# numba-cuda's own tests and examples import it too: they are run by test_numba_standin.py.
SKIP_PARTS = {"tests", "test", "testing", "examples", "benchmarks"}


def _site_dirs():
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    dirs.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    dirs.add(site.getusersitepackages())
    return sorted(d for d in dirs if os.path.isdir(d))


def _module_of(rel: Path):
    """The importable package a file under site-packages belongs to: its top
    directory, or cuda/<name> inside the cuda namespace; None for a lone file."""
    parts = rel.parts
    if len(parts) < 2 or parts[0].endswith((".dist-info", ".egg-info", ".data")):
        return None
    if parts[0] == "cuda":
        return "/".join(parts[:2]) if len(parts) > 2 else None
    return parts[0]


def find_clients():
    """{module name: first file that imports cuda.core} over every site directory."""
    found = {}
    for d in _site_dirs():
        root = Path(d)
        for path in root.rglob("*.py"):
            rel = path.relative_to(root)
            top = _module_of(rel)
            if top is None or top in NOT_CLIENTS or top in found or SKIP_PARTS & set(rel.parts[:-1]):
                continue
            try:
                if path.stat().st_size > (1 << 20):
                    continue
                text = path.read_bytes()
            except OSError:
                continue
            if IMPORTS_CUDA_CORE.search(text):
                found[top] = str(rel)
    return {name.replace("/", "."): where for name, where in sorted(found.items())}


def test_the_scan_finds_a_package_that_imports_cuda_core(tmp_path, monkeypatch):
    """The scan itself, on a made-up site directory: clients found, cuda.core and tests not."""
    (tmp_path / "client" / "sub").mkdir(parents=True)
    (tmp_path / "client" / "sub" / "m.py").write_text("x = 1\n    from cuda.core import Device\n")
    (tmp_path / "cuda" / "compute").mkdir(parents=True)
    (tmp_path / "cuda" / "compute" / "a.py").write_text("import cuda.core.utils as u\n")
    (tmp_path / "cuda" / "core").mkdir(parents=True)
    (tmp_path / "cuda" / "core" / "b.py").write_text("from cuda.core import Device\n")
    (tmp_path / "other" / "tests").mkdir(parents=True)
    (tmp_path / "other" / "tests" / "t.py").write_text("from cuda.core import Device\n")
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet" / "q.py").write_text("# from cuda.core we take nothing\nimport cuda.corex\n")
    monkeypatch.setattr(sys.modules[__name__], "_site_dirs", lambda: [str(tmp_path)])
    assert find_clients() == {"client": "client/sub/m.py", "cuda.compute": "cuda/compute/a.py"}


def _clients_or_skip():
    clients = find_clients()
    if not clients:
        pytest.skip("no installed library imports cuda.core on this machine: nothing to stand in for")
    return clients


def test_every_library_that_imports_cuda_core_imports_on_cucore():
    clients = _clients_or_skip()
    print("\nlibraries importing cuda.core:", ", ".join(f"{k} ({v})" for k, v in clients.items()))
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cucore.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(STANDIN), root, env.get("PYTHONPATH")) if p)
    failures = {}
    for name in clients:
        # NumPy 2.5 removed np.row_stack, which numba-cuda still uses: its bug, not cucore's.
        script = ("import numpy as np\nnp.row_stack = getattr(np, 'row_stack', np.vstack)\n"
                  "import cuda.core, cucore\nassert cuda.core.Device is cucore.Device, cuda.core.__file__\n"
                  f"import {name}\nprint('ok')\n")
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0 or "ok" not in r.stdout:
            failures[name] = r.stderr.strip().splitlines()[-8:]
    assert not failures, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in failures.items())
