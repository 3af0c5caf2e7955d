/*
 * Hopper tile engine (src/device/tile/hopper*.cuh): correctness, then speed
 * beside cuBLAS. One binary, one GPU (H100/H200, compute capability 9.0).
 *
 *   make build/bench/gemm
 *   build/bench/gemm --debug          # tiny known problems; prints first mismatches
 *   build/bench/gemm --check-only     # every correctness case, no timing
 *   build/bench/gemm                  # all checks ("all results match"), then timings
 *   build/bench/gemm --quick          # fewer cases and shapes
 *   build/bench/gemm --dtype bf16 --shape dense     # filters (bf16|fp16|tf32, dense|grouped|smallm|decode|mid)
 *   build/bench/gemm --variant v1,pp  # engine variants (v1 w1 pp sk2 sk4 pp2 w1c2 sm2 sm2h ws dec2; default all,
 *                                     # docs/tile.md "v2", "v3")
 *   build/bench/gemm --k 2048,768     # grouped timed shapes only at these K
 *   build/bench/gemm --device-groups  # only the grouped cases, each in host-groups (hg) and
 *                                     # device-groups (dg) mode beside cuBLAS (docs/tile.md "Device groups")
 *   options: --iters N (timed runs, median; default 10), --seed S, --threads T (CPU reference),
 *            --raster M (m-blocks per raster band; default the engine's 16),
 *            --sms N (cap the engine's grid at N blocks: small cases then run many
 *            tasks per block through the persistent loop),
 *            --pdl on|off (engine launches with programmatic dependent launch,
 *            hop_problem.no_pdl; default on: only the back-to-back timings overlap),
 *            --hg-table on|off (host groups' tile starts and rows in shared memory,
 *            hop_problem.no_hg_table; default on),
 *            --dg-concurrent (device-groups checks: write the table from a kernel on a
 *            second stream while the engine already waits, instead of in stream order
 *            before it; on an H200 the engine's blocks fill every SM and the writer never
 *            got a slot: the engine's table wait timed out, 2026-11-23)
 * Every variant a case is timed in is checked first on the same case.
 *
 * Groups modes. Every case with more than one group runs in both:
 *   hg  host groups: per-group tensor maps built from host-known row counts
 *   dg  device groups: the row counts and row offsets live in device memory
 *       and the engine derives its tasks from them. In the checks the table
 *       (poisoned first: rows = -1) is written by a one-warp kernel on a
 *       second stream that sleeps DG_DELAY_NS and then releases the table's
 *       readiness counter, while the engine already runs and waits on it.
 *       In the timings the table is written before (stream order), so the
 *       engine's time includes reading the table, not the wait.
 * Row layout (both modes): the groups sit in one row buffer with gaps of
 * GUARD + 3 * (g % 4) rows before group g and GUARD rows after the last, so
 * groups start at offsets that are not tile-aligned; A and C share the
 * layout (C row = A row), and every gap row of C must stay poisoned.
 *
 * Problem: C[rows x n_out] = epilogue(A[rows x K] . B[N x K]^T) per group,
 * A and B K-contiguous (B in nn.Linear layout), fp32 accumulation.
 * Inputs are random multiples of 2^-7 (A, in [-1, 1)) and 2^-11 (B, in
 * [-1/16, 1/16)): exact in bf16, fp16 and tf32, so the CPU reference (double
 * accumulation) sees exactly what the GPU multiplies. Per-element bound
 *   |c - ref| <= rtol * |ref| + 2^-14 * sum_k |a_k b_k|
 * rtol = 1e-2 for bf16 output (unit roundoff 2^-8 = 3.9e-3, 2.5x margin),
 * 2e-3 for fp16 (2^-11 = 4.9e-4, 4x), 5e-3 for fp32 output of the tf32 path
 * (inputs are exact tf32 values, so only accumulation order and the
 * hardware's fp32 accumulation remain; the 2^-14 magnitude term is that
 * accumulation allowance on every path, ~0.4% of a typical |ref| at K=8192).
 * Outputs are poisoned (all-ones bytes = NaN) before each run, and 8 guard
 * rows around every group's output must stay poisoned.
 *
 * Timing: cudaEvent around each launch, L2 flushed before each (memset of
 * 2 x L2, as v1 measured), median of --iters after 2 warm-ups. Small-M also
 * prints a clean flush (reading 2 x L2; the memset leaves L2 dirty and the
 * timed kernel pays the write-back) and 20 back-to-back launches / 20. The engine runs through its persistent task loop
 * with every task gated on a readiness counter that is already satisfied.
 * cuBLAS: cublasGemmEx per group (same layout: C^T = B . A^T in column-major).
 */
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/tile/hopper_host.cuh"

