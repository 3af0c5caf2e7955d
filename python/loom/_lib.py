"""ctypes bindings of loom's C API (include/loom.h), loaded at import.

Everything here mirrors loom.h one to one: the enums, the versioned config
structs (with the LOOM_*_CONFIG_INIT initialisers), the argument and record
structs, and one prototype (argtypes + restype) per function. Higher layers
(loom.config, loom.runtime, loom.torch) build on these; nothing here needs
torch.

Which libloom.so is loaded, first match wins:
  1. the file named by the environment variable LOOM_LIBRARY;
  2. libloom.so inside this package (what `pip install .` ships);
  3. build/libloom.so of the source checkout this file sits in
     (python/loom/_lib.py -> ../../build/libloom.so), for development.
libloom.so carries rpaths to the CUDA runtime and NCCL it was linked
against, so no LD_LIBRARY_PATH is needed.

The file is found when this module is imported (LoomLibraryError if there
is none) and loaded (dlopen) at the first call into it, not before: a
process has one libnccl.so.2, whichever is loaded first, and loading torch
first lets libloom share torch's NCCL (see docs/python.md, "NCCL").
`lib` is the ctypes.CDLL once loaded; touching it loads it.
"""
from __future__ import annotations

import ctypes
import enum
import os
import threading
import warnings
from ctypes import (POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t,
                    c_uint8, c_uint16, c_uint64, c_void_p)
from typing import Optional

# ---- constants (loom.h) --------------------------------------------------------

VERSION_MAJOR = 0
VERSION_MINOR = 1
VERSION_PATCH = 0
#: LOOM_API_VERSION: version of the config structs' layout.
API_VERSION = 3
#: LOOM_UNSET: "not set by the caller: use the default".
UNSET = -1
#: LOOM_MOE_MAX_RANKS: largest communicator a MoE layer supports.
MOE_MAX_RANKS = 64

ENV_LIBRARY = "LOOM_LIBRARY"


class Result(enum.IntEnum):
    """loom_result_t."""
    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_USAGE = 2
    CUDA_ERROR = 3
    NCCL_ERROR = 4
    OUT_OF_MEMORY = 5
    TIMEOUT = 6
    UNSUPPORTED = 7
    INTERNAL_ERROR = 8
    PEER_ERROR = 9


class DType(enum.IntEnum):
    """loom_dtype_t."""
    FP32 = 0
    BF16 = 1
    FP16 = 2


class Activation(enum.IntEnum):
    """loom_activation_t. SWIGLU is silu(x W1_gate) * (x W1_up)."""
    RELU = 0
    GELU = 1  # exact (erf) form
    SILU = 2
    SWIGLU = 3


class Math(enum.IntEnum):
    """loom_math_t: how fp32 layers multiply."""
    TF32 = 0
    FP32 = 1


class WeightLayout(enum.IntEnum):
    """loom_weight_layout_t."""
    OUT_IN = 0  # [out x in] row-major: nn.Linear.weight (default)
    IN_OUT = 1  # [in x out] row-major


class GateMath(enum.IntEnum):
    """loom_gate_math_t: how the fused gate sums its logits (loom.h "The
    fast gate")."""
    EXACT = 0  # fp64 tensor cores, the exact sum rounded once (default)
    FAST = 1   # bf16 / fp16 tensor cores, fp32 sums (bf16 / fp16 layers only)


class Exchange(enum.IntEnum):
    """loom_exchange_t."""
    RING = 0
    ALLTOALL = 1


# ---- errors ----------------------------------------------------------------------


class LoomError(RuntimeError):
    """A loom call failed: `result` is the loom_result_t, `message` the
    detailed text of loom_last_error() (or of the Python-side check)."""

    def __init__(self, result: int, message: str):
        try:
            result = Result(result)
        except ValueError:
            pass
        self.result = result
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        name = self.result.name.lower() if isinstance(self.result, Result) else str(self.result)
        return f"{self.message} [{name}]"


