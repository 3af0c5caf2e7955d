"""loom for PyTorch (this subpackage imports torch; `import loom` does not).

    import loom.torch
    moe = loom.torch.MoE(hidden_size=2048, moe_intermediate_size=768, num_experts=128,
                         num_experts_per_tok=8, norm_topk_prob=True,
                         device="cuda", dtype=torch.bfloat16)
    moe.load_hf_state_dict(hf_state_dict, prefix="model.layers.0.mlp.")
    y = moe(x)                      # one loom kernel on the current stream

  MoE                      nn.Module with HF config names and weight layouts
  reference_moe            pure-PyTorch forward with the math of loom's CPU reference
  comm_from_process_group  a loom communicator over a torch.distributed group
  torch.ops.loom.moe_forward / moe_forward_routing / moe_forward_routed
                           the custom ops (fake implementations registered)
  ag_gemm / gemm_rs / gemm_ar, torch.ops.loom.ag_gemm / gemm_rs / gemm_ar
                           the fused collective GEMMs (tensor-parallel linear
                           layers) on a loom.Comm; gemm_workspace sizes it
docs/python.md says what is guaranteed.
"""
import torch as _torch  # noqa: F401  (fails here, not later, when torch is missing)

from ._coll import (ag_gemm, gemm_ar, gemm_rs, gemm_workspace, get_comm, register_comm,
                    unregister_comm)
from ._dist import close_default_comms, comm_from_process_group, default_comm
from ._dtypes import loom_dtype, torch_dtype
from ._module import HF_EXPERT_NAMES, MoE
from ._ops import (get_layer, moe_forward, moe_forward_routed, moe_forward_routing,
                   register_layer, unregister_layer)
from ._reference import gate_logits, gate_weights, reference_moe, topk_ids

__all__ = [
    "MoE", "HF_EXPERT_NAMES", "reference_moe", "gate_logits", "gate_weights", "topk_ids",
    "comm_from_process_group", "default_comm", "close_default_comms", "moe_forward",
    "moe_forward_routing", "moe_forward_routed", "register_layer", "unregister_layer",
    "get_layer", "loom_dtype", "torch_dtype", "ag_gemm", "gemm_rs", "gemm_ar", "gemm_workspace",
    "register_comm", "unregister_comm", "get_comm",
]
