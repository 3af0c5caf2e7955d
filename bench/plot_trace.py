#!/usr/bin/env python3
"""A picture of one GPU's `loom moe --trace` timeline: a row per SM, a bar
per slice, colored by kind (the first word of the slice name: gate, place,
dispatch, GEMM0, GEMM1, combine, wait). Dispatch pieces overlap the GEMM
slices of their SM (the producer warps copy while the consumers compute),
so they are drawn as a thin band on the lower half of the row, the rest
full height; waits are grey.

Usage: python3 bench/plot_trace.py TRACE.json OUT.png [GPU]   (GPU: the
trace's pid, default 0; TRACE.json may be gzipped). Needs matplotlib.
"""
import gzip
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"gate": "tab:purple", "place": "tab:brown", "dispatch": "tab:orange",
          "GEMM0": "tab:blue", "GEMM1": "tab:green", "combine": "tab:red",
          "wait": "0.75"}


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, out = argv[1], argv[2]
    gpu = int(argv[3]) if len(argv) > 3 else 0
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    title = f"GPU {gpu}"
    bars = {}  # kind -> [(sm, start, duration)]
    kernel_us = 0.0
    for e in events:
        if e.get("pid") != gpu:
            continue
        if e.get("ph") == "M" and e.get("name") == "process_name":
            title = e["args"]["name"]
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "kernel":
            kernel_us = max(kernel_us, e["ts"] + e["dur"])
            continue
        kind = e["name"].split()[0]
        bars.setdefault(kind, []).append((e["tid"], e["ts"], e["dur"]))
    if not bars:
        print(f"no slices of pid {gpu} in {path}", file=sys.stderr)
        return 1
    sms = 1 + max(sm for v in bars.values() for sm, _, _ in v)
    fig, ax = plt.subplots(figsize=(12, 6))
    for kind in ["wait", "gate", "place", "GEMM0", "GEMM1", "combine", "dispatch"] + \
            sorted(k for k in bars if k not in COLORS):
        if kind not in bars:
            continue
        lo, h = (0.05, 0.35) if kind == "dispatch" else (0.05, 0.9)
        by_sm = {}
        for sm, ts, dur in bars[kind]:
            by_sm.setdefault(sm, []).append((ts, dur))
        for sm, spans in by_sm.items():
            ax.broken_barh(spans, (sm + lo, h), facecolors=COLORS.get(kind, "black"),
                           linewidth=0)
        ax.plot([], [], color=COLORS.get(kind, "black"), linewidth=6,
                label=f"{kind} ({len(bars[kind])})")
    ax.set_xlim(0, kernel_us or None)
    ax.set_ylim(0, sms)
    ax.set_xlabel("us since the kernel began")
    ax.set_ylabel("SM")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
