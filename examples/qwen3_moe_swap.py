"""Swap a Qwen3-MoE block's experts for loom's fused MoE kernel.

Builds a small random Qwen3-MoE-shaped sparse MoE block in plain PyTorch
(the Hugging Face module structure and parameter names: mlp.gate,
mlp.experts.{e}.gate_proj / up_proj / down_proj, and its forward:
bf16 router logits, softmax, top-k, optional renormalisation, a loop over
experts), moves its weights into loom.torch.MoE with load_hf_state_dict,
checks that the outputs match, then times both.

    PYTHONPATH=python LOOM_LIBRARY=$PWD/build/libloom.so python3 examples/qwen3_moe_swap.py
    python3 examples/qwen3_moe_swap.py --tokens 8192 --experts 128 --top-k 8   # after pip install .

On a machine without a GPU it runs a tiny block on the CPU, where loom's
block falls back to its reference (the check runs; the timings mean nothing).

What "match" means: the two blocks route a token to the same experts unless
its top-k edge is within rounding of a tie (Hugging Face rounds the router
logits to the model dtype; loom computes them exactly and rounds to fp32
once), so rows are compared where the routing agrees (per-row relative
error, bf16 tolerance 2e-2), and loom is also compared with reference_moe
(the exact reference) on every row.
"""
import argparse
import statistics
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

import loom.torch as lt


class Qwen3MoeMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Qwen3MoeSparseMoeBlock(nn.Module):
    """The Hugging Face (transformers 4.x) Qwen3-MoE block, in plain PyTorch."""

    def __init__(self, hidden, inter, num_experts, top_k, norm_topk_prob):
        super().__init__()
        self.top_k, self.norm_topk_prob, self.num_experts = top_k, norm_topk_prob, num_experts
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(Qwen3MoeMLP(hidden, inter) for _ in range(num_experts))

    def routing(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        w, ids = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            w = w / w.sum(dim=-1, keepdim=True)
        return w.to(x.dtype), ids

    def forward(self, hidden_states):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        w, ids = self.routing(x)
        out = torch.zeros_like(x)
        mask = F.one_hot(ids, self.num_experts).permute(2, 1, 0)  # [E, k, T]
        for e in torch.nonzero(mask.sum(dim=(1, 2)))[:, 0].tolist():
            j, t = torch.where(mask[e])
            y = self.experts[e](x[t]) * w[t, j, None]
            out.index_add_(0, t, y.to(x.dtype))
        return out.reshape(shape)


class DecoderLayerMLP(nn.Module):
    """Stand-in for the decoder layer that holds the block as `.mlp`."""

    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, h):
        return h + self.mlp(h)


def row_errors(y, ref):
    y, ref = y.double().reshape(-1, y.shape[-1]), ref.double().reshape(-1, ref.shape[-1])
    return (y - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-30)


def time_ms(fn, x, iters, warmup, cuda):
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(iters):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=4096 if cuda else 16)
    p.add_argument("--hidden", type=int, default=2048 if cuda else 128)
    p.add_argument("--ffn", type=int, default=768 if cuda else 64, help="moe_intermediate_size")
    p.add_argument("--experts", type=int, default=128 if cuda else 8)
    p.add_argument("--top-k", type=int, default=8 if cuda else 2)
    p.add_argument("--no-norm", action="store_true", help="norm_topk_prob=False")
    p.add_argument("--dtype", default="bfloat16" if cuda else "float32",
                   choices=["bfloat16", "float16", "float32"])
    p.add_argument("--iters", type=int, default=20 if cuda else 2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(a.seed)

    # 1. a random Qwen3-MoE block in plain PyTorch, inside its "decoder layer"
    hf = Qwen3MoeSparseMoeBlock(a.hidden, a.ffn, a.experts, a.top_k, not a.no_norm)
    with torch.no_grad():
        for prm in hf.parameters():
            prm.copy_(torch.randn_like(prm) / prm.shape[-1] ** 0.5)
    hf = hf.to(dev, dtype).eval()
    layer = DecoderLayerMLP(hf)

    # 2. the swap: loom's block from the same config names and state dict takes
    #    the PyTorch block's place in the layer
    moe = lt.MoE(hidden_size=a.hidden, moe_intermediate_size=a.ffn, num_experts=a.experts,
                 num_experts_per_tok=a.top_k, norm_topk_prob=not a.no_norm, hidden_act="silu",
                 max_tokens=a.tokens, device=dev, dtype=dtype)
    moe.load_hf_state_dict(hf.state_dict())
    x = torch.randn(a.tokens, a.hidden, device=dev).to(dtype)
    with torch.inference_mode():
        y_hf = layer.mlp(x)
        layer.mlp = moe
        y_loom = layer.mlp(x)
        _, ids_hf = hf.routing(x)
        ref, ids_ref, _ = moe.reference(x, return_routing=True)

    # 3. check
    if dtype == torch.float32:
        tol = 5e-3 if cuda else 1e-5  # TF32 on the GPU; the exact reference on the CPU
    else:
        tol = 2e-2
    err_ref = row_errors(y_loom, ref)
    agree = (ids_hf.sort(dim=1).values == ids_ref.long().sort(dim=1).values).all(dim=1)
    err_hf = row_errors(y_loom, y_hf)[agree]
    print(f"block: tokens {a.tokens}, hidden {a.hidden}, moe_intermediate {a.ffn}, experts "
          f"{a.experts}, top-k {a.top_k}, norm_topk_prob {not a.no_norm}, {a.dtype}, {dev}")
    print(f"loom vs reference_moe: worst row error {err_ref.max().item():.3g} (tolerance {tol})")
    print(f"loom vs the PyTorch block: {agree.sum().item()} of {a.tokens} tokens routed alike, "
          f"worst row error there {err_hf.max().item() if len(err_hf) else 0.0:.3g}")
    ok = err_ref.max().item() <= tol and (len(err_hf) == 0 or err_hf.max().item() <= 2 * tol) \
        and agree.double().mean().item() >= 0.5
    print("outputs match" if ok else "OUTPUTS DIFFER")

    # 4. timings (median of --iters, after warm-up)
    with torch.inference_mode():
        t_hf = time_ms(hf, x, a.iters, 2, cuda)
        t_loom = time_ms(moe, x, a.iters, 2, cuda)
    print(f"PyTorch block: {t_hf:.3f} ms   loom: {t_loom:.3f} ms   ({t_hf / t_loom:.2f}x)"
          + ("" if cuda else "   [CPU: loom runs its reference here; not a measurement]"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
