"""loom: single-kernel distributed MoE operators for Hopper GPUs, from Python.

    import loom                 # ctypes bindings; no torch needed
    import loom.torch           # PyTorch custom ops, MoE module (needs torch)

What is here without torch:
  - loom.LoomError (a failed call; .result is a loom.Result, .message the
    library's loom_last_error() text), loom.LoomArgumentError (rejected by
    Python-side validation; also a ValueError);
  - the enums Result, DType, Activation, Math, WeightLayout, GateMath, Exchange;
  - loom.CommConfig / loom.MoeConfig (the versioned C config structs);
  - loom.Comm / loom.MoeLayer (owning handles; buffers as device pointers);
  - loom._lib: the raw ctypes bindings of include/loom.h.
docs/python.md says what is guaranteed.
"""
from ._version import __version__
from . import _lib
from ._lib import (API_VERSION, UNSET, Activation, DType, Exchange, GateMath, LoomArgumentError,
                   LoomError,
                   LoomLibraryError, Math, Result, WeightLayout, dtype_size, dtype_string,
                   last_error, result_string)
from .config import CommConfig, MoeConfig
from .runtime import Comm, MoeLayer

#: Path of the libloom.so this process loaded.
library_path = _lib.library_path

__all__ = [
    "__version__", "API_VERSION", "UNSET", "Activation", "DType", "Exchange", "GateMath",
    "LoomArgumentError",
    "LoomError", "LoomLibraryError", "Math", "Result", "WeightLayout", "dtype_size", "dtype_string",
    "last_error", "result_string", "CommConfig", "MoeConfig", "Comm", "MoeLayer", "library_path",
]