class LoomArgumentError(LoomError, ValueError):
    """An argument rejected before any loom call (Python-side validation);
    result is always Result.INVALID_ARGUMENT. Also a ValueError."""

    def __init__(self, message: str):
        super().__init__(Result.INVALID_ARGUMENT, message)


class LoomLibraryError(ImportError):
    """libloom.so could not be found or loaded."""


# ---- structs -----------------------------------------------------------------------


class CommConfigC(ctypes.Structure):
    """loom_comm_config_t (the same at every API version so far)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("version", c_int),
        ("workspace_bytes", c_int64),
        ("signal_slots", c_int),
        ("timeout_ms", c_int),
    ]


class MoeConfigC(ctypes.Structure):
    """loom_moe_config_t at LOOM_API_VERSION 3 (version 1 ends before
    weight_layout: its struct_size is MOE_CONFIG_V1_SIZE; version 2's
    struct has the same size as version 3's, gate_math filling its tail
    padding, so the library reads gate_math only from version >= 3)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("version", c_int),
        ("hidden", c_int64),
        ("ffn", c_int64),
        ("num_experts", c_int64),
        ("top_k", c_int64),
        ("max_tokens_per_rank", c_int64),
        ("activation", c_int),
        ("dtype", c_int),
        ("fp32_math", c_int),
        ("normalize_top_k", c_int),
        ("capacity_factor", c_double),
        # since LOOM_API_VERSION 2
        ("weight_layout", c_int),
        # since LOOM_API_VERSION 3
        ("gate_math", c_int),
    ]


#: sizeof(loom_moe_config_t) at each API version (index version - 1).
MOE_CONFIG_SIZES = (MoeConfigC.weight_layout.offset, ctypes.sizeof(MoeConfigC),
                    ctypes.sizeof(MoeConfigC))
MOE_CONFIG_V1_SIZE = MOE_CONFIG_SIZES[0]


def comm_config_init() -> CommConfigC:
    """LOOM_COMM_CONFIG_INIT."""
    return CommConfigC(ctypes.sizeof(CommConfigC), API_VERSION, UNSET, UNSET, UNSET)


def moe_config_init() -> MoeConfigC:
    """LOOM_MOE_CONFIG_INIT."""
    return MoeConfigC(ctypes.sizeof(MoeConfigC), API_VERSION, UNSET, UNSET, UNSET, UNSET, UNSET,
                      UNSET, UNSET, UNSET, UNSET, 0.0, UNSET, UNSET)


class MoeStatsC(ctypes.Structure):
    """loom_moe_stats_t (written by the kernel into device memory)."""
    _fields_ = [
        ("rows_sent", c_int64 * MOE_MAX_RANKS),
        ("rows_received", c_int64 * MOE_MAX_RANKS),
        ("rows_dropped", c_int64),
        ("bytes_sent", c_int64),
        ("bytes_remote", c_int64),
        ("phase_end_ns", c_int64 * 5),
    ]


class MoeArgsC(ctypes.Structure):
    """loom_moe_args_t: device pointers as integers (0 = NULL)."""
    _fields_ = [
        ("x", c_void_p),
        ("num_tokens", c_int64),
        ("y", c_void_p),
        ("expert_ids_in", c_void_p),
        ("weights_in", c_void_p),
        ("expert_ids_out", c_void_p),
        ("weights_out", c_void_p),
        ("stats", c_void_p),
    ]


class MoeTraceEventC(ctypes.Structure):
    """loom_moe_trace_event_t, 32 bytes."""
    _fields_ = [
        ("start_ns", c_uint64),
        ("end_ns", c_uint64),
        ("sm", c_uint16),
        ("kind", c_uint8),
        ("peer", c_uint8),
        ("a", c_int32),
        ("b", c_int32),
        ("c", c_int32),
    ]


class MoeTraceInfoC(ctypes.Structure):
    """loom_moe_trace_info_t, 40 bytes."""
    _fields_ = [
        ("recorded", c_int64),
        ("dropped", c_int64),
        ("start_ns", c_uint64),
        ("end_ns", c_uint64),
        ("blocks", c_int32),
        ("rank", c_int32),
    ]


