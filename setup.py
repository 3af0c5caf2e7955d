"""Build hooks for `pip install .`: runs the Makefile to build
build/libloom.so and ships it inside the package as loom/libloom.so
(metadata lives in pyproject.toml).

    pip install .                 # builds libloom with make, installs the package
    LOOM_MAKE_JOBS=4 pip install .
    CUDA_HOME=... NCCL_HOME=... pip install .   # as for `make`

The build runs in this source tree (pip's in-tree build), so an up-to-date
build/ is reused. The wheel is platform-specific (it holds libloom.so, which
keeps rpaths to the CUDA runtime and NCCL it was linked against).
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def header_version():
    text = open(os.path.join(ROOT, "include", "loom.h")).read()
    parts = [re.search(r"#define LOOM_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def package_version():
    text = open(os.path.join(ROOT, "python", "loom", "_version.py")).read()
    v = re.search(r'__version__ = "([^"]+)"', text).group(1)
    h = header_version()
    if v != h:
        sys.exit(f"python/loom/_version.py says {v} but include/loom.h says {h}: make them agree")
    return v


def make_env():
    """The environment for make: pip's build isolation hides the system
    site-packages from `python3` through PYTHONPATH / PYTHONNOUSERSITE, which
    would hide an installed nvidia-nccl wheel from the Makefile's NCCL
    lookup; point NCCL_HOME at it ourselves when that is where NCCL is."""
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME"):
        env.pop(var, None)
    cuda = env.get("CUDA_HOME", "/usr/local/cuda")
    if not env.get("NCCL_HOME") and not os.path.isfile(os.path.join(cuda, "include", "nccl.h")):
        for py in (sys.executable, shutil.which("python3")):
            if not py:
                continue
            try:
                out = subprocess.run([py, "-c", "import nvidia.nccl as m; print(m.__path__[0])"],
                                     env=env, capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                continue
            path = out.stdout.strip()
            if out.returncode == 0 and os.path.isfile(os.path.join(path, "include", "nccl.h")):
                env["NCCL_HOME"] = path
                break
    return env


def nccl_of(lib, env):
    """(path, ncclGetVersion) of the libnccl that `lib` resolves to, or (None, None)."""
    try:
        out = subprocess.run(["ldd", lib], env=env, capture_output=True, text=True, timeout=60)
        m = re.search(r"libnccl\.so[.\d]* => (\S+)", out.stdout)
        if not m:
            return None, None
        code = ("import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); v=ctypes.c_int(); "
                "l.ncclGetVersion(ctypes.byref(v)); print(v.value)")
        v = subprocess.run([sys.executable, "-c", code, m.group(1)], env=env, capture_output=True,
                           text=True, timeout=60)
        return m.group(1), int(v.stdout.strip()) if v.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None, None


def build_libloom():
    """make build/libloom.so in the source tree; returns its path."""
    if not os.path.isfile(os.path.join(ROOT, "Makefile")):
        sys.exit("setup.py: no Makefile beside it: build from the loom repository (pip install "
                 "PATH_TO_REPO), not from an sdist")
    jobs = os.environ.get("LOOM_MAKE_JOBS") or str(os.cpu_count() or 1)
    env = make_env()
    cmd = ["make", f"-j{jobs}", "build/libloom.so"]
    print("setup.py: " + " ".join(cmd) + (f" (NCCL_HOME={env['NCCL_HOME']})"
                                          if env.get("NCCL_HOME") else ""), flush=True)
    r = subprocess.run(cmd, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit(f"setup.py: `{' '.join(cmd)}` failed (exit {r.returncode}); run it in "
                 f"{ROOT} to see why")
    return os.path.join(ROOT, "build", "libloom.so"), env


class BuildPy(build_py):
    """build_py, then libloom.so (and what it was built against) into the package."""

    def run(self):
        super().run()
        lib, env = build_libloom()
        dst = os.path.join(self.build_lib, "loom")
        self.mkpath(dst)
        self.copy_file(lib, os.path.join(dst, "libloom.so"))
        path, version = nccl_of(lib, env)
        with open(os.path.join(dst, "_build_info.py"), "w") as f:
            f.write("# Written by setup.py when this package was built.\n")
            f.write(f"NCCL_LIBRARY = {path!r}\n")
            f.write(f"NCCL_VERSION_CODE = {version!r}\n")


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: platform-specific, not pure Python."""

    def has_ext_modules(self):
        return True


# setuptools' own scratch (egg-info, build/lib) goes under build/python, beside
# make's outputs, not into the source tree.
os.makedirs(os.path.join(ROOT, "build", "python"), exist_ok=True)

setup(
    version=package_version(),
    cmdclass={"build_py": BuildPy},
    distclass=BinaryDistribution,
    options={"build": {"build_base": os.path.join(ROOT, "build", "python", "setuptools")},
             "egg_info": {"egg_base": os.path.join(ROOT, "build", "python")}},
)
