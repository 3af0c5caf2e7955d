"""Expert-parallel loom.torch.MoE over a torch.distributed group, one
process per GPU (not run by `make python-test`):

    NCCL_NVLS_ENABLE=0 PYTHONPATH=python LOOM_LIBRARY=$PWD/build/libloom.so \\
        torchrun --nproc-per-node 2 tests/python/dist_moe.py
    (or 4; E = 16 experts split over the ranks)

Every rank builds the same full set of weights (same seed), loads its
experts with load_hf_state_dict, and runs forwards on its own tokens
(different counts per rank, one rank with 0 tokens, for several calls);
each rank checks its y against reference_moe with every expert, then
torch.compile and a CUDA-graph replay of the same forward. Prints one
line per rank and exits non-zero on any failure.
"""
import os
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # loom never uses NVLink multicast

import torch  # noqa: E402  (torch before loom's first call: one libnccl, see docs/python.md)
import torch.distributed as dist  # noqa: E402

import loom  # noqa: E402
import loom.torch as lt  # noqa: E402

TOL = 2e-2  # bf16, as tests/gpu/test_moe.c


def row_err(y, ref):
    y, ref = y.double().reshape(-1, y.shape[-1]), ref.double().reshape(-1, ref.shape[-1])
    if len(y) == 0:
        return 0.0
    return ((y - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-30)).max().item()


def main() -> int:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    kw = dict(hidden_size=512, moe_intermediate_size=256, num_experts=16, num_experts_per_tok=4,
              norm_topk_prob=True)
    max_tokens = 512
    cfg = lt.MoE.make_config(**kw, max_tokens=max_tokens, dtype=torch.bfloat16)
    comm = lt.comm_from_process_group(config=loom.CommConfig.for_moe(cfg, nranks=world))
    failures = []
    try:
        assert (comm.rank, comm.nranks, comm.device) == (rank, world, local_rank), comm
        # the full layer, identical on every rank (CPU, fixed seed)
        full = lt.MoE(**kw, max_tokens=max_tokens, dtype=torch.bfloat16, device="cpu")
        g = torch.Generator().manual_seed(1234)
        with torch.no_grad():
            for p in (full.gate.weight, full.w1, full.w2):
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        moe = lt.MoE(**kw, max_tokens=max_tokens, dtype=torch.bfloat16, comm=comm)
        moe.load_hf_state_dict(full.to_hf_state_dict(style="qwen3"))

        def check(name, y, x):  # against the reference with every expert, on the CPU
            err = row_err(y.cpu(), full.reference(x.cpu()))
            if not err <= TOL:
                failures.append(f"{name}: worst row error {err:.3g} > {TOL}")

        gx = torch.Generator(device="cuda").manual_seed(rank)
        for call in range(4):
            T = 0 if call == 1 and rank == world - 1 else 37 * (rank + 1) + 50 * call
            x = torch.randn(T, kw["hidden_size"], device="cuda", generator=gx).bfloat16()
            check(f"call {call} (T={T})", moe(x), x)
        compiled = torch.compile(moe, fullgraph=True)
        x = torch.randn(64 + rank, kw["hidden_size"], device="cuda", generator=gx).bfloat16()
        check("torch.compile", compiled(x), x)
        # CUDA graph: every rank captures and replays the same number of forwards
        static_x = x.clone()
        moe(static_x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = moe(static_x)
        for rep in range(2):
            static_x.copy_(torch.randn(static_x.shape, device="cuda", generator=gx).bfloat16())
            graph.replay()
            torch.cuda.synchronize()
            check(f"graph replay {rep}", static_y, static_x)
        torch.cuda.synchronize()
        comm.raise_async_error()
    except Exception as e:  # report, then still take part in the collective close
        failures.append(f"{type(e).__name__}: {e}")
    ok = torch.tensor([0 if failures else 1], device="cuda")
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    comm.close()
    print(f"rank {rank}/{world}: " + ("all results match" if not failures else
                                      "FAILED: " + "; ".join(failures)), flush=True)
    dist.destroy_process_group()
    return 0 if ok.item() == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
