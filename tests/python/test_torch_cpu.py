"""loom.torch on the CPU (skipped without torch): the ops' fake / meta
implementations and tracing, reference_moe against a naive loop and
against the C reference, and the Hugging Face state-dict mapping."""
import ctypes
import math
import os
import types
import unittest

from loomtest_util import HAVE_TORCH, HAVE_TRANSFORMERS, c_reference, naive_moe, RefMoeShape

if HAVE_TORCH:
    import torch
    import loom
    import loom.torch as lt
    from loom import LoomArgumentError, LoomError

    TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _stub(H=128, F=64, E=8, k=2, act="swiglu", dtype="bf16", El=None, tmax=64, layout=None):
    cfg = loom.MoeConfig(H, F, E, k, tmax, activation=act, dtype=dtype, weight_layout=layout)
    return types.SimpleNamespace(config=cfg, local_experts=El or E, device=0)


def _weights(H, F, E, gated, dtype, device="cpu", generator=None, scale=1.0):
    F1 = 2 * F if gated else F
    g = generator
    wg = (torch.randn(E, H, generator=g) / math.sqrt(H)).to(dtype).to(device)
    w1 = (torch.randn(E, F1, H, generator=g) * scale / math.sqrt(H)).to(dtype).to(device)
    w2 = (torch.randn(E, H, F, generator=g) / math.sqrt(F)).to(dtype).to(device)
    return wg, w1, w2