#define CUDA_CHECK(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define CUBLAS_CHECK(x)                                                          \
  do {                                                                           \
    cublasStatus_t s_ = (x);                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* ---- options and device ---------------------------------------------------- */

struct options {
  int check_only, quick, debug;
  int dtype;  /* -1 all */
  int shape;  /* -1 all, 0 dense, 1 grouped, 2 smallm */
  int iters;
  uint32_t seed;
  int threads;
  unsigned variants; /* bit v: run variant v (all by default) */
  int raster_m;      /* 0 = the engine's default */
  int device_groups; /* --device-groups: only cases that run in both groups modes */
  const char *only;  /* --case S: only cases whose name contains S (checked, then timed) */
  int dg_same_stream;/* 1 (default): device-groups checks publish the table in stream order;
                        0 (--dg-concurrent): from a concurrent kernel */
  int ks[8], nks;    /* --k: grouped timed shapes only with these K (none: all) */
  int pair_stores;   /* --stores pairs: the epilogue's 4/8-byte column-pair stores
                        (hop_params.store16 = 0) instead of 16-byte quad stores */
  int sms;           /* --sms N: the engine's grid cap (hop_problem.num_sms); 0 = every SM */
  int no_pdl;        /* --pdl off: hop_problem.no_pdl = 1 (plain stream order between launches) */
  int no_hg_table;   /* --hg-table off: hop_problem.no_hg_table = 1 (host groups decoded from global memory) */
  int l2_hints;      /* --l2-hints N: hop_problem.l2_hints (0 none, 1 B evict_last, 2 + A evict_first) */
};
static options g_opt;
static int g_num_sms, g_l2_bytes;
static cublasHandle_t g_cublas;
static void *g_flush;
static size_t g_flush_bytes;

enum { CFG_LARGE = 0, CFG_SMALL = 1 };
static const char *dtype_name(int d) { return d == HOP_BF16 ? "bf16" : d == HOP_FP16 ? "fp16" : "tf32"; }
static const char *act_name(int a) {
  static const char *n[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu", "swiglu"};
  return n[a];
}
static int in_esize(int dt) { return dt == HOP_TF32 ? 4 : 2; }
static int out_esize(int o) { return o == HOP_OUT_FP32 ? 4 : 2; }

/* ---- inputs: a hash of (seed, index), identical on host and device ---------- */

static __host__ __device__ __forceinline__ float gen_val(uint32_t seed, uint64_t i, float scale) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xD1B54A32D192ED03ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (float)((int)(x >> 56) - 128) * scale; /* 256 values, exact in bf16/fp16/tf32 */
}
#define SCALE_A (1.0f / 128)
#define SCALE_B (1.0f / 2048)

template <typename T> __global__ void fill_kernel(T *p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (T)gen_val(seed, i, scale);
}
static void fill(void *p, int dtype, size_t n, uint32_t seed, float scale) {
  if (dtype == HOP_BF16) fill_kernel<<<1024, 256>>>((__nv_bfloat16 *)p, n, seed, scale);
  else if (dtype == HOP_FP16) fill_kernel<<<1024, 256>>>((__half *)p, n, seed, scale);
  else fill_kernel<<<1024, 256>>>((float *)p, n, seed, scale);
  CUDA_CHECK(cudaGetLastError());
}

/* ---- a tiny thread pool: parallel_for over [0, n) ----------------------------- */

struct pf_ctx {
  int n;
  int next; /* atomic */
  void (*fn)(int, void *);
  void *arg;
};
static void *pf_worker(void *p) {
  pf_ctx *c = (pf_ctx *)p;
  for (;;) {
    int i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
    if (i >= c->n) return NULL;
    c->fn(i, c->arg);
  }
}
static void parallel_for(int n, void (*fn)(int, void *), void *arg) {
  pf_ctx c = {n, 0, fn, arg};
  int nt = g_opt.threads;
  pthread_t th[256];
  if (nt > 256) nt = 256;
  for (int t = 0; t < nt; t++) pthread_create(&th[t], NULL, pf_worker, &c);
  for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
}

/* ---- one test/benchmark case ---------------------------------------------------- */

#define MAX_GROUPS 128
#define GUARD 8 /* poisoned rows before/after every group's output */

struct gcase {
  char name[96];
  int dtype, cfg, act, out;
  int G;
  int rows[MAX_GROUPS];
  int N, K;
  int row_ptr, row_scale; /* exercise the per-row destination table / scale */
  int timeout_group;      /* -1, or the group whose readiness never arrives */
  int timeout_m;          /* -1: every m-block of timeout_group; else only this
                             128-row m-block (large config) of it */
  int edge, rand_rows;    /* row sampling per group: 0 = check every row */
  int shape;              /* 0 dense, 1 grouped, 2 smallm, -1 correctness-only */
  int dg_only;            /* device-groups mode only (the cases below)        */
  int dg_table_never;     /* dg: the table's readiness counter never arrives */
  int dg_bad_group;       /* dg: -1, or a group whose table entry is out of range */
};

/* Device buffers of a case. */
struct gbufs {
  int64_t row_off[MAX_GROUPS];  /* buffer row of each group's first row (A) */
  int64_t crow_off[MAX_GROUPS]; /* C row of each group's first output row (= row_off) */
  int64_t c_rows;               /* rows of the buffer (A, C, Cref, scale, rowp) incl. gaps */
  int64_t total_rows;           /* sum of the groups' rows */
  int n_out;
  void *A, *B, *C, *Cref; /* Cref: cuBLAS output [c_rows x N], same row layout */
  float *scale;           /* [c_rows] */
  void **rowp;            /* [c_rows] device pointers */
  uint32_t *ready;        /* host groups: per group per m-block counters */
  uint32_t *error;
  /* device groups */
  int32_t *dg_off, *dg_rows;         /* [G] the table the engine reads (written by dg_writer_kernel) */
  int32_t *dg_src_off, *dg_src_rows; /* [G] what the writer copies there */
  uint32_t *dg_table_ready;          /* table readiness counter (target 1) */
  uint32_t *dg_ready;                /* [G * dg_ready_gstride] per (group, m-block) counters */
  int dg_ready_gstride;
  hop_plan plan;
};

enum { MODE_HG = 0, MODE_DG = 1 };
static const char *mode_name(int m) { return m == MODE_DG ? "dg" : "hg"; }
#define DG_DELAY_NS 50000ull /* the concurrent table writer sleeps this long first */

static int dest_row(const gcase *c, int g, int r) { return c->row_ptr ? c->rows[g] - 1 - r : r; }
static float row_scale_val(uint32_t seed, int64_t row) { return 0.5f + 0.125f * (float)((row * 2654435761u + seed) % 13); }

/* Engine variants (docs/tile.md, v2). Each maps to a configuration:
 *   v1      hop_large / hop_small          (cooperative, wait_group 0: v1 as measured)
 *   w1      hop_large_w1 / hop_small_w1    (cooperative, one wgmma batch in flight)
 *   pp      hop_pp (128 x 128 per WG, ping-pong; large-config cases only)
 *   sk2/4   w1 with split_k = 2 / 4 (deterministic fixed-order reduction)
 * v3 (docs/tile.md "v3"):
 *   pp2     hop_pp2: pp in 2-CTA clusters along M, B multicast (large-config cases)
 *   w1c2    hop_w1c2: large_w1 (128 x 256) in 2-CTA clusters, B multicast (large)
 *   sm2     hop_sm2: small 64 x 128, 2 stages of 4 k-blocks (small-config cases)
 *   sm2h    hop_sm2h: small 64 x 128, 4 stages of 2 k-blocks (small)
 * v7 (docs/tile.md "v7"):
 *   ws      hop_ws: large_w1 with the TMA epilogue (staged stmatrix + TMA
 *           stores; direct stores where it has no C map) (large)
 * v9 (docs/tile.md "v9", "v10"):
 *   dec2    hop_dec2: the swapped decode tile, 128 weight rows x 16 group
 *           rows a task (small-config cases)                                  */
enum {
  VAR_V1 = 0, VAR_W1 = 1, VAR_PP = 2, VAR_SK2 = 3, VAR_SK4 = 4,
  VAR_PP2 = 5, VAR_W1C2 = 6, VAR_SM2 = 7, VAR_SM2H = 8, VAR_WS = 9, VAR_DEC2 = 10, NUM_VARS = 11
};
static const char *var_name(int v) {
  static const char *n[] = {"v1", "w1", "pp", "w1+sk2", "w1+sk4", "pp2", "w1c2", "sm2", "sm2h", "ws", "dec2"};
  return n[v];
}
static int var_large_only(int v) { return v == VAR_PP || v == VAR_PP2 || v == VAR_W1C2 || v == VAR_WS; }
static int var_small_only(int v) { return v == VAR_SM2 || v == VAR_SM2H || v == VAR_DEC2; }
static int var_swap(int v) { return v == VAR_DEC2; }
static int var_cluster(int v) { return v == VAR_PP2 || v == VAR_W1C2; }
static int var_split(int v) { return v == VAR_SK2 ? 2 : v == VAR_SK4 ? 4 : 1; }

template <class CFG> static cudaError_t plan_cfg(hop_plan *plan, const hop_problem *pr) {
  return hop_plan_create<CFG>(plan, pr);
}
template <int DT> static cudaError_t plan_dt(int cfg, int var, hop_plan *plan, const hop_problem *pr) {
  if (cfg == CFG_LARGE) {
    if (var == VAR_V1) return plan_cfg<hop_large<DT>>(plan, pr);
    if (var == VAR_PP) return plan_cfg<hop_pp<DT>>(plan, pr);
    if (var == VAR_PP2) return plan_cfg<hop_pp2<DT>>(plan, pr);
    if (var == VAR_W1C2) return plan_cfg<hop_w1c2<DT>>(plan, pr);
    if (var == VAR_WS) return plan_cfg<hop_ws<DT>>(plan, pr);
    if (var_small_only(var)) return cudaErrorNotSupported;
    return plan_cfg<hop_large_w1<DT>>(plan, pr);
  }
  if (var == VAR_V1) return plan_cfg<hop_small<DT>>(plan, pr);
  if (var_large_only(var)) return cudaErrorNotSupported;
  if (var == VAR_SM2) return plan_cfg<hop_sm2<DT>>(plan, pr);
  if (var == VAR_SM2H) return plan_cfg<hop_sm2h<DT>>(plan, pr);
  if (var == VAR_DEC2) return plan_cfg<hop_dec2<DT>>(plan, pr);
  return plan_cfg<hop_small_w1<DT>>(plan, pr);
}

static cudaError_t plan_case(const gcase *c, gbufs *b, uint64_t timeout_ns, int var, int mode) {
  hop_group_desc gd[MAX_GROUPS];
  hop_dgroups_desc dd;
  /* rows of a task's readiness counter: the variant's task rows */
  const int es = in_esize(c->dtype), bm = c->cfg == CFG_LARGE ? 128 : var_swap(var) ? 16 : 64;
  int64_t ready_off = 0;
  for (int g = 0; g < c->G; g++) {
    hop_group_desc *d = &gd[g];
    memset(d, 0, sizeof(*d));
    d->a = (char *)b->A + b->row_off[g] * c->K * es;
    d->lda = c->K;
    d->rows = c->rows[g];
    d->b = (char *)b->B + (int64_t)g * c->N * c->K * es;
    d->ldb = c->K;
    d->c = (char *)b->C + b->crow_off[g] * b->n_out * out_esize(c->out);
    d->row_ptr = c->row_ptr ? b->rowp + b->row_off[g] : NULL;
    d->row_scale = c->row_scale ? b->scale + b->row_off[g] : NULL;
    d->ready = b->ready + ready_off;
    d->ready_target = 1;
    d->ready_stride = 1;
    ready_off += (c->rows[g] + bm - 1) / bm;
  }
  hop_problem pr;
  memset(&pr, 0, sizeof(pr));
  pr.dtype = c->dtype;
  pr.act = c->act;
  pr.n = c->N;
  pr.k = c->K;
  pr.ldc = b->n_out;
  pr.num_groups = c->G;
  pr.groups = gd;
  if (mode == MODE_DG) {
    memset(&dd, 0, sizeof(dd));
    dd.a = b->A;
    dd.lda = c->K;
    dd.capacity = (int)b->c_rows;
    dd.b = b->B;
    dd.ldb = c->K;
    dd.c = b->C;
    dd.row_ptr = c->row_ptr ? b->rowp : NULL;
    dd.row_scale = c->row_scale ? b->scale : NULL;
    dd.row_offset = b->dg_off;
    dd.rows = b->dg_rows;
    dd.table_ready = b->dg_table_ready;
    dd.table_target = 1;
    dd.ready = b->dg_ready;
    dd.ready_target = 1;
    dd.ready_stride = 1;
    dd.ready_group_stride = b->dg_ready_gstride;
    pr.groups = NULL;
    pr.dgroups = &dd;
  }
  pr.error = b->error;
  pr.timeout_ns = timeout_ns;
  pr.num_sms = g_opt.sms > 0 && g_opt.sms < g_num_sms ? g_opt.sms : g_num_sms;
  pr.raster_m = g_opt.raster_m;
  pr.no_pdl = g_opt.no_pdl;
  pr.no_hg_table = g_opt.no_hg_table;
  pr.l2_hints = g_opt.l2_hints;
  pr.split_k = var_split(var);
  /* row_ptr entries point at rows of C (pitch n_out) */
  pr.row_ptr_align16 = (b->n_out * out_esize(c->out)) % 16 == 0;
  pr.out = c->out;
  cudaError_t e = c->dtype == HOP_BF16   ? plan_dt<HOP_BF16>(c->cfg, var, &b->plan, &pr)
                  : c->dtype == HOP_FP16 ? plan_dt<HOP_FP16>(c->cfg, var, &b->plan, &pr)
                                         : plan_dt<HOP_TF32>(c->cfg, var, &b->plan, &pr);
  if (e == cudaSuccess && g_opt.pair_stores) b->plan.params.store16 = 0;
  return e;
}

/* The instantiations this program builds (each in every variant of its
 * configuration); anything else is refused. */
template <int CFGID, int DT, int ACT, int OUT>
static cudaError_t launch_var(int var, const hop_plan *plan, cudaStream_t st) {
  if constexpr (CFGID == CFG_LARGE) {
    if (var == VAR_V1) return hop_launch<hop_large<DT>, ACT, OUT>(plan, st);
    if (var == VAR_PP) return hop_launch<hop_pp<DT>, ACT, OUT>(plan, st);
    if (var == VAR_PP2) return hop_launch<hop_pp2<DT>, ACT, OUT>(plan, st);
    if (var == VAR_W1C2) return hop_launch<hop_w1c2<DT>, ACT, OUT>(plan, st);
    if (var == VAR_WS) return hop_launch<hop_ws<DT>, ACT, OUT>(plan, st);
    if (var_small_only(var)) return cudaErrorNotSupported;
    return hop_launch<hop_large_w1<DT>, ACT, OUT>(plan, st);
  } else {
    if (var == VAR_V1) return hop_launch<hop_small<DT>, ACT, OUT>(plan, st);
    if (var_large_only(var)) return cudaErrorNotSupported;
    if (var == VAR_SM2) return hop_launch<hop_sm2<DT>, ACT, OUT>(plan, st);
    if (var == VAR_SM2H) return hop_launch<hop_sm2h<DT>, ACT, OUT>(plan, st);
    if (var == VAR_DEC2) return hop_launch<hop_dec2<DT>, ACT, OUT>(plan, st);
    return hop_launch<hop_small_w1<DT>, ACT, OUT>(plan, st);
  }
}
#define RUN_IF(CFGID, DT, ACT, OUT)                                               \
  if (c->cfg == CFGID && c->dtype == DT && c->act == ACT && c->out == OUT)        \
    return launch_var<CFGID, DT, ACT, OUT>(var, plan, st);
static cudaError_t launch_case(const gcase *c, int var, const hop_plan *plan, cudaStream_t st) {
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_NONE, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_FP16, HOP_ACT_NONE, HOP_OUT_FP16)
  RUN_IF(CFG_LARGE, HOP_TF32, HOP_ACT_NONE, HOP_OUT_FP32)
  RUN_IF(CFG_SMALL, HOP_BF16, HOP_ACT_NONE, HOP_OUT_BF16)
  RUN_IF(CFG_SMALL, HOP_FP16, HOP_ACT_NONE, HOP_OUT_FP16)
  RUN_IF(CFG_SMALL, HOP_TF32, HOP_ACT_NONE, HOP_OUT_FP32)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_RELU, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_GELU_TANH, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_GELU_ERF, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_SILU, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_SWIGLU, HOP_OUT_BF16)
  RUN_IF(CFG_LARGE, HOP_BF16, HOP_ACT_NONE, HOP_OUT_FP32)
  RUN_IF(CFG_SMALL, HOP_BF16, HOP_ACT_SWIGLU, HOP_OUT_BF16)
  return cudaErrorNotSupported;
}
#undef RUN_IF

