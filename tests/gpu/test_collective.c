/*
 * GPU tests of the fused collective GEMMs (loom_ag_gemm, loom_gemm_rs,
 * loom_gemm_ar) on 1, 2, 4 and 8 ranks, skipping sizes the machine lacks:
 *
 *   test_collective single    one process drives every GPU
 *   test_collective multi     one process per GPU
 *   test_collective loopback  one process, 2, 4 and 8 ranks on device 0
 *
 * Each case (operator x shape x dtype x activation, every other one with a
 * bias: the all-gather's each rank's own, the reduce-scatter's and
 * all-reduce's the same on every rank): every rank's A and B fresh
 * random (a pure function of seed, case, call and rank, so any process can
 * compute the reference of any rank), C poisoned with NaN, two calls back to
 * back without a host sync (different A, different C), then every row of
 * every rank's C against the CPU reference in double: max over rows of
 * ||c_row - ref_row|| / ||ref_row|| within TOL_16BIT (bf16/fp16; the
 * reduce-scatter TOL_16BIT_RS) or TOL_TF32 (fp32 storage, TF32 math). Shapes put m, n and k off the tiles (m not a
 * multiple of 128, n not of the tile width, k not of the 64-wide k-block)
 * and include m = 1. Cases alternate the kernel's tiles (LOOM_AG_TILE
 * unset: the automatic choice, which takes the swapped decode tile for
 * groups of <= 16 rows and the 64 x 128 one for <= 64; = narrow, wide:
 * 128 x 128 ping-pong, 128 x 256 cooperative; = dec64: the 64 x 128 tile
 * for groups of <= 16 rows too) and, for
 * the reduce-scatter and all-reduce, the column chunks of the task order
 * (LOOM_RS_CHUNKS = 1 or 3; the automatic choice is 1 for shapes this
 * small), the one-tile mode (LOOM_RS_ONE_TILE = 1 or 0: one group over
 * all rows, for m <= 128 or up to 256 rows where no owner's rows straddle
 * a 128-row block, which outside the tests only a B larger than half the
 * L2 takes, or a group per owner; the all-gather's one-group mode with it,
 * LOOM_AG_ONE_GROUP: R m <= 128, or m < 128 dividing 128 and R m whole
 * blocks; in every di = 1 case its lockstep form, LOOM_AG_LOCKSTEP = 1,
 * where m <= 128 divides 128: every task waits for every source) and the
 * side role's
 * slices per tile (LOOM_RS_SLICES = 1, or the
 * automatic choice: up to 8 here). All-reduce: every rank's C must also
 * be the same bits (checked where one process holds every rank).
 * One process: a CUDA graph of one call per rank, replayed with new A.
 * All-gather: shape (m, n, k) = this rank's rows; reduce-scatter: every
 * rank's A has R m rows and C gets m of the sum; all-reduce: every rank's
 * A has m rows (owners of m / R or m / R + 1 rows; none for m = 1) and C
 * gets all m rows of the sum.
 * Fault (each operator, at m = 100 and at the decode size m = 20: the
 * all-gather's one group, the one-tile mode, the decode tile): on 2+ ranks the last rank never calls; every other rank must
 * report LOOM_TIMEOUT naming it (or LOOM_PEER_ERROR carrying another
 * rank's such timeout), within timeout + 2 s, and the
 * communicators must still be destroyed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "host/internal.h" /* loom_coll_phases */
#include "reference/reference.h"
#include "../check.h"
#include "gpu_check.h"
#include "ranks.h"

#define PROG "test_collective"
#define MAX_RANKS 8
#define CALLS 2
#define FAULT_TIMEOUT_MS 1000
#define CHILD_DEADLINE_S 300
#define TOL_TF32 2e-3
#define TOL_16BIT 1e-2
/* Reduce-scatter in bf16/fp16: each of the R partials is rounded to the
 * dtype before the fp32 sum (as the staging and NCCL's reduce-scatter do),
 * then the sum once more: up to R + 1 roundings of values as large as the
 * sum, so the row error grows about as sqrt(R) (measured worst rows on
 * loopback R = 2 / 4 / 8: 0.0050 / 0.0047 / 0.0096). TF32 partials stay
 * fp32. */
#define TOL_16BIT_RS 2e-2
static const uint64_t SEED = 0xa11ea7e4ull;

typedef struct {
  int m, n, k;
} shape_t;
enum { OP_AG, OP_RS, OP_AR, NUM_OPS };
static const char *const OP_NAME[NUM_OPS] = {"all-gather", "reduce-scatter", "all-reduce"};
/* the last one only on up to 2 ranks (its CPU reference is the long one).
 * {64, ..} and {256, ..}: one group over several 128-row blocks (the
 * all-gather's R m = 256, 512 rows at R = 4, 8; the reduce-scatter's 256
 * rows at R = 4, and at R = 2 with {128, ..}; the all-reduce's 256 rows at
 * R = 2, 4, 8). {13, ..}: groups of <= 16 rows, the swapped decode tile
 * (a source's or owner's 13 rows; the all-reduce's one-shot group of 13),
 * n and k off its 128 x 64 blocks */
