#!/usr/bin/env python3
"""The code a kernel launch runs, by region: distinct 128-byte lines of SASS
executed, instructions, and warp-stall samples (share stalled on "no
instruction"), from an ncu per-instruction export of ONE kernel and the
object file it was built from (session 37, docs/moe_v2.md "Session 37": an
SM keeps ~128 KB of code between launches, so the lines a call executes
decide whether its code is still there next call).

    ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \\
        --section WarpStateStats --section SourceCounters -o R loom moe ...
    ncu -i R.ncu-rep --page source --csv --print-source sass > R_sass.csv
    python3 bench/ncu_lines.py OBJ.o KERNEL R_sass.csv[.gz] [--by top|func] [--file moe.cu]

OBJ.o: the object (or binary) the profiled kernel came from, built with
-lineinfo; KERNEL: a substring of its mangled name that picks one function
(e.g. ILi0ELi2ELi1E for moe_kernel<0, 2, 1>). Regions: --by top (default)
the line of the kernel's own body an instruction is inlined into (one row
per phase call); --by func the innermost function of --file (default: the
file the kernel is defined in) that the instruction belongs to. The rows of
the export must be the function's instructions in address order (ncu's
source page is), else the script stops.
"""
import collections
import csv
import gzip
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_kloop import find_cuobjdump  # noqa: E402

STALLS = ('no_inst', 'barrier', 'long_sb', 'wait', 'membar', 'lg', 'short_sb', 'branch_resolving', 'selected',
          'not_selected', 'math', 'mio', 'dispatch', 'sleep', 'misc', 'drain', 'imc', 'tex')


def tools():
    """cuobjdump (found as sass_kloop.py finds it: PATH, $CUDA_HOME/bin, the
    wheels) and the nvdisasm beside it."""
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        sys.exit('ncu_lines: no cuobjdump (PATH, $CUDA_HOME/bin, nvidia-cuda-cuobjdump wheel)')
    nvdisasm = os.path.join(os.path.dirname(cuobjdump), 'nvdisasm')
    return cuobjdump, nvdisasm if os.access(nvdisasm, os.X_OK) else 'nvdisasm'


def disasm(obj, kernel):
    """(address, chain) per instruction of the one function matching kernel;
    chain = [(file, line, inlined_at_file, inlined_at_line), ...], innermost first."""
    cuobjdump, nvdisasm = tools()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([cuobjdump, '-xelf', 'all', os.path.abspath(obj)], cwd=d, check=True,
                       stdout=subprocess.DEVNULL)
        cubins = [f for f in os.listdir(d) if f.endswith('.cubin')]
        for cb in cubins:
            syms = subprocess.run(['readelf', '-sW', os.path.join(d, cb)], capture_output=True, text=True).stdout
            idx = [l.split()[0].rstrip(':') for l in syms.splitlines()
                   if ' FUNC ' in l and ' GLOBAL ' in l and kernel in l.split()[-1]]
            if len(idx) > 1:
                sys.exit('ncu_lines: %r names %d kernels in %s' % (kernel, len(idx), cb))
            if idx:
                out = subprocess.run([nvdisasm, '-gi', '-c', '-fun', idx[0], os.path.join(d, cb)],
                                     capture_output=True, text=True, check=True).stdout
                break
        else:
            sys.exit('ncu_lines: no kernel matching %r in %s' % (kernel, obj))
    insts, pending, chain = [], [], []
    for l in out.splitlines():
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?', l)
        if m:
            pending.append((os.path.basename(m.group(1)), int(m.group(2)),
                            m.group(3) and os.path.basename(m.group(3)), m.group(4) and int(m.group(4))))
            continue
        m = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?);', l)
        if m:
            if pending:
                chain, pending = pending, []
            insts.append((int(m.group(1), 16), chain))
    return insts


