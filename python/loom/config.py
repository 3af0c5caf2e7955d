"""Config dataclasses mirroring loom_comm_config_t and loom_moe_config_t.

A field left at None is LOOM_UNSET: the library picks its default (the
defaults are stated on each field and in loom.h). `to_c()` builds the C
struct the way LOOM_*_CONFIG_INIT does (struct_size and version set for
this package's LOOM_API_VERSION, then the fields). `validate()` checks in
Python what the library checks at its boundary, with messages that name the
field, so a bad config fails before any GPU work; the library checks again
and stays the authority (tests/python/test_core.py keeps the two in step).
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, fields
from typing import Optional, Tuple, Union

from . import _lib
from ._lib import (Activation, DType, GateMath, LoomArgumentError, Math, UNSET, WeightLayout, check)

# Limits the library enforces (src/host/moe.c, src/device/ops/moe.h, loom.h).
DIM_ALIGN = 64             # hidden and ffn: multiples of this
MAX_DIM = 1 << 16          # hidden, ffn <= 65536
MAX_EXPERTS = 1024         # num_experts <= 1024
MAX_TOP_K = 16             # top_k in [1, 16]
MAX_TOKENS = 1 << 24       # max_tokens_per_rank <= 2^24
MAX_CAPACITY_FACTOR = 1e6  # capacity_factor in [0, 1e6]
DISPATCH_TILE = 128        # each local expert's dispatch rows start on a 128-row tile
# R x max_tokens_per_rank x min(top_k, E/R) + 128 x E/R (the dispatch region's rows) <= this
MAX_DISPATCH_ROWS = (1 << 31) - DISPATCH_TILE
MAX_WORKSPACE_BYTES = 1 << 40
MAX_SIGNAL_SLOTS = 1 << 20
MAX_TIMEOUT_MS = 3600 * 1000

_DTYPE_NAMES = {"fp32": DType.FP32, "float32": DType.FP32, "float": DType.FP32,
                "bf16": DType.BF16, "bfloat16": DType.BF16,
                "fp16": DType.FP16, "float16": DType.FP16, "half": DType.FP16}
_ACT_NAMES = {"relu": Activation.RELU, "gelu": Activation.GELU, "silu": Activation.SILU,
              "swish": Activation.SILU, "swiglu": Activation.SWIGLU}
_MATH_NAMES = {"tf32": Math.TF32, "fp32": Math.FP32, "ieee": Math.FP32}
_LAYOUT_NAMES = {"out_in": WeightLayout.OUT_IN, "out-in": WeightLayout.OUT_IN,
                 "in_out": WeightLayout.IN_OUT, "in-out": WeightLayout.IN_OUT}
_GATE_NAMES = {"exact": GateMath.EXACT, "fast": GateMath.FAST}


def _as_int(value) -> Optional[int]:
    """value as an int if it is one: a Python int or a NumPy integer scalar
    (a model config read with NumPy holds np.int64), never a bool or
    np.bool_; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    t = type(value)
    if t.__module__ == "numpy" and getattr(getattr(value, "dtype", None), "kind", "") in ("i", "u"):
        return int(value)
    return None


def _is_unset(value) -> bool:
    """None, or the int UNSET itself (not a bool): the field is LOOM_UNSET."""
    return value is None or _as_int(value) == UNSET


def _enum(value, enum_type, names, field):
    """None or UNSET -> None (LOOM_UNSET); an enum member, its int value or a name -> the
    member."""
    if _is_unset(value):
        return None
    if isinstance(value, str):
        key = value.strip().lower()
        if key in names:
            return names[key]
        raise LoomArgumentError(f"{field} ({value!r}) is not one of " + ", ".join(sorted(names)))
    v = _as_int(value)
    if v is None:
        raise LoomArgumentError(f"{field} ({value!r}) must be a {enum_type.__name__}, its name or "
                                "None")
    try:
        return enum_type(v)
    except ValueError:
        raise LoomArgumentError(
            f"{field} ({value}) is not a {enum_type.__name__} (" +
            ", ".join(f"{m.name} = {m.value}" for m in enum_type) + ")") from None