def _row_rel_err(y, ref):
    """Per-row ||y - ref|| / ||ref|| (rows whose reference is 0 compare ||y||)."""
    y, ref = y.double().reshape(-1, y.shape[-1]), ref.double().reshape(-1, ref.shape[-1])
    d = (y - ref).norm(dim=1)
    r = ref.norm(dim=1)
    return torch.where(r > 0, d / r.clamp_min(1e-300), d)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TestFakeOps(unittest.TestCase):
    def setUp(self):
        self.layer = _stub()
        self.h = lt.register_layer(self.layer)

    def tearDown(self):
        lt.unregister_layer(self.h)

    def args(self, device="meta", T=(3, 5), dtype=None):
        dtype = dtype or torch.bfloat16
        mk = lambda *s: torch.empty(*s, dtype=dtype, device=device)
        return mk(*T, 128), mk(8, 128), mk(8, 128, 128), mk(8, 128, 64)

    def test_meta_shapes(self):
        y = torch.ops.loom.moe_forward(self.h, *self.args())
        self.assertEqual((y.shape, y.dtype, y.device.type), (torch.Size([3, 5, 128]),
                                                            torch.bfloat16, "meta"))
        y, ids, w = torch.ops.loom.moe_forward_routing(self.h, *self.args(T=(7,)))
        self.assertEqual(y.shape, (7, 128))
        self.assertEqual((ids.shape, ids.dtype), ((7, 2), torch.int32))
        self.assertEqual((w.shape, w.dtype), ((7, 2), torch.float32))
        x, _, w1, w2 = self.args(T=(2, 4))
        ids = torch.empty(2, 4, 2, dtype=torch.int32, device="meta")
        rw = torch.empty(2, 4, 2, dtype=torch.float32, device="meta")
        y = torch.ops.loom.moe_forward_routed(self.h, x, ids, rw, w1, w2)
        self.assertEqual(y.shape, (2, 4, 128))
        y = torch.ops.loom.moe_forward(self.h, *self.args(T=(0,)))  # zero tokens
        self.assertEqual(y.shape, (0, 128))

    def test_fake_cuda_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            y, ids, w = torch.ops.loom.moe_forward_routing(self.h, *self.args("cuda"))
            self.assertEqual((y.shape, y.dtype, y.device), ((3, 5, 128), torch.bfloat16,
                                                             torch.device("cuda", 0)))
            self.assertEqual((ids.shape, ids.dtype), ((3, 5, 2), torch.int32))

    def test_make_fx_and_compile_trace_the_op(self):
        from torch.fx.experimental.proxy_tensor import make_fx
        h = self.h

        def f(x, g, w1, w2):
            return torch.ops.loom.moe_forward(h, x, g, w1, w2) + x

        gm = make_fx(f, tracing_mode="fake")(*self.args())
        self.assertIn("torch.ops.loom.moe_forward.default", gm.code)
        out = torch.compile(f, backend="aot_eager", fullgraph=True)(*self.args())
        self.assertEqual(out.shape, (3, 5, 128))

    def test_opcheck_schema(self):
        torch.library.opcheck(torch.ops.loom.moe_forward.default, (self.h, *self.args()),
                              test_utils=("test_schema",))

    def test_fake_rejects_bad_inputs(self):
        x, g, w1, w2 = self.args()
        bad = [
            ((self.h, x[..., :64], g, w1, w2), "last dimension must be hidden = 128"),
            ((self.h, x.float(), g, w1, w2), "the layer's dtype is torch.bfloat16"),
            ((self.h, x, g.t(), w1, w2), "gate_weight has shape (128, 8)"),
            ((self.h, x, g, w1[:4], w2), "w1 has shape (4, 128, 128)"),
            ((self.h, x, g, w1, w2.transpose(1, 2)), "w2 has shape (8, 64, 128)"),
            ((self.h, x, g, w1, w2.half()), "w2 is torch.float16"),
            ((12345, x, g, w1, w2), "handle 12345 is not a registered MoE layer"),
        ]
        for args, text in bad:
            with self.assertRaises(LoomArgumentError) as cm:
                torch.ops.loom.moe_forward(*args)
            self.assertIn(text, str(cm.exception))
        ids = torch.empty(3, 5, 3, dtype=torch.int32, device="meta")
        rw = torch.empty(3, 5, 2, dtype=torch.float32, device="meta")
        with self.assertRaises(LoomArgumentError) as cm:
            torch.ops.loom.moe_forward_routed(self.h, x, ids, rw, w1, w2)
        self.assertIn("expert_ids has shape (3, 5, 3)", str(cm.exception))

    def test_fake_checks_token_count_and_weight_contiguity(self):
        # docs/python.md: the token count (<= max_tokens) and the weights'
        # contiguity are checked in the fake implementation too, so a
        # compiled graph refuses them when it is traced, as the real op does
        x, g, w1, w2 = self.args(T=(65,))  # the stub layer's max_tokens_per_rank is 64
        ids = torch.empty(65, 2, dtype=torch.int32, device="meta")
        rw = torch.empty(65, 2, dtype=torch.float32, device="meta")
        for op, args in ((torch.ops.loom.moe_forward, (self.h, x, g, w1, w2)),
                         (torch.ops.loom.moe_forward_routing, (self.h, x, g, w1, w2)),
                         (torch.ops.loom.moe_forward_routed, (self.h, x, ids, rw, w1, w2))):
            with self.assertRaises(LoomArgumentError, msg=str(op)) as cm:
                op(*args)
            self.assertIn("x has 65 tokens", str(cm.exception))
        x, g, w1, w2 = self.args(T=(4, 16))  # 64 tokens: allowed
        self.assertEqual(torch.ops.loom.moe_forward(self.h, x, g, w1, w2).shape, (4, 16, 128))
        nc = torch.empty(8, 128, 128, dtype=torch.bfloat16, device="meta").transpose(1, 2)
        for args, text in (((self.h, x, g, nc, w2), "w1 is not contiguous"),
                           ((self.h, x, torch.empty(128, 8, dtype=torch.bfloat16,
                                                    device="meta").t(), w1, w2),
                            "gate_weight is not contiguous")):
            with self.assertRaises(LoomArgumentError) as cm:
                torch.ops.loom.moe_forward(*args)
            self.assertIn(text, str(cm.exception))

    def test_cpu_tensors_rejected(self):
        x, g, w1, w2 = self.args("cpu")
        with self.assertRaises(LoomArgumentError) as cm:
            torch.ops.loom.moe_forward(self.h, x, g, w1, w2)
        self.assertIn("x is on cpu; the layer runs on cuda:0", str(cm.exception))

    def test_backward_raises(self):
        x, g, w1, w2 = self.args()
        x.requires_grad_()
        y = torch.ops.loom.moe_forward(self.h, x, g, w1, w2)
        with self.assertRaisesRegex(RuntimeError, "forward-only"):
            y.sum().backward()

    def test_in_out_layout_shapes(self):
        h = lt.register_layer(_stub(layout="in_out"))
        try:
            mk = lambda *s: torch.empty(*s, dtype=torch.bfloat16, device="meta")
            y = torch.ops.loom.moe_forward(h, mk(4, 128), mk(128, 8), mk(8, 128, 128),
                                           mk(8, 64, 128))
            self.assertEqual(y.shape, (4, 128))
        finally:
            lt.unregister_layer(h)