static void alloc_case(const gcase *c, gbufs *b) {
  memset(b, 0, sizeof(*b));
  /* readiness counters per 16 rows for the small configuration (dec's
   * tasks; the 64-row variants use the first ones of each group) */
  const int es = in_esize(c->dtype), os = out_esize(c->out), bm = c->cfg == CFG_LARGE ? 128 : 16;
  b->n_out = c->act == HOP_ACT_SWIGLU ? c->N / 2 : c->N;
  /* one row buffer: gap, group 0, gap, group 1, ..., GUARD tail (see the file comment) */
  int64_t t = 0, nready = 0;
  int mt_max = 1;
  for (int g = 0; g < c->G; g++) {
    t += GUARD + 3 * (g % 4);
    b->row_off[g] = t;
    b->crow_off[g] = t;
    t += c->rows[g];
    b->total_rows += c->rows[g];
    const int mt = (c->rows[g] + bm - 1) / bm;
    nready += mt;
    mt_max = mt > mt_max ? mt : mt_max;
  }
  t += GUARD;
  b->c_rows = t;
  b->dg_ready_gstride = mt_max;
  CUDA_CHECK(cudaMalloc(&b->A, t * c->K * es));
  CUDA_CHECK(cudaMalloc(&b->B, (int64_t)c->G * c->N * c->K * es));
  CUDA_CHECK(cudaMalloc(&b->C, b->c_rows * b->n_out * os));
  CUDA_CHECK(cudaMalloc(&b->scale, t * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b->rowp, t * sizeof(void *)));
  CUDA_CHECK(cudaMalloc(&b->ready, (nready + 1) * sizeof(uint32_t)));
  CUDA_CHECK(cudaMalloc(&b->error, sizeof(uint32_t)));
  CUDA_CHECK(cudaMalloc(&b->dg_off, 4 * sizeof(int32_t) * c->G));
  b->dg_rows = b->dg_off + c->G;
  b->dg_src_off = b->dg_off + 2 * c->G;
  b->dg_src_rows = b->dg_off + 3 * c->G;
  CUDA_CHECK(cudaMalloc(&b->dg_table_ready, sizeof(uint32_t)));
  CUDA_CHECK(cudaMalloc(&b->dg_ready, (size_t)c->G * mt_max * sizeof(uint32_t)));
  /* every buffer row gets a value, gap rows too: the engine reads them with
   * device groups (tiles that run past a group's end), never stores them */
  fill(b->A, c->dtype, (size_t)t * c->K, g_opt.seed * 2 + 1, SCALE_A);
  fill(b->B, c->dtype, (size_t)c->G * c->N * c->K, g_opt.seed * 2 + 2, SCALE_B);
  /* per-row scales, destinations; readiness (all satisfied except timeout_group) */
  float *hs = (float *)calloc(t, sizeof(float));
  void **hp = (void **)calloc(t, sizeof(void *));
  uint32_t *hr = (uint32_t *)malloc((nready + 1) * sizeof(uint32_t));
  uint32_t *hdr = (uint32_t *)calloc((size_t)c->G * mt_max, sizeof(uint32_t));
  int32_t *htab = (int32_t *)malloc(2 * sizeof(int32_t) * c->G);
  int64_t ri = 0;
  for (int g = 0; g < c->G; g++) {
    for (int r = 0; r < c->rows[g]; r++) {
      const int64_t row = b->row_off[g] + r;
      hs[row] = row_scale_val(g_opt.seed, row);
      hp[row] = (char *)b->C + (b->crow_off[g] + dest_row(c, g, r)) * b->n_out * os;
    }
    for (int m = 0; m < (c->rows[g] + bm - 1) / bm; m++) {
      const int never = g == c->timeout_group && (c->timeout_m < 0 || c->timeout_m == m);
      hr[ri++] = never ? 0u : 1u;
      hdr[(size_t)g * mt_max + m] = never ? 0u : 1u;
    }
    htab[g] = (int32_t)b->row_off[g];
    /* an out-of-range entry: rows past the buffer's end */
    htab[c->G + g] = g == c->dg_bad_group ? (int32_t)(b->c_rows - b->row_off[g] + 1) : c->rows[g];
  }
  CUDA_CHECK(cudaMemcpy(b->scale, hs, t * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b->rowp, hp, t * sizeof(void *), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b->ready, hr, (nready + 1) * sizeof(uint32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b->dg_ready, hdr, (size_t)c->G * mt_max * sizeof(uint32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b->dg_src_off, htab, 2 * sizeof(int32_t) * c->G, cudaMemcpyHostToDevice));
  free(hs);
  free(hp);
  free(hr);
  free(hdr);
  free(htab);
  CUDA_CHECK(cudaDeviceSynchronize());
}

/* The device-side producer of the group table in the device-groups checks:
 * one warp that sleeps delay_ns, copies the table (src -> dst: the stand-in
 * for a previous phase that counts rows per expert) and releases the
 * readiness counter. It must fit on an SM beside an engine block (384 x 168
 * registers leave exactly one warp of <= 32 registers; shared memory ~30 KB),
 * or, launched second, it would wait for engine blocks that wait for it. */
__global__ void __maxnreg__(32)
    dg_writer_kernel(const int32_t *src_off, const int32_t *src_rows, int32_t *off, int32_t *rows, int G,
                     uint32_t *ready, uint64_t delay_ns) {
  const uint64_t t0 = ptx_globaltimer_ns();
  while (ptx_globaltimer_ns() - t0 < delay_ns) __nanosleep(1000);
  for (int g = threadIdx.x; g < G; g += 32) {
    off[g] = src_off[g];
    rows[g] = src_rows[g];
  }
  __syncwarp(); /* the lanes' stores before lane 0's release (cumulative) */
  if (threadIdx.x == 0) ptx_atom_add_acq_rel_gpu_u32(ready, 1u);
}

static cudaStream_t g_side; /* non-blocking: runs beside the legacy default stream */
static cudaEvent_t g_side_ev;

/* Device groups: poison the table (rows = -1, an invalid entry: reading it
 * early would set HOP_ERR_TABLE), reset its counter, then publish it: from
 * the side stream after DG_DELAY_NS (concurrent = 1) or in stream order. */
static void dg_publish(const gcase *c, gbufs *b, int concurrent) {
  CUDA_CHECK(cudaMemsetAsync(b->dg_off, 0xFF, 2 * sizeof(int32_t) * c->G, 0));
  CUDA_CHECK(cudaMemsetAsync(b->dg_table_ready, 0, sizeof(uint32_t), 0));
  if (c->dg_table_never) return;
  if (concurrent) {
    CUDA_CHECK(cudaEventRecord(g_side_ev, 0));
    CUDA_CHECK(cudaStreamWaitEvent(g_side, g_side_ev, 0));
  }
  dg_writer_kernel<<<1, 32, 0, concurrent ? g_side : 0>>>(b->dg_src_off, b->dg_src_rows, b->dg_off, b->dg_rows,
                                                           c->G, b->dg_table_ready, concurrent ? DG_DELAY_NS : 0);
  CUDA_CHECK(cudaGetLastError());
}

static void free_case(gbufs *b) {
  hop_plan_destroy(&b->plan);
  cudaFree(b->A);
  cudaFree(b->B);
  cudaFree(b->C);
  if (b->Cref) cudaFree(b->Cref);
  cudaFree(b->scale);
  cudaFree(b->rowp);
  cudaFree(b->ready);
  cudaFree(b->error);
  cudaFree(b->dg_off);
  cudaFree(b->dg_table_ready);
  cudaFree(b->dg_ready);
}

/* ---- CPU reference and comparison --------------------------------------------- */

static float load_out(const void *p, int out, int64_t i) {
  if (out == HOP_OUT_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  if (out == HOP_OUT_FP16) return __half2float(((const __half *)p)[i]);
  return ((const float *)p)[i];
}
static int is_poison(const void *p, int out, int64_t i) {
  if (out == HOP_OUT_FP32) return ((const uint32_t *)p)[i] == 0xFFFFFFFFu;
  return ((const uint16_t *)p)[i] == 0xFFFF;
}
static double ref_act(int act, double x) {
  switch (act) {
    case HOP_ACT_RELU: return x > 0 ? x : 0;
    case HOP_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case HOP_ACT_GELU_ERF: return 0.5 * x * (1 + erf(x * 0.7071067811865476));
    case HOP_ACT_SILU: return x / (1 + exp(-x));
    default: return x;
  }
}

struct check_ctx {
  const gcase *c;
  const gbufs *b;
  const void *hC; /* host copy of the C buffer */
  int g;          /* group being checked */
  const float *Bf;/* that group's B [N x K] as floats */
  const int *rows;/* rows of g to check */
  int nrows;
  double rtol;
  /* results (atomics / first mismatch under lock) */
  int64_t checked, bad;
  pthread_mutex_t mu;
  int printed;
};

static void gen_b_chunk(int i, void *arg) {
  check_ctx *x = (check_ctx *)arg;
  const int64_t per = (int64_t)x->c->K * 64; /* 64 rows of B per chunk */
  const int64_t n = (int64_t)x->c->N * x->c->K, base = (int64_t)x->g * n;
  float *Bf = (float *)x->Bf;
  for (int64_t j = i * per; j < (i + 1) * per && j < n; j++) Bf[j] = gen_val(g_opt.seed * 2 + 2, base + j, SCALE_B);
}

static void check_row(int i, void *arg) {
  check_ctx *x = (check_ctx *)arg;
  const gcase *c = x->c;
  const gbufs *b = x->b;
  const int g = x->g, r = x->rows[i], K = c->K;
  const int64_t arow = b->row_off[g] + r;
  float *a = (float *)malloc(sizeof(float) * K);
  for (int k = 0; k < K; k++) a[k] = gen_val(g_opt.seed * 2 + 1, arow * K + k, SCALE_A);
  const double scale = c->row_scale ? row_scale_val(g_opt.seed, arow) : 1.0;
  const int64_t crow = b->crow_off[g] + dest_row(c, g, r);
  int64_t bad = 0;
  for (int oc = 0; oc < b->n_out; oc++) {
    double ref, tol;
    int n0 = oc;
    if (c->act == HOP_ACT_SWIGLU) n0 = (oc / HOP_SWIGLU_BLOCK) * 2 * HOP_SWIGLU_BLOCK + oc % HOP_SWIGLU_BLOCK;
    double acc[2] = {0, 0}, mag[2] = {0, 0};
    for (int part = 0; part < (c->act == HOP_ACT_SWIGLU ? 2 : 1); part++) {
      const float *brow = x->Bf + (int64_t)(n0 + part * HOP_SWIGLU_BLOCK) * K;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0, m0 = 0, m1 = 0;
      int k = 0;
      for (; k + 4 <= K; k += 4) {
        const double p0 = (double)a[k] * brow[k], p1 = (double)a[k + 1] * brow[k + 1];
        const double p2 = (double)a[k + 2] * brow[k + 2], p3 = (double)a[k + 3] * brow[k + 3];
        s0 += p0; s1 += p1; s2 += p2; s3 += p3;
        m0 += fabs(p0) + fabs(p1);
        m1 += fabs(p2) + fabs(p3);
      }
      for (; k < K; k++) {
        const double p = (double)a[k] * brow[k];
        s0 += p;
        m0 += fabs(p);
      }
      acc[part] = (s0 + s1) + (s2 + s3);
      mag[part] = m0 + m1;
    }
    const double eps_acc = 1.0 / 16384; /* 2^-14 */
    if (c->act == HOP_ACT_SWIGLU) {
      const double sg = acc[0] / (1 + exp(-acc[0]));
      ref = sg * acc[1] * scale;
      tol = eps_acc * (mag[0] * 1.1 * fabs(acc[1]) + mag[1] * fabs(sg)) * scale;
    } else {
      ref = ref_act(c->act, acc[0]) * scale;
      tol = eps_acc * mag[0] * 1.1 * scale;
    }
    tol += x->rtol * fabs(ref) + 1e-30;
    const double got = load_out(x->hC, c->out, crow * b->n_out + oc);
    const int poisoned = is_poison(x->hC, c->out, crow * b->n_out + oc);
    if (poisoned || !(fabs(got - ref) <= tol)) {
      bad++;
      pthread_mutex_lock(&x->mu);
      if (x->printed < 8) {
        x->printed++;
        printf("    MISMATCH group %d row %d col %d: got %.6g%s expected %.6g (tol %.3g)\n", g, r, oc, got,
               poisoned ? " (never written)" : "", ref, tol);
      }
      pthread_mutex_unlock(&x->mu);
    }
  }
  free(a);
  __atomic_fetch_add(&x->checked, (int64_t)b->n_out, __ATOMIC_RELAXED);
  __atomic_fetch_add(&x->bad, bad, __ATOMIC_RELAXED);
}

/* Rows of a group to check: all, or `edge` at each end plus `rand_rows` random. */
static int pick_rows(const gcase *c, int g, int *out, uint32_t seed) {
  const int R = c->rows[g];
  if (c->edge == 0 || R <= 2 * c->edge + c->rand_rows) {
    for (int r = 0; r < R; r++) out[r] = r;
    return R;
  }
  int n = 0;
  for (int r = 0; r < c->edge; r++) out[n++] = r;
  for (int r = R - c->edge; r < R; r++) out[n++] = r;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + g;
  for (int i = 0; i < c->rand_rows; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[n++] = c->edge + (int)((s >> 33) % (uint64_t)(R - 2 * c->edge));
  }
  return n;
}

/* Check the engine's output of case c (in b->C) against the CPU. Returns
 * the number of bad elements (guards and expectations of the timeout
 * case included). */
static int skipped_group(const gcase *c, int g, int mode) {
  return g == c->timeout_group || (mode == MODE_DG && (c->dg_table_never || g == c->dg_bad_group));
}
static int64_t check_case(const gcase *c, gbufs *b, uint32_t err_word, int var, int mode) {
  const int os = out_esize(c->out);
  const int64_t celems = b->c_rows * b->n_out;
  void *hC = malloc(celems * os);
  CUDA_CHECK(cudaMemcpy(hC, b->C, celems * os, cudaMemcpyDeviceToHost));
  int64_t bad = 0, checked = 0;
  /* gaps: rows that belong to no group must still be poisoned */
  for (int g = 0; g <= c->G; g++) {
    const int64_t r0 = g == 0 ? 0 : b->crow_off[g - 1] + c->rows[g - 1];
    const int64_t r1 = g == c->G ? b->c_rows : b->crow_off[g];
    for (int64_t r = r0; r < r1; r++)
      for (int j = 0; j < b->n_out; j++)
        if (!is_poison(hC, c->out, r * b->n_out + j)) {
          if (bad < 4) printf("    GUARD row %lld col %d written (after group %d)\n", (long long)r, j, g - 1);
          bad++;
        }
  }
  const uint32_t want = (c->timeout_group >= 0 || (mode == MODE_DG && c->dg_table_never) ? HOP_ERR_TIMEOUT : 0u) |
                        (mode == MODE_DG && c->dg_bad_group >= 0 ? HOP_ERR_TABLE : 0u);
  if (err_word != want) {
    printf("    error word %u, expected %u%s\n", err_word, want,
           mode == MODE_DG && (err_word & ~want & HOP_ERR_TIMEOUT)
               ? " (table wait timed out: with --dg-concurrent the writer kernel must find a free SM beside the engine)"
               : mode == MODE_DG && (err_word & ~want & HOP_ERR_TABLE) ? " (table read before it was written?)" : "");
    bad++;
  }
  check_ctx x;
  memset(&x, 0, sizeof(x));
  x.c = c;
  x.b = b;
  x.hC = hC;
  x.rtol = c->out == HOP_OUT_BF16 ? 1e-2 : c->out == HOP_OUT_FP16 ? 2e-3 : 5e-3;
  const int bm = c->cfg == CFG_LARGE ? 128 : 64;
  pthread_mutex_init(&x.mu, NULL);
  float *Bf = (float *)malloc(sizeof(float) * (size_t)c->N * c->K);
  int max_rows = 1;
  for (int g = 0; g < c->G; g++) max_rows = c->rows[g] > max_rows ? c->rows[g] : max_rows;
  int *rows = (int *)malloc(sizeof(int) * (max_rows + 2 * c->edge + c->rand_rows));
  for (int g = 0; g < c->G; g++) {
    if (c->rows[g] == 0) continue;
    if (skipped_group(c, g, mode)) { /* skipped tasks: their rows must be untouched */
      const int part = g == c->timeout_group && c->timeout_m >= 0; /* one m-block only */
      for (int r = part ? c->timeout_m * bm : 0; r < (part ? min(c->rows[g], (c->timeout_m + 1) * bm) : c->rows[g]); r++)
        for (int j = 0; j < b->n_out; j++)
          if (!is_poison(hC, c->out, (b->crow_off[g] + r) * b->n_out + j)) {
            if (bad < 4) printf("    timed-out group %d row %d written\n", g, r);
            bad++;
          }
      if (!part) continue;
    }
    x.g = g;
    x.Bf = Bf;
    parallel_for((c->N + 63) / 64, gen_b_chunk, &x);
    x.nrows = pick_rows(c, g, rows, g_opt.seed);
    if (g == c->timeout_group && c->timeout_m >= 0) { /* the other m-blocks must be right */
      int n = 0;
      for (int i = 0; i < x.nrows; i++)
        if (rows[i] / bm != c->timeout_m) rows[n++] = rows[i];
      x.nrows = n;
    }
    x.rows = rows;
    parallel_for(x.nrows, check_row, &x);
  }
  bad += x.bad;
  checked = x.checked;
  printf("  %-58s %-7s %s split %d: %s (%lld elements checked, %lld bad)\n", c->name, var_name(var),
         mode_name(mode), b->plan.params.split_k, bad ? "FAIL" : "ok", (long long)checked, (long long)bad);
  free(rows);
  free(Bf);
  free(hC);
  return bad;
}

/* Poison, run once, sync, check. */
static int64_t run_and_check(const gcase *c, gbufs *b, int var, int mode) {
  CUDA_CHECK(cudaMemset(b->C, 0xFF, b->c_rows * b->n_out * out_esize(c->out)));
  CUDA_CHECK(cudaMemset(b->error, 0, sizeof(uint32_t)));
  if (mode == MODE_DG) dg_publish(c, b, !g_opt.dg_same_stream); /* launched before the engine */
  cudaError_t e = launch_case(c, var, &b->plan, 0);
  if (e != cudaSuccess) {
    printf("  %-58s LAUNCH FAILED: %s\n", c->name, cudaGetErrorString(e));
    return 1;
  }
  e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("  %-58s KERNEL FAILED: %s\n", c->name, cudaGetErrorString(e));
    exit(1); /* the context is gone */
  }
  uint32_t err = 0;
  CUDA_CHECK(cudaMemcpy(&err, b->error, sizeof(err), cudaMemcpyDeviceToHost));
  return check_case(c, b, err, var, mode);
}

/* ---- timing ------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static void cublas_case(const gcase *c, gbufs *b) {
  const int es = in_esize(c->dtype);
  const cudaDataType_t t = c->dtype == HOP_BF16 ? CUDA_R_16BF : c->dtype == HOP_FP16 ? CUDA_R_16F : CUDA_R_32F;
  const cudaDataType_t ot = c->out == HOP_OUT_BF16 ? CUDA_R_16BF : c->out == HOP_OUT_FP16 ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t ct = c->dtype == HOP_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.f, zero = 0.f;
  for (int g = 0; g < c->G; g++) {
    if (c->rows[g] == 0) continue;
    /* column-major view: C^T [N x rows] = B^T(op T of [K x N]) * A^T ([K x rows]) */
    CUBLAS_CHECK(cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, c->N, c->rows[g], c->K, &one,
                              (const char *)b->B + (int64_t)g * c->N * c->K * es, t, c->K,
                              (const char *)b->A + b->row_off[g] * c->K * es, t, c->K, &zero,
                              (char *)b->Cref + b->row_off[g] * c->N * out_esize(c->out), ot, c->N, ct,
                              CUBLAS_GEMM_DEFAULT));
  }
}