def dtype_of(value) -> DType:
    """A DType from a DType, its int value or a name ("bf16", "float16", ...)."""
    d = _enum(value, DType, _DTYPE_NAMES, "dtype")
    if d is None:
        raise LoomArgumentError("dtype is None")
    return d


def _int(value, field, lo, hi, extra=""):
    """value as an int in [lo, hi] (a NumPy integer scalar is an int here), or
    LoomArgumentError naming the field."""
    v = _as_int(value)
    if v is None:
        raise LoomArgumentError(f"{field} ({value!r}) must be an int")
    if not lo <= v <= hi:
        raise LoomArgumentError(f"{field} ({v}) must be in [{lo}, {hi}]{extra}")
    return v


def _opt_int(value, field, lo, hi, extra=""):
    """None (LOOM_UNSET) passes; so does UNSET itself."""
    if _is_unset(value):
        return None
    return _int(value, field, lo, hi, extra)


@dataclass
class CommConfig:
    """loom_comm_config_t. None = LOOM_UNSET.

    workspace_bytes: symmetric data workspace per rank (default 64 MiB); size it
        with MoeConfig.workspace_bytes / CommConfig.for_moe. Same on every rank.
    signal_slots: signal slots per source rank, >= 3 (default 4096). Same on
        every rank.
    timeout_ms: bound on every wait inside loom's kernels (default: the
        environment variable LOOM_TIMEOUT_MS if set, else 5000).
    """
    workspace_bytes: Optional[int] = None
    signal_slots: Optional[int] = None
    timeout_ms: Optional[int] = None

    def validate(self) -> "CommConfig":
        _opt_int(self.workspace_bytes, "CommConfig.workspace_bytes", 1, MAX_WORKSPACE_BYTES)
        _opt_int(self.signal_slots, "CommConfig.signal_slots", 3, MAX_SIGNAL_SLOTS)
        _opt_int(self.timeout_ms, "CommConfig.timeout_ms", 1, MAX_TIMEOUT_MS)
        return self

    def to_c(self) -> _lib.CommConfigC:
        """The C struct, as LOOM_COMM_CONFIG_INIT then these fields."""
        self.validate()
        c = _lib.comm_config_init()
        for f in fields(self):
            v = getattr(self, f.name)
            setattr(c, f.name, UNSET if _is_unset(v) else _as_int(v))
        return c

    @classmethod
    def for_moe(cls, *configs: "MoeConfig", nranks: int,
                timeout_ms: Optional[int] = None) -> "CommConfig":
        """The smallest communicator config that holds every layer of `configs`
        on `nranks` ranks (the largest workspace and signal-slot needs; never
        below the library defaults)."""
        if not configs:
            raise LoomArgumentError("CommConfig.for_moe needs at least one MoeConfig")
        need_bytes, need_slots = 64 << 20, 4096
        for c in configs:
            b, s = c.workspace_bytes(nranks)
            need_bytes, need_slots = max(need_bytes, b), max(need_slots, s)
        return cls(workspace_bytes=need_bytes, signal_slots=need_slots, timeout_ms=timeout_ms)


