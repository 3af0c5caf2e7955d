"""The source distribution: `setup.py sdist` (what `python -m build
--sdist` runs) must carry everything `pip install loom-*.tar.gz` needs to
build libloom with the Makefile -- the Makefile, the public header, every
source file, the package and its readme -- and nothing built. Runs on a copy
of the tree (sdist writes egg-info next to the package). No GPU needed."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

from loomtest_util import REPO

IGNORED = shutil.ignore_patterns(".git", "build", "scratch", "__pycache__", "*.egg-info")


def _tracked_sources():
    """Files under src/ and include/ in the tree (relative paths)."""
    out = []
    for top in ("src", "include"):
        for d, _, files in os.walk(os.path.join(REPO, top)):
            out += [os.path.relpath(os.path.join(d, f), REPO) for f in files]
    return out


class TestSdist(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import setuptools  # noqa: F401
        except ImportError:
            raise unittest.SkipTest("setuptools not installed")
        cls.tmp = tempfile.mkdtemp(prefix="loom-sdist-")
        tree = os.path.join(cls.tmp, "tree")
        shutil.copytree(REPO, tree, ignore=IGNORED)
        dist = os.path.join(cls.tmp, "dist")
        out = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", dist], cwd=tree,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise AssertionError("setup.py sdist failed:\n" + out.stdout + out.stderr)
        archives = [f for f in os.listdir(dist) if f.endswith(".tar.gz")]
        if len(archives) != 1:
            raise AssertionError(f"expected one .tar.gz in {dist}, found {archives}")
        with tarfile.open(os.path.join(dist, archives[0])) as tar:
            names = tar.getnames()
        top = names[0].split("/")[0]
        cls.members = {n[len(top) + 1:] for n in names if n.startswith(top + "/")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_build_inputs_present(self):
        for f in ("Makefile", "setup.py", "pyproject.toml", "include/loom.h", "docs/python.md",
                  "python/loom/__init__.py", "python/loom/_version.py"):
            self.assertIn(f, self.members)

    def test_every_source_present(self):
        missing = [f for f in _tracked_sources() if f not in self.members]
        self.assertEqual(missing, [])

    def test_nothing_built(self):
        built = [m for m in self.members
                 if m.startswith(("build/", "scratch/")) or m.endswith((".o", ".a", ".so", ".pyc"))]
        self.assertEqual(built, [])


if __name__ == "__main__":
    unittest.main()