/* Reading a buffer of 2 x L2 evicts every line, and leaves L2 holding only
 * clean lines: the timed kernel then pays no write-back (the memset flush
 * leaves ~L2 bytes dirty, which the timed kernel's reads must write back to
 * HBM first: 50 MB on an H200, as much as the small-M weights). */
__global__ void read_flush_kernel(const int4 *p, size_t n, int *sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const int4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7FEEDBEE) *sink = acc; /* keeps the loads; never true for the zero-filled buffer */
}

/* Timing modes:
 *   FLUSH_DIRTY  memset 2 x L2 before each run (v1's method; L2 left dirty)
 *   FLUSH_CLEAN  read 2 x L2 of a never-written buffer before each run
 *   BACK2BACK    B2B_LAUNCHES launches in a row between two events, / B2B_LAUNCHES
 *                (launch-to-launch time; no flush, so data of the previous
 *                launch that fits in L2 may still be there)                    */
enum { FLUSH_DIRTY = 0, FLUSH_CLEAN = 1, BACK2BACK = 2 };
#define B2B_LAUNCHES 20
static void *g_flush_clean;
static int *g_sink;

static void run_once(const gcase *c, gbufs *b, int which, int var) {
  if (which == 0) CUDA_CHECK(launch_case(c, var, &b->plan, 0));
  else cublas_case(c, b);
}

