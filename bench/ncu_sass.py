#!/usr/bin/env python3
"""Read the SASS source page of an ncu report, exported as CSV:

    ncu --import R.ncu-rep --page source --csv --print-source sass > R_sass.csv
    python3 bench/ncu_sass.py R_sass.csv            # list the kernels
    python3 bench/ncu_sass.py R_sass.csv K [N]      # kernel K: stall mix, top N instructions
    python3 bench/ncu_sass.py R_sass.csv K --ranges name:lo-hi ...
                                                    # warp-sample share of address ranges
                                                    # (low 20 bits, hex, inclusive)

Warp-state samples are per instruction; the share of a range is the share of
all the kernel's samples (every warp role together)."""
import csv
import sys


def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return 0.0


def load(fn):
    blocks, cur = [], None
    for row in csv.reader(open(fn)):
        if not row:
            continue
        if row[0] == 'Kernel Name':
            cur = {'name': row[1], 'rows': []}
            blocks.append(cur)
        elif row[0] == 'Address':
            cur['hdr'] = row
        elif cur is not None:
            cur['rows'].append(row)
    return blocks


def main():
    blocks = load(sys.argv[1])
    if len(sys.argv) < 3:
        for i, b in enumerate(blocks):
            print(i, b['name'], len(b['rows']), 'instructions')
        return
    b = blocks[int(sys.argv[2])]
    h = b['hdr']
    i_s = h.index('Warp Stall Sampling (All Samples)')
    i_e = h.index('Instructions Executed')
    stalls = [i for i, x in enumerate(h) if x.startswith('stall_') and 'Not Issued' not in x]
    tot = sum(num(r[i_s]) for r in b['rows']) or 1.0
    print(b['name'], len(b['rows']), 'instructions,', int(tot), 'samples')
    if len(sys.argv) > 3 and sys.argv[3] == '--ranges':
        for spec in sys.argv[4:]:
            name, rng = spec.split(':')
            lo, hi = (int(v, 16) for v in rng.split('-'))
            sel = [r for r in b['rows'] if lo <= (int(r[0], 16) & 0xfffff) <= hi]
            agg = {}
            for r in sel:
                for i in stalls:
                    agg[h[i][6:]] = agg.get(h[i][6:], 0) + num(r[i])
            s = sum(num(r[i_s]) for r in sel)
            mix = sorted(((v, k) for k, v in agg.items() if v > 0), reverse=True)[:4]
            print(f'{name:>12} {s / tot * 100:5.1f}%  executed {int(sum(num(r[i_e]) for r in sel)):>12}  ' +
                  ' '.join(f'{k} {v / max(s, 1) * 100:.0f}%' for v, k in mix))
        return
    agg = {}
    for r in b['rows']:
        for i in stalls:
            agg[h[i][6:]] = agg.get(h[i][6:], 0) + num(r[i])
    print(' '.join(f'{k} {v / tot * 100:.1f}%' for v, k in sorted(((v, k) for k, v in agg.items()), reverse=True)[:10]))
    ntop = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    for r in sorted(b['rows'], key=lambda r: -num(r[i_s]))[:ntop]:
        top = sorted(((num(r[i]), h[i][6:]) for i in stalls), reverse=True)[:3]
        print(f'{int(r[0], 16) & 0xfffff:05x} {num(r[i_s]) / tot * 100:5.1f}% {int(num(r[i_e])):>10} {r[1][:64]:64s} ' +
              ' '.join(f'{k}:{int(v)}' for v, k in top if v > 0))


if __name__ == '__main__':
    main()
