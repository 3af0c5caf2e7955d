"""loom.torch on a GPU (skipped without torch or without a CUDA device):
the MoE block against reference_moe on world size 1 over several configs,
the routing it reports, caller routing, torch.compile, CUDA-graph capture,
bad inputs, an asynchronous error, and two GPUs driven from one process
when the machine has them; the collective GEMM ops (ag_gemm, gemm_rs,
gemm_ar) against F.linear on one GPU and on two. tests/python/dist_moe.py
covers torchrun."""
import os
import unittest

from loomtest_util import HAVE_TRANSFORMERS, have_cuda

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # loom never uses NVLink multicast

if have_cuda():
    import torch
    import loom
    import loom.torch as lt
    from loom import LoomArgumentError, LoomError, Result

TOL = {"bfloat16": 2e-2, "float16": 2e-2, "tf32": 5e-3, "fp32": 1e-5}  # tests/gpu/test_moe.c


def _tol(dtype, fp32_math=None):
    if dtype == torch.float32:
        return TOL["fp32"] if fp32_math == "fp32" else TOL["tf32"]
    return TOL[str(dtype).split(".")[1]]


def _row_rel_err(y, ref):
    y, ref = y.double().reshape(-1, y.shape[-1]), ref.double().reshape(-1, ref.shape[-1])
    d = (y - ref).norm(dim=1)
    r = ref.norm(dim=1)
    return torch.where(r > 0, d / r.clamp_min(1e-300), d)


