"""Shared helpers of the Python tests: what is available, the C reference
through ctypes, and a naive pure-Python MoE forward (plain loops over
Python floats, i.e. fp64) written straight from src/reference/moe.c."""
import ctypes
import importlib.util
import math
import os
import struct

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LOOM_H = os.path.join(REPO, "include", "loom.h")

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def have_cuda() -> bool:
    if not HAVE_TORCH:
        return False
    import torch
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


# ---- rounding of Python floats -------------------------------------------------------------


def f32(v: float) -> float:
    """Round to the nearest fp32 (RNE), as a C (float) cast."""
    if math.isnan(v) or math.isinf(v):
        return v
    return struct.unpack("f", struct.pack("f", v))[0]


def bf16(v: float) -> float:
    """fp32 value rounded to bf16 (RNE), as ref_round_bf16."""
    if math.isnan(v):
        return v
    bits = struct.unpack("I", struct.pack("f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits & 0xFFFFFFFF))[0]


def fp16(v: float) -> float:
    if math.isnan(v):
        return v
    return struct.unpack("e", struct.pack("e", v))[0]


ROUND = {"fp32": lambda v: v, "bf16": bf16, "fp16": fp16}


# ---- the naive reference -----------------------------------------------------------------


def _act(a, v):
    if a == "relu":
        return v if v > 0.0 else 0.0
    if a == "gelu":
        return 0.5 * v * (1.0 + math.erf(v * 0.70710678118654752440))
    return v / (1.0 + math.exp(-v))


def naive_moe(x, wg, w1, w2, k, act="swiglu", normalize=True, capacity_factor=0.0,
              dtype="fp32"):
    """x [T][H], wg [E][H], w1 [E][F1][H], w2 [E][H][F] (nn.Linear layouts),
    nested lists of floats already representable in dtype. Returns
    (logits [T][E] fp32, ids [T][k], weights [T][k] fp32, y [T][H] fp32)."""
    rnd = ROUND[dtype]
    T, H, E = len(x), len(x[0]), len(wg)
    F = len(w2[0][0])
    logits, ids, weights = [], [], []
    for t in range(T):
        row = []
        for e in range(E):
            p = [0.0] * 32
            for s in range(32):
                for h in range(s, H, 32):
                    p[s] += x[t][h] * wg[e][h]
            for o in (16, 8, 4, 2, 1):
                p = [p[s] + p[s ^ o] for s in range(32)]
            row.append(f32(p[0]))
        logits.append(row)
        # insertion top-k (ref_topk)
        def above(later, earlier):
            if math.isnan(later):
                return False
            return math.isnan(earlier) or later > earlier
        sel = []
        for e in range(E):
            if len(sel) < k:
                sel.append(e)
                pos = len(sel) - 1
            elif above(row[e], row[sel[k - 1]]):
                pos = k - 1
                sel[pos] = e
            else:
                continue
            while pos > 0 and above(row[e], row[sel[pos - 1]]):
                sel[pos] = sel[pos - 1]
                pos -= 1
            sel[pos] = e
        ids.append(sel)
        if not all(math.isfinite(v) for v in row):
            weights.append([math.nan] * k)
            continue
        mx = row[sel[0]]
        ex = [math.exp(v - mx) for v in row]
        total = 0.0
        for v in ex:
            total += v
        chosen = 0.0
        for e in sel:
            chosen += ex[e]
        scale = chosen if normalize else total
        weights.append([f32(ex[e] / scale) for e in sel])
    cap = math.ceil(capacity_factor * T * k / E) if capacity_factor > 0 and T > 0 else 0
    fill = [0] * E
    y = []
    outs = {}
    for t in range(T):
        for j in range(k):
            e = ids[t][j]
            if cap and fill[e] >= cap:
                outs[t, j] = None
                continue
            fill[e] += 1
            g = []
            for c in range(len(w1[e])):
                acc = 0.0
                for p in range(H):
                    acc += x[t][p] * w1[e][c][p]
                g.append(acc)
            if act == "swiglu":
                hv = [rnd(f32(_act("silu", g[f]) * g[F + f])) for f in range(F)]
            else:
                hv = [rnd(f32(_act(act, g[f]))) for f in range(F)]
            o = []
            for c in range(H):
                acc = 0.0
                for f in range(F):
                    acc += hv[f] * w2[e][c][f]
                o.append(rnd(f32(acc)))
            outs[t, j] = o
    for t in range(T):
        row = []
        for c in range(H):
            acc = 0.0
            for j in range(k):
                if outs[t, j] is not None:
                    acc += weights[t][j] * outs[t, j][c]
            row.append(f32(acc))
        y.append(row)
    return logits, ids, weights, y


# ---- the C reference (build/python/libloom_ref.so, made by `make python-test`) ----------------


class RefMoeShape(ctypes.Structure):
    """ref_moe_shape (src/reference/reference.h)."""
    _fields_ = [(n, ctypes.c_int) for n in
                ("T", "H", "F", "E", "k", "act", "renormalize", "capacity", "h_round", "out_round")]


def c_reference():
    """The C reference library, or None when LOOM_REFERENCE_LIBRARY is unset."""
    path = os.environ.get("LOOM_REFERENCE_LIBRARY") or os.path.join(REPO, "build", "python",
                                                                     "libloom_ref.so")
    if not os.path.isfile(path):
        return None
    lib = ctypes.CDLL(path)
    fp = ctypes.POINTER(ctypes.c_float)
    ip = ctypes.POINTER(ctypes.c_int32)
    lib.ref_moe_forward.restype = ctypes.c_int
    lib.ref_moe_forward.argtypes = [ctypes.POINTER(RefMoeShape), fp, fp, fp, fp, ip, fp, ip, fp,
                                    fp]
    return lib


def loom_h_defines():
    """#define NAME <int> and enum NAME = <int> of include/loom.h."""
    import re
    text = open(LOOM_H).read()
    out = {}
    for m in re.finditer(r"#define\s+(LOOM_\w+)\s+\(?(-?\d+)\)?\s*$", text, re.M):
        out[m.group(1)] = int(m.group(2))
    for m in re.finditer(r"^\s*(LOOM_\w+)\s*=\s*(-?\d+)\s*,?\s*(?:/\*.*)?$", text, re.M):
        out[m.group(1)] = int(m.group(2))
    return out
