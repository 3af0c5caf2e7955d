#!/usr/bin/env python3
"""Per-kind slice statistics of a `loom moe --trace` timeline.

usage: bench/trace_stats.py TRACE.json [...]

For each file: slices per kind (the first word of the slice name: gate,
place, dispatch, gemm0, gemm1, combine, wait ...), their count, mean and
max duration (us) and the summed time over all SMs, so a slow kind shows
up without opening Perfetto. Then the expert tasks' rhythm: per SM
(thread id of the timeline), the gaps between consecutive GEMM slices,
and the mean task period (slice + gap); docs/moe.md "Session 11" reads
the MoE's ~3.8 us gap against the engine's ~24 us tile from it.
"""
import json
import sys
from collections import defaultdict


def main(paths):
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        stats = defaultdict(lambda: [0, 0.0, 0.0])
        for e in events:
            if e.get("ph") != "X":
                continue
            kind = e["name"].split(" ")[0]
            if kind == "wait":
                kind = " ".join(e["name"].split(" ")[:2])
            s = stats[kind]
            d = float(e.get("dur", 0.0))
            s[0] += 1
            s[1] += d
            s[2] = max(s[2], d)
        print(path)
        print("  %-16s %8s %10s %10s %12s" % ("kind", "slices", "mean_us", "max_us", "sum_us"))
        for kind, (n, tot, mx) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
            print("  %-16s %8d %10.2f %10.2f %12.1f" % (kind, n, tot / n, mx, tot))
        gemm_rhythm(events)


def gemm_rhythm(events):
    """Gaps between consecutive GEMM slices of each SM (us)."""
    per_sm = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e["name"].startswith("GEMM"):
            per_sm[e.get("tid")].append((float(e["ts"]), float(e.get("dur", 0.0))))
    gaps, slices = [], []
    for sl in per_sm.values():
        sl.sort()
        slices += [d for _, d in sl]
        gaps += [b[0] - (a[0] + a[1]) for a, b in zip(sl, sl[1:])]
    if not gaps:
        return
    gaps.sort()
    mean_slice = sum(slices) / len(slices)
    mean_gap = sum(gaps) / len(gaps)
    print("  GEMM tasks on %d SMs: slice %.2f us, gap between slices mean %.2f / median %.2f / p90 %.2f us,"
          " period %.2f us" % (len(per_sm), mean_slice, mean_gap, gaps[len(gaps) // 2],
                               gaps[int(len(gaps) * 0.9)], mean_slice + mean_gap))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
