#!/usr/bin/env python3
"""A/B of two `loom` binaries on the MoE layer, in one process tree (one
device lease): the way bench/RESULTS.md compares a change with its base
since session 12, without a new script per call.

For each case the two binaries run alternately, `rounds` times each
(base, new, base, new, ...), `loom moe ... --impl fused`; every run's log
is kept in OUTDIR. The summary (stdout and OUTDIR/summary.md) gives per
case and token count the medians of each run, the change of the mean of
the medians, and the phase ends of the last run of each ("gate / place /
dispatch / experts / combine" us, as the CLI prints them). A run that
fails (verification, timeout) is listed as failed; its case shows "-".

usage: bench/moe_ab.py OUTDIR BASE_LOOM NEW_LOOM [--rounds N] [--case "ARGS"]...
  --case may repeat; without it the default set below runs.
  Sets NCCL_NVLS_ENABLE=0, and puts the nvidia-nccl wheel's lib directory
  on LD_LIBRARY_PATH when that package is importable (binaries built on
  another machine and carried to the GPU one).
"""
import os
import re
import subprocess
import sys

DEFAULT_CASES = [
    "--tokens 4096,16384 --iters 20",
    "--tokens 16384 --experts 4 --iters 20",
    "--tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20",
    "--tokens 1,128,512 --experts 64 --topk 8 --iters 30",
    "--tokens 16384 --dtype fp32 --iters 10",
]

TOKENS_RE = re.compile(r"^\[\d+/\d+\] tokens/GPU (\d+)")
FUSED_RE = re.compile(r"^\s+fused\s+median ([0-9.]+) us.*?phases end at (.*) us\s*$")


def parse(log):
    """{tokens: (median_us, phases)} from one `loom moe` log."""
    out, tokens = {}, None
    for line in log.splitlines():
        m = TOKENS_RE.match(line)
        if m:
            tokens = int(m.group(1))
            continue
        m = FUSED_RE.match(line)
        if m and tokens is not None:
            phases = " / ".join(p.split()[-1] for p in m.group(2).split(","))
            out[tokens] = (float(m.group(1)), phases)
    return out


def env_with_nccl():
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    try:
        import nvidia.nccl as m  # noqa: F401  (the wheel the GPU image has)
        lib = os.path.join(list(m.__path__)[0], "lib")
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    except ImportError:
        pass
    return env


def main(argv):
    args, cases, rounds = [], [], 2
    i = 0
    while i < len(argv):
        if argv[i] == "--rounds" and i + 1 < len(argv):
            rounds = int(argv[i + 1])
            i += 2
        elif argv[i] == "--case" and i + 1 < len(argv):
            cases.append(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 3 or rounds < 1:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    outdir, bins = args[0], {"base": args[1], "new": args[2]}
    for which, path in bins.items():
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            print("moe_ab: %s binary %s is not an executable file" % (which, path), file=sys.stderr)
            return 2
    cases = cases or DEFAULT_CASES
    os.makedirs(outdir, exist_ok=True)
    env = env_with_nccl()
    # results[case][which] = list of {tokens: (median, phases)}
    results, failed = {}, []
    for ci, case in enumerate(cases):
        results[case] = {"base": [], "new": []}
        for r in range(rounds):
            for which in ("base", "new"):
                cmd = [bins[which], "moe"] + case.split() + ["--impl", "fused"]
                name = os.path.join(outdir, "c%d_r%d_%s.log" % (ci, r, which))
                try:
                    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, timeout=300)
                    log, rc = p.stdout, p.returncode
                except subprocess.TimeoutExpired as e:  # (its output may come back as bytes)
                    out = e.stdout or ""
                    log, rc = out.decode(errors="replace") if isinstance(out, bytes) else out, 124
                with open(name, "w") as f:
                    f.write("$ %s\n%s\nrc=%d\n" % (" ".join(cmd), log, rc))
                if rc != 0:
                    failed.append("%s (rc %d): %s" % (which, rc, name))
                    continue
                results[case][which].append(parse(log))
    lines = ["| case | tokens | base median us | new median us | change | base phases | new phases |",
             "|---|---|---|---|---|---|---|"]
    for case in cases:
        toks = sorted({t for run in results[case]["base"] + results[case]["new"] for t in run})
        for t in toks:
            cell, last = {}, {}
            for which in ("base", "new"):
                vals = [run[t][0] for run in results[case][which] if t in run]
                cell[which] = vals
                last[which] = next((run[t][1] for run in reversed(results[case][which]) if t in run), "-")
            b, n = cell["base"], cell["new"]
            change = ("%+.1f%%" % (100.0 * (sum(n) / len(n) / (sum(b) / len(b)) - 1.0))) if b and n else "-"
            fmt = lambda v: ", ".join("%.1f" % x for x in v) if v else "-"
            lines.append("| `%s` | %d | %s | %s | %s | %s | %s |" % (case, t, fmt(b), fmt(n), change, last["base"],
                                                                   last["new"]))
    if failed:
        lines.append("")
        lines += ["failed: " + f for f in failed]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("base: %s\nnew: %s\nrounds: %d\n\n%s\n" % (bins["base"], bins["new"], rounds, text))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
