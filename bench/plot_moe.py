#!/usr/bin/env python3
"""Latency vs tokens per GPU (one color per run), fused beside the baseline, from `loom moe --json` files.

Usage: python3 bench/plot_moe.py OUT.png RUN.json [RUN.json ...]
Each JSON is one `loom moe` run (bench/moe_grid.sh writes grid-bf16.json and
grid-fp32.json); every (dtype, implementation) becomes one line. Needs
matplotlib (pip install matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, runs = argv[1], [json.load(open(p)) for p in argv[2:]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"fused": "-o", "baseline": "--s"}
    title = None
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple"]
    for i, run in enumerate(runs):
        color = colors[i % len(colors)]
        dtype = run["dtype"] + (" (TF32)" if run["dtype"] == "fp32" else "")
        title = (f"{run['gpus']} x {run['device']}: E={run['experts']}, k={run['top_k']}, "
                 f"H={run['hidden']}, F={run['ffn']}")
        for impl in ("fused", "baseline"):
            rows = sorted((r for r in run["rows"] if r["impl"] == impl),
                          key=lambda r: r["tokens_per_gpu"])
            if not rows:
                continue
            t = [r["tokens_per_gpu"] for r in rows]
            ax.errorbar(t, [r["median_us"] for r in rows],
                        yerr=[[r["median_us"] - r["min_us"] for r in rows],
                              [r["max_us"] - r["median_us"] for r in rows]],
                        fmt=styles[impl], capsize=3, color=color,
                        mfc=color if impl == "fused" else "white",
                        label=f"{'loom fused' if impl == 'fused' else 'NCCL + cuBLAS'}, {dtype}")
        bound = sorted({(r["tokens_per_gpu"], r["bound_us"]) for r in run["rows"]})
        ax.plot([b[0] for b in bound], [b[1] for b in bound], ":", color=color,
                label=f"bound, {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per GPU")
    ax.set_ylabel("layer time, us (median; bars: min..max)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