/* Median ms of `iters` runs of engine (which = 0, variant var) or cuBLAS (1). */
static float time_case(const gcase *c, gbufs *b, int which, int var, int mode) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const int iters = g_opt.iters;
  float *ms = (float *)malloc(sizeof(float) * iters);
  for (int i = -2; i < iters; i++) {
    if (mode == FLUSH_DIRTY) CUDA_CHECK(cudaMemsetAsync(g_flush, i & 0xFF, g_flush_bytes, 0));
    if (mode == FLUSH_CLEAN) {
      read_flush_kernel<<<4 * g_num_sms, 512>>>((const int4 *)g_flush_clean, g_flush_bytes / 16, g_sink);
      CUDA_CHECK(cudaGetLastError());
    }
    const int n = mode == BACK2BACK ? B2B_LAUNCHES : 1;
    /* LOOM_BENCH_PROFILE set: the last timed launch of each dirty-flush
     * timing is the only profiled range (ncu --profile-from-start off) */
    const int prof = mode == FLUSH_DIRTY && i == iters - 1 && getenv("LOOM_BENCH_PROFILE") != NULL;
    if (prof) CUDA_CHECK(cudaProfilerStart());
    CUDA_CHECK(cudaEventRecord(e0, 0));
    for (int r = 0; r < n; r++) run_once(c, b, which, var);
    CUDA_CHECK(cudaEventRecord(e1, 0));
    if (prof) CUDA_CHECK(cudaProfilerStop());
    CUDA_CHECK(cudaEventSynchronize(e1));
    if (i >= 0) {
      CUDA_CHECK(cudaEventElapsedTime(&ms[i], e0, e1));
      ms[i] /= n;
    }
  }
  qsort(ms, iters, sizeof(float), cmp_float);
  const float med = ms[iters / 2];
  free(ms);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return med;
}

/* cuBLAS times of one case (measured once, printed beside every variant). */
struct cublas_times {
  float dirty, clean, b2b;
};