def _fill(moe, seed):
    """Weights like a trained layer's scale (so SwiGLU outputs are O(1))."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for p in (moe.gate.weight, moe.w1, moe.w2):
            fan_in = p.shape[-1]
            p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)


CONFIGS = [  # name, MoE kwargs, dtype (a torch attribute name), tokens
    ("bf16 E8 k2", dict(hidden_size=256, moe_intermediate_size=128, num_experts=8,
                        num_experts_per_tok=2), "bfloat16", 300),
    ("fp16 E16 k4 no-norm", dict(hidden_size=512, moe_intermediate_size=256, num_experts=16,
                                 num_experts_per_tok=4, norm_topk_prob=False), "float16", 1000),
    ("fp32 tf32 E4 k1", dict(hidden_size=128, moe_intermediate_size=64, num_experts=4,
                             num_experts_per_tok=1), "float32", 77),
    ("fp32 exact E8 k2", dict(hidden_size=128, moe_intermediate_size=128, num_experts=8,
                              num_experts_per_tok=2, fp32_math="fp32"), "float32", 64),
    ("bf16 decode E64 k8", dict(hidden_size=1024, moe_intermediate_size=256, num_experts=64,
                                num_experts_per_tok=8), "bfloat16", 5),
    ("bf16 capacity 1.0", dict(hidden_size=256, moe_intermediate_size=128, num_experts=8,
                               num_experts_per_tok=2, capacity_factor=1.0), "bfloat16", 256),
    ("bf16 relu non-gated", dict(hidden_size=256, moe_intermediate_size=192, num_experts=8,
                                 num_experts_per_tok=2, gated=False, hidden_act="relu"),
     "bfloat16", 100),
    ("fp16 gelu non-gated", dict(hidden_size=192, moe_intermediate_size=128, num_experts=4,
                                 num_experts_per_tok=2, gated=False, hidden_act="gelu"),
     "float16", 50),
]


@unittest.skipUnless(have_cuda(), "no CUDA device (or no torch)")
class TestMoEGPU(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.cuda.set_device(0)

    def _moe(self, kw, dtype, max_tokens=1024, seed=0, **extra):
        m = lt.MoE(**kw, max_tokens=max_tokens, device="cuda", dtype=dtype, **extra)
        _fill(m, seed)
        return m

    def test_matches_reference(self):
        for i, (name, kw, dtype, T) in enumerate(CONFIGS):
            dtype = getattr(torch, dtype)
            with self.subTest(config=name):
                m = self._moe(kw, dtype, seed=i)
                x = torch.randn(T, kw["hidden_size"], device="cuda").to(dtype)
                y, ids, w = m.forward_with_routing(x)
                y2 = m(x)
                torch.cuda.synchronize()
                self.assertEqual((y.shape, y.dtype), (x.shape, dtype))
                self.assertTrue(torch.equal(y, y2), "two runs differ (loom is deterministic)")
                ref, rids, rw = m.reference(x, return_routing=True)
                if dtype != torch.float32:  # exact routing for 16-bit inputs (loom.h)
                    self.assertTrue(torch.equal(ids, rids), name)
                    self.assertLess((w - rw).abs().max().item(), 1e-6)
                err = _row_rel_err(y, ref)
                tol = _tol(dtype, kw.get("fp32_math"))
                self.assertLessEqual(err.max().item(), tol,
                                     f"{name}: worst row error {err.max().item():.3g} > {tol}")

    def test_shapes_zero_tokens_and_strided_input(self):
        kw = CONFIGS[0][1]
        m = self._moe(kw, torch.bfloat16)
        H = kw["hidden_size"]
        y = m(torch.empty(0, H, device="cuda", dtype=torch.bfloat16))
        self.assertEqual(y.shape, (0, H))
        big = torch.randn(4, 6, 2 * H, device="cuda").to(torch.bfloat16)
        x = big[..., :H]  # not contiguous
        y = m(x)
        self.assertEqual(y.shape, (4, 6, H))
        self.assertTrue(torch.equal(y, m(x.contiguous())))

    def test_caller_routing(self):
        kw = CONFIGS[1][1]
        m = self._moe(kw, torch.float16, seed=5)
        x = torch.randn(64, kw["hidden_size"], device="cuda").half()
        y, ids, w = m.forward_with_routing(x)
        self.assertTrue(torch.equal(m.forward_routed(x, ids, w), y))
        # other routing: the reference with that routing
        E, k = kw["num_experts"], kw["num_experts_per_tok"]
        ids2 = torch.stack([torch.randperm(E, device="cuda")[:k] for _ in range(64)]).int()
        w2 = torch.rand(64, k, device="cuda")
        y2 = m.forward_routed(x, ids2, w2)
        ref = m.reference(x, expert_ids=ids2, routing_weights=w2)
        self.assertLessEqual(_row_rel_err(y2, ref).max().item(), TOL["float16"])

    def test_torch_compile(self):
        kw = CONFIGS[0][1]
        m = self._moe(kw, torch.bfloat16, seed=2)

        def block(x):
            return m(torch.nn.functional.silu(x)) + x

        x = torch.randn(2, 50, kw["hidden_size"], device="cuda").to(torch.bfloat16)
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)
        self.assertTrue(torch.allclose(compiled(x), eager, rtol=1e-2, atol=1e-2))
        # a second shape (dynamic or recompiled), still the same numbers as eager
        x2 = torch.randn(3, 7, kw["hidden_size"], device="cuda").to(torch.bfloat16)
        self.assertTrue(torch.allclose(compiled(x2), block(x2), rtol=1e-2, atol=1e-2))
        mc = torch.compile(m, fullgraph=True)
        self.assertTrue(torch.equal(mc(x), m(x)))

    def test_cuda_graph(self):
        kw = CONFIGS[0][1]
        m = self._moe(kw, torch.bfloat16, seed=3)
        H = kw["hidden_size"]
        static_x = torch.randn(128, H, device="cuda").to(torch.bfloat16)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up outside the capture
            m(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = m(static_x)
        for seed in range(3):
            gen = torch.Generator("cuda").manual_seed(seed)
            new = torch.randn(128, H, device="cuda", generator=gen).to(torch.bfloat16)
            static_x.copy_(new)
            g.replay()
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(static_y, m(new)), f"replay {seed}")
        # torch.compile's CUDA-graph mode as well
        rc = torch.compile(m, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):
            out = rc(static_x)
        self.assertTrue(torch.equal(out, m(static_x)))

    def test_opcheck(self):
        kw = CONFIGS[0][1]
        m = self._moe(kw, torch.bfloat16)
        x = torch.randn(16, kw["hidden_size"], device="cuda").to(torch.bfloat16)
        torch.library.opcheck(torch.ops.loom.moe_forward.default,
                              (m.handle, x, m.gate.weight, m.w1, m.w2))

    def test_bad_inputs_raise(self):
        kw = CONFIGS[0][1]
        H = kw["hidden_size"]
        m = self._moe(kw, torch.bfloat16, max_tokens=64)
        bad = [
            (torch.randn(8, H, device="cuda"), "the layer's dtype is torch.bfloat16"),
            (torch.randn(8, H // 2, device="cuda").bfloat16(), "last dimension must be hidden"),
            (torch.randn(65, H, device="cuda").bfloat16(), "at most max_tokens_per_rank = 64"),
        ]
        for x, text in bad:
            with self.assertRaises(LoomArgumentError) as cm:
                m(x)
            self.assertIn(text, str(cm.exception))
        with self.assertRaises(LoomError):
            m(torch.randn(8, H, dtype=torch.bfloat16))  # CPU input, GPU block
        with self.assertRaises(LoomArgumentError):
            lt.MoE(H, 128, 8, 2, dtype=torch.bfloat16, device="cuda", max_tokens=0)
        with self.assertRaises(LoomArgumentError):
            m.forward_routed(torch.randn(8, H, device="cuda").bfloat16(),
                             torch.zeros(8, 2, dtype=torch.int64, device="cuda"),
                             torch.zeros(8, 2, device="cuda"))

    def test_async_error_on_bad_routing(self):
        kw = CONFIGS[0][1]
        E = kw["num_experts"]
        cfg = lt.MoE.make_config(**kw, max_tokens=64, dtype=torch.bfloat16)
        comm = loom.Comm.create_all([0], loom.CommConfig.for_moe(cfg, nranks=1, timeout_ms=2000))[0]
        try:
            m = self._moe(kw, torch.bfloat16, max_tokens=64, comm=comm)
            x = torch.randn(8, kw["hidden_size"], device="cuda").bfloat16()
            ids = torch.zeros(8, 2, dtype=torch.int32, device="cuda")
            ids[:, 1] = E  # out of range
            m.forward_routed(x, ids, torch.full((8, 2), 0.5, device="cuda"))
            torch.cuda.synchronize()
            self.assertEqual(comm.async_error(), Result.INVALID_ARGUMENT)
            with self.assertRaises(LoomError) as cm:
                comm.raise_async_error()
            self.assertIn("outside [0, num_experts)", cm.exception.message)
            with self.assertRaises(LoomError) as cm:  # the communicator refuses more work
                m(x)
            self.assertEqual(cm.exception.result, Result.INVALID_USAGE)
        finally:
            comm.close()

    def test_device_moves(self):
        kw = CONFIGS[2][1]
        m = self._moe(kw, torch.float32, seed=9)
        x = torch.randn(10, kw["hidden_size"], device="cuda")
        y = m(x)
        h = m.handle
        m.cpu()
        self.assertIsNone(m.handle)
        y_cpu = m(x.cpu())  # the reference path
        self.assertLessEqual(_row_rel_err(y.cpu(), y_cpu).max().item(), TOL["tf32"])
        m.cuda()
        self.assertIsNotNone(m.handle)
        self.assertNotEqual(m.handle, h)
        self.assertTrue(torch.equal(m(x), y))
        m.to(torch.bfloat16)
        self.assertEqual(m.config.resolved_dtype, loom.DType.BF16)
        self.assertEqual(m(x.bfloat16()).dtype, torch.bfloat16)

    @unittest.skipUnless(HAVE_TRANSFORMERS, "transformers is not installed")
    def test_transformers_block(self):
        import transformers
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
        cfg = transformers.Qwen3MoeConfig(hidden_size=256, moe_intermediate_size=128,
                                          num_experts=16, num_experts_per_tok=4,
                                          norm_topk_prob=True)
        torch.manual_seed(0)
        block = Qwen3MoeSparseMoeBlock(cfg).cuda().float().eval()
        with torch.no_grad():
            for p in block.parameters():
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
        m = lt.MoE.from_hf_config(cfg, device="cuda", dtype=torch.float32, fp32_math="fp32",
                                  max_tokens=512)
        m.load_hf_state_dict(block.state_dict())
        x = torch.randn(4, 100, 256, device="cuda")
        with torch.no_grad():
            ref = block(x)
        ref = ref[0] if isinstance(ref, tuple) else ref
        err = _row_rel_err(m(x), ref)
        # fp32 exact on both sides; a token whose top-k edge ties within fp32
        # rounding may route differently, so allow a rare row
        self.assertGreaterEqual((err < 1e-4).double().mean().item(), 0.99, err.max().item())


def _act(y, activation):
    fn = {"none": lambda t: t, "relu": torch.relu, "silu": torch.nn.functional.silu,
          "gelu": torch.nn.functional.gelu}[activation]
    return fn(y)


def _gemm_comm_config(shapes, nranks):
    """A CommConfig that fits every (op, m, n, k, dtype) of `shapes`."""
    need = [lt.gemm_workspace(op, m, n, k, dt, nranks) for op, m, n, k, dt in shapes]
    return loom.CommConfig(workspace_bytes=max(1 << 20, max(b for b, _ in need)),
                           signal_slots=max(64, max(s for _, s in need)))


@unittest.skipUnless(have_cuda(), "needs torch with a CUDA device")
class TestCollectiveGemmsGPU(unittest.TestCase):
    """loom.torch.ag_gemm / gemm_rs / gemm_ar on one GPU (world size 1: each
    is act(x weight^T)) against F.linear in fp64, per row; CUDA graph and
    torch.compile."""

    @classmethod
    def setUpClass(cls):
        shapes = [(op, 300, 264, 520, dt) for op in ("ag_gemm", "gemm_rs", "gemm_ar")
                  for dt in (torch.bfloat16, torch.float16, torch.float32)]
        cls.comm = loom.Comm.create_all([0], _gemm_comm_config(shapes, 1))[0]

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()

    def test_against_linear(self):
        g = torch.Generator(device="cpu").manual_seed(5)
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            for op, act in (("ag_gemm", "none"), ("gemm_rs", "relu"), ("gemm_ar", "gelu"),
                            ("gemm_ar", "silu")):
                x = torch.randn(300, 520, generator=g).to(dtype)
                w = (torch.randn(264, 520, generator=g) / 520 ** 0.5).to(dtype)
                y = getattr(lt, op)(x.cuda(), w.cuda(), self.comm, activation=act)
                ref = _act(torch.nn.functional.linear(x.double(), w.double()), act)
                self.assertEqual((y.shape, y.dtype), ((300, 264), dtype))
                err = _row_rel_err(y.cpu(), ref).max().item()
                self.assertLessEqual(err, _tol(dtype), f"{op} {act} {dtype}")
                # with nn.Linear's bias: act(x weight^T + bias); an odd
                # offset into a buffer (not 16-byte aligned) is copied
                b = torch.randn(265, generator=g).to(dtype)
                y = getattr(lt, op)(x.cuda(), w.cuda(), self.comm, activation=act,
                                    bias=b.cuda()[1:])
                ref = _act(torch.nn.functional.linear(x.double(), w.double(), b[1:].double()), act)
                err = _row_rel_err(y.cpu(), ref).max().item()
                self.assertLessEqual(err, _tol(dtype), f"{op} {act} {dtype} bias")

    def test_cuda_graph_and_compile(self):
        x = torch.randn(64, 520, device="cuda").bfloat16()
        w = (torch.randn(264, 520, device="cuda") / 520 ** 0.5).bfloat16()
        y0 = lt.gemm_ar(x, w, self.comm)  # warm-up (and the comm's registration) outside capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = lt.gemm_ar(x, w, self.comm)
        x.copy_(torch.randn(64, 520, device="cuda").bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        ref = torch.nn.functional.linear(x.double(), w.double())
        self.assertLessEqual(_row_rel_err(y, ref).max().item(), TOL["bfloat16"])
        self.assertEqual(y0.shape, y.shape)
        cid = self.comm._loom_torch_id
        f = torch.compile(lambda a, b: torch.ops.loom.gemm_rs(cid, a, b, "none") + 1,
                          fullgraph=True)
        out = f(x, w)
        self.assertLessEqual(_row_rel_err(out - 1, ref).max().item(), 3e-2)

    def test_bad_shapes_raise(self):
        x = torch.randn(10, 520, device="cuda").bfloat16()
        w = torch.randn(264, 520, device="cuda").bfloat16()
        with self.assertRaises(LoomArgumentError):
            lt.gemm_ar(x, w.t().contiguous(), self.comm)
        with self.assertRaises(LoomArgumentError):
            lt.gemm_ar(x, w[:, :512].contiguous(), self.comm)  # in-features differ from x's


@unittest.skipUnless(have_cuda() and torch.cuda.device_count() >= 2, "needs 2 GPUs")
class TestTwoGPUsOneProcess(unittest.TestCase):
    def test_collective_gemms_two_ranks(self):
        m, n, k = 200, 264, 520
        shapes = [("ag_gemm", m, n, k, torch.bfloat16), ("gemm_rs", m, n, k, torch.bfloat16),
                  ("gemm_ar", m, n, k, torch.bfloat16)]
        comms = loom.Comm.create_all([0, 1], _gemm_comm_config(shapes, 2))
        try:
            g = torch.Generator(device="cpu").manual_seed(9)
            xs = [torch.randn(m, k, generator=g).bfloat16() for _ in range(2)]
            ws = [(torch.randn(n, k, generator=g) / k ** 0.5).bfloat16() for _ in range(2)]
            part = [torch.nn.functional.linear(x.double(), w.double()) for x, w in zip(xs, ws)]
            total = part[0] + part[1]
            for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
                ys = []
                for r in range(2):  # launches are asynchronous: both ranks run together
                    with torch.cuda.device(r):
                        ys.append(getattr(lt, op)(xs[r].to(f"cuda:{r}"), ws[r].to(f"cuda:{r}"),
                                                  comms[r]))
                for r in range(2):
                    torch.cuda.synchronize(r)
                for r in range(2):
                    if op == "ag_gemm":
                        ref = torch.nn.functional.linear(torch.cat(xs).double(), ws[r].double())
                    elif op == "gemm_rs":
                        ref = total[r * m // 2:(r + 1) * m // 2]
                    else:
                        ref = total
                    err = _row_rel_err(ys[r].cpu(), ref).max().item()
                    self.assertLessEqual(err, 2e-2, f"{op} rank {r}")
                if op == "gemm_ar":
                    self.assertTrue(torch.equal(ys[0].cpu(), ys[1].cpu()),
                                    "the all-reduce's C must be the same bits on every rank")
        finally:
            loom.Comm.close_all(comms)

    def test_expert_parallel_two_ranks(self):
        kw = dict(hidden_size=256, moe_intermediate_size=128, num_experts=8,
                  num_experts_per_tok=2)
        cfg = lt.MoE.make_config(**kw, max_tokens=256, dtype=torch.bfloat16)
        comms = loom.Comm.create_all([0, 1], loom.CommConfig.for_moe(cfg, nranks=2))
        try:
            full = lt.MoE(**kw, max_tokens=256, dtype=torch.bfloat16, device="cpu")
            _fill(full, 11)
            sd = full.to_hf_state_dict()
            blocks = []
            for c in comms:
                b = lt.MoE(**kw, max_tokens=256, dtype=torch.bfloat16, comm=c)
                b.load_hf_state_dict(sd)
                blocks.append(b)
            xs = [torch.randn(T, 256).bfloat16() for T in (200, 0)]
            ys = []
            for b, x, dev in zip(blocks, xs, (0, 1)):  # launches are asynchronous
                with torch.cuda.device(dev):
                    ys.append(b(x.to(f"cuda:{dev}")))
            for dev in (0, 1):
                torch.cuda.synchronize(dev)
            for x, y in zip(xs, ys):
                ref = full.reference(x)
                if x.shape[0]:
                    self.assertLessEqual(_row_rel_err(y.cpu(), ref).max().item(), TOL["bfloat16"])
                else:
                    self.assertEqual(y.shape, (0, 256))
        finally:
            loom.Comm.close_all(comms)


if __name__ == "__main__":
    unittest.main()
