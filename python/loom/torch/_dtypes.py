"""torch.dtype <-> loom.DType."""
import torch

from .._lib import DType, LoomArgumentError

_TO_TORCH = {DType.FP32: torch.float32, DType.BF16: torch.bfloat16, DType.FP16: torch.float16}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def torch_dtype(dtype: DType) -> torch.dtype:
    return _TO_TORCH[DType(dtype)]


def loom_dtype(dtype: torch.dtype) -> DType:
    if dtype not in _FROM_TORCH:
        raise LoomArgumentError(f"dtype {dtype} is not supported by loom (float32, bfloat16, "
                                "float16)")
    return _FROM_TORCH[dtype]