static void report_case(const gcase *c, gbufs *b, int var, int mode, const cublas_times *tc) {
  const int64_t tot = b->total_rows;
  int active = 0;
  for (int g = 0; g < c->G; g++) active += c->rows[g] > 0;
  const double flops = 2.0 * tot * c->N * c->K;
  const double wbytes = (double)active * c->N * c->K * in_esize(c->dtype);
  const double bytes = (double)tot * c->K * in_esize(c->dtype) + wbytes + (double)tot * b->n_out * out_esize(c->out);
  if (mode == MODE_DG) { /* the table is written before the timed launches (no wait inside) */
    dg_publish(c, b, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  const float te = time_case(c, b, 0, var, FLUSH_DIRTY);
  char cfgname[16];
  snprintf(cfgname, sizeof(cfgname), "%s",
           var == VAR_PP ? "128x128pp" : var == VAR_PP2 ? "128x128pc2" : var == VAR_W1C2 ? "128x256c2" : var == VAR_WS ? "128x256ws"
           : var == VAR_SM2 ? "64x128k4" : var == VAR_SM2H ? "64x128k2" : var == VAR_DEC2 ? "128Nx16sw" : c->cfg == CFG_LARGE ? "128x256" : "64x128");
  printf("  %-34s %-7s %s %-9s engine %8.4f ms %7.1f TFLOP/s %6.0f GB/s | cuBLAS %8.4f ms %7.1f TFLOP/s | engine/cuBLAS %.2f\n",
         c->name, var_name(var), mode_name(mode), cfgname, te, flops / te * 1e-9, bytes / te * 1e-6, tc->dirty,
         flops / tc->dirty * 1e-9, tc->dirty / te);
  if (c->shape >= 2) { /* small-M, decode: the flush method and the launch matter; weights-only bandwidth */
    const float tcl = time_case(c, b, 0, var, FLUSH_CLEAN);
    const float tbb = time_case(c, b, 0, var, BACK2BACK);
    printf("  %-34s %-7s %-2s %-9s   weights %.1f MB: dirty-flush %6.0f GB/s | clean-flush %8.4f ms %6.0f GB/s"
           " (cuBLAS %8.4f ms) | back-to-back x%d %8.4f ms %6.0f GB/s (cuBLAS %8.4f ms)\n",
           "", "", "", "", wbytes * 1e-6, wbytes / te * 1e-6, tcl, wbytes / tcl * 1e-6, tc->clean, B2B_LAUNCHES, tbb,
           wbytes / tbb * 1e-6, tc->b2b);
  }
  fflush(stdout);
}

/* ---- cases -------------------------------------------------------------------- */

static gcase make_case(const char *name, int dtype, int cfg, int act, int out, int G, const int *rows, int N,
                       int K) {
  gcase c;
  memset(&c, 0, sizeof(c));
  snprintf(c.name, sizeof(c.name), "%s %s %s", name, dtype_name(dtype), act_name(act));
  c.dtype = dtype;
  c.cfg = cfg;
  c.act = act;
  c.out = out;
  c.G = G;
  for (int g = 0; g < G; g++) c.rows[g] = rows[g];
  c.N = N;
  c.K = K;
  c.timeout_group = -1;
  c.timeout_m = -1;
  c.shape = -1;
  c.dg_bad_group = -1;
  return c;
}
static int out_of(int dtype) { return dtype == HOP_BF16 ? HOP_OUT_BF16 : dtype == HOP_FP16 ? HOP_OUT_FP16 : HOP_OUT_FP32; }

static int want_dtype(int d) { return g_opt.dtype < 0 || g_opt.dtype == d; }
static int want_k(int k) {
  if (!g_opt.nks) return 1;
  for (int i = 0; i < g_opt.nks; i++)
    if (g_opt.ks[i] == k) return 1;
  return 0;
}

/* Variants run on a case (every one is checked; the same ones are timed):
 * v1 and w1 everywhere; pp on large-config cases; split-K on correctness
 * cases and small-M (a dense/grouped split would only add workspace traffic). */
static int case_variants(const gcase *c, int *v) {
  int n = 0;
  for (int var = 0; var < NUM_VARS; var++) {
    if (!(g_opt.variants >> var & 1)) continue;
    if (var_large_only(var) && c->cfg != CFG_LARGE) continue;
    if (var_small_only(var) && c->cfg != CFG_SMALL) continue;
    if ((var == VAR_SK2 || var == VAR_SK4) && (c->shape == 0 || c->shape == 1)) continue;
    v[n++] = var;
  }
  return n;
}
static int want_shape(int s) { return g_opt.shape < 0 || g_opt.shape == s; }

/* Groups modes a case runs in with variant var (each checked, the same
 * timed): host groups unless the case is device-only; device groups for
 * every case with more than one group, except with split-K (the engine
 * refuses it there: the workspace is sized by host-known tiles). */
static int case_modes(const gcase *c, int var, int *m) {
  int n = 0;
  if (!c->dg_only) m[n++] = MODE_HG;
  if ((c->G > 1 || c->dg_only) && var_split(var) == 1) m[n++] = MODE_DG;
  return n;
}
/* --device-groups keeps only the cases that run in both modes (or in dg only). */
static int keep_case(const gcase *c) {
  if (g_opt.only != NULL && strstr(c->name, g_opt.only) == NULL) return 0;
  return !g_opt.device_groups || c->G > 1 || c->dg_only;
}

/* Correctness-only cases for one dtype (irregular sizes, epilogues, gating). */
static int correctness_cases(int dt, gcase *v) {
  int n = 0;
  const int o = out_of(dt);
  static const int r1[] = {256}, r2[] = {300}, r3[] = {1, 63, 65, 127, 0, 128, 129, 300};
  static const int r4[] = {1, 16, 63, 64, 0, 17, 40, 64}, r5[] = {65, 130, 64}, r6[] = {100, 37};
  v[n++] = make_case("dense 256x512x576", dt, CFG_LARGE, HOP_ACT_NONE, o, 1, r1, 512, 576);
  v[n++] = make_case("dense 300x264x200 (K%64!=0, N%256!=0)", dt, CFG_LARGE, HOP_ACT_NONE, o, 1, r2, 264, 200);
  v[n++] = make_case("grouped {1,63,65,127,0,128,129,300}x512x2880", dt, CFG_LARGE, HOP_ACT_NONE, o, 8, r3, 512, 2880);
  v[n++] = make_case("small-M {1,16,63,64,0,17,40,64}x384x1000", dt, CFG_SMALL, HOP_ACT_NONE, o, 8, r4, 384, 1000);
  if (g_opt.quick && dt != HOP_BF16) return n;
  gcase t = make_case("gated: group 1 never ready -> timeout", dt, CFG_LARGE, HOP_ACT_NONE, o, 3, r5, 256, 128);
  t.timeout_group = 1;
  v[n++] = t;
  /* one m-block of a 2-CTA pair never ready (clusters: CTA rank 1 of the
   * first pair of group 1 skips, its peer computes; m-block 2 is paired
   * with a phantom) */
  static const int r8[] = {65, 300, 64};
  gcase t2 = make_case("gated: group 1 m-block 1 never ready", dt, CFG_LARGE, HOP_ACT_NONE, o, 3, r8, 256, 192);
  t2.timeout_group = 1;
  t2.timeout_m = 1;
  v[n++] = t2;
  if (dt != HOP_BF16) return n;
  static const int acts[] = {HOP_ACT_RELU, HOP_ACT_GELU_TANH, HOP_ACT_GELU_ERF, HOP_ACT_SILU, HOP_ACT_SWIGLU};
  for (int i = 0; i < 5; i++) v[n++] = make_case("grouped {65,130,64}x512x320", dt, CFG_LARGE, acts[i], o, 3, r5, 512, 320);
  v[n++] = make_case("small-M {1,16,63,64,0,17,40,64}x384x1000", dt, CFG_SMALL, HOP_ACT_SWIGLU, o, 8, r4, 384, 1000);
  gcase s = make_case("row_ptr+row_scale {100,37}x256x192", dt, CFG_LARGE, HOP_ACT_NONE, o, 2, r6, 256, 192);
  s.row_ptr = s.row_scale = 1;
  v[n++] = s;
  v[n++] = make_case("fp32 out {65,130,64}x512x320", dt, CFG_LARGE, HOP_ACT_NONE, HOP_OUT_FP32, 3, r5, 512, 320);
  /* device groups only: the table's counter never arrives (every block times
   * out, nothing written); one entry past the buffer (HOP_ERR_TABLE, that
   * group unwritten, the others right); 128 groups of 0..300 rows (the
   * table scan spans 4 warps' worth of groups, many partial tiles) */
  gcase d1 = make_case("dg: table never ready -> timeout", dt, CFG_LARGE, HOP_ACT_NONE, o, 3, r5, 256, 128);
  d1.dg_only = d1.dg_table_never = 1;
  v[n++] = d1;
  gcase d2 = make_case("dg: entry 1 out of range -> HOP_ERR_TABLE", dt, CFG_LARGE, HOP_ACT_NONE, o, 3, r5, 256, 128);
  d2.dg_only = 1;
  d2.dg_bad_group = 1;
  v[n++] = d2;
  int r7[MAX_GROUPS];
  for (int g = 0; g < MAX_GROUPS; g++) r7[g] = g % 9 == 4 ? 0 : (int)((g * 2654435761u >> 7) % 301);
  gcase d3 = make_case("dg: 128 groups of 0..300 rows x256x320", dt, CFG_LARGE, HOP_ACT_SILU, o, MAX_GROUPS, r7, 256, 320);
  d3.dg_only = 1;
  d3.row_scale = 1;
  v[n++] = d3;
  return n;
}

/* The benchmark shapes for one dtype. */
static int bench_cases(int dt, gcase *v) {
  int n = 0;
  const int o = out_of(dt);
  if (want_shape(0)) {
    static const int r[] = {8192};
    gcase c = make_case("dense 8192x8192x8192", dt, CFG_LARGE, HOP_ACT_NONE, o, 1, r, 8192, 8192);
    c.edge = 16;
    c.rand_rows = 224; /* 256 rows of 8192 against the CPU */
    c.shape = 0;
    v[n++] = c;
  }
  if (want_shape(1)) {
    static const int ks[] = {2048, 1536, 768};
    /* 32 x 1024: the expert GEMMs of `loom moe --tokens 16384` (E = 32, k = 2) */
    static const int gs[][2] = {{4, 8192}, {4, 2048}, {16, 8192}, {128, 512}, {32, 1024}};
    for (int gi = 0; gi < (int)(sizeof gs / sizeof gs[0]); gi++)
      for (int ki = 0; ki < 3; ki++) {
        if (g_opt.quick && (ki > 0 || gi > 1)) continue;
        if (!want_k(ks[ki])) continue;
        int rows[MAX_GROUPS];
        for (int g = 0; g < gs[gi][0]; g++) rows[g] = gs[gi][1];
        char nm[64];
        snprintf(nm, sizeof(nm), "grouped %dx%d x2048x%d", gs[gi][0], gs[gi][1], ks[ki]);
        gcase c = make_case(nm, dt, CFG_LARGE, HOP_ACT_NONE, o, gs[gi][0], rows, 2048, ks[ki]);
        c.edge = 16;
        c.rand_rows = 32;
        c.shape = 1;
        v[n++] = c;
      }
    /* an MoE-like uneven split: 128 groups of 0..1023 rows (~64K rows in
     * all; most groups end in a partial tile, none starts tile-aligned) */
    for (int ki = 0; ki < 3; ki += 2) {
      if (g_opt.quick || !want_k(ks[ki])) continue;
      int rows[MAX_GROUPS];
      for (int g = 0; g < MAX_GROUPS; g++) rows[g] = (int)((g * 2654435761u + 12345u) >> 9) % 1024;
      char nm[64];
      snprintf(nm, sizeof(nm), "grouped 128x0..1023 x2048x%d", ks[ki]);
      gcase c = make_case(nm, dt, CFG_LARGE, HOP_ACT_NONE, o, MAX_GROUPS, rows, 2048, ks[ki]);
      c.edge = 16;
      c.rand_rows = 16;
      c.shape = 1;
      v[n++] = c;
    }
  }
  if (want_shape(2)) {
    static const int ms[] = {16, 64, 256};
    for (int mi = 0; mi < 3; mi++) {
      if (g_opt.quick && mi != 1) continue;
      int rows[8];
      for (int g = 0; g < 8; g++) rows[g] = ms[mi];
      char nm[64];
      snprintf(nm, sizeof(nm), "small-M 8x%d x2048x2048", ms[mi]);
      /* <= 64 rows: 64x128 tiles (128 tasks); 256 rows: 128x256 tiles (128 tasks) */
      gcase c = make_case(nm, dt, ms[mi] <= 64 ? CFG_SMALL : CFG_LARGE, HOP_ACT_NONE, o, 8, rows, 2048, 2048);
      c.shape = 2;
      v[n++] = c;
    }
  }
  /* the per-GPU weights (N, K) of a Llama-70B-class layer (hidden 8192,
   * ffn 28672) in tensor parallelism: row-parallel (N = hidden, K = ffn /
   * R) on 2 and 4 GPUs (235 and 117 MB of bf16 weights), and
   * column-parallel on 4 (N = ffn / 4, K = hidden) */
  static const int nk[][2] = {{8192, 14336}, {8192, 7168}, {7168, 8192}};
  if (want_shape(3)) {
    /* decode: one group of a few rows against one of those weights,
     * streamed once */
    static const int ms[] = {1, 16, 64, 128};
    for (int si = 0; si < 3; si++)
      for (int mi = 0; mi < 4; mi++)
        for (int cfg = CFG_LARGE; cfg <= CFG_SMALL; cfg++) { /* 64-row tiles for <= 64 rows */
          if ((g_opt.quick && (mi != 1 || si != 0)) || (cfg == CFG_SMALL && ms[mi] > 64)) continue;
          char nm[64];
          snprintf(nm, sizeof(nm), "decode 1x%d x%dx%d %s", ms[mi], nk[si][0], nk[si][1],
                   cfg == CFG_LARGE ? "bm128" : "bm64");
          gcase c = make_case(nm, dt, cfg, HOP_ACT_NONE, o, 1, &ms[mi], nk[si][0], nk[si][1]);
          c.shape = 3;
          v[n++] = c;
        }
  }
  if (want_shape(4)) {
    /* mid: the decode shapes at 256-1024 rows, the GEMM the collective
     * kernels run at 256-1024 tokens (bench/RESULTS.md session 24: the
     * all-gather's GEMM phase at 512 tokens on 4 GPUs took ~2x what this
     * per-GPU GEMM should) */
    static const int ms[] = {256, 512, 1024};
    for (int si = 0; si < 3; si++)
      for (int mi = 0; mi < 3; mi++) {
        if (g_opt.quick && (mi != 1 || si != 2)) continue;
        char nm[64];
        snprintf(nm, sizeof(nm), "mid 1x%d x%dx%d", ms[mi], nk[si][0], nk[si][1]);
        gcase c = make_case(nm, dt, CFG_LARGE, HOP_ACT_NONE, o, 1, &ms[mi], nk[si][0], nk[si][1]);
        c.edge = 16; /* 64 rows against the CPU: both ends and 32 random */
        c.rand_rows = 32;
        c.shape = 4;
        v[n++] = c;
      }
  }
  return n;
}

/* ---- --debug: tiny problems with known inputs ------------------------------------- */

static int debug_one(int dt, int cfg, int M, int N, int K, int pattern, int var) {
  const int es = in_esize(dt), o = out_of(dt), os = out_esize(o);
  float *a = (float *)malloc(sizeof(float) * M * K), *bb = (float *)malloc(sizeof(float) * N * K);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++)
      a[i * K + k] = pattern == 0 ? (k == i % K ? 1.f : 0.f) : (float)((i * 3 + k * 5) % 7 - 3);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++)
      bb[n * K + k] = pattern == 0 ? (float)((n % 16) * 16 + k % 16) : (float)((n * 5 + k * 3) % 9 - 4) / 4;
  void *ha = malloc((size_t)M * K * es), *hb = malloc((size_t)N * K * es);
  for (int64_t i = 0; i < (int64_t)M * K; i++) {
    if (dt == HOP_BF16) ((__nv_bfloat16 *)ha)[i] = __float2bfloat16(a[i]);
    else if (dt == HOP_FP16) ((__half *)ha)[i] = __float2half(a[i]);
    else ((float *)ha)[i] = a[i];
  }
  for (int64_t i = 0; i < (int64_t)N * K; i++) {
    if (dt == HOP_BF16) ((__nv_bfloat16 *)hb)[i] = __float2bfloat16(bb[i]);
    else if (dt == HOP_FP16) ((__half *)hb)[i] = __float2half(bb[i]);
    else ((float *)hb)[i] = bb[i];
  }
  gcase c = make_case("debug", dt, cfg, HOP_ACT_NONE, o, 1, &M, N, K);
  gbufs b;
  alloc_case(&c, &b); /* random fill, then overwritten with the pattern */
  CUDA_CHECK(cudaMemcpy((char *)b.A + b.row_off[0] * K * es, ha, (size_t)M * K * es, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b.B, hb, (size_t)N * K * es, cudaMemcpyHostToDevice));
  CUDA_CHECK(plan_case(&c, &b, 1000000000ull, var, MODE_HG));
  CUDA_CHECK(cudaMemset(b.C, 0xFF, b.c_rows * b.n_out * os));
  CUDA_CHECK(cudaMemset(b.error, 0, 4));
  CUDA_CHECK(launch_case(&c, var, &b.plan, 0));
  CUDA_CHECK(cudaDeviceSynchronize());
  uint32_t err;
  CUDA_CHECK(cudaMemcpy(&err, b.error, 4, cudaMemcpyDeviceToHost));
  void *hc = malloc(b.c_rows * b.n_out * os);
  CUDA_CHECK(cudaMemcpy(hc, b.C, b.c_rows * b.n_out * os, cudaMemcpyDeviceToHost));
  printf("debug %s %s %s (split %d) %dx%dx%d pattern %d (%s): grid %d, smem %d B, error word %u\n",
         dtype_name(dt), cfg == CFG_LARGE ? "large" : "small", var_name(var),
         b.plan.params.split_k, M, N, K, pattern,
         pattern == 0 ? "A = identity rows, C[i][n] = (n%16)*16 + i%16 for K=64" : "small integers",
         b.plan.grid, b.plan.smem_bytes, err);
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int n = 0; n < N; n++) {
      double ref = 0;
      for (int k = 0; k < K; k++) ref += (double)a[i * K + k] * bb[n * K + k];
      const float got = load_out(hc, o, (GUARD + i) * (int64_t)b.n_out + n);
      if (fabs(got - ref) > 1e-2 * fabs(ref) + 1e-3 || got != got) {
        if (bad < 16)
          printf("  mismatch C[%d][%d]: got %g expected %g%s\n", i, n, got, ref,
                 pattern == 0 && got == got && got >= 0 && got < 256
                     ? "  (got decodes to n%16, k%16 below)" : "");
        if (bad < 16 && pattern == 0 && got == got && got >= 0 && got < 256)
          printf("      got = B[n'%%16=%d][k'%%16=%d]: row %d/col %d should hold B[%d][%d]\n", (int)got / 16,
                 (int)got % 16, i, n, n % 16, i % 16);
        bad++;
      }
    }
  printf("  top-left 8x8 of C (got/expected):\n");
  for (int i = 0; i < 8 && i < M; i++) {
    printf("   ");
    for (int n = 0; n < 8 && n < N; n++) {
      double ref = 0;
      for (int k = 0; k < K; k++) ref += (double)a[i * K + k] * bb[n * K + k];
      printf(" %6g/%-6g", load_out(hc, o, (GUARD + i) * (int64_t)b.n_out + n), ref);
    }
    printf("\n");
  }
  printf("  %s: %d of %d elements wrong\n", bad ? "FAIL" : "ok", bad, M * N);
  free(a);
  free(bb);
  free(ha);
  free(hb);
  free(hc);
  free_case(&b);
  return bad;
}

