"""loom.torch.MoE: a Mixture-of-Experts block (gate + routed SwiGLU experts)
that runs as loom's single-kernel MoE layer forward.

Parameters, in nn.Linear's [out, in] layout per matrix (loom's
WeightLayout.OUT_IN):
    gate.weight  [E, H]        the router (HF: mlp.gate.weight)
    w1           [E/R, 2F, H]  per local expert: rows [0, F) the gate
                               projection, rows [F, 2F) the up projection
                               (HF Qwen3-MoE gate_proj / up_proj; Mixtral w1 / w3)
    w2           [E/R, H, F]   per local expert: the down projection
                               (HF down_proj; Mixtral w2)
R is the communicator's size; this rank holds experts
[rank * E/R, (rank + 1) * E/R). load_hf_state_dict maps Hugging Face
checkpoints onto these.
"""
import math
import weakref
from dataclasses import replace
from typing import Dict, List, Mapping, Optional

import torch
from torch import nn

from .._lib import Activation, LoomArgumentError, LoomError, Result
from ..config import MoeConfig
from ..runtime import Comm, MoeLayer
from ._dist import default_comm
from ._dtypes import loom_dtype
from ._ops import check_tokens, moe_forward, moe_forward_routed, moe_forward_routing, \
    register_layer, unregister_layer
from ._reference import reference_moe

# Hugging Face per-expert names of (gate, up, down) projections by model family.
HF_EXPERT_NAMES = {
    "qwen3": ("gate_proj", "up_proj", "down_proj"),  # Qwen2/3-MoE, also DeepSeek-style MLPs
    "mixtral": ("w1", "w3", "w2"),                   # Mixtral: w1 gate, w3 up, w2 down
}


def _activation(hidden_act: str, gated: bool) -> Activation:
    a = str(hidden_act).strip().lower()
    if gated:
        if a in ("silu", "swish"):
            return Activation.SWIGLU
        raise LoomArgumentError(f"hidden_act {hidden_act!r} with gated experts: loom runs gated "
                                "experts as SwiGLU only (hidden_act 'silu')")
    table = {"relu": Activation.RELU, "gelu": Activation.GELU, "silu": Activation.SILU,
             "swish": Activation.SILU}
    if a not in table:
        raise LoomArgumentError(f"hidden_act {hidden_act!r} is not one of relu, gelu (exact erf "
                                "form), silu")
    return table[a]


def _release(handle: int, layer: MoeLayer) -> None:
    unregister_layer(handle)
    try:
        layer.close()
    except Exception:
        pass


