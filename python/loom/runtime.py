"""Owning Python handles over loom_comm_t and loom_moe_t (no torch needed).

Device buffers and streams are passed as integers (device pointers,
cudaStream_t values; 0 = NULL / the legacy default stream), exactly as the
C API takes them; loom.torch passes tensors' data_ptr() and the current
stream. Every failure raises loom.LoomError with loom_last_error()'s text.
"""
from __future__ import annotations

import ctypes
import weakref
from typing import List, Optional, Sequence

from . import _lib
from ._lib import LoomError, Result, check
from .config import CommConfig, MoeConfig


def _ptr(v) -> Optional[int]:
    """An int device pointer (or None/0 for NULL) as a c_void_p value."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _lib.LoomArgumentError(f"a device pointer must be a non-negative int, got {v!r}")
    return v or None


class Comm:
    """One rank of a loom communicator (loom_comm_t).

    Made by Comm.create (on an NCCL communicator you made), Comm.create_all
    (one process driving several local GPUs) or
    loom.torch.comm_from_process_group. close() is collective: every rank
    calls it (close_all for a clique made by create_all in this process).
    A single-rank communicator is also closed when garbage-collected; a
    larger one is not (a destroy is collective, and a finaliser cannot
    know the other ranks do the same).
    """

    def __init__(self, handle: int, *, nccl_comm: Optional[int] = None):
        # Internal: use the constructors below.
        self._handle = handle
        self._owned_nccl = nccl_comm  # destroyed after loom_comm_destroy, if not None
        self._clique: Optional[List["Comm"]] = None
        #: the CommConfig it was made with (None when unknown)
        self.config: Optional[CommConfig] = None
        self._layers = weakref.WeakSet()
        self.rank = self._query(_lib.lib.loom_comm_rank, ctypes.c_int)
        self.nranks = self._query(_lib.lib.loom_comm_size, ctypes.c_int)
        self.device = self._query(_lib.lib.loom_comm_device, ctypes.c_int)
        self.workspace_bytes = self._query(_lib.lib.loom_comm_workspace_bytes, ctypes.c_size_t)

    # -- constructors --
    @classmethod
    def create(cls, nccl_comm: int, config: Optional[CommConfig] = None, *,
               own_nccl: bool = False) -> "Comm":
        """loom_comm_create on an initialised NCCL (>= 2.28) communicator
        (its ncclComm_t as an int). Collective over it; uses the calling
        thread's current CUDA device, which must be the NCCL communicator's.
        With own_nccl, close() also destroys the NCCL communicator."""
        if not nccl_comm:
            raise _lib.LoomArgumentError("nccl_comm is NULL")
        cfg = (config or CommConfig()).to_c()
        h = ctypes.c_void_p()
        check(_lib.lib.loom_comm_create(ctypes.c_void_p(nccl_comm), ctypes.byref(cfg),
                                        ctypes.byref(h)))
        comm = cls(h.value, nccl_comm=nccl_comm if own_nccl else None)
        comm.config = config or CommConfig()
        return comm

    @classmethod
    def create_all(cls, devices: Sequence[int],
                   config: Optional[CommConfig] = None) -> List["Comm"]:
        """loom_comm_create_all: one communicator per listed CUDA device (rank i
        on devices[i]), all driven by this process. Sets NCCL_NVLS_ENABLE=0
        in the environment when it is unset (loom never uses multicast)."""
        devices = list(devices)
        if not devices:
            raise _lib.LoomArgumentError("devices is empty")
        cfg = (config or CommConfig()).to_c()
        n = len(devices)
        devs = (ctypes.c_int * n)(*devices)
        out = (ctypes.c_void_p * n)()
        check(_lib.lib.loom_comm_create_all(n, devs, ctypes.byref(cfg), out))
        comms = [cls(out[i]) for i in range(n)]
        for c in comms:
            c._clique = comms if n > 1 else None
            c.config = config or CommConfig()
        return comms

    @classmethod
    def create_loopback(cls, nranks: int,
                        config: Optional[CommConfig] = None) -> List["Comm"]:
        """loom_comm_create_loopback: nranks ranks on the current CUDA device,
        for testing multi-rank paths on one GPU (each rank's kernels fill
        SMs // nranks SMs; issue the ranks' calls on separate streams). No
        NCCL communicator; not for speed."""
        n = int(nranks)
        if n < 1:
            raise _lib.LoomArgumentError(f"nranks ({n}) must be >= 1")
        cfg = (config or CommConfig()).to_c()
        out = (ctypes.c_void_p * n)()
        check(_lib.lib.loom_comm_create_loopback(n, ctypes.byref(cfg), out))
        comms = [cls(out[i]) for i in range(n)]
        for c in comms:
            c._clique = comms if n > 1 else None
            c.config = config or CommConfig()
        return comms

    # -- queries --
    def _query(self, fn, ctype):
        v = ctype()
        check(fn(ctypes.c_void_p(self.handle), ctypes.byref(v)))
        return v.value

    @property
    def handle(self) -> int:
        """The loom_comm_t as an int."""
        if self._handle is None:
            raise LoomError(Result.INVALID_USAGE, "the communicator was closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def nccl(self) -> int:
        """loom_comm_nccl: the NCCL communicator underneath (borrowed)."""
        return self._query(_lib.lib.loom_comm_nccl, ctypes.c_void_p)

    def async_error(self) -> Result:
        """loom_comm_get_async_error (non-blocking; synchronise the stream
        first to cover every kernel launched so far)."""
        return Result(self._query(_lib.lib.loom_comm_get_async_error, ctypes.c_int))

    def raise_async_error(self) -> None:
        """Raise LoomError if a kernel of this communicator reported a failure
        (timeout, bad routing, a peer's error), with its description."""
        r = self.async_error()
        if r != Result.SUCCESS:
            raise LoomError(r, _lib.last_error() or _lib.result_string(r))

    # -- lifetime --
    def _release_layers(self):
        for layer in list(self._layers):
            layer.close()

    def close(self) -> None:
        """loom_comm_destroy (collective; host-synchronising). Closes the MoE
        layers made on it first. No-op when already closed."""
        if self._handle is None:
            return
        if self._clique is not None:
            raise LoomError(Result.INVALID_USAGE,
                            "this communicator belongs to a clique made by Comm.create_all in this "
                            "process: close them together with Comm.close_all(comms)")
        self._release_layers()
        h, self._handle = self._handle, None
        res = _lib.lib.loom_comm_destroy(ctypes.c_void_p(h))
        msg = _lib.last_error()
        if self._owned_nccl is not None:
            nccl, self._owned_nccl = self._owned_nccl, None
            _lib.nccl().ncclCommDestroy(ctypes.c_void_p(nccl))
        if res != Result.SUCCESS:
            raise LoomError(res, msg or _lib.result_string(res))

    @staticmethod
    def close_all(comms: Sequence["Comm"]) -> None:
        """loom_comm_destroy_all over communicators of one process's clique
        (a communicator listed twice is destroyed once)."""
        live = []
        for c in comms:  # once each: the library refuses a handle listed twice
            if c._handle is not None and not any(c is d for d in live):
                live.append(c)
        if not live:
            return
        for c in live:
            c._release_layers()
        arr = (ctypes.c_void_p * len(live))(*[c._handle for c in live])
        for c in live:
            c._handle = None
            c._clique = None
        check(_lib.lib.loom_comm_destroy_all(len(live), arr))

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            if self._handle is not None and self.nranks == 1 and self._clique is None:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"device {self.device}"
        return f"<loom.Comm rank {self.rank} of {self.nranks}, {state}>"


class MoeLayer:
    """A MoE layer (loom_moe_t) on a communicator.

    Not collective to create, but every rank must pass the same config.
    Device buffers are ints (device pointers on the communicator's device,
    16-byte aligned), streams are cudaStream_t ints.
    """

    def __init__(self, comm: Comm, config: MoeConfig):
        config.validate(comm.nranks)
        self.comm = comm
        self.config = config
        c = config.to_c()
        h = ctypes.c_void_p()
        check(_lib.lib.loom_moe_create(ctypes.c_void_p(comm.handle), ctypes.byref(c),
                                       ctypes.byref(h)))
        self._handle = h.value
        self.nranks = comm.nranks
        self.rank = comm.rank
        self.device = comm.device
        self.local_experts = config.num_experts // comm.nranks
        comm._layers.add(self)

    @property
    def handle(self) -> int:
        if self._handle is None:
            raise LoomError(Result.INVALID_USAGE, "the MoE layer was closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def set_weights(self, gate_w: Optional[int], w1: int, w2: int) -> None:
        """loom_moe_set_weights: device pointers (no copy is made)."""
        check(_lib.lib.loom_moe_set_weights(ctypes.c_void_p(self.handle), _ptr(gate_w),
                                            _ptr(w1), _ptr(w2)))

    def forward(self, x: int, num_tokens: int, y: int, stream: int = 0) -> None:
        """loom_moe_forward: fused gate, one kernel on `stream`. Collective."""
        check(_lib.lib.loom_moe_forward(ctypes.c_void_p(self.handle), _ptr(x), int(num_tokens),
                                        _ptr(y), _ptr(stream)))

    def forward_ex(self, x: int, num_tokens: int, y: int, stream: int = 0, *,
                   expert_ids_in: Optional[int] = None, weights_in: Optional[int] = None,
                   expert_ids_out: Optional[int] = None, weights_out: Optional[int] = None,
                   stats: Optional[int] = None) -> None:
        """loom_moe_forward_ex: caller routing in (both or neither), the
        routing used out (both or neither), statistics. Collective."""
        a = _lib.MoeArgsC(_ptr(x), int(num_tokens), _ptr(y), _ptr(expert_ids_in), _ptr(weights_in),
                          _ptr(expert_ids_out), _ptr(weights_out), _ptr(stats))
        check(_lib.lib.loom_moe_forward_ex(ctypes.c_void_p(self.handle), ctypes.byref(a),
                                           _ptr(stream)))

    def set_trace(self, events: Optional[int], capacity: int = 0,
                  info: Optional[int] = None) -> None:
        """loom_moe_set_trace (events None: tracing off)."""
        check(_lib.lib.loom_moe_set_trace(ctypes.c_void_p(self.handle), _ptr(events),
                                          int(capacity), _ptr(info)))

    def close(self) -> None:
        """loom_moe_destroy (waits for the device). No-op when closed."""
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        check(_lib.lib.loom_moe_destroy(ctypes.c_void_p(h)))

    def __del__(self):
        try:
            if self._handle is not None and not self.comm.closed:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        c = self.config
        return (f"<loom.MoeLayer H={c.hidden} F={c.ffn} E={c.num_experts} k={c.top_k} "
                f"{c.resolved_activation.name.lower()} {c.resolved_dtype.name.lower()} on rank "
                f"{self.rank} of {self.nranks}>")