/* ---- main ----------------------------------------------------------------------- */

static void usage(void) {
  printf("usage: gemm [--debug] [--check-only] [--quick] [--dtype bf16|fp16|tf32] "
         "[--shape dense|grouped|smallm|decode|mid] [--variant v1,w1,pp,sk2,sk4,pp2,w1c2,sm2,sm2h,ws,dec2] [--k K1,K2,..] [--raster M] "
         "[--iters N] [--seed S] "
         "[--threads T] [--device-groups] [--dg-concurrent] [--stores v4|pairs] [--case NAME-SUBSTRING]\n"
         "       [--sms N] [--pdl on|off] [--hg-table on|off] [--l2-hints 0|1|2]\n"
         "env LOOM_BENCH_PROFILE=1: each timing's last dirty-flush launch is the only profiled range "
         "(for ncu --profile-from-start off)\n");
}

/* A two-way option value: 0 for `no`, 1 for `yes`, -1 for anything else. */
static int opt_choice(const char *v, const char *no, const char *yes) {
  return !strcmp(v, yes) ? 1 : !strcmp(v, no) ? 0 : -1;
}

int main(int argc, char **argv) {
  g_opt.dtype = -1;
  g_opt.shape = -1;
  g_opt.iters = 10;
  g_opt.seed = 1234;
  g_opt.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  g_opt.dg_same_stream = 1;
  g_opt.variants = (1u << NUM_VARS) - 1;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--check-only")) g_opt.check_only = 1;
    else if (!strcmp(s, "--quick")) g_opt.quick = 1;
    else if (!strcmp(s, "--debug")) g_opt.debug = 1;
    else if (!strcmp(s, "--dtype") && i + 1 < argc) {
      const char *d = argv[++i];
      g_opt.dtype = !strcmp(d, "bf16") ? HOP_BF16 : !strcmp(d, "fp16") ? HOP_FP16 : !strcmp(d, "tf32") ? HOP_TF32 : -2;
    } else if (!strcmp(s, "--shape") && i + 1 < argc) {
      const char *d = argv[++i];
      g_opt.shape = !strcmp(d, "dense") ? 0 : !strcmp(d, "grouped") ? 1 : !strcmp(d, "smallm") ? 2
                                                                                                : !strcmp(d, "decode") ? 3
                                                                                                : !strcmp(d, "mid") ? 4 : -2;
    } else if (!strcmp(s, "--iters") && i + 1 < argc) g_opt.iters = atoi(argv[++i]);
    else if (!strcmp(s, "--seed") && i + 1 < argc) g_opt.seed = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(s, "--threads") && i + 1 < argc) g_opt.threads = atoi(argv[++i]);
    else if (!strcmp(s, "--raster") && i + 1 < argc) g_opt.raster_m = atoi(argv[++i]);
    else if (!strcmp(s, "--device-groups")) g_opt.device_groups = 1;
    else if (!strcmp(s, "--case") && i + 1 < argc) g_opt.only = argv[++i];
    else if (!strcmp(s, "--k") && i + 1 < argc) {
      char buf[128];
      snprintf(buf, sizeof(buf), "%s", argv[++i]);
      for (char *tok = strtok(buf, ","); tok && g_opt.nks < 8; tok = strtok(NULL, ",")) g_opt.ks[g_opt.nks++] = atoi(tok);
    }
    else if (!strcmp(s, "--dg-concurrent")) g_opt.dg_same_stream = 0;
    else if (!strcmp(s, "--pdl") && i + 1 < argc) {
      g_opt.no_pdl = opt_choice(argv[++i], "on", "off");
      if (g_opt.no_pdl < 0) {
        usage();
        return 2;
      }
    }
    else if (!strcmp(s, "--hg-table") && i + 1 < argc) {
      g_opt.no_hg_table = opt_choice(argv[++i], "on", "off");
      if (g_opt.no_hg_table < 0) {
        usage();
        return 2;
      }
    }
    else if (!strcmp(s, "--l2-hints") && i + 1 < argc) {
      g_opt.l2_hints = atoi(argv[++i]);
      if (g_opt.l2_hints < 0 || g_opt.l2_hints > 2) {
        usage();
        return 2;
      }
    }
    else if (!strcmp(s, "--sms") && i + 1 < argc) {
      g_opt.sms = atoi(argv[++i]);
      if (g_opt.sms < 1) {
        usage();
        return 2;
      }
    }
    else if (!strcmp(s, "--stores") && i + 1 < argc) {
      g_opt.pair_stores = opt_choice(argv[++i], "v4", "pairs");
      if (g_opt.pair_stores < 0) {
        usage();
        return 2;
      }
    }
    else if (!strcmp(s, "--variant") && i + 1 < argc) {
      char buf[128];
      snprintf(buf, sizeof(buf), "%s", argv[++i]);
      g_opt.variants = 0;
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int v = -1;
        for (int q = 0; q < NUM_VARS; q++)
          if (!strcmp(tok, var_name(q))) v = q;
        if (!strcmp(tok, "sk2")) v = VAR_SK2;
        if (!strcmp(tok, "sk4")) v = VAR_SK4;
        if (v < 0) {
          usage();
          return 2;
        }
        g_opt.variants |= 1u << v;
      }
    }
    else {
      usage();
      return 2;
    }
  }
  if (g_opt.dtype == -2 || g_opt.shape == -2 || g_opt.iters < 1 || g_opt.threads < 1 || !g_opt.variants ||
      g_opt.raster_m < 0) {
    usage();
    return 2;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) {
    printf("skip: needs compute capability 9.0 (H100/H200), found %d.%d (%s)\n", prop.major, prop.minor, prop.name);
    return 0;
  }
  g_num_sms = prop.multiProcessorCount;
  g_l2_bytes = prop.l2CacheSize;
  printf("device %s: %d SMs, L2 %d MB, %zu KB smem/block opt-in; CPU reference on %d threads, seed %u\n", prop.name,
         g_num_sms, g_l2_bytes >> 20, prop.sharedMemPerBlockOptin >> 10, g_opt.threads, g_opt.seed);

  if (g_opt.debug) {
    int bad = 0;
    for (int var = 0; var < NUM_VARS; var++) {
      if (!(g_opt.variants >> var & 1)) continue;
      if (var_small_only(var)) { /* K a multiple of 4 k-blocks (KSUB) */
        bad += debug_one(HOP_BF16, CFG_SMALL, 64, 64, 256, 0, var);
        bad += debug_one(HOP_FP16, CFG_SMALL, 64, 128, 512, 1, var);
        bad += debug_one(HOP_TF32, CFG_SMALL, 40, 128, 256, 1, var);
        continue;
      }
      if (!var_large_only(var)) bad += debug_one(HOP_BF16, CFG_SMALL, 64, 64, 64, 0, var);
      bad += debug_one(HOP_BF16, CFG_LARGE, 128, 256, 64, 0, var);
      bad += debug_one(HOP_BF16, CFG_LARGE, 128, 256, 192, 1, var);
      bad += debug_one(HOP_TF32, CFG_LARGE, 128, 256, 64, 0, var);
      if (var_cluster(var)) { /* 2-CTA clusters: 3 m-tiles (a full pair + a phantom), 5 k-blocks, 2 n-blocks */
        bad += debug_one(HOP_BF16, CFG_LARGE, 384, 512, 320, 1, var);
        bad += debug_one(HOP_FP16, CFG_LARGE, 200, 256, 64, 0, var);
      }
      if (!var_large_only(var)) bad += debug_one(HOP_FP16, CFG_SMALL, 64, 128, 128, 1, var);
    }
    printf(bad ? "debug: MISMATCHES\n" : "debug: all results match\n");
    return bad ? 1 : 0;
  }

  /* 1. correctness of every case and every timed shape */
  static gcase cases[512];
  int nc = 0;
  for (int dt = 0; dt < 3; dt++) {
    if (!want_dtype(dt)) continue;
    nc += correctness_cases(dt, cases + nc);
  }
  const int first_bench = nc;
  for (int dt = 0; dt < 3; dt++) {
    if (!want_dtype(dt)) continue;
    nc += bench_cases(dt, cases + nc);
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&g_side_ev, cudaEventDisableTiming));
  {
    /* load the writer now (lazy module loading would otherwise load it at its
     * first launch, possibly while an engine that waits for it is resident) */
    cudaFuncAttributes fa;
    CUDA_CHECK(cudaFuncGetAttributes(&fa, dg_writer_kernel));
    if (fa.numRegs > 32) printf("warning: dg_writer_kernel uses %d registers (> 32): may not fit beside the engine\n", fa.numRegs);
  }
  printf("correctness (%d cases, each in every variant and groups mode it is timed in; timed shapes checked on "
         "sampled rows;\n             dg: table written by a %s):\n",
         nc, g_opt.dg_same_stream ? "kernel before the engine (same stream)"
                                  : "concurrent kernel on a second stream after a 50 us sleep");
  int64_t bad = 0;
  int nchecked = 0;
  for (int i = 0; i < nc; i++) {
    if (!keep_case(&cases[i])) continue;
    gbufs b;
    alloc_case(&cases[i], &b);
    int vars[NUM_VARS];
    const int nv = case_variants(&cases[i], vars);
    for (int vi = 0; vi < nv; vi++) {
      int modes[2];
      const int nm = case_modes(&cases[i], vars[vi], modes);
      for (int mi = 0; mi < nm; mi++) {
        const int gated = cases[i].timeout_group >= 0 || cases[i].dg_table_never;
        cudaError_t e = plan_case(&cases[i], &b, gated ? 200000ull : 2000000000ull, vars[vi], modes[mi]);
        if (e != cudaSuccess) {
          printf("  %-58s %-7s %s PLAN FAILED: %s\n", cases[i].name, var_name(vars[vi]), mode_name(modes[mi]),
                 cudaGetErrorString(e));
          bad++;
        } else {
          bad += run_and_check(&cases[i], &b, vars[vi], modes[mi]);
          nchecked++;
        }
        hop_plan_destroy(&b.plan);
      }
    }
    free_case(&b);
  }
  if (bad) {
    printf("MISMATCHES: %lld bad elements; no timing\n", (long long)bad);
    return 1;
  }
  printf("all results match (%d case x variant x groups-mode runs)\n", nchecked);
  if (g_opt.check_only) return 0;

  /* 2. timings */
  CUBLAS_CHECK(cublasCreate(&g_cublas));
  g_flush_bytes = (size_t)g_l2_bytes * 2;
  CUDA_CHECK(cudaMalloc(&g_flush, g_flush_bytes));
  CUDA_CHECK(cudaMalloc(&g_flush_clean, g_flush_bytes));
  CUDA_CHECK(cudaMemset(g_flush_clean, 0, g_flush_bytes));
  CUDA_CHECK(cudaMalloc(&g_sink, sizeof(int)));
  printf("timing (median of %d, L2 flushed by a %zu MB memset before each run unless said; GB/s counts A + B + C once;\n"
         "        small-M adds a clean (read) flush and %d back-to-back launches):\n",
         g_opt.iters, g_flush_bytes >> 20, B2B_LAUNCHES);
  for (int i = first_bench; i < nc; i++) {
    if (!keep_case(&cases[i])) continue;
    gbufs b;
    alloc_case(&cases[i], &b);
    CUDA_CHECK(cudaMalloc(&b.Cref, b.c_rows * cases[i].N * out_esize(cases[i].out) + 16));
    cublas_times tc;
    tc.dirty = time_case(&cases[i], &b, 1, 0, FLUSH_DIRTY);
    tc.clean = cases[i].shape >= 2 ? time_case(&cases[i], &b, 1, 0, FLUSH_CLEAN) : 0.f;
    tc.b2b = cases[i].shape >= 2 ? time_case(&cases[i], &b, 1, 0, BACK2BACK) : 0.f;
    int vars[NUM_VARS];
    const int nv = case_variants(&cases[i], vars);
    for (int vi = 0; vi < nv; vi++) {
      int modes[2];
      const int nm = case_modes(&cases[i], vars[vi], modes);
      for (int mi = 0; mi < nm; mi++) {
        CUDA_CHECK(plan_case(&cases[i], &b, 2000000000ull, vars[vi], modes[mi]));
        report_case(&cases[i], &b, vars[vi], modes[mi], &tc);
        hop_plan_destroy(&b.plan);
      }
    }
    free_case(&b);
  }
  cublasDestroy(g_cublas);
  cudaFree(g_flush);
  cudaFree(g_flush_clean);
  cudaFree(g_sink);
  cudaEventDestroy(g_side_ev);
  cudaStreamDestroy(g_side);
  return 0;
}
