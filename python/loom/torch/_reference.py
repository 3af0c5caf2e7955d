"""A pure-PyTorch MoE layer forward with the math of loom's CPU reference
(src/reference/moe.c: ref_moe_gate + ref_moe_forward), for tests.

Step by step, as the C reference does it:
  gate     logits[t][e] = sum_h x[t][h] * wg[e][h] in fp64 in the canonical
           order (32 slices h = s, s+32, ... summed in order, then a
           butterfly over the slice index), rounded to fp32 once;
  top-k    over the fp32 logits: larger first, NaN below every number
           (-Inf included), ties to the LOWER expert index; always k
           distinct ids;
  weights  softmax over all E logits in fp64 (minus the top logit, summed
           in ascending e) at the chosen ids, divided by the sum of the k
           chosen (ascending j) when normalize_top_k, else by the full sum;
           rounded to fp32. A token with any non-finite logit gets NaN
           weights;
  capacity c > 0: each expert keeps the first ceil(c * T * k / E)
           assignments in token-major order (t, then j); the rest add 0;
  experts  g = x * W1 in fp64, act(g) in fp64 (SwiGLU: silu(g[:F]) * g[F:]),
           h rounded to fp32 then to x's dtype when that is bf16/fp16;
           out = h * W2 in fp64, rounded to fp32, then to x's dtype;
  combine  y[t] = sum over kept j, ascending, of w[t][j] * out[t][j] in
           fp64, rounded to fp32.
The fp64 matrix products (and exp / erf) may round their last fp64 bit
differently from the C code's loops; everything else is the same operation
in the same order. The result is fp32: it is the truth loom's GPU output
(in x's dtype) is compared against, with the per-dtype tolerances of
docs/python.md.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch

from .._lib import WeightLayout
from ..config import _LAYOUT_NAMES, _enum

_SLICES = 32  # the gate's canonical summation slices (ref_moe_gate)
_TOKEN_CHUNK = 512  # tokens per gate chunk (bounds the [chunk, 32, E] fp64 temporary)

_ACTS = ("relu", "gelu", "silu", "swiglu")


def _act_name(activation) -> str:
    if isinstance(activation, str):
        a = activation.strip().lower()
        a = "silu" if a == "swish" else a
    else:  # loom.Activation or its int value (0 .. 3; not a bool, not LOOM_UNSET)
        if isinstance(activation, bool) or not isinstance(activation, int) \
                or not 0 <= activation < len(_ACTS):
            raise ValueError(f"activation ({activation!r}) is not one of {', '.join(_ACTS)} "
                             "or a loom.Activation")
        a = _ACTS[int(activation)]
    if a not in _ACTS:
        raise ValueError(f"activation ({activation!r}) is not one of {', '.join(_ACTS)}")
    return a


def _round_to(t: torch.Tensor, dtype: Optional[torch.dtype]) -> torch.Tensor:
    """fp32 values rounded (RNE) through a 16-bit dtype and back; None: unchanged."""
    return t if dtype is None else t.to(dtype).float()


def gate_logits(x: torch.Tensor, gate_weight: torch.Tensor) -> torch.Tensor:
    """fp32 logits [T, E] of x [T, H] and gate_weight [E, H] in the reference's
    canonical fp64 order (bitwise what ref_moe_gate holds)."""
    T, H = x.shape
    E = gate_weight.shape[0]
    pad = (-H) % _SLICES
    chunks = (H + pad) // _SLICES
    wd = torch.nn.functional.pad(gate_weight.double(), (0, pad)).view(E, chunks, _SLICES)
    wd = wd.permute(1, 2, 0).contiguous()  # [chunk][slice][E]
    out = torch.empty(T, E, dtype=torch.float32, device=x.device)
    perms = {o: torch.arange(_SLICES, device=x.device) ^ o for o in (16, 8, 4, 2, 1)}
    for t0 in range(0, T, _TOKEN_CHUNK):
        xd = torch.nn.functional.pad(x[t0:t0 + _TOKEN_CHUNK].double(), (0, pad))
        xd = xd.view(-1, chunks, _SLICES)
        p = torch.zeros(xd.shape[0], _SLICES, E, dtype=torch.float64, device=x.device)
        for i in range(chunks):  # slice s adds h = s, s + 32, ... in order; products are exact
            p += xd[:, i, :, None] * wd[i][None]
        for o in (16, 8, 4, 2, 1):  # butterfly: p[s] = p[s] + p[s ^ o]
            p = p + p[:, perms[o], :]
        out[t0:t0 + _TOKEN_CHUNK] = p[:, 0, :].float()
    return out


def topk_ids(logits: torch.Tensor, k: int) -> torch.Tensor:
    """int64 [T, k]: ref_topk's order (larger first, NaN below every number,
    ties to the lower index)."""
    nan = torch.isnan(logits)
    key = torch.where(nan, torch.full_like(logits, -math.inf), logits)
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    # NaNs after everything (-Inf included), keeping index order among them.
    nan_sorted = torch.gather(nan, 1, order).to(torch.int8)
    order = torch.gather(order, 1, torch.sort(nan_sorted, dim=1, stable=True).indices)
    return order[:, :k]


def gate_weights(logits: torch.Tensor, ids: torch.Tensor, normalize: bool) -> torch.Tensor:
    """fp32 [T, k] routing weights of the chosen ids (ref_moe_gate's gate_row)."""
    T, E = logits.shape
    k = ids.shape[1]
    ld = logits.double()
    top = torch.gather(ld, 1, ids[:, :1])
    ex = torch.exp(ld - top)
    total = torch.zeros(T, dtype=torch.float64, device=logits.device)
    for e in range(E):  # ascending e, as the reference sums
        total = total + ex[:, e]
    chosen_ex = torch.gather(ex, 1, ids)
    chosen = torch.zeros(T, dtype=torch.float64, device=logits.device)
    for j in range(k):
        chosen = chosen + chosen_ex[:, j]
    scale = chosen if normalize else total
    w = (chosen_ex / scale[:, None]).float()
    finite = torch.isfinite(logits).all(dim=1, keepdim=True)
    return torch.where(finite, w, torch.full_like(w, math.nan))


def _act(a: str, g: torch.Tensor, F: int) -> torch.Tensor:
    if a == "swiglu":
        gate, up = g[:, :F], g[:, F:]
        return gate / (1.0 + torch.exp(-gate)) * up
    if a == "relu":
        return torch.where(g > 0.0, g, torch.zeros_like(g))
    if a == "gelu":
        return 0.5 * g * (1.0 + torch.erf(g * 0.70710678118654752440))
    return g / (1.0 + torch.exp(-g))  # silu


def reference_moe(x: torch.Tensor, gate_weight: Optional[torch.Tensor], w1: torch.Tensor,
                  w2: torch.Tensor, top_k: int, *, activation="swiglu",
                  normalize_top_k: bool = True, capacity_factor: float = 0.0,
                  expert_ids: Optional[torch.Tensor] = None,
                  routing_weights: Optional[torch.Tensor] = None,
                  weight_layout="out_in", return_routing: bool = False
                  ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The MoE layer forward of one rank's tokens with ALL experts, as loom's
    CPU reference computes it (module docstring). Returns fp32 y shaped like x.

    x            [..., H], fp32 / bf16 / fp16 (its dtype selects the rounding
                 of the intermediate and of each expert's output, as on the GPU)
    gate_weight  [E, H] (weight_layout "out_in", nn.Linear's) or [H, E]
                 ("in_out"); may be None with caller routing
    w1           [E, F1, H] ("out_in"; SwiGLU: F1 = 2F, rows [0, F) gate,
                 [F, 2F) up) or [E, H, F1] ("in_out")
    w2           [E, H, F] ("out_in") or [E, F, H] ("in_out")
    top_k        choices per token
    activation   "relu", "gelu" (exact), "silu" or "swiglu" (or loom.Activation)
    weight_layout  "out_in" / "in_out" or a loom.WeightLayout, as MoeConfig takes
                 it (a bad value raises ValueError)
    capacity_factor  0: dropless; c > 0: ceil(c * T * k / E) per expert
    expert_ids, routing_weights  caller routing [..., k] (both or neither;
                 ids may repeat, as in the reference)
    return_routing  also return (ids int32 [..., k], weights fp32 [..., k])
    """
    act = _act_name(activation)
    layout = _enum(weight_layout, WeightLayout, _LAYOUT_NAMES, "weight_layout")
    if layout == WeightLayout.IN_OUT:
        gate_weight = None if gate_weight is None else gate_weight.t()
        w1, w2 = w1.transpose(1, 2), w2.transpose(1, 2)
    H = x.shape[-1]
    lead = x.shape[:-1]
    xs = x.reshape(-1, H).float()
    T = xs.shape[0]
    E, F1, H1 = w1.shape
    F = w2.shape[2]
    gated = act == "swiglu"
    if H1 != H or w2.shape[:2] != (E, H) or F1 != (2 * F if gated else F):
        raise ValueError(f"weight shapes w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)} do not fit "
                         f"hidden {H}, {act} (out_in: w1 [E, {'2F' if gated else 'F'}, H], "
                         "w2 [E, H, F])")
    if not 1 <= top_k <= E:
        raise ValueError(f"top_k ({top_k}) must be in [1, num_experts = {E}]")
    rd = x.dtype if x.dtype in (torch.bfloat16, torch.float16) else None
    dev = x.device

    if (expert_ids is None) != (routing_weights is None):
        raise ValueError("expert_ids and routing_weights come together or not at all")
    if expert_ids is None:
        if gate_weight is None or tuple(gate_weight.shape) != (E, H):
            raise ValueError(f"gate_weight must be [E, H] = [{E}, {H}] (out_in)")
        logits = gate_logits(xs, gate_weight.float())
        ids = topk_ids(logits, top_k)
        w = gate_weights(logits, ids, normalize_top_k)
    else:
        ids = expert_ids.reshape(T, top_k).long().to(dev)
        w = routing_weights.reshape(T, top_k).float().to(dev)
        if T and (ids.min() < 0 or ids.max() >= E):
            raise ValueError(f"expert_ids must be in [0, {E})")

    # Capacity: positions in token-major order (a = t * k + j).
    n = T * top_k
    flat = ids.reshape(n)
    if capacity_factor > 0 and T > 0:
        cap = math.ceil(capacity_factor * T * top_k / E)
        onehot = torch.nn.functional.one_hot(flat, E)
        before = (torch.cumsum(onehot, 0) - onehot).gather(1, flat[:, None])[:, 0]
        kept = before < cap
    else:
        kept = torch.ones(n, dtype=torch.bool, device=dev)

    out = torch.zeros(n, H, dtype=torch.float32, device=dev)  # each assignment's expert output
    w1d, w2d = w1.double(), w2.double()
    for e in range(E):
        rows = torch.nonzero((flat == e) & kept)[:, 0]
        if rows.numel() == 0:
            continue
        g = xs[rows // top_k].double() @ w1d[e].t()
        h = _round_to(_act(act, g, F).float(), rd)
        o = (h.double() @ w2d[e].t()).float()
        out[rows] = _round_to(o, rd)

    acc = torch.zeros(T, H, dtype=torch.float64, device=dev)
    out = out.view(T, top_k, H)
    keptv = kept.view(T, top_k, 1)
    for j in range(top_k):  # ascending j, skipping dropped assignments
        contrib = w[:, j:j + 1].double() * out[:, j].double()
        acc = torch.where(keptv[:, j], acc + contrib, acc)
    y = acc.float().reshape(*lead, H)
    if return_routing:
        return (y, ids.to(torch.int32).reshape(*lead, top_k),
                w.reshape(*lead, top_k).contiguous())
    return y
