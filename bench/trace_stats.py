#!/usr/bin/env python3
"""Per-kind slice statistics of a `loom moe --trace` timeline.

usage: bench/trace_stats.py TRACE.json [...]

For each file: slices per kind (the first word of the slice name: gate,
place, dispatch, gemm0, gemm1, combine, wait ...), their count, mean and
max duration (us) and the summed time over all SMs, so a slow kind shows
up without opening Perfetto.
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


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