def functions(path):
    """(first line, name) of each function defined at column 0 in a C/CUDA file
    (a kernel's name may follow its __launch_bounds__ on the next line)."""
    out, src = [], open(path).read().split('\n')
    for i, l in enumerate(src):
        prev = src[i - 1] if i > 0 else ''
        m = re.match(r'^(?:static |extern |__global__ |template )?[^ (#/*][^(]*?\b([A-Za-z_]\w*)\(', l)
        if m and ('__device__' in l or '__global__' in l or '__device__' in prev or '__global__' in prev or
                  'template' in prev):
            name = m.group(1)
            if name == '__launch_bounds__' and i + 1 < len(src):
                n = re.match(r'\s+([A-Za-z_]\w*)\(', src[i + 1])
                name = n.group(1) if n else name
            out.append((i + 1, name))
    return out


def main():
    args = sys.argv[1:]
    by, srcfile = 'top', None
    if '--by' in args:
        i = args.index('--by')
        by = args[i + 1]
        del args[i:i + 2]
    if '--file' in args:
        i = args.index('--file')
        srcfile = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3 or by not in ('top', 'func'):
        sys.exit(__doc__)
    obj, kernel, csvf = args
    insts = disasm(obj, kernel)
    opener = gzip.open if csvf.endswith('.gz') else open
    rows = list(csv.reader(opener(csvf, 'rt')))
    hdr = next(r for r in rows if r and r[0] == 'Address')
    data = rows[rows.index(hdr) + 1:]
    data = [r for r in data if r and r[0] != 'Kernel Name']
    if len(data) != len(insts):
        sys.exit('ncu_lines: %d rows in the export, %d instructions in the object: not the same build?'
                 % (len(data), len(insts)))
    col = {h: i for i, h in enumerate(hdr)}
    kfile = next((c[-1][0] for _, c in insts if c), '?')
    srcfile = srcfile or kfile
    src = None
    for d in ('.', 'src/device/ops', 'src/device/tile', 'src/device/runtime'):
        if os.path.exists(os.path.join(d, srcfile)):
            src = os.path.join(d, srcfile)
            break
    text = open(src).read().split('\n') if src else []
    funcs = functions(src) if src else []

    def fn(line):
        name = '?'
        for s, n in funcs:
            if s > line:
                break
            name = n
        return name

    def region(chain):
        if not chain:
            return '?'
        if by == 'top':
            f, ln = chain[-1][0], chain[-1][1]
            return '%s:%d  %s' % (f, ln, text[ln - 1].strip()[:56] if f == kfile and text and ln <= len(text) else '')
        for f, ln, af, aln in chain:
            if f == srcfile:
                return fn(ln)
            if af == srcfile:
                return fn(aln)
        return '(other files)'

    agg = collections.defaultdict(collections.Counter)
    lines = collections.defaultdict(set)
    every = set()
    for (addr, chain), r in zip(insts, data):
        ex = int(float(r[col['Instructions Executed']] or 0))
        key = region(chain)
        c = agg[key]
        if ex > 0:
            c['ins'] += 1
            lines[key].add(addr // 128)
            every.add(addr // 128)
        for s in STALLS:
            v = int(float(r[col['stall_' + s]] or 0)) if 'stall_' + s in col else 0
            c[s] += v
            c['samples'] += v
    print('%s: %d distinct 128-byte lines executed (%.0f KB), %d instructions'
          % (kernel, len(every), len(every) * 128 / 1024, sum(c['ins'] for c in agg.values())))
    print('%-66s %6s %6s %8s %7s %7s %7s' % ('region', 'lines', 'insts', 'samples', 'no_inst', 'barrier', 'long_sb'))
    for key, c in sorted(agg.items(), key=lambda kv: -len(lines[kv[0]])):
        if not lines[key] and c['samples'] == 0:
            continue
        n = max(1, c['samples'])
        print('%-66s %6d %6d %8d %6.0f%% %6.0f%% %6.0f%%' % (key[:66], len(lines[key]), c['ins'], c['samples'],
                                                             100.0 * c['no_inst'] / n, 100.0 * c['barrier'] / n,
                                                             100.0 * c['long_sb'] / n))


if __name__ == '__main__':
    main()
