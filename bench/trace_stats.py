#!/usr/bin/env python3
"""Per-kind slice statistics of a `loom moe --trace` timeline.

usage: bench/trace_stats.py TRACE.json [...]

For each file: slices per kind (the first word of the slice name: gate,
place, dispatch, gemm0, gemm1, combine, wait ...), their count, mean and
max duration (us) and the summed time over all SMs, so a slow kind shows
up without opening Perfetto. Then when each kind ran (first start, last
end, us since the kernel began), how many dispatch pieces ran beside a
GEMM slice of their SM (the Hopper variant copies most pieces on the
producer warpgroup while the consumers compute, docs/moe.md session 12),
and the expert tasks' rhythm: per SM (thread id of the timeline), the
gaps between consecutive GEMM slices, and the mean task period (slice +
gap); docs/moe.md "Session 11" reads the MoE's ~3.8 us gap against the
engine's ~24 us tile from it.
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
        spans(events, stats)
        gemm_rhythm(events)


def kind_of(e):
    words = e["name"].split(" ")
    return " ".join(words[:2]) if words[0] == "wait" else words[0]


def spans(events, stats):
    """First start and last end of each kind; dispatch pieces beside GEMMs."""
    xs = [e for e in events if e.get("ph") == "X"]
    if not xs:
        return
    t0 = min(float(e["ts"]) for e in xs)
    first, last = {}, {}
    for e in xs:
        k, a = kind_of(e), float(e["ts"]) - t0
        b = a + float(e.get("dur", 0.0))
        first[k] = min(first.get(k, a), a)
        last[k] = max(last.get(k, b), b)
    print("  when (us since the kernel began): " +
          ", ".join("%s %.1f-%.1f" % (k, first[k], last[k])
                    for k in sorted(first, key=lambda k: first[k]) if k in stats))
    gemm = defaultdict(list)
    for e in xs:
        if e["name"].startswith("GEMM"):
            gemm[e.get("tid")].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))))
    pieces = [e for e in xs if kind_of(e) == "dispatch"]
    if not pieces or not gemm:
        return
    beside = 0
    for e in pieces:
        a, b = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
        if any(s < b and a < t for s, t in gemm.get(e.get("tid"), [])):
            beside += 1
    print("  dispatch: %d of %d slices overlap a GEMM slice of their SM" % (beside, len(pieces)))


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
