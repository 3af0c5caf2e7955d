#!/usr/bin/env python3
"""Local-memory traffic inside the wgmma k-block loops of compiled kernels,
from their SASS (no GPU needed): for every HGMMA the innermost loop around
it (a backward branch and the address it jumps to: the k-block loop), and
the LDL / STL inside that loop. A spill reload there runs once per k-block,
ahead of the wgmma issue, on every task: in session 14 a change to the MoE
gate alone (not to the GEMM code) put one `LDL` into moe_kernel's consumer
k-loop, and those builds ran the expert GEMMs 2-6% slower (bench/RESULTS.md
session 14).
`make test` runs the --all form over the operators' objects (sass-check).

usage: bench/sass_kloop.py OBJECT_OR_BINARY MANGLED_KERNEL_NAME
       bench/sass_kloop.py --all OBJECT_OR_BINARY...
  The first prints each k-block loop of one kernel (address range, HGMMAs,
  LDL/STL); the second checks every kernel with HGMMA in the files and
  prints one line, or the offending loops. Exit 1 when a k-block loop
  touches local memory, 0 when none does, 2 on a usage error or a kernel
  without HGMMA (first form), 3 when cuobjdump is not found (--all: with a
  message; `make test` then skips the check).
cuobjdump (and the nvdisasm it runs) is looked for on PATH, in
$CUDA_HOME/bin, and in the wheels (`pip install nvidia-cuda-cuobjdump
nvidia-cuda-nvdisasm`, which .ci/run installs when none is found).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

ADDR_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*\*/)?\s*$")
BRA_RE = re.compile(r"\bBRA\b[^;]*?\b0x([0-9a-f]+)")
FUNC_RE = re.compile(r"^\s*Function : (\S+)")


def find_cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    cand = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump")
    if os.access(cand, os.X_OK):
        return cand
    try:
        import nvidia  # the pip wheels' namespace package
        for root in list(nvidia.__path__):
            for path in sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump"))):
                if not os.access(path, os.X_OK):
                    os.chmod(path, 0o755)  # (wheels may drop the mode bit)
                return path
    except (ImportError, OSError):
        pass
    return None


def kloops(sass_lines):
    """[(start, end, hgmma count, [LDL/STL text])] of the k-block loops."""
    insts = []  # (address, text)
    for line in sass_lines:
        m = ADDR_RE.match(line)
        if m:
            insts.append((int(m.group(1), 16), m.group(2)))
    ranges = []  # every loop: a backward branch at b to a target a <= b
    for addr, text in insts:
        m = BRA_RE.search(text)
        if m and int(m.group(1), 16) < addr:
            ranges.append((int(m.group(1), 16), addr))
    inner = set()  # for each HGMMA, the smallest loop around it: its k-block loop
    for addr, text in insts:
        if "HGMMA" in text:
            around = [r for r in ranges if r[0] <= addr <= r[1]]
            if around:
                inner.add(min(around, key=lambda r: r[1] - r[0]))
    loops = []
    for a, b in sorted(inner):
        body = [t for x, t in insts if a <= x <= b]
        local = [t for t in body if re.search(r"\b(LDL|STL)\b", t)]
        loops.append((a, b, sum("HGMMA" in t for t in body), local))
    return loops


def sass_of(tool, path, fn=None):
    cmd = [tool, "-sass"] + (["-fun", fn] if fn else []) + [path]
    # cuobjdump -sass runs nvdisasm: the one beside it first
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          check=True).stdout.splitlines()


def check_all(tool, paths):
    kernels, bad = 0, []
    for path in paths:
        funcs, name = {}, None
        for line in sass_of(tool, path):
            m = FUNC_RE.match(line)
            if m:
                name = m.group(1)
                funcs.setdefault(name, [])
            elif name is not None:
                funcs[name].append(line)
        for name, lines in funcs.items():
            if not any("HGMMA" in l for l in lines):
                continue
            kernels += 1
            for a, b, n, local in kloops(lines):
                if local:
                    bad.append("%s %s: k-block loop 0x%x-0x%x (%d HGMMA): %s" %
                               (os.path.basename(path), name, a, b, n, "; ".join(local)))
    if bad:
        print("sass-check: local memory inside %d k-block loop(s) (bench/sass_kloop.py):" % len(bad))
        for line in bad:
            print("    " + line)
        return 1
    where = os.path.basename(paths[0]) if len(paths) == 1 else "%d files" % len(paths)
    print("sass-check: %s: %d kernels with wgmma, no local memory in their k-block loops" % (where, kernels))
    return 0


def main(argv):
    if len(argv) < 2 or (argv[0] != "--all" and len(argv) != 2):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    tool = find_cuobjdump()
    if tool is None:
        print("sass-check: skipped, no cuobjdump (PATH, $CUDA_HOME/bin, nvidia-cuda-cuobjdump wheel)")
        return 3
    try:
        if argv[0] == "--all":
            return check_all(tool, argv[1:])
        obj, fn = argv
        loops = kloops(sass_of(tool, obj, fn))
    except (OSError, subprocess.CalledProcessError) as e:
        print("sass_kloop: cuobjdump failed: %s" % e, file=sys.stderr)
        return 2
    if not loops:
        print("sass_kloop: no loop issuing HGMMA in %s" % fn, file=sys.stderr)
        return 2
    dirty = 0
    for a, b, hgmma, local in loops:
        print("loop 0x%x-0x%x: %d HGMMA, %d LDL/STL" % (a, b, hgmma, len(local)))
        for t in local:
            print("    " + t)
        dirty += len(local) > 0
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
