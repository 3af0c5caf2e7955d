"""loom communicators for PyTorch programs.

comm_from_process_group: one loom communicator per rank of a
torch.distributed group (one process per GPU, as torchrun starts them).
loom makes its own NCCL communicator for it: rank 0 of the group takes an
ncclUniqueId from the libnccl that libloom is linked to, the group
broadcasts it (torch.distributed.broadcast_object_list), every rank calls
ncclCommInitRank through ctypes on that same libnccl, then
loom_comm_create. The loom communicator owns that NCCL communicator and
destroys it in close().

default_comm: the single-GPU communicators loom.torch.MoE uses when it is
given none (world size 1), one per device, shared by every layer that fits.
"""
import ctypes
import os
import threading
from typing import Dict, List, Optional, Union

import torch

from .. import _lib
from .._lib import LoomError, Result
from ..config import CommConfig, MoeConfig
from ..runtime import Comm

NCCL_MIN_VERSION = 22800  # loom needs NCCL >= 2.28 (the device API)


def _device_index(device) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise _lib.LoomArgumentError(f"device {d} is not a CUDA device")
    return d.index if d.index is not None else torch.cuda.current_device()


def _global_rank(group, group_rank: int) -> int:
    import torch.distributed as dist
    if group is None:
        return group_rank
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, group_rank)
    return dist.distributed_c10d._get_global_rank(group, group_rank)  # torch < 2.0


def comm_from_process_group(group=None, *, device: Union[int, str, torch.device, None] = None,
                            config: Optional[CommConfig] = None) -> Comm:
    """A loom communicator over the ranks of a torch.distributed group
    (default: the world). Collective over the group: every rank calls it.

    device: this rank's CUDA device (default: torch.cuda.current_device());
        it becomes the current device.
    config: the communicator's CommConfig (same on every rank); size it for
        your layers with CommConfig.for_moe(moe_config, nranks=world_size)
        or loom.torch.MoE.comm_config(...).
    Sets NCCL_NVLS_ENABLE=0 in the environment when it is unset (loom never
    uses NVLink multicast; set it before the process starts to cover
    torch's own NCCL communicators too).
    Errors: LoomError (NCCL_ERROR, UNSUPPORTED for NCCL < 2.28, and what
    loom_comm_create reports)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise LoomError(Result.INVALID_USAGE, "comm_from_process_group: torch.distributed is not "
                        "initialised (call torch.distributed.init_process_group first)")
    rank = dist.get_rank(group)
    nranks = dist.get_world_size(group)
    if rank < 0:
        raise LoomError(Result.INVALID_USAGE,
                        "comm_from_process_group: this process is not in the group")
    dev = _device_index(device)
    torch.cuda.set_device(dev)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    version = _lib.nccl_version()
    if version < NCCL_MIN_VERSION:
        raise LoomError(Result.UNSUPPORTED,
                        f"comm_from_process_group: libnccl {_lib.nccl().path} is version code "
                        f"{version}; loom needs >= {NCCL_MIN_VERSION} (NCCL 2.28, device API)")
    if config is not None:
        config.validate()
    n = _lib.nccl()
    payload: List[Optional[bytes]] = [None]
    if rank == 0:
        uid = _lib.NcclUniqueId()
        _lib.nccl_check(n.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        payload[0] = bytes(uid)
    dist.broadcast_object_list(payload, src=_global_rank(group, 0), group=group,
                               device=torch.device("cuda", dev))
    uid = _lib.NcclUniqueId.from_buffer_copy(payload[0])
    _lib.set_device(dev)
    nccl_comm = ctypes.c_void_p()
    _lib.nccl_check(n.ncclCommInitRank(ctypes.byref(nccl_comm), nranks, uid, rank),
                    f"ncclCommInitRank (rank {rank} of {nranks}, device {dev})")
    try:
        comm = Comm.create(nccl_comm.value, config, own_nccl=True)
    except BaseException:
        n.ncclCommDestroy(nccl_comm)
        raise
    return comm


# ---- single-GPU communicators for world size 1 ----------------------------------------------

_DEFAULT_LOCK = threading.Lock()
_DEFAULT: Dict[int, List[Comm]] = {}
_DEFAULT_WORKSPACE = 64 << 20
_DEFAULT_SLOTS = 4096


def default_comm(device: int, for_config: MoeConfig) -> Comm:
    """A single-rank communicator on `device` large enough for a layer of
    `for_config`: an existing one when one fits, else a new one sized for it
    (kept for the process's lifetime; see close_default_comms)."""
    need_bytes, need_slots = for_config.workspace_bytes(1)
    with _DEFAULT_LOCK:
        for c in _DEFAULT.get(device, []):
            if not c.closed and c.workspace_bytes >= need_bytes and \
                    (c.config.signal_slots or _DEFAULT_SLOTS) >= need_slots:
                return c
        cfg = CommConfig(workspace_bytes=max(need_bytes, _DEFAULT_WORKSPACE),
                         signal_slots=max(need_slots, _DEFAULT_SLOTS))
        comm = Comm.create_all([device], cfg)[0]
        _DEFAULT.setdefault(device, []).append(comm)
        return comm


def close_default_comms() -> None:
    """Close the communicators default_comm made (and every layer on them)."""
    with _DEFAULT_LOCK:
        for comms in _DEFAULT.values():
            for c in comms:
                c.close()
        _DEFAULT.clear()