@dataclass
class MoeConfig:
    """loom_moe_config_t. None = LOOM_UNSET (the default named per field).

    Required: hidden and ffn (multiples of 64 in [64, 65536]), num_experts
    ([1, 1024], divisible by the number of ranks), top_k ([1, 16],
    <= num_experts), max_tokens_per_rank ([1, 2^24]; bounds every call's
    token count).
    Optional: activation (Activation or "relu" / "gelu" / "silu" / "swiglu";
    default silu), dtype (DType or "fp32" / "bf16" / "fp16"; default bf16),
    fp32_math (Math or "tf32" / "fp32"; default tf32; fp32 layers only),
    normalize_top_k (default True: the k weights of a token sum to 1),
    capacity_factor (0 = dropless, the default; c > 0 keeps per expert and
    source rank the first ceil(c * num_tokens * top_k / num_experts)
    assignments), weight_layout (WeightLayout or "out_in" / "in_out";
    default out_in, nn.Linear's [out x in]), gate_math (GateMath or
    "exact" / "fast"; default exact; fast needs dtype bf16 or fp16 and
    routes within the bound loom.h's "The fast gate" states).
    """
    hidden: int
    ffn: int
    num_experts: int
    top_k: int
    max_tokens_per_rank: int
    activation: Union[Activation, str, None] = None
    dtype: Union[DType, str, None] = None
    fp32_math: Union[Math, str, None] = None
    normalize_top_k: Optional[bool] = None
    capacity_factor: float = 0.0
    weight_layout: Union[WeightLayout, str, None] = None
    gate_math: Union[GateMath, str, None] = None

    # -- resolved values (defaults applied) --
    @property
    def resolved_activation(self) -> Activation:
        a = _enum(self.activation, Activation, _ACT_NAMES, "MoeConfig.activation")
        return Activation.SILU if a is None else a

    @property
    def resolved_dtype(self) -> DType:
        d = _enum(self.dtype, DType, _DTYPE_NAMES, "MoeConfig.dtype")
        return DType.BF16 if d is None else d

    @property
    def resolved_fp32_math(self) -> Math:
        m = _enum(self.fp32_math, Math, _MATH_NAMES, "MoeConfig.fp32_math")
        return Math.TF32 if m is None else m

    def _normalize_top_k(self):
        """normalize_top_k with UNSET read as None."""
        n = self.normalize_top_k
        return None if _is_unset(n) else n

    @property
    def resolved_normalize_top_k(self) -> bool:
        n = self._normalize_top_k()
        return True if n is None else bool(n)

    @property
    def resolved_weight_layout(self) -> WeightLayout:
        w = _enum(self.weight_layout, WeightLayout, _LAYOUT_NAMES, "MoeConfig.weight_layout")
        return WeightLayout.OUT_IN if w is None else w

    @property
    def resolved_gate_math(self) -> GateMath:
        g = _enum(self.gate_math, GateMath, _GATE_NAMES, "MoeConfig.gate_math")
        return GateMath.EXACT if g is None else g

    @property
    def gated(self) -> bool:
        return self.resolved_activation == Activation.SWIGLU

    @property
    def ffn1(self) -> int:
        """Columns of x * W1: 2 * ffn for SwiGLU (gate and up), else ffn."""
        return 2 * self.ffn if self.gated else self.ffn

    def validate(self, nranks: Optional[int] = None) -> "MoeConfig":
        """Raise LoomArgumentError naming the first bad field; with nranks,
        also check the communicator size and the dispatch region's rows
        (loom.h: R x max_tokens_per_rank x min(top_k, E/R) + 128 x E/R
        <= 2^31 - 128). Returns self."""
        for name in ("hidden", "ffn"):
            v = _int(getattr(self, name), f"MoeConfig.{name}", DIM_ALIGN, MAX_DIM)
            if v % DIM_ALIGN:
                raise LoomArgumentError(f"MoeConfig.{name} ({v}) must be a multiple of {DIM_ALIGN} "
                                        f"in [{DIM_ALIGN}, {MAX_DIM}]")
        E = _int(self.num_experts, "MoeConfig.num_experts", 1, MAX_EXPERTS)
        k = _int(self.top_k, "MoeConfig.top_k", 1, MAX_TOP_K)
        if k > E:
            raise LoomArgumentError(f"MoeConfig.top_k ({k}) exceeds num_experts ({E})")
        tokens = _int(self.max_tokens_per_rank, "MoeConfig.max_tokens_per_rank", 1, MAX_TOKENS)
        self.resolved_activation, self.resolved_dtype, self.resolved_fp32_math
        self.resolved_weight_layout
        if self.resolved_gate_math == GateMath.FAST and \
                self.resolved_dtype not in (DType.BF16, DType.FP16):
            raise LoomArgumentError("MoeConfig.gate_math 'fast' needs dtype bf16 or fp16 (dtype is "
                                    f"{self.resolved_dtype.name.lower()}): fp32 layers have only "
                                    "the exact gate")
        n = self._normalize_top_k()
        if n is not None and not (isinstance(n, bool) or (isinstance(n, int) and n in (0, 1))):
            raise LoomArgumentError(f"MoeConfig.normalize_top_k ({n!r}) must be a bool, None or "
                                    "UNSET")
        cf = self.capacity_factor
        if cf == UNSET and not isinstance(cf, bool):
            cf = 0.0  # LOOM_UNSET: dropless
        if isinstance(cf, bool) or not isinstance(cf, (int, float)) or not math.isfinite(cf) \
                or not 0.0 <= cf <= MAX_CAPACITY_FACTOR:
            raise LoomArgumentError(f"MoeConfig.capacity_factor ({cf!r}) must be 0 (dropless) or "
                                    f"in (0, {MAX_CAPACITY_FACTOR:g}]")
        if nranks is not None:
            nranks = _int(nranks, "nranks", 1, _lib.MOE_MAX_RANKS)
            if E % nranks:
                raise LoomArgumentError(f"MoeConfig.num_experts ({E}) is not "
                                        f"divisible by the number of ranks ({nranks})")
            el = E // nranks
            rows = nranks * tokens * min(k, el) + DISPATCH_TILE * el
            if rows > MAX_DISPATCH_ROWS:
                raise LoomArgumentError(
                    f"MoeConfig: the layer's dispatch region would have {rows} rows ({nranks} "
                    f"ranks x max_tokens_per_rank {tokens} x min(top_k "
                    f"{k}, E/R {el}) + {DISPATCH_TILE} x E/R), more than its row indices "
                    f"hold (2^31 - {DISPATCH_TILE}): lower max_tokens_per_rank, top_k or the rank "
                    "count")
        return self

    def to_c(self, version: int = _lib.API_VERSION) -> _lib.MoeConfigC:
        """The C struct as LOOM_MOE_CONFIG_INIT then these fields. version=1
        builds the version-1 struct (struct_size without weight_layout), as a
        caller compiled against that header would; version=2 leaves
        gate_math unset (the library does not read it below version 3)."""
        self.validate()
        c = _lib.moe_config_init()
        if version not in range(1, _lib.API_VERSION + 1):
            raise LoomArgumentError(f"version ({version}) must be in [1, {_lib.API_VERSION}]")
        c.version = version
        c.struct_size = _lib.MOE_CONFIG_SIZES[version - 1]
        c.hidden, c.ffn = _as_int(self.hidden), _as_int(self.ffn)
        c.num_experts, c.top_k = _as_int(self.num_experts), _as_int(self.top_k)
        c.max_tokens_per_rank = _as_int(self.max_tokens_per_rank)

        def unset_or(v):
            return UNSET if v is None else int(v)

        c.activation = unset_or(_enum(self.activation, Activation, _ACT_NAMES, "activation"))
        c.dtype = unset_or(_enum(self.dtype, DType, _DTYPE_NAMES, "dtype"))
        c.fp32_math = unset_or(_enum(self.fp32_math, Math, _MATH_NAMES, "fp32_math"))
        n = self._normalize_top_k()
        c.normalize_top_k = UNSET if n is None else int(bool(n))
        c.capacity_factor = float(self.capacity_factor)
        if version >= 2:
            c.weight_layout = unset_or(_enum(self.weight_layout, WeightLayout, _LAYOUT_NAMES,
                                             "weight_layout"))
        if version >= 3:
            c.gate_math = unset_or(_enum(self.gate_math, GateMath, _GATE_NAMES, "gate_math"))
        elif self.resolved_gate_math != GateMath.EXACT:
            raise LoomArgumentError(f"gate_math {self.resolved_gate_math.name.lower()} needs a "
                                    f"version >= 3 struct (version {version})")
        return c

    def workspace_bytes(self, nranks: int) -> Tuple[int, int]:
        """loom_moe_workspace_bytes: (minimum workspace_bytes, minimum
        signal_slots) of a communicator of nranks ranks for this layer."""
        self.validate(nranks)
        c, nranks = self.to_c(), _as_int(nranks)
        b, s = ctypes.c_size_t(), ctypes.c_int()
        check(_lib.lib.loom_moe_workspace_bytes(ctypes.byref(c), nranks, ctypes.byref(b),
                                           ctypes.byref(s)))
        return b.value, s.value

    def describe_workspace(self, nranks: int) -> str:
        """loom_moe_workspace_describe: the workspace formula in words."""
        self.validate(nranks)
        c, nranks = self.to_c(), _as_int(nranks)
        buf = ctypes.create_string_buffer(2048)
        check(_lib.lib.loom_moe_workspace_describe(ctypes.byref(c), nranks, buf, len(buf)))
        return buf.value.decode()
