"""The torch-free package: the library loads, the bindings match loom.h,
errors carry loom's messages, and Python-side validation agrees with the
library's. No GPU needed (calls that would reach the GPU are only made
where they fail first on their arguments)."""
import ctypes
import os
import subprocess
import sys
import unittest

import loom
from loom import _lib
from loom._lib import LoomArgumentError, LoomError, Result

from loomtest_util import LOOM_H, REPO, loom_h_defines


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class TestImport(unittest.TestCase):
    def test_import_does_not_import_torch(self):
        out = subprocess.run(
            [sys.executable, "-c", "import sys, loom; print(sorted(m for m in sys.modules "
             "if m == 'torch' or m.startswith('torch.')))"],
            env=_env(), capture_output=True, text=True, cwd="/", timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "[]")

    def test_library_found_at_import_loaded_at_first_call(self):
        out = subprocess.run(
            [sys.executable, "-c", "import loom, os; print(os.path.isfile(loom.library_path), "
             "loom._lib.loaded()); loom.dtype_size(loom.DType.FP32); print(loom._lib.loaded())"],
            env=_env(), capture_output=True, text=True, cwd="/", timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["True", "False", "True"])

    def test_library_loaded(self):
        self.assertTrue(os.path.isfile(loom.library_path))
        env = os.environ.get(_lib.ENV_LIBRARY)
        if env:
            self.assertEqual(loom.library_path, env)
        self.assertIsInstance(_lib.lib, ctypes.CDLL)

    def test_bad_library_path_fails_with_clear_message(self):
        env = _env()
        env[_lib.ENV_LIBRARY] = "/nonexistent/libloom.so"
        out = subprocess.run([sys.executable, "-c", "import loom"], env=env, capture_output=True,
                             text=True, cwd="/", timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("LoomLibraryError", out.stderr)
        self.assertIn("LOOM_LIBRARY='/nonexistent/libloom.so' is not a file", out.stderr)

    def test_version_matches_header(self):
        d = loom_h_defines()
        self.assertEqual(loom.__version__, "%d.%d.%d" % (d["LOOM_VERSION_MAJOR"],
                                                         d["LOOM_VERSION_MINOR"],
                                                         d["LOOM_VERSION_PATCH"]))
        self.assertEqual(_lib.API_VERSION, d["LOOM_API_VERSION"])
        self.assertEqual(_lib.UNSET, d["LOOM_UNSET"])
        self.assertEqual(_lib.MOE_MAX_RANKS, d["LOOM_MOE_MAX_RANKS"])

    def test_enums_match_header(self):
        d = loom_h_defines()
        for enum_type, prefix, count in (
                (Result, "LOOM_", "LOOM_NUM_RESULTS"), (loom.DType, "LOOM_", "LOOM_NUM_DTYPES"),
                (loom.Activation, "LOOM_ACT_", "LOOM_NUM_ACTIVATIONS"),
                (loom.Math, "LOOM_MATH_", "LOOM_NUM_MATHS"),
                (loom.WeightLayout, "LOOM_WEIGHTS_", "LOOM_NUM_WEIGHT_LAYOUTS"),
                (loom.Exchange, "LOOM_EXCHANGE_", "LOOM_NUM_EXCHANGES")):
            self.assertEqual(len(enum_type), d[count], enum_type)
            for m in enum_type:
                self.assertEqual(d[prefix + m.name], m.value, f"{enum_type.__name__}.{m.name}")

    def test_every_header_function_is_bound(self):
        import re
        text = open(LOOM_H).read()
        declared = set(re.findall(r"^(?:const char \*|loom_result_t )(loom_\w+)\(", text, re.M))
        self.assertTrue(declared)
        self.assertEqual(declared - set(_lib._PROTOTYPES), set())


class TestErrors(unittest.TestCase):
    def test_result_strings(self):
        self.assertEqual(loom.result_string(Result.SUCCESS), "success")
        self.assertEqual(loom.result_string(Result.TIMEOUT), "timeout")
        for r in Result:
            self.assertTrue(loom.result_string(r))
        self.assertEqual(loom.result_string(99), "unknown result")

    def test_dtype_size_and_string(self):
        self.assertEqual([loom.dtype_size(d) for d in loom.DType], [4, 2, 2])
        self.assertEqual([loom.dtype_string(d) for d in loom.DType], ["fp32", "bf16", "fp16"])
        self.assertEqual(loom.dtype_string(9), "unknown")

    def test_bad_dtype_raises_loom_error_with_message(self):
        with self.assertRaises(LoomError) as cm:
            loom.dtype_size(7)
        e = cm.exception
        self.assertEqual(e.result, Result.INVALID_ARGUMENT)
        self.assertEqual(e.message, "loom_dtype_size: dtype (7) is not a loom_dtype_t")
        self.assertIn("[invalid_argument]", str(e))
        self.assertEqual(loom.last_error(), e.message)
        loom.dtype_size(loom.DType.BF16)  # a successful call clears it
        self.assertEqual(loom.last_error(), "")

    def test_null_bytes_pointer(self):
        self.assertEqual(_lib.lib.loom_dtype_size(0, None), Result.INVALID_ARGUMENT)
        self.assertIn("bytes is NULL", loom.last_error())

    def test_null_handles(self):
        lib = _lib.lib
        h = ctypes.c_void_p()
        cases = [
            (lambda: lib.loom_comm_create(None, None, ctypes.byref(h)), "nccl is NULL"),
            (lambda: lib.loom_comm_create(None, None, None), "comm is NULL"),
            (lambda: lib.loom_moe_create(None, ctypes.byref(_lib.moe_config_init()),
                                         ctypes.byref(h)), "comm is NULL"),
            (lambda: lib.loom_moe_set_weights(None, None, None, None), "moe is NULL"),
            (lambda: lib.loom_moe_forward(None, None, 0, None, None), "moe is NULL"),
            (lambda: lib.loom_moe_forward_ex(None, None, None), "moe is NULL"),
            (lambda: lib.loom_moe_set_trace(None, None, 0, None), "moe is NULL"),
            (lambda: lib.loom_comm_rank(None, ctypes.byref(ctypes.c_int())), "comm is NULL"),
            (lambda: lib.loom_comm_get_async_error(None, ctypes.byref(ctypes.c_int())),
             "comm is NULL"),
        ]
        for call, text in cases:
            self.assertEqual(call(), Result.INVALID_ARGUMENT, text)
            self.assertIn(text, loom.last_error())
        # NULL destroys are no-ops
        self.assertEqual(lib.loom_comm_destroy(None), Result.SUCCESS)
        self.assertEqual(lib.loom_moe_destroy(None), Result.SUCCESS)

    def test_comm_create_argument_errors(self):
        with self.assertRaises(LoomArgumentError):
            loom.Comm.create(0)
        with self.assertRaises(LoomArgumentError):
            loom.Comm.create_all([])
        with self.assertRaises(LoomError) as cm:
            loom.Comm.create_all([0, 0])
        self.assertEqual(cm.exception.result, Result.INVALID_ARGUMENT)
        self.assertIn("are both device 0", cm.exception.message)

    def test_comm_config_checked_by_library(self):
        # loom_comm_create_all validates the config before touching a GPU.
        c = _lib.comm_config_init()
        c.struct_size = 8
        out = (ctypes.c_void_p * 1)()
        self.assertEqual(_lib.lib.loom_comm_create_all(1, None, ctypes.byref(c), out),
                         Result.INVALID_ARGUMENT)
        self.assertIn("struct_size (8) is not sizeof(loom_comm_config_t) (%d)"
                      % ctypes.sizeof(_lib.CommConfigC), loom.last_error())
        c = _lib.comm_config_init()
        c.signal_slots = 2
        self.assertEqual(_lib.lib.loom_comm_create_all(1, None, ctypes.byref(c), out),
                         Result.INVALID_ARGUMENT)
        self.assertIn("signal_slots (2) must be in [3,", loom.last_error())

    def test_close_all_with_a_comm_listed_twice(self):
        # loom_comm_destroy_all refuses a handle listed twice and destroys
        # nothing (5476616); close_all must still destroy each communicator
        # once, not mark them all closed after the refusal. A stand-in for
        # the library (no GPU here) keeps loom.h's contract for that call.
        destroyed, real = [], _lib.lib

        class Lib:
            last = b""

            def loom_comm_destroy_all(self, n, arr):
                hs = [arr[i] for i in range(n)]
                if len(set(hs)) != len(hs):
                    Lib.last = b"loom_comm_destroy_all: comms[0] and comms[2] are the same " \
                               b"communicator"
                    return Result.INVALID_ARGUMENT
                destroyed.extend(hs)
                Lib.last = b""
                return Result.SUCCESS

            def loom_last_error(self):
                return Lib.last

            def loom_result_string(self, r):
                return real.loom_result_string(r)

        def fake_comm(h):
            c = object.__new__(loom.Comm)
            c._handle, c._owned_nccl, c.config = h, None, None
            c._layers = set()
            c.rank, c.nranks, c.device, c.workspace_bytes = 0, 2, 0, 0  # 2: no finaliser close
            return c

        a, b = fake_comm(0x1000), fake_comm(0x2000)
        a._clique = b._clique = [a, b]
        _lib.lib = Lib()
        try:
            loom.Comm.close_all([a, b, a])
        finally:
            _lib.lib = real
        self.assertEqual(sorted(destroyed), [0x1000, 0x2000])
        self.assertTrue(a.closed and b.closed)

    def test_comm_create_all_without_gpu_raises(self):
        if _lib.device_count() > 0:
            self.skipTest("a GPU is present")
        with self.assertRaises(LoomError) as cm:
            loom.Comm.create_all([0])
        self.assertNotEqual(cm.exception.result, Result.SUCCESS)
        self.assertTrue(cm.exception.message)

    def test_exchange_workspace(self):
        n = ctypes.c_size_t()
        self.assertEqual(_lib.lib.loom_exchange_workspace_bytes(
            loom.Exchange.ALLTOALL, 4, 1024, ctypes.byref(n)), Result.SUCCESS)
        self.assertGreaterEqual(n.value, 4 * 1024)
        self.assertEqual(_lib.lib.loom_exchange_workspace_bytes(
            loom.Exchange.RING, 2, 0, ctypes.byref(n)), Result.INVALID_ARGUMENT)
        self.assertIn("bytes_per_peer", loom.last_error())


def _raw_moe_struct(hidden, ffn, E, k, tmax, act=-1, dtype=-1, math=-1, norm=-1, cf=0.0, wl=-1):
    c = _lib.moe_config_init()
    c.hidden, c.ffn, c.num_experts, c.top_k, c.max_tokens_per_rank = hidden, ffn, E, k, tmax
    c.activation, c.dtype, c.fp32_math, c.normalize_top_k = act, dtype, math, norm
    c.capacity_factor, c.weight_layout = cf, wl
    return c


def _c_accepts(c, nranks):
    b, s = ctypes.c_size_t(), ctypes.c_int()
    return _lib.lib.loom_moe_workspace_bytes(ctypes.byref(c), nranks, ctypes.byref(b),
                                             ctypes.byref(s)) == Result.SUCCESS


class TestConfigs(unittest.TestCase):
    def test_struct_sizes(self):
        self.assertEqual(ctypes.sizeof(_lib.MoeConfigC), 88)
        self.assertEqual(_lib.MOE_CONFIG_V1_SIZE, 80)
        self.assertEqual(ctypes.sizeof(_lib.CommConfigC), 32)
        self.assertEqual(ctypes.sizeof(_lib.MoeTraceEventC), 32)
        self.assertEqual(ctypes.sizeof(_lib.MoeTraceInfoC), 40)
        self.assertEqual(ctypes.sizeof(_lib.MoeArgsC), 64)
        self.assertEqual(ctypes.sizeof(_lib.MoeStatsC), (2 * 64 + 3 + 5) * 8)
        self.assertEqual(ctypes.sizeof(_lib.GemmArgsC), 88)  # a_gathered since session 22, bias 24

    def test_ag_gemm_workspace(self):
        # pure host arithmetic in libloom (no GPU): every rank's 300 x 1032
        # bf16 rows rounded to 256 bytes, one slot per 128 rows + 2
        a = _lib.gemm_args_init()
        self.assertEqual((a.struct_size, a.version, a.activation), (88, _lib.API_VERSION, -1))
        self.assertIsNone(a.a_gathered)
        self.assertIsNone(a.bias)
        a.m, a.n, a.k = 300, 264, 1032
        b, s = ctypes.c_size_t(), ctypes.c_int()
        self.assertEqual(_lib.lib.loom_ag_gemm_workspace_bytes(ctypes.byref(a), 4, ctypes.byref(b),
                                                               ctypes.byref(s)), Result.SUCCESS)
        self.assertEqual((b.value, s.value), (4 * 619264, 5))
        a.k = 1028
        self.assertEqual(_lib.lib.loom_ag_gemm_workspace_bytes(ctypes.byref(a), 4, ctypes.byref(b),
                                                               None), Result.INVALID_ARGUMENT)
        self.assertIn("multiples of 8", loom.last_error())

    def test_gemm_ar_workspace(self):
        # any m: 301 rows over 4 ranks go one-shot (3 x 301 x 264 bf16 <= 1
        # MiB): 4 parts of all 301 x 264 bf16 rows rounded to 256 bytes, 3 x 3
        # tiles + 2 slots; at 2000 rows two-shot, 500 at most a rank: the R
        # partials + the R - 1 other owners' reduced rows, each part 500 x
        # 264 bf16 rounded to 256 bytes, 4 x 3 tiles, twice, + 2 slots; one
        # rank needs no workspace and 3 slots
        a = _lib.gemm_args_init()
        a.n, a.k = 264, 1032
        b, s = ctypes.c_size_t(), ctypes.c_int()
        for m, nranks, want in ((301, 4, (4 * 158976, 11)), (2000, 4, (7 * 264192, 26)), (301, 1, (0, 3))):
            a.m = m
            self.assertEqual(_lib.lib.loom_gemm_ar_workspace_bytes(
                ctypes.byref(a), nranks, ctypes.byref(b), ctypes.byref(s)), Result.SUCCESS)
            self.assertEqual((b.value, s.value), want)

    def test_init_macros(self):
        c = _lib.moe_config_init()
        self.assertEqual((c.struct_size, c.version), (88, _lib.API_VERSION))
        self.assertEqual([c.hidden, c.ffn, c.num_experts, c.top_k, c.max_tokens_per_rank,
                          c.activation, c.dtype, c.fp32_math, c.normalize_top_k,
                          c.weight_layout, c.gate_math], [-1] * 11)
        self.assertEqual(c.capacity_factor, 0.0)
        cc = _lib.comm_config_init()
        self.assertEqual((cc.struct_size, cc.version, cc.workspace_bytes, cc.signal_slots,
                          cc.timeout_ms), (32, _lib.API_VERSION, -1, -1, -1))

    def test_versioned_structs_accepted_by_library(self):
        cfg = loom.MoeConfig(hidden=256, ffn=512, num_experts=8, top_k=2, max_tokens_per_rank=64,
                             activation="swiglu", weight_layout="in_out")
        b2 = ctypes.c_size_t()
        v2 = cfg.to_c()
        self.assertEqual(v2.weight_layout, loom.WeightLayout.IN_OUT)
        self.assertEqual(_lib.lib.loom_moe_workspace_bytes(ctypes.byref(v2), 2, ctypes.byref(b2),
                                                           None), Result.SUCCESS)
        v1 = cfg.to_c(version=1)
        self.assertEqual((v1.version, v1.struct_size), (1, 80))
        b1 = ctypes.c_size_t()
        self.assertEqual(_lib.lib.loom_moe_workspace_bytes(ctypes.byref(v1), 2, ctypes.byref(b1),
                                                           None), Result.SUCCESS)
        self.assertEqual(b1.value, b2.value)
        bad = cfg.to_c()
        bad.struct_size = 80  # a version-3 struct must be the full size
        self.assertEqual(_lib.lib.loom_moe_workspace_bytes(ctypes.byref(bad), 2, ctypes.byref(b1),
                                                           None), Result.INVALID_ARGUMENT)
        self.assertIn("struct_size (80) is not the size of a version 3", loom.last_error())
        bad = cfg.to_c()
        bad.version = _lib.API_VERSION + 1
        self.assertFalse(_c_accepts(bad, 2))
        self.assertIn(f"config->version ({_lib.API_VERSION + 1})", loom.last_error())

    def test_gate_math(self):
        # LOOM_GATE_FAST: bf16 / fp16 only, checked here and by the library;
        # a version-2 struct (the same size: gate_math was its tail padding)
        # is read without it, whatever lies there
        fast = loom.MoeConfig(256, 512, 8, 2, 64, dtype="fp16", gate_math="fast")
        self.assertEqual(fast.resolved_gate_math, loom.GateMath.FAST)
        c = fast.to_c()
        self.assertEqual((c.version, c.struct_size, c.gate_math), (3, 88, 1))
        self.assertTrue(_c_accepts(c, 2), loom.last_error())
        self.assertEqual(loom.MoeConfig(256, 512, 8, 2, 64).resolved_gate_math, loom.GateMath.EXACT)
        with self.assertRaisesRegex(LoomArgumentError, "gate_math 'fast' needs dtype bf16 or fp16"):
            loom.MoeConfig(256, 512, 8, 2, 64, dtype="fp32", gate_math="fast").validate()
        with self.assertRaisesRegex(LoomArgumentError, "gate_math"):
            loom.MoeConfig(256, 512, 8, 2, 64, gate_math="fp8").validate()
        with self.assertRaisesRegex(LoomArgumentError, "version >= 3"):
            fast.to_c(version=2)
        c32 = loom.MoeConfig(256, 512, 8, 2, 64, dtype="fp32").to_c()
        c32.gate_math = loom.GateMath.FAST
        self.assertFalse(_c_accepts(c32, 2))
        self.assertIn("gate_math LOOM_GATE_FAST needs dtype bf16 or fp16", loom.last_error())
        c.gate_math = 7
        self.assertFalse(_c_accepts(c, 2))
        self.assertIn("config->gate_math (7)", loom.last_error())
        v2 = loom.MoeConfig(256, 512, 8, 2, 64, dtype="fp32").to_c(version=2)
        self.assertEqual((v2.version, v2.struct_size), (2, 88))
        v2.gate_math = 0x5A5A5A5A
        self.assertTrue(_c_accepts(v2, 2), loom.last_error())

    def test_workspace_formula(self):
        for R, E, k, T, H, dt, es in ((1, 8, 2, 100, 256, "bf16", 2),
                                      (4, 32, 8, 64, 512, "fp32", 4),
                                      (8, 64, 8, 16, 7168, "fp16", 2)):
            cfg = loom.MoeConfig(hidden=H, ffn=128, num_experts=E, top_k=k, max_tokens_per_rank=T,
                                 dtype=dt)
            b, s = cfg.workspace_bytes(R)
            core = (2 * R * T * min(k, E // R) + 128 * (E // R)) * H * es  # loom.h's formula
            self.assertGreaterEqual(b, core)
            self.assertLess(b, core + (1 << 20))
            self.assertGreaterEqual(s, 3)
            text = cfg.describe_workspace(R)
            self.assertTrue(text.startswith(f"{b} bytes"), text)

    def test_describe_truncates(self):
        cfg = loom.MoeConfig(hidden=64, ffn=64, num_experts=2, top_k=1, max_tokens_per_rank=1)
        buf = ctypes.create_string_buffer(16)
        c = cfg.to_c()
        self.assertEqual(_lib.lib.loom_moe_workspace_describe(ctypes.byref(c), 1, buf, 16),
                         Result.SUCCESS)
        self.assertEqual(len(buf.value), 15)

    def test_python_validation_agrees_with_library(self):
        # (sizes small enough that the layer's workspace and signal slots stay
        # under the communicator limits, which only the library checks)
        base = dict(hidden=128, ffn=256, E=8, k=2, tmax=32)
        variants = [
            {}, dict(hidden=0), dict(hidden=63), dict(hidden=64), dict(hidden=100),
            dict(hidden=65536), dict(hidden=65536 + 64), dict(ffn=0), dict(ffn=96), dict(ffn=64),
            dict(E=0), dict(E=1, k=1), dict(E=1024), dict(E=1025), dict(k=0), dict(k=16, E=16),
            dict(k=17, E=32), dict(k=9), dict(tmax=0), dict(tmax=1 << 24, E=2),
            dict(tmax=(1 << 24) + 1, E=2),
            dict(act=0), dict(act=3), dict(act=4), dict(act=-2), dict(dtype=0), dict(dtype=2),
            dict(dtype=3), dict(math=1), dict(math=2), dict(norm=0), dict(norm=1), dict(norm=2),
            dict(cf=0.5), dict(cf=-1.0), dict(cf=-0.5), dict(cf=1e6), dict(cf=2e6),
            dict(cf=float("nan")), dict(cf=float("inf")), dict(wl=0), dict(wl=1), dict(wl=2),
        ]
        pyname = {"E": "num_experts", "k": "top_k", "tmax": "max_tokens_per_rank",
                  "act": "activation", "math": "fp32_math", "norm": "normalize_top_k",
                  "cf": "capacity_factor", "wl": "weight_layout"}
        checked = 0
        for v in variants:
            for nranks in (1, 2, 3, 8, 64, 65):
                args = dict(base, **v)
                c_ok = _c_accepts(_raw_moe_struct(**args), nranks)
                kw = {pyname.get(n, n): x for n, x in args.items()}
                for n in ("activation", "dtype", "fp32_math", "normalize_top_k", "weight_layout"):
                    if kw.get(n) == -1:
                        kw[n] = None
                if kw.get("normalize_top_k") in (0, 1):
                    kw["normalize_top_k"] = bool(kw["normalize_top_k"])
                kw["hidden"], kw["ffn"] = kw.pop("hidden"), kw.pop("ffn")
                cfg = loom.MoeConfig(**kw)
                try:
                    cfg.validate(nranks)
                    py_ok, why = True, ""
                except LoomArgumentError as e:
                    py_ok, why = False, str(e)
                self.assertEqual(py_ok, c_ok, f"{args} nranks {nranks}: python says "
                                 f"{why or 'ok'}, the library says {loom.last_error() or 'ok'}")
                checked += 1
        self.assertGreater(checked, 200)

    def test_dispatch_region_rows_agree_with_library(self):
        # 92c900a: the library refuses a layer whose dispatch region, R x
        # max_tokens_per_rank x min(top_k, E/R) + 128 x E/R rows, exceeds
        # 2^31 - 128; validate(nranks) must refuse the same configs (hidden
        # 64 fp16 keeps the workspace under 2^40, so this is the rule that
        # decides)
        limit = (1 << 31) - 128
        checked = refused = 0
        for R, E, k, tmax in ((8, 128, 16, 1 << 24), (8, 128, 8, 1 << 24), (8, 64, 16, 1 << 24),
                              (16, 256, 16, 1 << 23), (16, 256, 16, (1 << 23) + 1),
                              (4, 64, 16, (1 << 25) // 2), (64, 1024, 16, 1 << 21),
                              (64, 1024, 16, (1 << 21) - 1), (2, 1024, 16, 1 << 24)):
            rows = R * tmax * min(k, E // R) + 128 * (E // R)
            c_ok = _c_accepts(_raw_moe_struct(64, 64, E, k, tmax, dtype=2), R)
            cfg = loom.MoeConfig(64, 64, E, k, tmax, dtype="fp16")
            try:
                cfg.validate(R)
                py_ok, why = True, ""
            except LoomArgumentError as e:
                py_ok, why = False, e.message
            self.assertEqual(c_ok, rows <= limit, (R, E, k, tmax, loom.last_error()))
            self.assertEqual(py_ok, c_ok, f"R {R} E {E} k {k} tmax {tmax}: python says "
                             f"{why or 'ok'}, the library {loom.last_error() or 'ok'}")
            if not py_ok:
                self.assertIn("dispatch region", why)
                self.assertIn(str(rows), why)
                refused += 1
            checked += 1
        self.assertGreaterEqual(refused, 3)
        with self.assertRaises(LoomArgumentError):  # before the C call, as a ValueError
            loom.MoeConfig(64, 64, 128, 16, 1 << 24, dtype="fp16").workspace_bytes(8)

    def test_unset_is_none_in_every_optional_field(self):
        # loom.UNSET (-1) is what the library takes for "default" in every
        # optional field (LOOM_MOE_CONFIG_INIT); capacity_factor and
        # CommConfig took it, the enum fields and normalize_top_k refused it
        none = loom.MoeConfig(128, 128, 8, 2, 16)
        for f in ("activation", "dtype", "fp32_math", "weight_layout", "gate_math",
                  "normalize_top_k", "capacity_factor"):
            with self.subTest(field=f):
                cfg = loom.MoeConfig(128, 128, 8, 2, 16, **{f: loom.UNSET})
                cfg.validate(2)
                if f != "capacity_factor":  # which keeps -1.0 in the struct (C: 0)
                    self.assertEqual(bytes(cfg.to_c()), bytes(none.to_c()))
                self.assertTrue(_c_accepts(cfg.to_c(), 2), loom.last_error())
                self.assertEqual(cfg.workspace_bytes(2), none.workspace_bytes(2))
                self.assertEqual((cfg.resolved_activation, cfg.resolved_dtype,
                                  cfg.resolved_fp32_math, cfg.resolved_normalize_top_k,
                                  cfg.resolved_weight_layout, cfg.resolved_gate_math),
                                 (none.resolved_activation, none.resolved_dtype,
                                  none.resolved_fp32_math, none.resolved_normalize_top_k,
                                  none.resolved_weight_layout, none.resolved_gate_math))
        self.assertEqual(loom.MoeConfig(128, 128, 8, 2, 16, activation=loom.UNSET,
                                        weight_layout=loom.UNSET).to_c(version=1).struct_size, 80)
        with self.assertRaises(LoomArgumentError):  # other negative values stay refused
            loom.MoeConfig(128, 128, 8, 2, 16, activation=-2).validate()
        with self.assertRaises(LoomArgumentError):
            loom.MoeConfig(128, 128, 8, 2, 16, normalize_top_k=-2).validate()

    def test_validation_messages(self):
        def msg(**kw):
            base = dict(hidden=128, ffn=128, num_experts=8, top_k=2, max_tokens_per_rank=16)
            base.update(kw)
            nranks = base.pop("nranks", None)
            with self.assertRaises(LoomArgumentError) as cm:
                loom.MoeConfig(**base).validate(nranks)
            return cm.exception.message

        self.assertEqual(msg(top_k=9), "MoeConfig.top_k (9) exceeds num_experts (8)")
        self.assertIn("MoeConfig.hidden (100) must be a multiple of 64", msg(hidden=100))
        self.assertIn("must be an int", msg(ffn=128.0))
        self.assertIn("must be an int", msg(num_experts=True))
        self.assertIn("is not one of", msg(dtype="int8"))
        self.assertIn("is not a Activation", msg(activation=7))
        self.assertIn("not divisible by the number of ranks (3)", msg(nranks=3))
        self.assertIn("capacity_factor", msg(capacity_factor=-2.0))
        e = LoomArgumentError("x")
        self.assertIsInstance(e, ValueError)
        self.assertIsInstance(e, LoomError)
        self.assertEqual(e.result, Result.INVALID_ARGUMENT)

    def test_names_and_defaults(self):
        cfg = loom.MoeConfig(128, 64, 4, 2, 8, activation="SwiGLU", dtype="float16",
                             fp32_math="fp32", weight_layout="in-out")
        self.assertEqual(cfg.resolved_activation, loom.Activation.SWIGLU)
        self.assertEqual(cfg.resolved_dtype, loom.DType.FP16)
        self.assertEqual(cfg.ffn1, 128)
        c = cfg.to_c()
        self.assertEqual((c.activation, c.dtype, c.fp32_math, c.weight_layout), (3, 2, 1, 1))
        d = loom.MoeConfig(128, 64, 4, 2, 8)
        self.assertEqual((d.resolved_activation, d.resolved_dtype, d.resolved_fp32_math,
                          d.resolved_normalize_top_k, d.resolved_weight_layout),
                         (loom.Activation.SILU, loom.DType.BF16, loom.Math.TF32, True,
                          loom.WeightLayout.OUT_IN))
        c = d.to_c()
        self.assertEqual((c.activation, c.dtype, c.normalize_top_k, c.weight_layout),
                         (-1, -1, -1, -1))

    def test_numpy_integer_fields(self):
        # A model config read with NumPy holds np.int64 sizes: they are ints
        # here (validated, in the C struct as the same values); np.bool_ and
        # NumPy floats are not.
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        cfg = loom.MoeConfig(np.int64(128), np.int32(64), np.int64(8), np.uint8(2),
                             np.int64(16), activation=np.int64(3))
        self.assertIs(cfg.validate(np.int64(2)), cfg)
        c = cfg.to_c()
        self.assertEqual((c.hidden, c.ffn, c.num_experts, c.top_k, c.max_tokens_per_rank,
                          c.activation), (128, 64, 8, 2, 16, 3))
        self.assertEqual(cfg.workspace_bytes(np.int64(2)),
                         loom.MoeConfig(128, 64, 8, 2, 16, activation=3).workspace_bytes(2))
        self.assertEqual(loom.MoeConfig(128, 64, 8, 2, 16, dtype=np.int64(loom.UNSET)).to_c().dtype,
                         -1)
        loom.CommConfig(timeout_ms=np.int64(1000), signal_slots=np.int32(64)).validate()
        for bad in (dict(top_k=np.bool_(True)), dict(hidden=np.float64(128.0)),
                    dict(num_experts=np.int64(2000))):
            base = dict(hidden=128, ffn=64, num_experts=8, top_k=2, max_tokens_per_rank=16)
            base.update(bad)
            with self.assertRaises(LoomArgumentError) as cm:
                loom.MoeConfig(**base).validate()
            self.assertIn("MoeConfig." + next(iter(bad)), cm.exception.message)
        with self.assertRaises(LoomArgumentError):
            loom.MoeConfig(128, 64, 8, 2, 16).validate(np.float64(2.0))

    def test_comm_config(self):
        self.assertEqual(loom.CommConfig().to_c().workspace_bytes, -1)
        with self.assertRaises(LoomArgumentError):
            loom.CommConfig(timeout_ms=0).validate()
        a = loom.MoeConfig(1024, 1024, 16, 4, 4096)
        b = loom.MoeConfig(2048, 512, 32, 8, 1024, dtype="fp32")
        cc = loom.CommConfig.for_moe(a, b, nranks=4, timeout_ms=1000)
        for m in (a, b):
            need, slots = m.workspace_bytes(4)
            self.assertGreaterEqual(cc.workspace_bytes, need)
            self.assertGreaterEqual(cc.signal_slots, slots)
        self.assertEqual(cc.timeout_ms, 1000)
        cc.to_c()


if __name__ == "__main__":
    unittest.main()