CASES = [  # (H, F, E, k, act, dtype, normalize, capacity_factor, T)
    (64, 16, 6, 2, "swiglu", "fp32", True, 0.0, 7),
    (96, 8, 5, 3, "relu", "bf16", False, 0.0, 5),
    (64, 8, 4, 1, "gelu", "fp16", True, 0.5, 9),
    (32, 8, 8, 4, "silu", "bf16", True, 0.75, 6),
]


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TestReference(unittest.TestCase):
    def _data(self, H, F, E, dtype, T, seed):
        g = torch.Generator().manual_seed(seed)
        dt = TORCH_DTYPES[dtype]
        x = torch.randn(T, H, generator=g).to(dt)
        wg, w1, w2 = _weights(H, F, E, True, dt, generator=g)
        return x, wg, w1, w2

    def test_against_naive_loop(self):
        for seed, (H, F, E, k, act, dtype, norm, cf, T) in enumerate(CASES):
            with self.subTest(case=(H, F, E, k, act, dtype, norm, cf)):
                dt = TORCH_DTYPES[dtype]
                g = torch.Generator().manual_seed(100 + seed)
                x = torch.randn(T, H, generator=g).to(dt)
                wg, w1, w2 = _weights(H, F, E, act == "swiglu", dt, generator=g)
                y, ids, w = lt.reference_moe(x, wg, w1, w2, k, activation=act,
                                             normalize_top_k=norm, capacity_factor=cf,
                                             return_routing=True)
                logits = lt.gate_logits(x.float(), wg.float())
                L = lambda t: t.float().tolist()
                n_logits, n_ids, n_w, n_y = naive_moe(L(x), L(wg), L(w1), L(w2), k, act, norm,
                                                      cf, dtype)
                self.assertEqual(logits.tolist(), n_logits)  # bitwise: same order in fp64
                self.assertEqual(ids.tolist(), n_ids)
                nw = torch.tensor(n_w)
                self.assertTrue(torch.allclose(w, nw, rtol=2 ** -22, atol=0), (w, nw))
                err = _row_rel_err(y, torch.tensor(n_y)).max().item()
                self.assertLess(err, 1e-6 if dtype == "fp32" else 1e-2)

    def test_against_c_reference(self):
        ref = c_reference()
        if ref is None:
            self.skipTest("the C reference library (build/python/libloom_ref.so) is not built")
        acts = {"relu": 0, "gelu": 1, "silu": 2, "swiglu": 3}
        rounds = {"fp32": 0, "bf16": 1, "fp16": 2}
        fp = ctypes.POINTER(ctypes.c_float)
        ip = ctypes.POINTER(ctypes.c_int32)
        cases = CASES + [(256, 128, 16, 4, "swiglu", "bf16", True, 0.0, 200),
                         (128, 64, 32, 8, "swiglu", "fp32", False, 1.0, 100),
                         (192, 64, 8, 2, "gelu", "fp16", True, 0.0, 64)]
        for seed, (H, F, E, k, act, dtype, norm, cf, T) in enumerate(cases):
            with self.subTest(case=(H, F, E, k, act, dtype, norm, cf, T)):
                dt = TORCH_DTYPES[dtype]
                g = torch.Generator().manual_seed(seed)
                x = torch.randn(T, H, generator=g).to(dt)
                wg, w1, w2 = _weights(H, F, E, act == "swiglu", dt, generator=g)
                y, ids, w = lt.reference_moe(x, wg, w1, w2, k, activation=act,
                                             normalize_top_k=norm, capacity_factor=cf,
                                             return_routing=True)
                # the C reference takes [in x out] weights
                cx = x.float().contiguous()
                cwg = wg.float().t().contiguous()
                cw1 = w1.float().transpose(1, 2).contiguous()
                cw2 = w2.float().transpose(1, 2).contiguous()
                cy = torch.empty(T, H)
                cids = torch.empty(T, k, dtype=torch.int32)
                cw = torch.empty(T, k)
                cap = math.ceil(cf * T * k / E) if cf > 0 else 0
                shape = RefMoeShape(T, H, F, E, k, acts[act], int(norm), cap, rounds[dtype],
                                    rounds[dtype])
                P = lambda t, typ: ctypes.cast(t.data_ptr(), typ)
                rc = ref.ref_moe_forward(ctypes.byref(shape), P(cx, fp), P(cwg, fp), P(cw1, fp),
                                         P(cw2, fp), None, None, P(cids, ip), P(cw, fp), P(cy, fp))
                self.assertEqual(rc, 0)
                self.assertTrue(torch.equal(ids, cids))
                self.assertTrue(torch.allclose(w, cw, rtol=2 ** -22, atol=0))
                err = _row_rel_err(y, cy)
                self.assertLess(err.max().item(), 1e-6 if dtype == "fp32" else 1e-2)
                # nearly every element is bitwise the C reference's
                self.assertGreater((y == cy).double().mean().item(), 0.99)

    def test_ties_and_nan(self):
        H, E, k = 64, 6, 3
        x = torch.randn(4, H)
        wg = torch.randn(E, H)
        wg[3] = wg[1]  # experts 1 and 3 tie on every token
        wg[5] = wg[1]
        x[2, 7] = math.nan  # token 2: every logit NaN
        logits = lt.gate_logits(x, wg)
        ids = lt.topk_ids(logits, k)
        for t in (0, 1, 3):
            chosen = ids[t].tolist()
            if 1 in chosen and 3 in chosen:
                self.assertLess(chosen.index(1), chosen.index(3))
            for a, b in zip(chosen, chosen[1:]):  # descending, ties to the lower index
                self.assertTrue(logits[t, a] > logits[t, b] or
                                (logits[t, a] == logits[t, b] and a < b))
        self.assertEqual(ids[2].tolist(), [0, 1, 2])  # all NaN: the lowest indices
        w = lt.gate_weights(logits, ids, True)
        self.assertTrue(torch.isnan(w[2]).all())
        self.assertTrue(torch.isfinite(w[[0, 1, 3]]).all())
        # NaN ranks below -inf
        lg = torch.tensor([[math.nan, -math.inf, 0.0, math.nan, 1.0]])
        self.assertEqual(lt.topk_ids(lg, 5).tolist(), [[4, 2, 1, 0, 3]])
        # a NaN token's y row is NaN, the others are finite
        w1 = torch.randn(E, 32, H) * 0.1
        w2 = torch.randn(E, H, 16) * 0.1
        y = lt.reference_moe(x, wg, w1, w2, k)
        self.assertTrue(torch.isnan(y[2]).all())
        self.assertTrue(torch.isfinite(y[[0, 1, 3]]).all())

    def test_activation_ints_outside_the_enum_refused(self):
        # activation takes loom.Activation or its int value; -1 (LOOM_UNSET)
        # ran SwiGLU (Python's negative index), 4 raised IndexError
        x, wg, w1, w2 = self._data(64, 16, 4, "fp32", 3, 1)
        y = lt.reference_moe(x, wg, w1, w2, 2, activation="swiglu")
        self.assertTrue(torch.equal(y, lt.reference_moe(x, wg, w1, w2, 2,
                                                        activation=loom.Activation.SWIGLU)))
        for bad in (-1, -2, 4, True):
            with self.subTest(activation=bad):
                with self.assertRaisesRegex(ValueError, "activation"):
                    lt.reference_moe(x, wg, w1, w2, 2, activation=bad)

    def test_caller_routing_and_layouts(self):
        H, F, E, k, T = 64, 16, 4, 2, 6
        x, wg, w1, w2 = self._data(H, F, E, "fp32", T, 7)
        y, ids, w = lt.reference_moe(x, wg, w1, w2, k, return_routing=True)
        y2 = lt.reference_moe(x, None, w1, w2, k, expert_ids=ids, routing_weights=w)
        self.assertTrue(torch.equal(y, y2))
        y3 = lt.reference_moe(x, wg.t(), w1.transpose(1, 2), w2.transpose(1, 2), k,
                              weight_layout="in_out")
        self.assertTrue(torch.equal(y, y3))
        for layout in (loom.WeightLayout.IN_OUT, int(loom.WeightLayout.IN_OUT), "in-out"):
            with self.subTest(weight_layout=layout):  # as MoeConfig takes it
                self.assertTrue(torch.equal(y, lt.reference_moe(
                    x, wg.t(), w1.transpose(1, 2), w2.transpose(1, 2), k, weight_layout=layout)))
        self.assertTrue(torch.equal(y, lt.reference_moe(x, wg, w1, w2, k,
                                                        weight_layout=loom.WeightLayout.OUT_IN)))
        for bad in ("rows", 5, True):
            with self.subTest(weight_layout=bad):
                with self.assertRaisesRegex(ValueError, "weight_layout"):
                    lt.reference_moe(x, wg, w1, w2, k, weight_layout=bad)
        y4 = lt.reference_moe(x.view(2, 3, H), wg, w1, w2, k)
        self.assertTrue(torch.equal(y, y4.view(T, H)))
        with self.assertRaises(ValueError):
            lt.reference_moe(x, wg, w1, w2, E + 1)
        with self.assertRaises(ValueError):
            lt.reference_moe(x, wg, w1[:, :F], w2, k)  # SwiGLU needs 2F rows


