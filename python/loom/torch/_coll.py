"""loom's fused collective GEMMs (the tensor-parallel linear layers) as
PyTorch custom ops (namespace "loom"), one persistent kernel per GPU each:

    torch.ops.loom.ag_gemm(comm_id, x, weight, activation, bias=None) -> y
        all-gather + GEMM (column-parallel linear): x [m, k] this rank's
        rows, weight [n, k]; y [R*m, n] = act([x_0; ...; x_{R-1}] weight^T
        + bias), bias this rank's shard of the layer's
    torch.ops.loom.gemm_rs(comm_id, x, weight, activation, bias=None) -> y
        GEMM + reduce-scatter (row-parallel linear): x [m, k] every output
        row's activations (m a multiple of R), weight [n, k]; y [m/R, n] =
        this rank's rows of act(sum over ranks of x_s weight_s^T + bias)
    torch.ops.loom.gemm_ar(comm_id, x, weight, activation, bias=None) -> y
        GEMM + all-reduce: x [..., k], weight [n, k]; y [..., n] =
        act(sum over ranks of x_s weight_s^T + bias), the same bits on
        every rank

weight is in nn.Linear's layout ([out, in]). bias: None or [n] of x's
dtype (nn.Linear.bias), added once in fp32 before the activation; the
reduce-scatter and all-reduce add it to the sum, so pass the same one on
every rank (the row-parallel layer's). activation: "none", "relu",
"gelu" (exact, erf) or "silu", applied after the sum. x and weight share a
dtype (float32 runs TF32 tensor-core math, bfloat16, float16), live on the
communicator's GPU; y is new, of x's dtype. comm_id is the int that
register_comm() returned for a loom.Comm; ag_gemm / gemm_rs / gemm_ar below
take the Comm itself. The communicator's workspace must fit the shapes:
size its CommConfig with gemm_workspace(). Every call is collective over
the communicator: every rank calls, in the same order, with the same
shapes and activation. The kernel runs on torch.cuda.current_stream();
nothing synchronises the host (CUDA graphs and torch.compile work: the
fake implementations give shapes without running anything). Forward only.
docs/collective_gemm.md says what the kernels do; docs/python.md how to
use them.
"""
import ctypes
import threading
from typing import Dict, Optional, Tuple

import torch

from .. import _lib
from .._lib import Activation, LoomArgumentError, UNSET
from ._dtypes import loom_dtype

_OPS = ("ag_gemm", "gemm_rs", "gemm_ar")
_ACTIVATIONS = {"none": UNSET, "relu": int(Activation.RELU), "gelu": int(Activation.GELU),
                "silu": int(Activation.SILU)}

_LOCK = threading.Lock()
_COMMS: Dict[int, object] = {}
_NEXT = [1]


def register_comm(comm) -> int:
    """Register a loom.Comm (anything with .handle, .nranks and .device) and
    return the id the ops take. ag_gemm / gemm_rs / gemm_ar do this for
    you, once per Comm."""
    with _LOCK:
        h = _NEXT[0]
        _NEXT[0] += 1
        _COMMS[h] = comm
    return h


def unregister_comm(comm_id: int) -> None:
    with _LOCK:
        _COMMS.pop(comm_id, None)


def get_comm(comm_id: int):
    comm = _COMMS.get(comm_id)
    if comm is None:
        raise LoomArgumentError(f"loom op: comm id {comm_id} is not a registered communicator "
                                "(unregistered, or never registered with register_comm)")
    return comm


def gemm_workspace(op: str, m: int, n: int, k: int, dtype: torch.dtype,
                   nranks: int) -> Tuple[int, int]:
    """(workspace bytes, signal slots) the communicator needs for one of the
    ops on these shapes (m, n, k as in its C call: ag_gemm's m is this
    rank's rows, gemm_rs's and gemm_ar's every row). Take the largest over
    the calls a program makes for its CommConfig."""
    fn = {"ag_gemm": _lib.lib.loom_ag_gemm_workspace_bytes,
          "gemm_rs": _lib.lib.loom_gemm_rs_workspace_bytes,
          "gemm_ar": _lib.lib.loom_gemm_ar_workspace_bytes}.get(op)
    if fn is None:
        raise LoomArgumentError(f"op {op!r} is not one of {', '.join(_OPS)}")
    a = _lib.gemm_args_init()
    a.dtype, a.m, a.n, a.k = int(loom_dtype(dtype)), m, n, k
    b, s = ctypes.c_size_t(), ctypes.c_int()
    _lib.check(fn(ctypes.byref(a), nranks, ctypes.byref(b), ctypes.byref(s)),
               f"loom_{op}_workspace_bytes")
    return b.value, s.value


