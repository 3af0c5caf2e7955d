"""loom's MoE forward as PyTorch custom ops (namespace "loom").

    torch.ops.loom.moe_forward(handle, x, gate_weight, w1, w2) -> y
    torch.ops.loom.moe_forward_routing(handle, x, gate_weight, w1, w2)
        -> (y, expert_ids int32 [..., k], weights fp32 [..., k])
    torch.ops.loom.moe_forward_routed(handle, x, expert_ids, routing_weights, w1, w2) -> y

`handle` is the int that register_layer() returned for a loom.MoeLayer
(loom.torch.MoE does this for you). The weights are inputs of every call
(so compiled graphs see them as inputs): gate_weight [E, H], w1 [E/R, F1, H],
w2 [E/R, H, F] in the layer's dtype and weight layout (shapes transposed
for WeightLayout.IN_OUT), contiguous, on the layer's device. x is
[..., hidden] of the layer's dtype; y has x's shape and dtype. The kernel
runs on torch.cuda.current_stream(); nothing synchronises the host, so the
ops can be captured in CUDA graphs and compiled by torch.compile (the fake
implementations give shapes and dtypes without running anything).
Every call is collective over the layer's communicator: every rank calls,
in the same order, with its own token count (0 allowed).
Forward only: backward through these ops raises.
"""
import math
import threading
from typing import Dict, Optional, Tuple

import torch

from .._lib import LoomArgumentError
from ..config import WeightLayout
from ._dtypes import torch_dtype

_LOCK = threading.Lock()
_LAYERS: Dict[int, object] = {}
_NEXT = [1]


def register_layer(layer) -> int:
    """Register a loom.MoeLayer (anything with .config, .local_experts,
    .device, and for real calls .set_weights/.forward/.forward_ex) and return
    the handle id the ops take."""
    with _LOCK:
        h = _NEXT[0]
        _NEXT[0] += 1
        _LAYERS[h] = layer
    return h


def unregister_layer(handle: int) -> None:
    with _LOCK:
        _LAYERS.pop(handle, None)


def get_layer(handle: int):
    layer = _LAYERS.get(handle)
    if layer is None:
        raise LoomArgumentError(f"loom op: handle {handle} is not a registered MoE layer "
                                "(closed, or never registered with register_layer)")
    return layer


# ---- argument checks (shared by the real and the fake implementations) -------------------


def _expect(t: torch.Tensor, name: str, shape, dtype, layer) -> None:
    if not isinstance(t, torch.Tensor):
        raise LoomArgumentError(f"{name} must be a tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(shape):
        raise LoomArgumentError(f"{name} has shape {tuple(t.shape)}; the layer needs "
                                f"{tuple(shape)}")
    if t.dtype != dtype:
        raise LoomArgumentError(f"{name} is {t.dtype}; the layer needs {dtype}")
    _expect_device(t, name, layer)
    if not t.is_contiguous():
        raise LoomArgumentError(f"{name} is not contiguous: loom reads the weights in place "
                                "(call .contiguous() once when loading them)")


def _expect_device(t: torch.Tensor, name: str, layer) -> None:
    dev = t.device
    if dev.type == "meta":
        return
    if dev.type != "cuda" or (dev.index is not None and dev.index != layer.device):
        raise LoomArgumentError(f"{name} is on {dev}; the layer runs on cuda:{layer.device}")


def _check_weights(layer, gate_weight: Optional[torch.Tensor], w1: torch.Tensor,
                   w2: torch.Tensor) -> None:
    c = layer.config
    dt = torch_dtype(c.resolved_dtype)
    H, F, F1, E, El = c.hidden, c.ffn, c.ffn1, c.num_experts, layer.local_experts
    out_in = c.resolved_weight_layout == WeightLayout.OUT_IN
    if gate_weight is not None:
        _expect(gate_weight, "gate_weight", (E, H) if out_in else (H, E), dt, layer)
    _expect(w1, "w1", (El, F1, H) if out_in else (El, H, F1), dt, layer)
    _expect(w2, "w2", (El, H, F) if out_in else (El, F, H), dt, layer)


def _check_x(layer, x: torch.Tensor) -> None:
    check_tokens(layer.config, x)
    _expect_device(x, "x", layer)


def check_tokens(c, x: torch.Tensor) -> None:
    """x against MoeConfig c, device aside: [..., hidden], c's dtype, at most
    max_tokens_per_rank tokens (the GPU ops and the CPU forward alike)."""
    if not isinstance(x, torch.Tensor):
        raise LoomArgumentError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] != c.hidden:
        raise LoomArgumentError(f"x has shape {tuple(x.shape)}; its last dimension must be "
                                f"hidden = {c.hidden}")
    dt = torch_dtype(c.resolved_dtype)
    if x.dtype != dt:
        raise LoomArgumentError(f"x is {x.dtype}; the layer's dtype is {dt}")
    T = math.prod(x.shape[:-1])
    if T > c.max_tokens_per_rank:
        raise LoomArgumentError(f"x has {T} tokens; the layer was made for at most "
                                f"max_tokens_per_rank = {c.max_tokens_per_rank} per call")