class MoE(nn.Module):
    """A MoE block on loom's fused MoE layer kernel.

    Takes Hugging Face config names:
      hidden_size, moe_intermediate_size (F), num_experts (E),
      num_experts_per_tok (top-k), norm_topk_prob (renormalise the k
      weights; Mixtral always does), hidden_act ("silu": SwiGLU experts).
    loom options:
      gated: SwiGLU experts (True, as Qwen3-MoE / Mixtral) or a plain
        act(x W1) W2 (False; hidden_act relu / gelu / silu);
      max_tokens: the most tokens one forward may pass per rank (sizes the
        communicator workspace: ~2 * R * max_tokens * min(k, E/R) * H * dtype
        bytes);
      capacity_factor: 0 dropless (default), c > 0 capacity per expert;
      fp32_math: "tf32" (default) or "fp32" (exact) for float32 blocks;
      comm: a loom.Comm (from loom.torch.comm_from_process_group) for expert
        parallelism over R ranks; None: world size 1 on the parameters'
        device, with a communicator loom.torch makes and shares;
      device, dtype: of the parameters (float32, bfloat16 or float16); with
        a comm, a CUDA device must be the communicator's (CPU or meta are
        fine: the loom layer is made when the block moves to its GPU).
    forward(x [..., H]) -> y, same shape and dtype. On a CUDA device it is
    one loom kernel (torch.ops.loom.moe_forward) on the current stream:
    torch.compile and CUDA graphs work. On the CPU (world size 1) it checks
    x as the GPU op does and runs reference_moe, the exact (slow) reference.
    Forward only: parameters are created with requires_grad=False and the
    ops have no backward.
    With R > 1 every forward is collective: every rank calls it the same
    number of times, each with its own tokens (0 allowed).
    """

    def __init__(self, hidden_size: int, moe_intermediate_size: int, num_experts: int,
                 num_experts_per_tok: int, norm_topk_prob: bool = True, hidden_act: str = "silu",
                 *, gated: bool = True, max_tokens: int = 4096, capacity_factor: float = 0.0,
                 fp32_math: Optional[str] = None, comm: Optional[Comm] = None,
                 device=None, dtype: Optional[torch.dtype] = None):
        super().__init__()
        dtype = dtype or torch.get_default_dtype()
        self.config = self.make_config(hidden_size, moe_intermediate_size, num_experts,
                                       num_experts_per_tok, norm_topk_prob, hidden_act,
                                       gated=gated, max_tokens=max_tokens,
                                       capacity_factor=capacity_factor, fp32_math=fp32_math,
                                       dtype=dtype)
        self.nranks = comm.nranks if comm is not None else 1
        self.rank = comm.rank if comm is not None else 0
        self.config.validate(self.nranks)
        if comm is not None:
            want = torch.device("cuda", comm.device)
            d = torch.device(device) if device is not None else want
            if d.type == "cuda" and d.index is None:
                d = torch.device("cuda", torch.cuda.current_device())
            device = d
            if d.type == "cuda" and d != want:
                raise LoomArgumentError(f"device {device} is not the communicator's device {want} "
                                        "(parameters may also start on the CPU or meta device)")
        self.comm = comm
        self.hidden_size = hidden_size
        self.moe_intermediate_size = moe_intermediate_size
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.norm_topk_prob = bool(norm_topk_prob)
        self.hidden_act = hidden_act
        self.gated = gated
        self.local_experts = num_experts // self.nranks
        self.first_expert = self.rank * self.local_experts
        F1 = self.config.ffn1
        kw = dict(device=device, dtype=dtype)
        self.gate = nn.Linear(hidden_size, num_experts, bias=False, **kw)
        self.gate.weight.requires_grad_(False)
        self.w1 = nn.Parameter(torch.empty(self.local_experts, F1, hidden_size, **kw),
                               requires_grad=False)
        self.w2 = nn.Parameter(torch.empty(self.local_experts, hidden_size, moe_intermediate_size,
                                           **kw), requires_grad=False)
        self._layer: Optional[MoeLayer] = None
        self._handle: Optional[int] = None
        self._layer_key = None
        self._finalizer = None
        self.reset_parameters()
        self._sync_layer()

    # ---- config -----------------------------------------------------------------------
    @staticmethod
    def make_config(hidden_size: int, moe_intermediate_size: int, num_experts: int,
                    num_experts_per_tok: int, norm_topk_prob: bool = True,
                    hidden_act: str = "silu", *, gated: bool = True, max_tokens: int = 4096,
                    capacity_factor: float = 0.0, fp32_math: Optional[str] = None,
                    dtype: torch.dtype = torch.bfloat16) -> MoeConfig:
        """The loom.MoeConfig of a block built with these arguments (for
        CommConfig.for_moe before the block exists)."""
        return MoeConfig(hidden=hidden_size, ffn=moe_intermediate_size, num_experts=num_experts,
                         top_k=num_experts_per_tok, max_tokens_per_rank=max_tokens,
                         activation=_activation(hidden_act, gated), dtype=loom_dtype(dtype),
                         fp32_math=fp32_math, normalize_top_k=bool(norm_topk_prob),
                         capacity_factor=capacity_factor).validate()

    @staticmethod
    def hf_kwargs(hf_config) -> Dict:
        """MoE keyword arguments from a Hugging Face config (Qwen3MoeConfig,
        Qwen2MoeConfig without shared experts, MixtralConfig, or any object
        with those attribute names)."""
        get = lambda *names, default=None: next(
            (getattr(hf_config, n) for n in names if getattr(hf_config, n, None) is not None),
            default)
        kw = dict(hidden_size=get("hidden_size"),
                  moe_intermediate_size=get("moe_intermediate_size", "intermediate_size"),
                  num_experts=get("num_experts", "num_local_experts"),
                  num_experts_per_tok=get("num_experts_per_tok"),
                  norm_topk_prob=get("norm_topk_prob", default=True),  # Mixtral: always
                  hidden_act=get("hidden_act", default="silu"))
        missing = [k for k, v in kw.items() if v is None]
        if missing:
            raise LoomArgumentError(f"hf_config has no {', '.join(missing)}")
        if get("shared_expert_intermediate_size", "n_shared_experts", default=0):
            raise LoomArgumentError("hf_config has shared experts: loom.torch.MoE covers the "
                                    "routed experts only")
        return kw

    @classmethod
    def from_hf_config(cls, hf_config, **kwargs) -> "MoE":
        """MoE(**MoE.hf_kwargs(hf_config), **kwargs)."""
        return cls(**cls.hf_kwargs(hf_config), **kwargs)

    def reset_parameters(self) -> None:
        """nn.Linear's default init, per matrix: U(-1/sqrt(in), 1/sqrt(in))."""
        with torch.no_grad():
            self.gate.reset_parameters()
            b1 = 1.0 / math.sqrt(self.hidden_size)
            b2 = 1.0 / math.sqrt(self.moe_intermediate_size)
            self.w1.uniform_(-b1, b1)
            self.w2.uniform_(-b2, b2)

    # ---- the loom layer follows the parameters' device and dtype ---------------------------
    def _release_layer(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._layer = self._handle = self._layer_key = self._finalizer = None

    def _sync_layer(self) -> None:
        dev, dt = self.w1.device, self.w1.dtype
        index = None
        if dev.type == "cuda":
            index = dev.index if dev.index is not None else torch.cuda.current_device()
        key = (index, dt) if index is not None else None
        if key == self._layer_key and (key is None or self._layer is not None):
            return
        self._release_layer()
        if key is None:
            return
        if self.comm is not None and self.comm.device != index:
            raise LoomArgumentError(f"MoE: parameters moved to {dev}, but the communicator is on "
                                    f"cuda:{self.comm.device}")
        self.config = replace(self.config, dtype=loom_dtype(dt))
        comm = self.comm if self.comm is not None else default_comm(index, self.config)
        layer = MoeLayer(comm, self.config)
        self._layer = layer
        self._handle = register_layer(layer)
        self._layer_key = key
        self._finalizer = weakref.finalize(self, _release, self._handle, layer)
        self._finalizer.atexit = False

    def _apply(self, *args, **kwargs):
        out = super()._apply(*args, **kwargs)
        self._sync_layer()
        return out

    @property
    def handle(self) -> Optional[int]:
        """The id the loom ops take (None while the parameters are not on a GPU)."""
        return self._handle

    @property
    def layer(self) -> Optional[MoeLayer]:
        return self._layer

    # ---- forward ------------------------------------------------------------------------
    def _need_handle(self, x: torch.Tensor) -> int:
        if self._handle is None:
            raise LoomError(Result.INVALID_USAGE,
                            f"MoE: the parameters are on {self.w1.device} and x on {x.device}; "
                            "loom runs on a CUDA device (move the block with .cuda() / .to())")
        return self._handle

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._handle is None and x.device.type == "cpu" and self.w1.device.type == "cpu":
            check_tokens(self.config, x)  # what the GPU op refuses, refused here too
            return self.reference(x).to(x.dtype)
        return moe_forward(self._need_handle(x), x, self.gate.weight, self.w1, self.w2)

    def forward_with_routing(self, x: torch.Tensor):
        """(y, expert_ids int32 [..., k], weights fp32 [..., k]): the routing
        the fused gate chose (GPU only)."""
        return moe_forward_routing(self._need_handle(x), x, self.gate.weight, self.w1, self.w2)

    def forward_routed(self, x: torch.Tensor, expert_ids: torch.Tensor,
                       routing_weights: torch.Tensor) -> torch.Tensor:
        """y with caller routing (expert_ids int32 [..., k], distinct per token;
        routing_weights fp32 [..., k]); the gate is not used (GPU only)."""
        return moe_forward_routed(self._need_handle(x), x, expert_ids, routing_weights,
                                  self.w1, self.w2)

    def reference(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        """reference_moe of x with this block's weights (fp32 result). Needs
        every expert here, so world size 1 (for R > 1 gather w1 / w2 and call
        reference_moe)."""
        if self.nranks != 1:
            raise LoomError(Result.INVALID_USAGE, "MoE.reference needs every expert: world size 1")
        c = self.config
        return reference_moe(x, self.gate.weight, self.w1, self.w2, c.top_k,
                             activation=c.resolved_activation,
                             normalize_top_k=c.resolved_normalize_top_k,
                             capacity_factor=c.capacity_factor, **kwargs)

    def extra_repr(self) -> str:
        return (f"hidden_size={self.hidden_size}, moe_intermediate_size="
                f"{self.moe_intermediate_size}, num_experts={self.num_experts}, "
                f"num_experts_per_tok={self.num_experts_per_tok}, norm_topk_prob="
                f"{self.norm_topk_prob}, hidden_act={self.hidden_act!r}, gated={self.gated}, "
                f"max_tokens={self.config.max_tokens_per_rank}, experts [{self.first_expert}, "
                f"{self.first_expert + self.local_experts}) of rank {self.rank}/{self.nranks}")

    # ---- Hugging Face state dicts ------------------------------------------------------------
    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor], prefix: str = "", *,
                           strict: bool = True) -> List[str]:
        """Copy a Hugging Face MoE block's weights into this block (this rank's
        experts only). Recognised under `prefix` (e.g. "model.layers.3.mlp."):
          gate.weight                          [E, H]   the router
          checkpoint files, per expert e:
            experts.{e}.gate_proj / up_proj / down_proj.weight   (Qwen3-MoE)
            experts.{e}.w1 / w3 / w2.weight                      (Mixtral)
            ([F, H], [F, H], [H, F], nn.Linear layout)
          transformers >= 5 in memory (fused):
            experts.gate_up_proj [E, 2F, H] (gate rows first), experts.down_proj [E, H, F]
        w1[i] = cat(gate, up) rows, w2[i] = down, for global expert
        first_expert + i. Every needed tensor's shape is checked before
        anything is copied; values are converted to the block's dtype.
        strict: keys under the prefix that are none of these (shared experts,
        biases, ...) raise. Returns the keys used."""
        if not self.gated:
            raise LoomArgumentError("load_hf_state_dict maps gated (SwiGLU) experts; this block "
                                    "has gated=False")
        p = prefix if not prefix or prefix.endswith(".") else prefix + "."
        H, F, E = self.hidden_size, self.moe_intermediate_size, self.num_experts
        lo, hi = self.first_expert, self.first_expert + self.local_experts

        def take(key, shape):
            if key not in state_dict:
                raise LoomArgumentError(f"load_hf_state_dict: {key!r} is missing")
            t = state_dict[key]
            if tuple(t.shape) != tuple(shape):
                raise LoomArgumentError(f"load_hf_state_dict: {key!r} has shape "
                                        f"{tuple(t.shape)}; expected {tuple(shape)}")
            return t

        plan = [(self.gate.weight, take(p + "gate.weight", (E, H)))]
        known = {p + "gate.weight"}
        if p + "experts.gate_up_proj" in state_dict:
            gu = take(p + "experts.gate_up_proj", (E, 2 * F, H))
            dn = take(p + "experts.down_proj", (E, H, F))
            plan += [(self.w1, gu[lo:hi]), (self.w2, dn[lo:hi])]
            known |= {p + "experts.gate_up_proj", p + "experts.down_proj"}
            used = sorted(known)
        else:
            style = next((s for s, (g, _, _) in HF_EXPERT_NAMES.items()
                          if f"{p}experts.{lo}.{g}.weight" in state_dict), None)
            if style is None:
                raise LoomArgumentError(
                    f"load_hf_state_dict: no experts under {p!r}: expected "
                    f"{p}experts.{lo}.gate_proj.weight (Qwen3-MoE), {p}experts.{lo}.w1.weight "
                    f"(Mixtral) or {p}experts.gate_up_proj (transformers >= 5)")
            g, u, d = HF_EXPERT_NAMES[style]
            used = [p + "gate.weight"]
            for e in range(E):
                names = [f"{p}experts.{e}.{n}.weight" for n in (g, u, d)]
                known.update(names)
                if lo <= e < hi:
                    i = e - lo
                    plan += [(self.w1[i, :F], take(names[0], (F, H))),
                             (self.w1[i, F:], take(names[1], (F, H))),
                             (self.w2[i], take(names[2], (H, F)))]
                    used += names
        if strict:
            extra = sorted(k for k in state_dict if k.startswith(p) and k not in known)
            if extra:
                raise LoomArgumentError(
                    "load_hf_state_dict: keys under the prefix that loom.torch.MoE does not hold "
                    f"(shared experts? biases?): {', '.join(extra[:8])}"
                    + (f" and {len(extra) - 8} more" if len(extra) > 8 else ""))
        with torch.no_grad():
            for dst, src in plan:
                dst.copy_(src)
        return used

    def to_hf_state_dict(self, prefix: str = "", style: str = "qwen3") -> Dict[str, torch.Tensor]:
        """This rank's weights as a Hugging Face state dict (copies):
        style "qwen3" or "mixtral" (per-expert keys, global expert ids), or
        "fused" (transformers >= 5: experts.gate_up_proj / down_proj; world
        size 1 only)."""
        if not self.gated:
            raise LoomArgumentError("to_hf_state_dict maps gated (SwiGLU) experts only")
        p = prefix if not prefix or prefix.endswith(".") else prefix + "."
        F = self.moe_intermediate_size
        out = {p + "gate.weight": self.gate.weight.detach().clone()}
        if style == "fused":
            if self.nranks != 1:
                raise LoomArgumentError("style 'fused' holds every expert: world size 1 only")
            out[p + "experts.gate_up_proj"] = self.w1.detach().clone()
            out[p + "experts.down_proj"] = self.w2.detach().clone()
            return out
        if style not in HF_EXPERT_NAMES:
            raise LoomArgumentError(f"style {style!r} is not one of qwen3, mixtral, fused")
        g, u, d = HF_EXPERT_NAMES[style]
        for i in range(self.local_experts):
            e = self.first_expert + i
            out[f"{p}experts.{e}.{g}.weight"] = self.w1[i, :F].detach().clone()
            out[f"{p}experts.{e}.{u}.weight"] = self.w1[i, F:].detach().clone()
            out[f"{p}experts.{e}.{d}.weight"] = self.w2[i].detach().clone()
        return out