def _hf_block_naive(x, gate, experts, k, norm):
    """A Hugging Face Qwen3-MoE / Mixtral block's math in fp64 from per-expert
    (gate_proj, up_proj, down_proj) [out, in] matrices."""
    xd = x.double().reshape(-1, x.shape[-1])
    probs = torch.softmax(xd @ gate.double().t(), dim=-1)
    w, ids = torch.topk(probs, k, dim=-1)
    if norm:
        w = w / w.sum(-1, keepdim=True)
    y = torch.zeros_like(xd)
    for t in range(xd.shape[0]):
        for j in range(k):
            gp, up, dp = (m.double() for m in experts[ids[t, j].item()])
            h = torch.nn.functional.silu(xd[t] @ gp.t()) * (xd[t] @ up.t())
            y[t] += w[t, j] * (h @ dp.t())
    return y.reshape(x.shape)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TestModuleCPU(unittest.TestCase):
    H, F, E, k = 128, 64, 8, 2

    def _hf_sd(self, style, prefix="model.layers.0.mlp.", seed=0):
        g = torch.Generator().manual_seed(seed)
        H, F, E = self.H, self.F, self.E
        sd = {prefix + "gate.weight": torch.randn(E, H, generator=g)}
        names = lt.HF_EXPERT_NAMES["qwen3" if style == "fused" else style]
        experts = []
        for e in range(E):
            m = (torch.randn(F, H, generator=g) / 8, torch.randn(F, H, generator=g) / 8,
                 torch.randn(H, F, generator=g) / 8)
            experts.append(m)
            if style != "fused":
                for n, t in zip(names, m):
                    sd[f"{prefix}experts.{e}.{n}.weight"] = t
        if style == "fused":
            sd[prefix + "experts.gate_up_proj"] = torch.stack([torch.cat(m[:2]) for m in experts])
            sd[prefix + "experts.down_proj"] = torch.stack([m[2] for m in experts])
        return sd, experts

    def _moe(self, **kw):
        return lt.MoE(self.H, self.F, self.E, self.k, dtype=torch.float32, **kw)

    def test_hf_round_trips(self):
        for style in ("qwen3", "mixtral", "fused"):
            with self.subTest(style=style):
                sd, _ = self._hf_sd(style)
                m = self._moe()
                used = m.load_hf_state_dict(sd, "model.layers.0.mlp")
                self.assertEqual(sorted(used), sorted(sd))
                back = m.to_hf_state_dict("model.layers.0.mlp.", style=style)
                self.assertEqual(sorted(back), sorted(sd))
                for key in sd:
                    self.assertTrue(torch.equal(back[key], sd[key]), key)

    def test_layout_is_gate_then_up(self):
        sd, experts = self._hf_sd("qwen3", prefix="")
        m = self._moe()
        m.load_hf_state_dict(sd)
        for e, (gp, up, dp) in enumerate(experts):
            self.assertTrue(torch.equal(m.w1[e, :self.F], gp))
            self.assertTrue(torch.equal(m.w1[e, self.F:], up))
            self.assertTrue(torch.equal(m.w2[e], dp))
        self.assertTrue(torch.equal(m.gate.weight, sd["gate.weight"]))

    def test_forward_matches_hf_math(self):
        for style, norm in (("qwen3", False), ("qwen3", True), ("mixtral", True)):
            with self.subTest(style=style, norm=norm):
                sd, experts = self._hf_sd(style, prefix="", seed=3)
                m = self._moe(norm_topk_prob=norm)
                m.load_hf_state_dict(sd)
                x = torch.randn(2, 9, self.H, generator=torch.Generator().manual_seed(5))
                y = m(x)
                self.assertEqual((y.shape, y.dtype), (x.shape, x.dtype))
                ref = _hf_block_naive(x, sd["gate.weight"], experts, self.k, norm)
                self.assertLess(_row_rel_err(y, ref).max().item(), 1e-5)

    def test_cpu_forward_checks_x_as_the_gpu_op(self):
        # The CPU forward (reference_moe) refuses what torch.ops.loom.moe_forward
        # refuses, with the same messages: more tokens than max_tokens, a wrong
        # hidden size or dtype.
        m = self._moe(max_tokens=8)
        m.load_hf_state_dict(self._hf_sd("qwen3", prefix="", seed=3)[0])
        self.assertEqual(m(torch.randn(2, 4, self.H)).shape, (2, 4, self.H))
        for x, msg in ((torch.randn(3, 3, self.H), "x has 9 tokens; the layer was made for at "
                        "most max_tokens_per_rank = 8"),
                       (torch.randn(4, self.H + 64), "its last dimension must be hidden"),
                       (torch.randn(4, self.H, dtype=torch.float64), "the layer's dtype is "
                        "torch.float32")):
            with self.subTest(shape=tuple(x.shape), dtype=x.dtype):
                with self.assertRaisesRegex(LoomArgumentError, msg):
                    m(x)

    def test_load_errors_leave_weights_unchanged(self):
        m = self._moe()
        before = {k: v.clone() for k, v in m.state_dict().items()}
        sd, _ = self._hf_sd("qwen3", prefix="p.")
        bad = dict(sd)
        del bad["p.experts.5.up_proj.weight"]
        with self.assertRaisesRegex(LoomArgumentError, "'p.experts.5.up_proj.weight' is missing"):
            m.load_hf_state_dict(bad, "p.")
        bad = dict(sd)
        bad["p.experts.2.down_proj.weight"] = torch.zeros(self.F, self.H)
        with self.assertRaisesRegex(LoomArgumentError, r"has shape \(64, 128\); expected "
                                                        r"\(128, 64\)"):
            m.load_hf_state_dict(bad, "p.")
        bad = dict(sd)
        bad["p.shared_expert.gate_proj.weight"] = torch.zeros(1)
        with self.assertRaisesRegex(LoomArgumentError, "shared_expert"):
            m.load_hf_state_dict(bad, "p.")
        with self.assertRaisesRegex(LoomArgumentError, "no experts under"):
            m.load_hf_state_dict({"p.gate.weight": sd["p.gate.weight"]}, "p.")
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        m.load_hf_state_dict(dict(bad), "p.", strict=False)  # extra keys allowed when not strict

    def test_expert_parallel_slice(self):
        comm = types.SimpleNamespace(nranks=4, rank=2, device=0)
        m = lt.MoE(self.H, self.F, self.E, self.k, dtype=torch.float32, comm=comm, device="cpu")
        self.assertEqual((m.local_experts, m.first_expert), (2, 4))
        self.assertEqual(m.w1.shape, (2, 2 * self.F, self.H))
        sd, experts = self._hf_sd("mixtral", prefix="")
        used = m.load_hf_state_dict(sd)
        self.assertEqual(len(used), 1 + 2 * 3)
        self.assertTrue(torch.equal(m.w1[1, self.F:], experts[5][1]))  # w3 of expert 5
        back = m.to_hf_state_dict(style="mixtral")
        self.assertEqual(sorted(k for k in back if k.startswith("experts.")),
                         sorted(f"experts.{e}.{n}.weight" for e in (4, 5)
                                for n in ("w1", "w2", "w3")))
        with self.assertRaises(LoomError):
            m(torch.randn(3, self.H))  # R > 1: no CPU path

    def test_constructor_validation(self):
        with self.assertRaisesRegex(LoomArgumentError, "top_k \\(9\\) exceeds num_experts \\(8\\)"):
            lt.MoE(128, 64, 8, 9)
        with self.assertRaisesRegex(LoomArgumentError, "SwiGLU only"):
            lt.MoE(128, 64, 8, 2, hidden_act="gelu")
        with self.assertRaisesRegex(LoomArgumentError, "multiple of 64"):
            lt.MoE(100, 64, 8, 2)
        with self.assertRaisesRegex(LoomArgumentError, "not supported by loom"):
            lt.MoE(128, 64, 8, 2, dtype=torch.float64)
        m = lt.MoE(128, 64, 8, 2, gated=False, hidden_act="gelu", dtype=torch.float32)
        self.assertEqual(m.w1.shape, (8, 64, 128))
        y = m(torch.randn(3, 128))
        self.assertEqual(y.shape, (3, 128))
        self.assertIsNone(m.handle)
        self.assertFalse(any(p.requires_grad for p in m.parameters()))

    def test_hf_kwargs(self):
        q = types.SimpleNamespace(hidden_size=2048, moe_intermediate_size=768,
                                  intermediate_size=6144,
                                  num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                                  hidden_act="silu")
        self.assertEqual(lt.MoE.hf_kwargs(q), dict(hidden_size=2048, moe_intermediate_size=768,
                                                   num_experts=128, num_experts_per_tok=8,
                                                   norm_topk_prob=True, hidden_act="silu"))
        mx = types.SimpleNamespace(hidden_size=4096, intermediate_size=14336, num_local_experts=8,
                                   num_experts_per_tok=2, hidden_act="silu")
        kw = lt.MoE.hf_kwargs(mx)
        self.assertEqual((kw["moe_intermediate_size"], kw["num_experts"], kw["norm_topk_prob"]),
                         (14336, 8, True))
        with self.assertRaisesRegex(LoomArgumentError, "shared experts"):
            lt.MoE.hf_kwargs(types.SimpleNamespace(**vars(q), shared_expert_intermediate_size=5632))

    @unittest.skipUnless(HAVE_TRANSFORMERS, "transformers is not installed")
    def test_against_transformers_blocks(self):
        import transformers
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
        torch.manual_seed(0)
        blocks = [
            (Qwen3MoeSparseMoeBlock, transformers.Qwen3MoeConfig(
                hidden_size=128, moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2,
                norm_topk_prob=True)),
            (Qwen3MoeSparseMoeBlock, transformers.Qwen3MoeConfig(
                hidden_size=128, moe_intermediate_size=64, num_experts=8, num_experts_per_tok=3,
                norm_topk_prob=False)),
            (MixtralSparseMoeBlock, transformers.MixtralConfig(
                hidden_size=128, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2)),
        ]
        for cls, cfg in blocks:
            with self.subTest(block=cls.__name__, k=cfg.num_experts_per_tok):
                block = cls(cfg).float().eval()
                with torch.no_grad():
                    for p in block.parameters():
                        p.normal_(0, 0.1)
                m = lt.MoE.from_hf_config(cfg, dtype=torch.float32)
                m.load_hf_state_dict(block.state_dict())
                x = torch.randn(2, 5, 128)
                with torch.no_grad():
                    ref = block(x)
                ref = ref[0] if isinstance(ref, tuple) else ref
                self.assertLess(_row_rel_err(m(x), ref).max().item(), 1e-5)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TestCollectiveGemmOps(unittest.TestCase):
    """torch.ops.loom.ag_gemm / gemm_rs / gemm_ar: shapes from the fake
    implementations, argument checks, tracing, workspace sizing (no GPU)."""

    def setUp(self):
        self.comm = types.SimpleNamespace(handle=1, nranks=4, device=0)
        self.id = lt.register_comm(self.comm)

    def tearDown(self):
        lt.unregister_comm(self.id)

    @staticmethod
    def mk(*shape, dtype=None, device="meta"):
        # (no torch.bfloat16 default: the class body runs without torch too)
        return torch.empty(*shape, dtype=torch.bfloat16 if dtype is None else dtype, device=device)

    def test_meta_shapes(self):
        x, w = self.mk(100, 64), self.mk(48, 64)
        self.assertEqual(torch.ops.loom.ag_gemm(self.id, x, w, "none").shape, (400, 48))
        self.assertEqual(torch.ops.loom.gemm_rs(self.id, x, w, "relu").shape, (25, 48))
        self.assertEqual(torch.ops.loom.gemm_ar(self.id, x, w, "gelu").shape, (100, 48))
        y = torch.ops.loom.gemm_ar(self.id, self.mk(3, 7, 64), w, "silu")  # any leading dims
        self.assertEqual((y.shape, y.dtype), ((3, 7, 48), torch.bfloat16))
        y = torch.ops.loom.gemm_ar(self.id, self.mk(5, 64, dtype=torch.float32),
                                   self.mk(48, 64, dtype=torch.float32), "none")
        self.assertEqual(y.dtype, torch.float32)
        b = self.mk(48)  # nn.Linear.bias: the same shapes with one
        self.assertEqual(torch.ops.loom.ag_gemm(self.id, x, w, "none", b).shape, (400, 48))
        self.assertEqual(torch.ops.loom.gemm_rs(self.id, x, w, "relu", bias=b).shape, (25, 48))
        self.assertEqual(lt.gemm_ar(x, w, self.comm, bias=b).shape, (100, 48))

    def test_wrappers_register_the_comm_once(self):
        comm = types.SimpleNamespace(handle=2, nranks=2, device=0)
        y = lt.gemm_rs(self.mk(8, 64), self.mk(16, 64), comm)
        self.assertEqual(y.shape, (4, 16))
        cid = comm._loom_torch_id
        lt.ag_gemm(self.mk(8, 64), self.mk(16, 64), comm, activation="relu")
        self.assertEqual(comm._loom_torch_id, cid)
        self.assertIs(lt.get_comm(cid), comm)
        lt.unregister_comm(cid)

    def test_bad_inputs(self):
        x, w = self.mk(100, 64), self.mk(48, 64)
        bad = [
            ("ag_gemm", (self.id, x, w.t(), "none"), "x has shape (100, 64); it must be [m, 48]"),
            ("gemm_rs", (self.id, x[:98], w, "none"), "98 rows; they must be a multiple of the 4"),
            ("gemm_ar", (self.id, x, w.float(), "none"), "weight is torch.float32, x is "
                                                         "torch.bfloat16"),
            ("gemm_ar", (self.id, x.double(), w.double(), "none"), "not supported by loom"),
            ("gemm_ar", (self.id, x, self.mk(2, 48, 64), "none"), "it must be [out, in]"),
            ("gemm_ar", (self.id, x[:0], w, "none"), "x has no rows"),
            ("gemm_ar", (self.id, x, w, "swiglu"), "activation 'swiglu' is not one of"),
            ("gemm_ar", (987654, x, w, "none"), "comm id 987654 is not a registered"),
            ("gemm_ar", (self.id, self.mk(100, 64, device="cpu"), w, "none"),
             "x is on cpu; the communicator runs on cuda:0"),
            ("ag_gemm", (self.id, x, w, "none", self.mk(64)), "bias has shape (64,); it must be [48]"),
            ("gemm_rs", (self.id, x, w, "none", self.mk(1, 48)), "bias has shape (1, 48)"),
            ("gemm_ar", (self.id, x, w, "none", self.mk(48, dtype=torch.float32)),
             "bias is torch.float32, x is torch.bfloat16"),
            ("gemm_ar", (self.id, x, w, "none", self.mk(48, device="cpu")),
             "bias is on cpu; the communicator runs on cuda:0"),
        ]
        for op, args, text in bad:
            with self.assertRaises(LoomArgumentError, msg=op) as cm:
                getattr(torch.ops.loom, op)(*args)
            self.assertIn(text, str(cm.exception))

    def test_fake_refuses_what_every_collective_refuses(self):
        # loom_ag_gemm / gemm_rs / gemm_ar (check_args) take n, k >= 1 and
        # multiples of 8 only; the fakes must refuse the same shapes so that a
        # traced graph does not fail only when run
        x = self.mk(8, 64)
        for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
            for xs, ws, text in (((8, 64), (12, 64), "n (12) and k (64) must be multiples of 8"),
                                 ((8, 60), (16, 60), "n (16) and k (60) must be multiples of 8"),
                                 ((8, 0), (16, 0), "n (16) and k (0) must be >= 1"),
                                 ((8, 64), (0, 64), "n (0) and k (64) must be >= 1")):
                with self.subTest(op=op, x=xs, w=ws):
                    with self.assertRaises(LoomArgumentError) as cm:
                        getattr(torch.ops.loom, op)(self.id, self.mk(*xs), self.mk(*ws), "none")
                    self.assertIn(text, str(cm.exception))
            # and the library says the same of those shapes
            for n, k in ((12, 64), (16, 60), (16, 0), (0, 64)):
                with self.assertRaises(LoomError):
                    lt.gemm_workspace(op, 8, n, k, torch.bfloat16, 4)
            self.assertEqual(getattr(torch.ops.loom, op)(self.id, x, self.mk(16, 64),
                                                         "none").dim(), 2)

    def test_fake_cuda_and_tracing(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
        with FakeTensorMode():
            y = torch.ops.loom.gemm_ar(self.id, self.mk(6, 64, device="cuda"),
                                       self.mk(32, 64, device="cuda"), "none")
            self.assertEqual((y.shape, y.device), ((6, 32), torch.device("cuda", 0)))
        cid = self.id

        def f(x, w):
            return torch.ops.loom.gemm_rs(cid, x, w, "none") * 2

        gm = make_fx(f, tracing_mode="fake")(self.mk(8, 64), self.mk(16, 64))
        self.assertIn("torch.ops.loom.gemm_rs.default", gm.code)
        out = torch.compile(f, backend="aot_eager", fullgraph=True)(self.mk(8, 64), self.mk(16, 64))
        self.assertEqual(out.shape, (2, 16))
        torch.library.opcheck(torch.ops.loom.gemm_ar.default,
                              (self.id, self.mk(4, 64), self.mk(8, 64), "none"),
                              test_utils=("test_schema",))
        torch.library.opcheck(torch.ops.loom.ag_gemm.default,
                              (self.id, self.mk(4, 64), self.mk(8, 64), "none", self.mk(8)),
                              test_utils=("test_schema",))

    def test_backward_raises(self):
        x = self.mk(4, 64).requires_grad_()
        y = torch.ops.loom.gemm_ar(self.id, x, self.mk(8, 64), "none")
        with self.assertRaisesRegex(RuntimeError, "forward-only"):
            y.sum().backward()

    def test_gemm_workspace(self):
        # the C functions' numbers (tests/cpu/test_api.c): 300 x 256 x 64
        # bf16 over 4 ranks, all-reduce, one-shot (the default for partials
        # this small): 4 parts of a rank's 153600-byte partial, 3 x 2 + 2
        # slots; two-shot forced: 7 parts of 38400 bytes, 2 x 2 + 2 slots
        self.assertEqual(lt.gemm_workspace("gemm_ar", 300, 256, 64, torch.bfloat16, 4),
                         (4 * 153600, 8))
        os.environ["LOOM_AR_ONE_SHOT"] = "0"
        try:
            self.assertEqual(lt.gemm_workspace("gemm_ar", 300, 256, 64, torch.bfloat16, 4),
                             (7 * 38400, 6))
        finally:
            del os.environ["LOOM_AR_ONE_SHOT"]
        self.assertEqual(lt.gemm_workspace("gemm_ar", 300, 256, 64, torch.bfloat16, 1), (0, 3))
        b, s = lt.gemm_workspace("ag_gemm", 128, 256, 64, torch.float16, 2)
        self.assertEqual(b, 2 * 128 * 64 * 2)
        with self.assertRaises(LoomError):
            lt.gemm_workspace("gemm_rs", 301, 256, 64, torch.bfloat16, 4)  # m % R
        with self.assertRaises(LoomArgumentError):
            lt.gemm_workspace("gemm_xx", 1, 8, 8, torch.bfloat16, 1)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TestExample(unittest.TestCase):
    """examples/qwen3_moe_swap.py as a user runs it: without a GPU it checks
    loom.torch.MoE (its reference path) against the Hugging Face-shaped
    block on a tiny shape and must say the outputs match."""

    def test_qwen3_moe_swap_on_cpu(self):
        import subprocess
        import sys
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(root, "python") + os.pathsep + env.get("PYTHONPATH", "")
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path, whatever the machine has
        out = subprocess.run([sys.executable, os.path.join(root, "examples", "qwen3_moe_swap.py")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("outputs match", out.stdout)


if __name__ == "__main__":
    unittest.main()