def _check_routing(layer, x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> None:
    k = layer.config.top_k
    shape = tuple(x.shape[:-1]) + (k,)
    for t, name, dt in ((ids, "expert_ids", torch.int32), (w, "routing_weights", torch.float32)):
        if not isinstance(t, torch.Tensor):
            raise LoomArgumentError(f"{name} must be a tensor, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise LoomArgumentError(f"{name} has shape {tuple(t.shape)}; x of shape "
                                    f"{tuple(x.shape)} with top_k {k} needs {shape}")
        if t.dtype != dt:
            raise LoomArgumentError(f"{name} is {t.dtype}; it must be {dt}")
        _expect_device(t, name, layer)


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """t as a contiguous tensor whose data is 16-byte aligned (a copy only
    when t is not already)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _weight_ptr(t: Optional[torch.Tensor], name: str) -> Optional[int]:
    if t is None:
        return None
    if t.data_ptr() % 16:
        raise LoomArgumentError(f"{name} (data_ptr {t.data_ptr():#x}) is not 16-byte aligned")
    return t.data_ptr()


def _run(handle: int, x: torch.Tensor, gate_weight: Optional[torch.Tensor], w1: torch.Tensor,
         w2: torch.Tensor, ids_in: Optional[torch.Tensor] = None,
         w_in: Optional[torch.Tensor] = None, want_routing: bool = False):
    layer = get_layer(handle)
    _check_x(layer, x)
    _check_weights(layer, gate_weight, w1, w2)
    c = layer.config
    k = c.top_k
    x2 = _aligned(x.reshape(-1, c.hidden))
    T = x2.shape[0]
    y = torch.empty_like(x2)
    ids_out = w_out = None
    if want_routing:
        ids_out = torch.empty(T, k, dtype=torch.int32, device=x.device)
        w_out = torch.empty(T, k, dtype=torch.float32, device=x.device)
    if ids_in is not None:
        _check_routing(layer, x, ids_in, w_in)
        ids_in = _aligned(ids_in.reshape(T, k))
        w_in = _aligned(w_in.reshape(T, k))

    def p(t):
        return t.data_ptr() if t is not None and T > 0 else None

    with torch.cuda.device(x.device):
        stream = torch.cuda.current_stream(x.device).cuda_stream
        layer.set_weights(_weight_ptr(gate_weight, "gate_weight"), _weight_ptr(w1, "w1"),
                          _weight_ptr(w2, "w2"))
        if ids_in is None and not want_routing:
            layer.forward(p(x2), T, p(y), stream)
        else:
            layer.forward_ex(p(x2), T, p(y), stream, expert_ids_in=p(ids_in), weights_in=p(w_in),
                             expert_ids_out=p(ids_out), weights_out=p(w_out))
    y = y.view(x.shape)
    if want_routing:
        lead = tuple(x.shape[:-1])
        return y, ids_out.view(*lead, k), w_out.view(*lead, k)
    return y


def _no_backward(ctx, *grads):
    raise RuntimeError("loom's MoE ops are forward-only (inference): they have no backward")


def _no_context(ctx, inputs, output):
    return None


# ---- the ops ---------------------------------------------------------------------------------


@torch.library.custom_op("loom::moe_forward", mutates_args=())
def moe_forward(handle: int, x: torch.Tensor, gate_weight: torch.Tensor, w1: torch.Tensor,
                w2: torch.Tensor) -> torch.Tensor:
    """MoE layer forward with the fused gate: y [..., hidden]."""
    return _run(handle, x, gate_weight, w1, w2)


@moe_forward.register_fake
def _moe_forward_fake(handle, x, gate_weight, w1, w2):
    layer = get_layer(handle)
    _check_x(layer, x)
    _check_weights(layer, gate_weight, w1, w2)
    return x.new_empty(x.shape)


@torch.library.custom_op("loom::moe_forward_routing", mutates_args=())
def moe_forward_routing(handle: int, x: torch.Tensor, gate_weight: torch.Tensor, w1: torch.Tensor,
                        w2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fused gate, also returning the routing it chose: (y, expert_ids int32
    [..., k], weights fp32 [..., k])."""
    return _run(handle, x, gate_weight, w1, w2, want_routing=True)


@moe_forward_routing.register_fake
def _moe_forward_routing_fake(handle, x, gate_weight, w1, w2):
    layer = get_layer(handle)
    _check_x(layer, x)
    _check_weights(layer, gate_weight, w1, w2)
    rshape = tuple(x.shape[:-1]) + (layer.config.top_k,)
    return (x.new_empty(x.shape), x.new_empty(rshape, dtype=torch.int32),
            x.new_empty(rshape, dtype=torch.float32))


@torch.library.custom_op("loom::moe_forward_routed", mutates_args=())
def moe_forward_routed(handle: int, x: torch.Tensor, expert_ids: torch.Tensor,
                       routing_weights: torch.Tensor, w1: torch.Tensor,
                       w2: torch.Tensor) -> torch.Tensor:
    """Caller routing: expert_ids int32 [..., k] (distinct per token, in
    [0, num_experts); checked in the kernel, which reports a violation as an
    asynchronous LOOM_INVALID_ARGUMENT) and routing_weights fp32 [..., k]."""
    layer = get_layer(handle)
    _check_x(layer, x)
    _check_routing(layer, x, expert_ids, routing_weights)
    return _run(handle, x, None, w1, w2, ids_in=expert_ids, w_in=routing_weights)


@moe_forward_routed.register_fake
def _moe_forward_routed_fake(handle, x, expert_ids, routing_weights, w1, w2):
    layer = get_layer(handle)
    _check_x(layer, x)
    _check_routing(layer, x, expert_ids, routing_weights)
    _check_weights(layer, None, w1, w2)
    return x.new_empty(x.shape)


for _op in (moe_forward, moe_forward_routing, moe_forward_routed):
    _op.register_autograd(_no_backward, setup_context=_no_context)