# ---- argument checks (shared by the real and the fake implementations) -------------------


def _activation(activation: str) -> int:
    if activation not in _ACTIVATIONS:
        raise LoomArgumentError(f"activation {activation!r} is not one of "
                                f"{', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[activation]


def _check(op: str, comm, x: torch.Tensor, weight: torch.Tensor) -> Tuple[int, int, int]:
    """(m, n, k) of the C call, after checking x and weight; raises
    LoomArgumentError with what is wrong."""
    for t, name in ((x, "x"), (weight, "weight")):
        if not isinstance(t, torch.Tensor):
            raise LoomArgumentError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
        dev = t.device
        if dev.type != "meta" and (dev.type != "cuda" or
                                   (dev.index is not None and dev.index != comm.device)):
            raise LoomArgumentError(f"{op}: {name} is on {dev}; the communicator runs on "
                                    f"cuda:{comm.device}")
    loom_dtype(x.dtype)
    if weight.dtype != x.dtype:
        raise LoomArgumentError(f"{op}: weight is {weight.dtype}, x is {x.dtype}: they must match")
    if weight.dim() != 2:
        raise LoomArgumentError(f"{op}: weight has shape {tuple(weight.shape)}; it must be "
                                "[out, in] (nn.Linear's layout)")
    n, k = weight.shape
    # the library's rules for every collective GEMM (collective.c check_args)
    if n < 1 or k < 1:
        raise LoomArgumentError(f"{op}: weight has shape {tuple(weight.shape)}: n ({n}) and k "
                                f"({k}) must be >= 1")
    if n % 8 or k % 8:
        raise LoomArgumentError(f"{op}: weight has shape {tuple(weight.shape)}: n ({n}) and k "
                                f"({k}) must be multiples of 8 (16-byte rows for loom's "
                                "tensor-memory loads)")
    if op == "gemm_ar":
        if x.dim() < 1 or x.shape[-1] != k:
            raise LoomArgumentError(f"{op}: x has shape {tuple(x.shape)}; its last dimension "
                                    f"must be weight's in-features, {k}")
        m = x.numel() // k if k else 0
    else:
        if x.dim() != 2 or x.shape[1] != k:
            raise LoomArgumentError(f"{op}: x has shape {tuple(x.shape)}; it must be [m, {k}] "
                                    "(weight's in-features)")
        m = x.shape[0]
    if op == "gemm_rs" and m % comm.nranks:
        raise LoomArgumentError(f"{op}: x has {m} rows; they must be a multiple of the "
                                f"{comm.nranks} ranks (each gets m / nranks rows)")
    if m < 1:
        raise LoomArgumentError(f"{op}: x has no rows")
    return m, n, k


def _check_bias(op: str, comm, x: torch.Tensor, bias: Optional[torch.Tensor], n: int) -> None:
    if bias is None:
        return
    if not isinstance(bias, torch.Tensor):
        raise LoomArgumentError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
    dev = bias.device
    if dev.type != "meta" and (dev.type != "cuda" or
                               (dev.index is not None and dev.index != comm.device)):
        raise LoomArgumentError(f"{op}: bias is on {dev}; the communicator runs on "
                                f"cuda:{comm.device}")
    if bias.dtype != x.dtype:
        raise LoomArgumentError(f"{op}: bias is {bias.dtype}, x is {x.dtype}: they must match")
    if tuple(bias.shape) != (n,):
        raise LoomArgumentError(f"{op}: bias has shape {tuple(bias.shape)}; it must be [{n}] "
                                "(weight's out-features)")


def _out_shape(op: str, comm, x: torch.Tensor, m: int, n: int) -> Tuple[int, ...]:
    if op == "ag_gemm":
        return (comm.nranks * m, n)
    if op == "gemm_rs":
        return (m // comm.nranks, n)
    return tuple(x.shape[:-1]) + (n,)


def _run(op: str, comm_id: int, x: torch.Tensor, weight: torch.Tensor,
         activation: str, bias: Optional[torch.Tensor]) -> torch.Tensor:
    comm = get_comm(comm_id)
    act = _activation(activation)
    m, n, k = _check(op, comm, x, weight)
    _check_bias(op, comm, x, bias, n)
    x2 = x.contiguous()
    if x2.data_ptr() % 16:
        x2 = x2.clone()
    if not weight.is_contiguous() or weight.data_ptr() % 16:
        raise LoomArgumentError(f"{op}: weight must be contiguous and 16-byte aligned (loom "
                                "reads it in place)")
    b2 = None
    if bias is not None:  # loom takes a 16-byte aligned bias: copy one that is not
        b2 = bias.contiguous()
        if b2.data_ptr() % 16:
            b2 = b2.clone()
    y = torch.empty(_out_shape(op, comm, x, m, n), dtype=x.dtype, device=x.device)
    a = _lib.gemm_args_init()
    a.dtype, a.m, a.n, a.k = int(loom_dtype(x.dtype)), m, n, k
    a.a, a.b, a.c, a.activation = x2.data_ptr(), weight.data_ptr(), y.data_ptr(), act
    a.bias = b2.data_ptr() if b2 is not None else None
    fn = getattr(_lib.lib, f"loom_{op}")
    with torch.cuda.device(x.device):
        stream = torch.cuda.current_stream(x.device).cuda_stream
        _lib.check(fn(ctypes.c_void_p(comm.handle), ctypes.byref(a), ctypes.c_void_p(stream)),
                   f"loom_{op}")
    return y


def _fake(op: str, comm_id: int, x: torch.Tensor, weight: torch.Tensor,
          activation: str, bias: Optional[torch.Tensor]) -> torch.Tensor:
    comm = get_comm(comm_id)
    _activation(activation)
    m, n, _ = _check(op, comm, x, weight)
    _check_bias(op, comm, x, bias, n)
    return x.new_empty(_out_shape(op, comm, x, m, n))


# ---- the ops ---------------------------------------------------------------------------------


@torch.library.custom_op("loom::ag_gemm", mutates_args=())
def ag_gemm_op(comm_id: int, x: torch.Tensor, weight: torch.Tensor,
               activation: str, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """All-gather + GEMM: y [R*m, n]."""
    return _run("ag_gemm", comm_id, x, weight, activation, bias)


@ag_gemm_op.register_fake
def _ag_gemm_fake(comm_id, x, weight, activation, bias=None):
    return _fake("ag_gemm", comm_id, x, weight, activation, bias)


@torch.library.custom_op("loom::gemm_rs", mutates_args=())
def gemm_rs_op(comm_id: int, x: torch.Tensor, weight: torch.Tensor,
               activation: str, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """GEMM + reduce-scatter: y [m/R, n]."""
    return _run("gemm_rs", comm_id, x, weight, activation, bias)


@gemm_rs_op.register_fake
def _gemm_rs_fake(comm_id, x, weight, activation, bias=None):
    return _fake("gemm_rs", comm_id, x, weight, activation, bias)


@torch.library.custom_op("loom::gemm_ar", mutates_args=())
def gemm_ar_op(comm_id: int, x: torch.Tensor, weight: torch.Tensor,
               activation: str, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """GEMM + all-reduce: y [..., n]."""
    return _run("gemm_ar", comm_id, x, weight, activation, bias)


@gemm_ar_op.register_fake
def _gemm_ar_fake(comm_id, x, weight, activation, bias=None):
    return _fake("gemm_ar", comm_id, x, weight, activation, bias)


def _no_backward(ctx, *grads):
    raise RuntimeError("loom's collective GEMM ops are forward-only: they have no backward")


def _no_context(ctx, inputs, output):
    return None


for _op in (ag_gemm_op, gemm_rs_op, gemm_ar_op):
    _op.register_autograd(_no_backward, setup_context=_no_context)


# ---- the same, taking the Comm -----------------------------------------------------------------


def _comm_id(comm) -> int:
    cid = getattr(comm, "_loom_torch_id", None)
    if cid is None or cid not in _COMMS:
        cid = register_comm(comm)
        comm._loom_torch_id = cid
    return cid


def ag_gemm(x: torch.Tensor, weight: torch.Tensor, comm, activation: Optional[str] = None,
           bias: Optional[torch.Tensor] = None):
    """torch.ops.loom.ag_gemm on `comm` (a loom.Comm, registered on first use)."""
    return torch.ops.loom.ag_gemm(_comm_id(comm), x, weight, activation or "none", bias)


def gemm_rs(x: torch.Tensor, weight: torch.Tensor, comm, activation: Optional[str] = None,
           bias: Optional[torch.Tensor] = None):
    """torch.ops.loom.gemm_rs on `comm` (a loom.Comm, registered on first use)."""
    return torch.ops.loom.gemm_rs(_comm_id(comm), x, weight, activation or "none", bias)


def gemm_ar(x: torch.Tensor, weight: torch.Tensor, comm, activation: Optional[str] = None,
           bias: Optional[torch.Tensor] = None):
    """torch.ops.loom.gemm_ar on `comm` (a loom.Comm, registered on first use)."""
    return torch.ops.loom.gemm_ar(_comm_id(comm), x, weight, activation or "none", bias)