class GemmArgsC(ctypes.Structure):
    """loom_gemm_args_t (the collective GEMMs; new at LOOM_API_VERSION 2):
    device pointers as integers (0 = NULL)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("version", c_int),
        ("dtype", c_int),
        ("m", c_int64),
        ("n", c_int64),
        ("k", c_int64),
        ("a", c_void_p),
        ("b", c_void_p),
        ("c", c_void_p),
        ("activation", c_int),
        ("a_gathered", c_void_p),
        ("bias", c_void_p),
    ]


def gemm_args_init() -> GemmArgsC:
    """LOOM_GEMM_ARGS_INIT (dtype bf16, activation none, no gathered A, no bias)."""
    return GemmArgsC(ctypes.sizeof(GemmArgsC), API_VERSION, 1, 0, 0, 0, None, None, None, UNSET, None,
                     None)


# ---- prototypes --------------------------------------------------------------------

_res = c_int  # loom_result_t
_handle = c_void_p  # loom_comm_t, loom_moe_t, ncclComm_t, cudaStream_t

_PROTOTYPES = {
    "loom_result_string": (c_char_p, [c_int]),
    "loom_last_error": (c_char_p, []),
    "loom_dtype_size": (_res, [c_int, POINTER(c_size_t)]),
    "loom_dtype_string": (c_char_p, [c_int]),
    "loom_comm_create": (_res, [_handle, POINTER(CommConfigC), POINTER(_handle)]),
    "loom_comm_create_all": (_res, [c_int, POINTER(c_int), POINTER(CommConfigC), POINTER(_handle)]),
    "loom_comm_create_loopback": (_res, [c_int, POINTER(CommConfigC), POINTER(_handle)]),
    "loom_comm_destroy": (_res, [_handle]),
    "loom_comm_destroy_all": (_res, [c_int, POINTER(_handle)]),
    "loom_comm_get_async_error": (_res, [_handle, POINTER(c_int)]),
    "loom_comm_rank": (_res, [_handle, POINTER(c_int)]),
    "loom_comm_size": (_res, [_handle, POINTER(c_int)]),
    "loom_comm_device": (_res, [_handle, POINTER(c_int)]),
    "loom_comm_workspace_bytes": (_res, [_handle, POINTER(c_size_t)]),
    "loom_comm_nccl": (_res, [_handle, POINTER(_handle)]),
    "loom_exchange_workspace_bytes": (_res, [c_int, c_int, c_size_t, POINTER(c_size_t)]),
    "loom_exchange": (_res, [_handle, c_int, c_void_p, c_void_p, c_size_t, _handle]),
    "loom_ag_gemm_workspace_bytes": (_res, [POINTER(GemmArgsC), c_int, POINTER(c_size_t),
                                            POINTER(c_int)]),
    "loom_ag_gemm": (_res, [_handle, POINTER(GemmArgsC), _handle]),
    "loom_gemm_rs_workspace_bytes": (_res, [POINTER(GemmArgsC), c_int, POINTER(c_size_t),
                                            POINTER(c_int)]),
    "loom_gemm_rs": (_res, [_handle, POINTER(GemmArgsC), _handle]),
    "loom_gemm_ar_workspace_bytes": (_res, [POINTER(GemmArgsC), c_int, POINTER(c_size_t),
                                            POINTER(c_int)]),
    "loom_gemm_ar": (_res, [_handle, POINTER(GemmArgsC), _handle]),
    "loom_moe_workspace_bytes": (_res, [POINTER(MoeConfigC), c_int, POINTER(c_size_t),
                                        POINTER(c_int)]),
    "loom_moe_workspace_describe": (_res, [POINTER(MoeConfigC), c_int, c_char_p, c_size_t]),
    "loom_moe_create": (_res, [_handle, POINTER(MoeConfigC), POINTER(_handle)]),
    "loom_moe_set_weights": (_res, [_handle, c_void_p, c_void_p, c_void_p]),
    "loom_moe_forward_ex": (_res, [_handle, POINTER(MoeArgsC), _handle]),
    "loom_moe_forward": (_res, [_handle, c_void_p, c_int64, c_void_p, _handle]),
    "loom_moe_set_trace": (_res, [_handle, c_void_p, c_int64, c_void_p]),
    "loom_moe_destroy": (_res, [_handle]),
}


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def library_candidates() -> list:
    """Where libloom.so is looked for, in order (see the module docstring)."""
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return [env]
    here = _package_dir()
    return [os.path.join(here, "libloom.so"),
            os.path.normpath(os.path.join(here, "..", "..", "build", "libloom.so"))]


def _find() -> str:
    candidates = library_candidates()
    path = next((p for p in candidates if os.path.isfile(p)), None)
    if path is None:
        if os.environ.get(ENV_LIBRARY):
            raise LoomLibraryError(f"{ENV_LIBRARY}={candidates[0]!r} is not a file")
        raise LoomLibraryError(
            "libloom.so not found (looked at " + ", ".join(candidates) + "): install the package "
            "with `pip install .` from the loom repository, or build it with `make` and set "
            f"{ENV_LIBRARY} to build/libloom.so")
    return os.path.abspath(path)


#: The libloom.so this process uses (found at import, loaded at first use).
library_path = _find()
_load_lock = threading.Lock()
#: Set by _load: the NCCL libloom resolved to, and whether it was already in
#: the process (e.g. torch's) when libloom was loaded.
nccl_preloaded: Optional[str] = None


def _bind(cdll, prototypes) -> None:
    """Set restype and argtypes of each (name, restype, argtypes) on cdll."""
    for name, restype, argtypes in prototypes:
        fn = getattr(cdll, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _open_linked(prefix: str, fallback: str, prototypes):
    """The copy of a library libloom is linked to (the one mapped in this
    process, else `fallback` by name), with `prototypes` bound; .path says
    which file."""
    _load()
    path = _mapped_library(prefix) or fallback
    cdll = ctypes.CDLL(path)
    _bind(cdll, prototypes)
    cdll.path = path
    return cdll


def _load():
    global lib, nccl_preloaded
    with _load_lock:
        if "lib" in globals():
            return globals()["lib"]
        nccl_preloaded = _mapped_library("libnccl.so")
        try:
            cdll = ctypes.CDLL(library_path)
        except OSError as e:
            raise LoomLibraryError(
                f"cannot load {library_path}: {e}. libloom.so needs the CUDA runtime (libcudart) "
                "and NCCL >= 2.28 (libnccl.so.2) it was built against; `ldd` on it shows what "
                "is missing") from e
        _bind(cdll, ((name, r, a) for name, (r, a) in _PROTOTYPES.items()))
        lib = cdll
    _check_nccl_build()
    return cdll


def _check_nccl_build() -> None:
    """Warn when the NCCL in this process is not the version libloom was
    built against (its device code is compiled from that NCCL's headers)."""
    try:
        from . import _build_info
    except ImportError:  # not an installed build (e.g. make python-test)
        return
    built = getattr(_build_info, "NCCL_VERSION_CODE", None)
    try:
        now = nccl_version()
    except Exception:
        return
    if built and now != built:
        warnings.warn(
            f"loom: libloom.so was built against NCCL version code {built}, but this process "
            f"uses {now} ({nccl().path}{', loaded before loom' if nccl_preloaded else ''}); "
            "loom's device code follows the headers it was built with: rebuild loom against "
            "this NCCL (pip install . with it installed) if communicators fail", RuntimeWarning,
            stacklevel=3)


def loaded() -> bool:
    """Whether libloom.so has been loaded into this process yet."""
    return "lib" in globals()


def __getattr__(name):  # PEP 562: `lib` loads the library on first access
    if name == "lib":
        return _load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- result handling ------------------------------------------------------------------


def result_string(result: int) -> str:
    """loom_result_string: short static name of a result."""
    return _load().loom_result_string(int(result)).decode()


def last_error() -> str:
    """loom_last_error: this thread's detailed message of the last failed call."""
    return _load().loom_last_error().decode(errors="replace")


def check(result: int, what: str = "") -> None:
    """Raise LoomError carrying loom_last_error() unless result is LOOM_SUCCESS.
    Must run on the thread that made the call (the message is thread-local)."""
    if result == Result.SUCCESS:
        return
    message = last_error() or result_string(result)
    if what and not message.startswith(what):
        message = f"{what}: {message}"
    raise LoomError(result, message)


def dtype_size(dtype: int) -> int:
    """loom_dtype_size."""
    n = c_size_t()
    check(_load().loom_dtype_size(int(dtype), ctypes.byref(n)))
    return n.value


def dtype_string(dtype: int) -> str:
    """loom_dtype_string."""
    return _load().loom_dtype_string(int(dtype)).decode()


# ---- the NCCL and CUDA runtime libraries libloom links to --------------------------------


def _mapped_library(prefix: str) -> Optional[str]:
    """Path of the mapped shared object whose file name starts with `prefix`
    (libloom's own dependency, loaded with it), from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if os.path.basename(path).startswith(prefix):
                        return path
    except OSError:
        pass
    return None


class NcclUniqueId(ctypes.Structure):
    """ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128)."""
    _fields_ = [("internal", ctypes.c_char * 128)]


_nccl = None
_cudart = None


def nccl():
    """The libnccl that libloom is linked to (the same copy in this process),
    with the prototypes loom.torch uses."""
    global _nccl
    if _nccl is None:
        _nccl = _open_linked("libnccl.so", "libnccl.so.2", (
            ("ncclGetVersion", c_int, [POINTER(c_int)]),
            ("ncclGetUniqueId", c_int, [POINTER(NcclUniqueId)]),
            ("ncclCommInitRank", c_int, [POINTER(_handle), c_int, NcclUniqueId, c_int]),
            ("ncclCommDestroy", c_int, [_handle]),
            ("ncclCommAbort", c_int, [_handle]),
            ("ncclGetErrorString", c_char_p, [c_int]),
            ("ncclGetLastError", c_char_p, [_handle]),
        ))
    return _nccl


def nccl_check(result: int, what: str, comm=None) -> None:
    """Raise LoomError(NCCL_ERROR) for a failed NCCL call."""
    if result == 0:
        return
    n = nccl()
    detail = n.ncclGetErrorString(result).decode()
    raw = n.ncclGetLastError(comm)
    last = raw.decode(errors="replace") if raw else ""
    raise LoomError(Result.NCCL_ERROR, f"{what}: {detail}" + (f" ({last})" if last else ""))


def nccl_version() -> int:
    """ncclGetVersion of the NCCL libloom uses (e.g. 22809 for 2.28.9)."""
    v = c_int()
    nccl_check(nccl().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value


def cudart():
    """The CUDA runtime libloom is linked to, with cudaSetDevice / cudaGetDevice /
    cudaGetDeviceCount / cudaGetErrorString."""
    global _cudart
    if _cudart is None:
        _cudart = _open_linked("libcudart.so", "libcudart.so", (
            ("cudaSetDevice", c_int, [c_int]),
            ("cudaGetDevice", c_int, [POINTER(c_int)]),
            ("cudaGetDeviceCount", c_int, [POINTER(c_int)]),
            ("cudaGetErrorString", c_char_p, [c_int]),
        ))
    return _cudart


def cuda_check(result: int, what: str) -> None:
    """Raise LoomError(CUDA_ERROR) for a failed CUDA runtime call."""
    if result != 0:
        msg = cudart().cudaGetErrorString(result).decode()
        raise LoomError(Result.CUDA_ERROR, f"{what}: {msg} (cudaError {result})")


def set_device(device: int) -> None:
    """cudaSetDevice on libloom's CUDA runtime for the calling thread."""
    cuda_check(cudart().cudaSetDevice(int(device)), f"cudaSetDevice({device})")


def device_count() -> int:
    """cudaGetDeviceCount; 0 when there is no usable GPU or driver."""
    n = c_int(0)
    return n.value if cudart().cudaGetDeviceCount(ctypes.byref(n)) == 0 else 0
