#!/usr/bin/env python3
"""Time over bound per run and rows per GPU, fused beside the baseline, from
`loom ag-gemm` / `loom gemm-rs` / `loom gemm-ar` --json files (issue 12's plot
per operator).

Usage: python3 bench/plot_collective.py OUT.png RUN.json [RUN.json ...]
One panel per operator (ag-gemm, gemm-rs, gemm-ar) found in the runs; in a
panel, each run (shape, dtype) is one color, fused a solid line, the NCCL +
cuBLAS baseline dashed; the y axis is median time / bound (1 = at the
bound), the x axis rows per GPU (--tokens). bench/collective_grid.sh writes
the runs.
Needs matplotlib (pip install matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(run):
    dtype = run["dtype"] + (" (TF32)" if run["dtype"] == "fp32" else "")
    act = "" if run.get("act", "none") == "none" else f", {run['act']}"
    return f"hidden {run['hidden']}, ffn {run['ffn']}, {dtype}{act}"


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, runs = argv[1], [json.load(open(p)) for p in argv[2:]]
    ops = sorted({r["command"] for r in runs})
    fig, axes = plt.subplots(1, len(ops), figsize=(6.5 * len(ops), 4.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, op in zip(axes[0], ops):
        mine = [r for r in runs if r["command"] == op]
        for i, run in enumerate(mine):
            color = colors[i % len(colors)]
            for impl, style in (("fused", "-o"), ("baseline", "--s")):
                rows = sorted((r for r in run["rows"] if r["impl"] == impl), key=lambda r: r["tokens_per_gpu"])
                if not rows:
                    continue
                ax.plot([r["tokens_per_gpu"] for r in rows], [r["median_us"] / r["bound_us"] for r in rows],
                        style, color=color, mfc=color if impl == "fused" else "white",
                        label=f"{'loom fused' if impl == 'fused' else 'NCCL + cuBLAS'}: {label(run)}")
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rows per GPU (--tokens)")
        ax.set_ylabel("median time / bound")
        gpus = sorted({r["gpus"] for r in mine})
        ax.set_title(f"loom {op}, {'/'.join(map(str, gpus))} x {mine[0]['device']}")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