static const shape_t SHAPES[] = {{100, 136, 200}, {1, 8, 8},       {20, 200, 1032}, {128, 256, 64},  {257, 264, 1032},
                                 {64, 392, 136},  {256, 136, 72}, {13, 392, 264},  {600, 520, 2056}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))
static const loom_dtype_t DTYPES[] = {LOOM_BF16, LOOM_FP16, LOOM_FP32};
static const int ACTS[] = {LOOM_UNSET, LOOM_ACT_RELU, LOOM_ACT_GELU, LOOM_ACT_SILU};
#define MAX_ELEMS_A (600 * 2056) /* per rank's share of rows */
#define MAX_ELEMS_B (520 * 2056)
#define MAX_ELEMS_C (8 * 600 * 520)
#define MAX_N 520

static ranks_mode g_mode = RANKS_SINGLE;

/* Element i of a matrix (which: 0 = A, 1 = B) of `rank` in call `call` of
 * case `cs`: uniform in [-1, 1), then rounded to the dtype. */
static float gen(int cs, int call, int rank, int which, size_t i) {
  const uint64_t z = SEED ^ ((uint64_t)cs << 48) ^ ((uint64_t)call << 44) ^ ((uint64_t)rank << 40) ^
                     ((uint64_t)which << 36) ^ (uint64_t)i;
  return (float)((double)(ref_splitmix64(z) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void gen_matrix(float *x, size_t n, int cs, int call, int rank, int which, loom_dtype_t dt) {
  for (size_t i = 0; i < n; i++) x[i] = gen(cs, call, rank, which, i);
  ref_round_array(x, n, (int)dt);
}

static ref_activation ref_act_of(int act) {
  return act == LOOM_ACT_RELU ? REF_ACT_RELU : act == LOOM_ACT_GELU ? REF_ACT_GELU : REF_ACT_SILU;
}

typedef struct {
  loom_comm_t comm;
  int rank, device;
  cudaStream_t stream;
  void *a[CALLS], *b, *c[CALLS];
  void *g[CALLS]; /* the all-gather's a_gathered (call 1 of each case) */
  void *bias;     /* [n] of the cases with a bias */
} rank_ctx;

static int ctx_setup(rank_ctx *c, int R) {
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  for (int k = 0; k < CALLS; k++) {
    CUDA_T(cudaMalloc(&c->a[k], (size_t)R * MAX_ELEMS_A * sizeof(float))); /* RS: R m rows */
    CUDA_T(cudaMalloc(&c->c[k], (size_t)R * 600 * 520 * sizeof(float)));
    CUDA_T(cudaMalloc(&c->g[k], (size_t)R * MAX_ELEMS_A * sizeof(float)));
  }
  CUDA_T(cudaMalloc(&c->b, MAX_ELEMS_B * sizeof(float)));
  CUDA_T(cudaMalloc(&c->bias, MAX_N * sizeof(float)));
  return 0;
}

static void ctx_free(rank_ctx *c) {
  if (c->device >= 0) cudaSetDevice(c->device);
  for (int k = 0; k < CALLS; k++) {
    if (c->a[k]) cudaFree(c->a[k]);
    if (c->c[k]) cudaFree(c->c[k]);
    if (c->g[k]) cudaFree(c->g[k]);
  }
  if (c->b) cudaFree(c->b);
  if (c->bias) cudaFree(c->bias);
  if (c->stream) cudaStreamDestroy(c->stream);
}

static loom_comm_config_t test_config(int R, int timeout_ms) {
  loom_comm_config_t cfg = LOOM_COMM_CONFIG_INIT;
  loom_gemm_args_t big = LOOM_GEMM_ARGS_INIT;
  big.dtype = LOOM_FP32;
  big.m = 600;
  big.n = 520;
  big.k = 2056;
  size_t bytes = 0, rs = 0;
  if (loom_ag_gemm_workspace_bytes(&big, R, &bytes, NULL) != LOOM_SUCCESS) bytes = 64u << 20;
  big.m = 600 * R;
  if (loom_gemm_rs_workspace_bytes(&big, R, &rs, NULL) != LOOM_SUCCESS) rs = 64u << 20;
  if (rs > bytes) bytes = rs;
  big.m = 600;
  if (loom_gemm_ar_workspace_bytes(&big, R, &rs, NULL) != LOOM_SUCCESS) rs = 64u << 20;
  cfg.workspace_bytes = (int64_t)(bytes > rs ? bytes : rs);
  cfg.timeout_ms = timeout_ms;
  return cfg;
}

/* Rows of each rank's A: m (all-gather, all-reduce), R m (reduce-scatter). */
static int rows_a(int op, int R, const shape_t *s) { return op == OP_RS ? R * s->m : s->m; }

/* Upload rank r's inputs of case cs, call k (A of `arows` rows). */
static int upload(rank_ctx *c, int cs, int k, const shape_t *s, int arows, loom_dtype_t dt, float *tmp,
                  void *packed) {
  size_t es = 0;
  loom_dtype_size(dt, &es);
  CUDA_T(cudaSetDevice(c->device));
  gen_matrix(tmp, (size_t)arows * s->k, cs, k, c->rank, 0, dt);
  ref_pack_array(packed, tmp, (size_t)arows * s->k, (int)dt);
  CUDA_T(cudaMemcpy(c->a[k], packed, (size_t)arows * s->k * es, cudaMemcpyHostToDevice));
  if (k == 0) {
    gen_matrix(tmp, (size_t)s->n * s->k, cs, 0, c->rank, 1, dt);
    ref_pack_array(packed, tmp, (size_t)s->n * s->k, (int)dt);
    CUDA_T(cudaMemcpy(c->b, packed, (size_t)s->n * s->k * es, cudaMemcpyHostToDevice));
  }
  return 0;
}

static loom_gemm_args_t args_of(const rank_ctx *c, int k, const shape_t *s, int arows, loom_dtype_t dt,
                                int act, int bias) {
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = dt;
  a.m = arows;
  a.n = s->n;
  a.k = s->k;
  a.a = c->a[k];
  a.b = c->b;
  a.c = c->c[k];
  a.activation = act;
  a.bias = bias ? c->bias : NULL;
  return a;
}

/* The bias of case cs on `rank` ([n], rounded to the dtype): the all-gather's
 * own (each rank's shard of the column-parallel layer), the reduce-scatter's
 * and all-reduce's rank 0's on every rank (the row-parallel layer's one
 * bias, passed by every rank). */
static int bias_rank(int op, int rank) { return op == OP_AG ? rank : 0; }
static void gen_bias(float *x, const shape_t *s, int cs, int brank, loom_dtype_t dt) {
  gen_matrix(x, (size_t)s->n, cs, 0, brank, 2, dt);
}
static int upload_bias(rank_ctx *c, int cs, int op, const shape_t *s, loom_dtype_t dt, float *tmp, void *packed) {
  size_t es = 0;
  loom_dtype_size(dt, &es);
  CUDA_T(cudaSetDevice(c->device));
  gen_bias(tmp, s, cs, bias_rank(op, c->rank), dt);
  ref_pack_array(packed, tmp, (size_t)s->n, (int)dt);
  CUDA_T(cudaMemcpy(c->bias, packed, (size_t)s->n * es, cudaMemcpyHostToDevice));
  return 0;
}

/* Rank c->rank's output of case cs (its A from call `data_call`, in buffer
 * c->c[k]) against the reference; one CHECK. worst: the largest row error. */
static int verify(const rank_ctx *c, int op, int R, int cs, int data_call, int k, const shape_t *s,
                  loom_dtype_t dt, int act, int bias, const char *what, double *worst) {
  size_t es = 0;
  loom_dtype_size(dt, &es);
  /* output rows: every rank's m (all-gather), or this rank's m of the sum */
  const int M = op == OP_AG ? R * s->m : s->m, n = s->n, K = s->k, ar = rows_a(op, R, s);
  float *out = malloc((size_t)M * n * sizeof(float));
  void *raw = malloc((size_t)M * n * es);
  float *A = malloc((size_t)ar * K * sizeof(float)), *B = malloc((size_t)n * K * sizeof(float));
  float *ref = malloc((size_t)n * sizeof(float)), *bv = calloc((size_t)n, sizeof(float));
  double *sum = malloc((size_t)M * n * sizeof(double));
  int rc = 0;
  if (!out || !raw || !A || !B || !ref || !bv || !sum) {
    CHECK(0, "host allocation failed");
    rc = -1;
    goto done;
  }
  if (cudaSetDevice(c->device) != cudaSuccess ||
      cudaMemcpy(raw, c->c[k], (size_t)M * n * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
    CHECK(0, "%s: rank %d: copying C back failed", what, c->rank);
    rc = -1;
    goto done;
  }
  ref_unpack_array(out, raw, (size_t)M * n, (int)dt);
  if (bias) gen_bias(bv, s, cs, bias_rank(op, c->rank), dt); /* else zeros */
  const double tol = dt == LOOM_FP32 ? TOL_TF32 : op != OP_AG ? TOL_16BIT_RS : TOL_16BIT;
  double w = 0;
  int bad_row = -1;
  if (op != OP_AG) { /* rows [rank m, (rank+1) m) (all-reduce: all m) of sum_s A_s B_s^T */
    const int row0 = op == OP_RS ? c->rank * M : 0;
    for (size_t e = 0; e < (size_t)M * n; e++) sum[e] = 0;
    for (int src = 0; src < R; src++) {
      gen_matrix(A, (size_t)ar * K, cs, data_call, src, 0, dt);
      gen_matrix(B, (size_t)n * K, cs, 0, src, 1, dt);
      for (int i = 0; i < M; i++) {
        const float *a = A + ((size_t)row0 + i) * K;
        for (int j = 0; j < n; j++) {
          const float *b = B + (size_t)j * K;
          double acc = 0;
          for (int p = 0; p < K; p++) acc += (double)a[p] * (double)b[p];
          sum[(size_t)i * n + j] += acc;
        }
      }
    }
    for (int i = 0; i < M; i++) {
      for (int j = 0; j < n; j++) {
        const double v = sum[(size_t)i * n + j] + (double)bv[j];
        ref[j] = (float)(act == LOOM_UNSET ? v : ref_act(ref_act_of(act), v));
      }
      const double e = ref_rel_error(out + (size_t)i * n, ref, (size_t)n);
      if (!(e <= w)) {
        w = e;
        if (!(e <= tol) && bad_row < 0) bad_row = i;
      }
    }
  }
  gen_matrix(B, (size_t)n * K, cs, 0, c->rank, 1, dt);
  for (int src = 0; op == OP_AG && src < R; src++) {
    gen_matrix(A, (size_t)s->m * K, cs, data_call, src, 0, dt);
    for (int i = 0; i < s->m; i++) {
      const float *a = A + (size_t)i * K;
      for (int j = 0; j < n; j++) {
        const float *b = B + (size_t)j * K;
        double acc = 0;
        for (int p = 0; p < K; p++) acc += (double)a[p] * (double)b[p];
        acc += (double)bv[j];
        ref[j] = (float)(act == LOOM_UNSET ? acc : ref_act(ref_act_of(act), acc));
      }
      const int row = src * s->m + i;
      const double e = ref_rel_error(out + (size_t)row * n, ref, (size_t)n);
      if (!(e <= w)) {
        w = e;
        if (!(e <= tol) && bad_row < 0) bad_row = row;
      }
    }
  }
  *worst = w;
  CHECK(bad_row < 0,
        "%s: %s: rank %d of %d: %dx%dx%d %s act %d%s call %d: row %d error %.3g > %.0e (worst %.3g)", what,
        OP_NAME[op], c->rank, R, s->m, n, K, loom_dtype_string(dt), act, bias ? " bias" : "", k, bad_row, w, tol,
        w);
  rc = bad_row < 0 ? 0 : -1;
done:
  free(out);
  free(raw);
  free(A);
  free(B);
  free(ref);
  free(bv);
  free(sum);
  return rc;
}

/* The all-gather's a_gathered of call k (A of call `data_call`): every
 * rank's A in rank order, bit for bit (the bytes that rank uploaded); one
 * CHECK. */
static int verify_gathered(const rank_ctx *c, int R, int cs, int data_call, int k, const shape_t *s,
                           loom_dtype_t dt, const char *what) {
  size_t es = 0;
  loom_dtype_size(dt, &es);
  const size_t part = (size_t)s->m * s->k;
  float *A = malloc(part * sizeof(float));
  unsigned char *want = malloc(part * es), *got = malloc((size_t)R * part * es);
  int bad = !A || !want || !got, src = -1;
  if (!bad && (cudaSetDevice(c->device) != cudaSuccess ||
               cudaMemcpy(got, c->g[k], (size_t)R * part * es, cudaMemcpyDeviceToHost) != cudaSuccess))
    bad = 1;
  for (int r = 0; r < R && !bad; r++) {
    gen_matrix(A, part, cs, data_call, r, 0, dt);
    ref_pack_array(want, A, part, (int)dt);
    if (memcmp(want, got + (size_t)r * part * es, part * es) != 0) {
      bad = 1;
      src = r;
    }
  }
  CHECK(!bad, "%s: all-gather a_gathered: rank %d of %d, %dx%d %s call %d: rank %d's rows differ (or a copy failed)",
        what, c->rank, R, s->m, s->k, loom_dtype_string(dt), k, src);
  free(A);
  free(want);
  free(got);
  return bad ? -1 : 0;
}

static loom_result_t call_op(int op, loom_comm_t comm, const loom_gemm_args_t *a, cudaStream_t s) {
  return op == OP_RS ? loom_gemm_rs(comm, a, s) : op == OP_AR ? loom_gemm_ar(comm, a, s) : loom_ag_gemm(comm, a, s);
}

/* All-reduce: rank 0's C of call k is the same bits as every other rank's
 * (one process holds every rank: cs[0 .. R-1]); one CHECK. */
static int same_everywhere(const rank_ctx *cs, int R, int k, size_t bytes, const char *what) {
  unsigned char *c0 = malloc(bytes), *ci = malloc(bytes);
  int bad = !c0 || !ci, rank = -1;
  if (!bad && (cudaSetDevice(cs[0].device) != cudaSuccess ||
               cudaMemcpy(c0, cs[0].c[k], bytes, cudaMemcpyDeviceToHost) != cudaSuccess))
    bad = 1;
  for (int i = 1; i < R && !bad; i++) {
    if (cudaSetDevice(cs[i].device) != cudaSuccess ||
        cudaMemcpy(ci, cs[i].c[k], bytes, cudaMemcpyDeviceToHost) != cudaSuccess || memcmp(c0, ci, bytes)) {
      bad = 1;
      rank = i;
    }
  }
  CHECK(!bad, "%s: all-reduce call %d: rank %d's C differs from rank 0's (or a copy failed)", what, k, rank);
  free(c0);
  free(ci);
  return bad ? -1 : 0;
}

static int case_allowed(int R, int si) {
  return si < NSHAPES - 1 || R <= 2;
}

/* Every case on the nl ranks this process drives (all R, or one). */
static int run_cases(rank_ctx *cs, int nl, int R, const char *what) {
  /* reduce-scatter's A: R m rows */
  const size_t max_elems = (size_t)R * MAX_ELEMS_A > MAX_ELEMS_B ? (size_t)R * MAX_ELEMS_A : MAX_ELEMS_B;
  float *tmp = malloc(max_elems * sizeof(float));
  void *packed = malloc(max_elems * sizeof(float));
  if (!tmp || !packed) {
    CHECK(0, "host allocation");
    free(tmp);
    free(packed);
    return -1;
  }
  int rc = 0, ncase = 0;
  double worst_all = 0;
  for (int op = 0; op < NUM_OPS && rc == 0; op++)
  for (int si = 0; si < NSHAPES && rc == 0; si++) {
    if (!case_allowed(R, si)) continue;
    for (int di = 0; di < 3 && rc == 0; di++) {
      const shape_t *s = &SHAPES[si];
      const loom_dtype_t dt = DTYPES[di];
      const int act = ACTS[(si + di + op) % 4];
      const int bias = (si + di + op) % 2; /* every other case with a bias (loom_gemm_args_t.bias) */
      const int id = op * 64 + si * 3 + di, ar = rows_a(op, R, s);
      const size_t c_elems = (size_t)(op == OP_AG ? R : 1) * s->m * s->n;
      size_t es = 0;
      loom_dtype_size(dt, &es);
      for (int i = 0; i < nl && rc == 0; i++) {
        for (int k = 0; k < CALLS && rc == 0; k++) rc = upload(&cs[i], id, k, s, ar, dt, tmp, packed);
        if (rc == 0 && bias) rc = upload_bias(&cs[i], id, op, s, dt, tmp, packed);
        for (int k = 0; k < CALLS && rc == 0; k++)
          if (cudaMemset(cs[i].c[k], 0xFF, c_elems * es) != cudaSuccess ||
              (op == OP_AG && cudaMemset(cs[i].g[k], 0xFF, (size_t)R * ar * s->k * es) != cudaSuccess))
            rc = -1;
        if (cudaDeviceSynchronize() != cudaSuccess) rc = -1;
      }
      if (rc != 0) break;
      /* the kernel's tiles, case by case: the automatic choice (the
       * swapped decode tile where a group has <= 16 rows, the 64 x 128
       * one where <= 64, else the 128 x 128 one for every shape here),
       * then two forced: the ping-pong and the wide tile, or for {13, ..}
       * (m = 1 keeps them) the automatic choice again and the 64 x 128
       * decode tile, so that every dtype takes the swapped one */
      const char *tile = id % 3 == 0 ? NULL : id % 3 == 1 ? "narrow" : "wide";
      if (s->m > 1 && s->m <= 16 && tile) tile = id % 3 == 1 ? NULL : "dec64";
      if (tile)
        setenv("LOOM_AG_TILE", tile, 1);
      else
        unsetenv("LOOM_AG_TILE");
      setenv("LOOM_RS_CHUNKS", id / 2 % 2 ? "3" : "1", 1);
      /* one group (the reduce-scatter's and all-reduce's one-tile mode,
       * the all-gather's one-group mode) wherever the rows allow it (=1:
       * above 128 rows too, which B this small would not take), or a group
       * per owner / source */
      setenv("LOOM_RS_ONE_TILE", id / 8 % 2 ? "0" : "1", 1);
      /* the all-gather's one group also in every di = 1 case, there in
       * its lockstep form (LOOM_AG_LOCKSTEP: every task waits for every
       * source; m = 128 and m = 64 here) */
      setenv("LOOM_AG_ONE_GROUP", id / 8 % 2 && di != 1 ? "0" : "1", 1);
      setenv("LOOM_AG_LOCKSTEP", di == 1 ? "1" : "0", 1);
      /* the blocks' first tasks one per TPC (hop_block_slot), or in index order */
      setenv("LOOM_COLL_SPREAD", id / 16 % 2 ? "0" : "1", 1);
      /* B ahead of the one group's / one tile's readiness waits, or not */
      setenv("LOOM_COLL_B_AHEAD", id % 2 ? "0" : "1", 1);
      /* the all-gather's bulk pushes: a piece counted while the next one
       * flies, or each at once */
      setenv("LOOM_AG_DEFER", id / 2 % 2 ? "0" : "1", 1);
      /* the all-reduce's one-shot mode: automatic (small partials), forced on, forced off */
      if (id / 3 % 3 == 0)
        unsetenv("LOOM_AR_ONE_SHOT");
      else
        setenv("LOOM_AR_ONE_SHOT", id / 3 % 3 == 1 ? "1" : "0", 1);
      /* the one-tile and one-shot modes' tagged partials (16-bit outputs):
       * automatic (on where they fit), or off */
      if (id / 5 % 2)
        setenv("LOOM_LL", "0", 1);
      else
        unsetenv("LOOM_LL");
      if (id / 4 % 2) /* one side-role item per tile, or the automatic slices (up to 8 here) */
        setenv("LOOM_RS_SLICES", "1", 1);
      else
        unsetenv("LOOM_RS_SLICES");
      /* two calls back to back, no host sync between them */
      for (int k = 0; k < CALLS; k++)
        for (int i = 0; i < nl; i++) {
          cudaSetDevice(cs[i].device);
          loom_gemm_args_t a = args_of(&cs[i], k, s, ar, dt, act, bias);
          if (op == OP_AG && k == 1) a.a_gathered = cs[i].g[k]; /* call 0 without, call 1 with */
          const loom_result_t r = call_op(op, cs[i].comm, &a, cs[i].stream);
          CHECK(r == LOOM_SUCCESS, "%s: rank %d %s: %s", what, cs[i].rank, OP_NAME[op], loom_last_error());
          if (r != LOOM_SUCCESS) rc = -1;
        }
      for (int i = 0; i < nl; i++) {
        cudaSetDevice(cs[i].device);
        const cudaError_t e = cudaStreamSynchronize(cs[i].stream);
        CHECK(e == cudaSuccess, "%s: rank %d sync: %s", what, cs[i].rank, cudaGetErrorString(e));
        if (e != cudaSuccess || check_no_async_error(cs[i].comm, cs[i].rank, what) != 0) rc = -1;
        /* the last call's phase stamps (the CLI's "phases end at"): every
         * block started, ran its roles and ended, in that order */
        double ph[LOOM_COLL_STAMPS];
        const loom_result_t pr = loom_coll_phases(cs[i].comm, ph);
        const int ordered = ph[LOOM_COLL_STAMP_END] > 0 && ph[LOOM_COLL_STAMP_END] >= ph[LOOM_COLL_STAMP_GEMM] &&
                            ph[LOOM_COLL_STAMP_END] >= ph[LOOM_COLL_STAMP_SIDE] &&
                            ph[LOOM_COLL_STAMP_GEMM] >= ph[LOOM_COLL_STAMP_BEGIN] &&
                            ph[LOOM_COLL_STAMP_END] < 10e6;
        CHECK(pr == LOOM_SUCCESS && ordered, "%s: rank %d phase stamps: start %.1f gemm %.1f side %.1f end %.1f us",
              what, cs[i].rank, ph[0], ph[1], ph[2], ph[3]);
        if (pr != LOOM_SUCCESS || !ordered) rc = -1;
      }
      if (rc != 0) break;
      for (int i = 0; i < nl; i++)
        for (int k = 0; k < CALLS; k++) {
          double w = 0;
          if (verify(&cs[i], op, R, id, k, k, s, dt, act, bias, what, &w) != 0) rc = -1;
          if (w > worst_all) worst_all = w;
          if (op == OP_AG && k == 1 && verify_gathered(&cs[i], R, id, k, k, s, dt, what) != 0) rc = -1;
        }
      for (int k = 0; k < CALLS && op == OP_AR && nl == R && R > 1; k++)
        if (same_everywhere(cs, R, k, c_elems * es, what) != 0) rc = -1;
      ncase++;
    }
  }
  unsetenv("LOOM_AG_TILE");
  unsetenv("LOOM_RS_CHUNKS");
  unsetenv("LOOM_RS_SLICES");
  unsetenv("LOOM_RS_ONE_TILE");
  unsetenv("LOOM_AG_ONE_GROUP");
  unsetenv("LOOM_AG_LOCKSTEP");
  unsetenv("LOOM_COLL_SPREAD");
  unsetenv("LOOM_COLL_B_AHEAD");
  unsetenv("LOOM_AG_DEFER");
  unsetenv("LOOM_AR_ONE_SHOT");
  unsetenv("LOOM_LL");
  printf("  %s R=%d: %d cases (three operators) x %d calls, worst row error %.3g\n", what, R, ncase, CALLS,
         worst_all);
  free(tmp);
  free(packed);
  return rc;
}

/* One call per rank captured into a CUDA graph (one kernel node each),
 * replayed twice with new A in between; verified after each replay. */
static int run_graph_case(rank_ctx *cs, int R) {
  const shape_t *s = &SHAPES[0];
  const loom_dtype_t dt = LOOM_BF16;
  const int id = 100;
  cudaGraph_t graph[MAX_RANKS];
  cudaGraphExec_t exec[MAX_RANKS];
  float *tmp = malloc(MAX_ELEMS_A * sizeof(float));
  void *packed = malloc(MAX_ELEMS_A * sizeof(float));
  for (int i = 0; i < R; i++) {
    if (upload(&cs[i], id, 0, s, s->m, dt, tmp, packed) != 0) return -1;
    CUDA_T(cudaStreamSynchronize(cs[i].stream));
    CUDA_T(cudaStreamBeginCapture(cs[i].stream, cudaStreamCaptureModeThreadLocal));
    const loom_gemm_args_t a = args_of(&cs[i], 0, s, s->m, dt, LOOM_UNSET, 0);
    const loom_result_t r = loom_ag_gemm(cs[i].comm, &a, cs[i].stream);
    CUDA_T(cudaStreamEndCapture(cs[i].stream, &graph[i]));
    CHECK(r == LOOM_SUCCESS, "graph: rank %d loom_ag_gemm: %s", i, loom_last_error());
    if (r != LOOM_SUCCESS) return -1;
    size_t nodes = 0;
    CUDA_T(cudaGraphGetNodes(graph[i], NULL, &nodes));
    CHECK(nodes == 1, "graph: rank %d: %zu nodes, want 1 kernel", i, nodes);
    CUDA_T(cudaGraphInstantiate(&exec[i], graph[i], 0));
  }
  int rc = 0;
  for (int rep = 0; rep < 2 && rc == 0; rep++) {
    for (int i = 0; i < R; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      /* new A each replay: the data of "call" rep + 2 into buffer 0 */
      gen_matrix(tmp, (size_t)s->m * s->k, id, rep + 2, cs[i].rank, 0, dt);
      ref_pack_array(packed, tmp, (size_t)s->m * s->k, (int)dt);
      CUDA_T(cudaMemcpy(cs[i].a[0], packed, (size_t)s->m * s->k * 2, cudaMemcpyHostToDevice));
      CUDA_T(cudaMemset(cs[i].c[0], 0xFF, (size_t)R * s->m * s->n * 2));
    }
    for (int i = 0; i < R; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      CUDA_T(cudaGraphLaunch(exec[i], cs[i].stream));
    }
    for (int i = 0; i < R; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      CUDA_T(cudaStreamSynchronize(cs[i].stream));
      if (check_no_async_error(cs[i].comm, i, "graph") != 0) rc = -1;
    }
    for (int i = 0; i < R && rc == 0; i++) {
      double w = 0;
      if (verify(&cs[i], OP_AG, R, id, rep + 2, 0, s, dt, LOOM_UNSET, 0, "graph replay", &w) != 0) rc = -1;
    }
  }
  for (int i = 0; i < R; i++) {
    cudaGraphExecDestroy(exec[i]);
    cudaGraphDestroy(graph[i]);
  }
  free(tmp);
  free(packed);
  return rc;
}

/* Fault runs of one world size: FAULT_SHAPE[j] for runs 1 + j NUM_OPS ..
 * (j + 1) NUM_OPS, one operator each: a group per source / owner (m =
 * 100; the all-reduce two-shot), and the decode forms (m = 20: the
 * all-gather's one group and the one-tile mode up to 6 ranks, the decode
 * tile, the all-reduce's one-shot mode). */
static const int FAULT_SHAPE[] = {0, 2};
#define FAULT_RUNS (NUM_OPS * (int)(sizeof FAULT_SHAPE / sizeof FAULT_SHAPE[0]))

/* Fault run f (0 .. FAULT_RUNS - 1): the last rank never calls operator
 * f % NUM_OPS; the others must time out naming it. */
static int run_fault_case(rank_ctx *cs, int nl, int R, int f) {
  const int op = f % NUM_OPS;
  const shape_t *s = &SHAPES[FAULT_SHAPE[f / NUM_OPS]];
  float *tmp = malloc(MAX_ELEMS_A * sizeof(float));
  void *packed = malloc(MAX_ELEMS_A * sizeof(float));
  int rc = 0;
  /* the all-reduce: two-shot at m = 100 (forced), one-shot at m = 20 (its automatic choice) */
  if (f / NUM_OPS == 0)
    setenv("LOOM_AR_ONE_SHOT", "0", 1);
  else
    unsetenv("LOOM_AR_ONE_SHOT");
  const double t0 = now_s();
  for (int i = 0; i < nl; i++) {
    if (cs[i].rank == R - 1) continue;
    const int ar = rows_a(op, R, s);
    if (upload(&cs[i], 200, 0, s, ar, LOOM_BF16, tmp, packed) != 0) rc = -1;
    const loom_gemm_args_t a = args_of(&cs[i], 0, s, ar, LOOM_BF16, LOOM_UNSET, 0);
    LOOM_T(call_op(op, cs[i].comm, &a, cs[i].stream));
  }
  for (int i = 0; i < nl; i++) {
    if (cs[i].rank == R - 1) continue;
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaStreamSynchronize(cs[i].stream));
    const double dt = now_s() - t0;
    loom_result_t ae = LOOM_SUCCESS;
    LOOM_T(loom_comm_get_async_error(cs[i].comm, &ae));
    char want[32];
    snprintf(want, sizeof want, "peer %d", R - 1);
    /* the first rank to time out stops the others: they report its fault */
    CHECK((ae == LOOM_TIMEOUT || ae == LOOM_PEER_ERROR) && strstr(loom_last_error(), want) != NULL,
          "fault (%s, m = %d): rank %d: async error %s (%s), want LOOM_TIMEOUT (or LOOM_PEER_ERROR) naming %s",
          OP_NAME[op], s->m, cs[i].rank,
          loom_result_string(ae), loom_last_error(), want);
    CHECK(dt < FAULT_TIMEOUT_MS / 1e3 + 2.0, "fault: rank %d took %.1f s", cs[i].rank, dt);
  }
  unsetenv("LOOM_AR_ONE_SHOT");
  free(tmp);
  free(packed);
  return rc;
}

/* ---- one process ------------------------------------------------------------ */

static int single_process(int R, int fault) {
  rank_ctx cs[MAX_RANKS];
  loom_comm_t comms[MAX_RANKS] = {0};
  memset(cs, 0, sizeof cs);
  loom_comm_config_t cfg = test_config(R, fault ? FAULT_TIMEOUT_MS : LOOM_UNSET);
  if (ranks_world_create(g_mode, R, &cfg, comms) != 0) return -1;
  int rc = 0;
  for (int i = 0; i < R && rc == 0; i++) {
    cs[i].comm = comms[i];
    cs[i].rank = i;
    cs[i].device = ranks_device(g_mode, i);
    rc = ctx_setup(&cs[i], R);
  }
  if (rc == 0) {
    if (fault) {
      rc = run_fault_case(cs, R, R, fault - 1);
    } else {
      rc = run_cases(cs, R, R, g_mode == RANKS_LOOPBACK ? "loopback" : "single-process");
      if (rc == 0) rc = run_graph_case(cs, R);
    }
  }
  for (int i = 0; i < R; i++) ctx_free(&cs[i]);
  const loom_result_t r = loom_comm_destroy_all(R, comms);
  CHECK(r == LOOM_SUCCESS, "destroy_all: %s", loom_last_error());
  return rc;
}

/* ---- one process per GPU ------------------------------------------------------ */

static int child_rank(const ranks_child *rc, void *arg) {
  const int rank = rc->rank, R = rc->n, fault = *(const int *)arg;
  alarm(CHILD_DEADLINE_S);
  ncclUniqueId id;
  if (ranks_unique_id(rc, &id) != 0) return 1;
  rank_ctx c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.device = rank;
  ncclComm_t nccl;
  if (cudaSetDevice(rank) != cudaSuccess || ncclCommInitRank(&nccl, R, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL init failed\n", rank);
    return 1;
  }
  loom_comm_config_t cfg = test_config(R, fault ? FAULT_TIMEOUT_MS : LOOM_UNSET);
  loom_result_t r = loom_comm_create(nccl, &cfg, &c.comm);
  CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_create: %s", rank, loom_last_error());
  if (r == LOOM_SUCCESS && ctx_setup(&c, R) == 0) {
    if (fault)
      run_fault_case(&c, 1, R, fault - 1);
    else
      run_cases(&c, 1, R, "multi-process");
  }
  ctx_free(&c);
  r = loom_comm_destroy(c.comm);
  CHECK(r == LOOM_SUCCESS, "rank %d destroy: %s", rank, loom_last_error());
  ncclCommDestroy(nccl);
  char name[64];
  snprintf(name, sizeof name, PROG " multi rank %d/%d%s", rank, R, fault ? " fault" : "");
  (void)NUM_OPS;
  return check_summary(name);
}

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (ranks_mode_parse(argc, argv, PROG, "", &g_mode) != 0) return RANKS_USAGE_EXIT;
  char name[64];
  snprintf(name, sizeof name, "%s %s", PROG, RANKS_MODE_NAMES[g_mode]);
  alarm(3 * CHILD_DEADLINE_S); /* a hang becomes a failure, never a stall */
  const int ngpu = ranks_mode_gpu_count(g_mode);
  if (ngpu == 0) {
    CHECK_SKIP("no GPU visible");
    return check_summary(name);
  }
  printf("%s: %d GPUs visible, seed 0x%llx\n", name, ngpu, (unsigned long long)SEED);
  const int sizes[] = {1, 2, 4, 8};
  for (int i = g_mode == RANKS_LOOPBACK ? 1 : 0; i < 4; i++) {
    const int R = sizes[i];
    if (!ranks_world_fits(g_mode, R, ngpu)) {
      CHECK_SKIP("%d GPUs needed, %d visible", R, ngpu);
      continue;
    }
    for (int fault = 0; fault <= (R > 1 ? FAULT_RUNS : 0); fault++) { /* 0: cases; 1 + f: fault run f */
      const double t = now_s();
      if (g_mode == RANKS_MULTI)
        ranks_run(R, child_rank, &fault, fault ? "fault" : "cases");
      else
        single_process(R, fault);
      if (fault)
        printf("  R=%d fault of %s (m = %d) done in %.1f s (%d failed so far)\n", R, OP_NAME[(fault - 1) % NUM_OPS],
               SHAPES[FAULT_SHAPE[(fault - 1) / NUM_OPS]].m, now_s() - t, check_failed_);
      else
        printf("  R=%d cases done in %.1f s (%d failed so far)\n", R, now_s() - t, check_failed_);
      fflush(stdout);
    }
  }
  return check_summary(name);
}
