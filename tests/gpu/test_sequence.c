/*
 * GPU test of buffer reuse across calls and operators on ONE communicator:
 * a long random sequence of exchanges and MoE forwards of three different
 * layers, launched back to back on one stream per rank with no host
 * synchronisation between calls, must give bitwise the results of the same
 * calls run in isolation. World sizes 1, 2, 4 and 8 (sizes the machine
 * lacks are skipped; R = 1 still exercises the reuse rule locally).
 *
 *   test_sequence single [--calls N] [--seed S]  one process drives every
 *                                                GPU (loom_comm_create_all)
 *   test_sequence multi  [--calls N] [--seed S]  one process per GPU
 *                                                (ranks.h)
 *   test_sequence loopback [...]                 one process, 2, 4 and 8
 *                                                ranks on device 0
 *
 * The sequence (default SEQ_DEFAULT_CALLS calls; every rank builds the same
 * one from the seed) mixes eight operators:
 *   r  loom_exchange ring        bytes per peer from BPP_LIST (up to 6 MiB)
 *   a  loom_exchange all-to-all  same sizes, per peer
 *   A  MoE layer A   bf16, H 256, F 512, E = 4R, top_k 2, swiglu
 *   B  MoE layer B   fp16, H 512, F 256, E = 8R, top_k 4, silu,
 *                    normalize_top_k 0
 *   C  MoE layer C   fp32 (TF32), H 192, F 128, E = 2R, top_k min(3, E),
 *                    gelu, capacity_factor 1.25 (drops; top_k > E/R)
 *   g  loom_ag_gemm      bf16, m drawn in [1, AG_MAX_M] per call (the same
 *                        on every rank), n AG_N, k AG_K, no activation or
 *                        ReLU
 *   s  loom_gemm_rs      the same weights and draws; A of R m rows, C m rows
 *   u  loom_gemm_ar      the same; A and C of m rows (uneven owners)
 * Its first 65 calls are a de Bruijn sequence over the eight operators (in a
 * seed-dependent order), so every ordered pair of operators, a pair of the
 * same operator included, occurs back to back at least once; the rest are
 * drawn at random. Each MoE call draws per rank its token count in [0,
 * max_tokens] (on 3 calls in 4 one rank gets 0 and another the maximum; at
 * R = 1 the count cycles through 0, max, random), caller routing (1 in 3)
 * or the fused gate, and whether it asks for expert_ids_out, weights_out
 * and stats; with 0 tokens it passes x = y = NULL half the time. Every call
 * has its own input and output buffers; outputs are poisoned and carry a
 * guard (one row or 256 bytes) past their end.
 *
 * Checks:
 *   - the back-to-back run ends without an async error;
 *   - every exchange's recvbuf equals what the senders sent (a pure
 *     function of seed, call, source and destination), byte for byte, and
 *     its guard is untouched;
 *   - every MoE call is then run again in isolation (launch on every rank,
 *     drain every stream, meet) into fresh outputs, and y (all rows plus
 *     the guard), expert_ids_out, weights_out and stats (rows and bytes;
 *     not the phase times) must be bitwise equal to the back-to-back run's;
 *     y rows must be finite (so written), the guard row still poison;
 *     routing out equals the caller's routing, or ref_moe_gate's ids for
 *     the fused gate (weights within TOL_WEIGHTS); stats rows add up to
 *     tokens * top_k;
 *   - every collective GEMM is run again in isolation too, and its C (R m
 *     rows, m rows) must be bitwise equal to the back-to-back run's, finite,
 *     with the guard row past it still poison.
 *
 * A watchdog (alarm) names the step in progress and ends the process when
 * one takes longer than STEP_DEADLINE_S; every wait in the test is bounded.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "reference/reference.h"
#include "../check.h"
#include "gpu_check.h"
#include "ranks.h"
#include "test_data.h"
#include "watchdog.h"

_Static_assert(LOOM_FP32 == 0 && LOOM_BF16 == 1 && LOOM_FP16 == 2,
               "ref_*_array formats follow loom_dtype_t");

#define MAX_RANKS 8
#define SEQ_DEFAULT_CALLS 90
#define SEQ_MAX_CALLS 4096
#define GUARD_BYTES 256 /* past every exchange recvbuf */
#define POLL_NS 100000
#define TOL_WEIGHTS 1e-6 /* fused gate's weights against ref_moe_gate */
#define STREAM_DEADLINE_S 120.0
#define BARRIER_DEADLINE_S 120.0
#define STEP_DEADLINE_S 300
#define CHILD_DEADLINE_S 1800

static const size_t BPP_LIST[] = {1000, 65536 + 16, 1u << 20, (3u << 20) + 4, 6u << 20};
#define NUM_BPP (sizeof BPP_LIST / sizeof BPP_LIST[0])
#define MAX_BPP ((size_t)6 << 20)

static uint64_t g_seed = 0x73657175656e6365ull; /* "sequence" */

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* ---- deterministic random numbers (splitmix64) ---------------------------------------------- */

enum { KIND_SEQ = 1, KIND_GATE, KIND_W1, KIND_W2, KIND_X, KIND_ROUTE };

static rng_t rng_make(uint64_t key, int kind, int index) {
  return rng_stream(g_seed, key, kind, index);
}

/* ---- layers ----------------------------------------------------------------------------------- */

enum { OP_RING, OP_A2A, OP_MOE_A, OP_MOE_B, OP_MOE_C, OP_AG, OP_RS, OP_AR, NUM_OPS };
#define NUM_LAYERS 3
static const char OP_LETTER[NUM_OPS] = {'r', 'a', 'A', 'B', 'C', 'g', 's', 'u'};
static int is_exchange(int op) { return op == OP_RING || op == OP_A2A; }
static int is_moe(int op) { return op >= OP_MOE_A && op <= OP_MOE_C; }
static int is_coll(int op) { return op >= OP_AG && op <= OP_AR; }

/* The collective GEMMs' calls: bf16, B [AG_N x AG_K] per rank, m drawn per
 * call. All-gather: A m rows, C = act([A_0; ...] B_r^T), R m rows.
 * Reduce-scatter: A R m rows, C m rows of the sum. All-reduce: A and C m
 * rows. */
#define AG_MAX_M 384
#define AG_N 264
#define AG_K 520
static const char *const COLL_NAME[3] = {"all-gather GEMM", "GEMM reduce-scatter", "GEMM all-reduce"};
static size_t coll_rows_a(int op, int R, int m) { return (size_t)(op == OP_RS ? R : 1) * (size_t)m; }
static size_t coll_rows_c(int op, int R, int m) { return (size_t)(op == OP_AG ? R : 1) * (size_t)m; }

typedef struct {
  int dtype, act, H, F, experts_per_rank, k, Tmax, normalize;
  double capacity;
} layer_spec;

static const layer_spec LAYERS[NUM_LAYERS] = {
    {LOOM_BF16, LOOM_ACT_SWIGLU, 256, 512, 4, 2, 1024, 1, 0.0},
    {LOOM_FP16, LOOM_ACT_SILU, 512, 256, 8, 4, 640, 0, 0.0},
    {LOOM_FP32, LOOM_ACT_GELU, 192, 128, 2, 3, 300, 1, 1.25},
};

static loom_moe_config_t layer_config(int l, int R) {
  const layer_spec *s = &LAYERS[l];
  loom_moe_config_t c = LOOM_MOE_CONFIG_INIT;
  c.hidden = s->H;
  c.ffn = s->F;
  c.num_experts = (int64_t)s->experts_per_rank * R;
  c.top_k = s->k < c.num_experts ? s->k : c.num_experts;
  c.max_tokens_per_rank = s->Tmax;
  c.activation = s->act;
  c.dtype = s->dtype;
  c.normalize_top_k = s->normalize;
  c.capacity_factor = s->capacity;
  return c;
}

/* ---- the sequence ----------------------------------------------------------------------------- */

typedef struct {
  int op;
  size_t bpp;                 /* exchange: bytes per peer */
  int tokens[MAX_RANKS];      /* MoE: per rank */
  int caller[MAX_RANKS];      /* caller routing (else the fused gate) */
  int outs[MAX_RANKS];        /* expert_ids_out, weights_out, stats */
  int null_io[MAX_RANKS];     /* 0 tokens passed as x = y = NULL */
  int ag_m, ag_act;           /* collective GEMMs: m (as above), activation */
} seq_call;

/* de Bruijn sequence B(k, 2) (Fredricksen-Kessler-Maiorana), cyclic,
 * k*k symbols; out must hold k*k. */
typedef struct {
  int a[8], *out, len, k;
} db_state;

static void db_rec(db_state *s, int t, int p) {
  if (t > 2) {
    if (2 % p == 0)
      for (int j = 1; j <= p; j++) s->out[s->len++] = s->a[j];
    return;
  }
  s->a[t] = s->a[t - p];
  db_rec(s, t + 1, p);
  for (int j = s->a[t - p] + 1; j < s->k; j++) {
    s->a[t] = j;
    db_rec(s, t + 1, t);
  }
}

static void gen_sequence(int R, int ncalls, seq_call *calls) {
  rng_t g = rng_make((uint64_t)R << 48, KIND_SEQ, 0);
  int perm[NUM_OPS], db[NUM_OPS * NUM_OPS + 1];
  for (int i = 0; i < NUM_OPS; i++) perm[i] = i;
  for (int i = NUM_OPS - 1; i > 0; i--) {
    const int q = rng_int(&g, i + 1), t = perm[i];
    perm[i] = perm[q];
    perm[q] = t;
  }
  db_state s;
  memset(&s, 0, sizeof s);
  s.out = db;
  s.k = NUM_OPS;
  db_rec(&s, 1, 1);
  db[s.len] = db[0]; /* linear: the wrap-around pair too */
  const int ndb = s.len + 1;
  for (int i = 0; i < ncalls; i++) {
    seq_call *c = &calls[i];
    memset(c, 0, sizeof *c);
    c->op = i < ndb ? perm[db[i]] : rng_int(&g, NUM_OPS);
    if (is_exchange(c->op)) {
      c->bpp = BPP_LIST[rng_int(&g, (int)NUM_BPP)];
      continue;
    }
    if (is_coll(c->op)) {
      c->ag_m = 1 + rng_int(&g, AG_MAX_M);
      c->ag_act = rng_int(&g, 2) ? LOOM_UNSET : LOOM_ACT_RELU;
      continue;
    }
    const int Tmax = LAYERS[c->op - OP_MOE_A].Tmax;
    for (int r = 0; r < R; r++) {
      c->tokens[r] = rng_int(&g, Tmax + 1);
      c->caller[r] = rng_int(&g, 3) == 0;
      c->outs[r] = rng_int(&g, 2);
    }
    if (R == 1) {
      c->tokens[0] = i % 3 == 0 ? 0 : i % 3 == 1 ? Tmax : c->tokens[0];
    } else if (rng_int(&g, 4) != 0) {
      const int z = rng_int(&g, R), m = (z + 1 + rng_int(&g, R - 1)) % R;
      c->tokens[z] = 0;
      c->tokens[m] = Tmax;
    }
    for (int r = 0; r < R; r++) c->null_io[r] = c->tokens[r] == 0 && rng_int(&g, 2);
  }
}

/* ---- data ------------------------------------------------------------------------------------- */

/* 8-byte word w of what `src` sends `dst` in call `call`. */
static uint64_t payload_word(int call, int src, int dst, size_t w) {
  return ref_splitmix64(g_seed ^ ((uint64_t)src << 58) ^ ((uint64_t)dst << 52) ^
                        ((uint64_t)call << 36) ^ (uint64_t)w);
}

static void payload(int call, int src, int dst, size_t bpp, unsigned char *out) {
  for (size_t b = 0; b < bpp; b += 8) {
    const uint64_t w = payload_word(call, src, dst, b >> 3);
    memcpy(out + b, &w, bpp - b < 8 ? bpp - b : 8);
  }
}

static uint64_t layer_key(int l, int R) { return ((uint64_t)R << 56) ^ ((uint64_t)(l + 1) << 44); }

/* gate_w [H x E] of layer l (host floats, rounded to the dtype). */
static void gen_gate(int l, int R, float *g) {
  const loom_moe_config_t c = layer_config(l, R);
  const size_t n = (size_t)c.hidden * (size_t)c.num_experts;
  const double s = 2.0 / sqrt((double)c.hidden);
  rng_t r = rng_make(layer_key(l, R), KIND_GATE, 0);
  for (size_t i = 0; i < n; i++) g[i] = (float)(rng_sym(&r) * s);
  ref_round_array(g, n, c.dtype);
}

/* x of (call, rank) for layer l: T rows in [-1, 1), rounded. */
static void gen_x(int l, int R, int call, int rank, int T, float *x) {
  const loom_moe_config_t c = layer_config(l, R);
  const size_t n = (size_t)T * (size_t)c.hidden;
  rng_t r = rng_make(layer_key(l, R) ^ ((uint64_t)call << 20), KIND_X, rank);
  for (size_t i = 0; i < n; i++) x[i] = (float)rng_sym(&r);
  ref_round_array(x, n, c.dtype);
}

/* Caller routing of (call, rank): k distinct ids per token, weights in
 * [0.05, 1). */
static void gen_routing(int l, int R, int call, int rank, int T, int32_t *ids, float *wts) {
  const loom_moe_config_t c = layer_config(l, R);
  const int E = (int)c.num_experts, k = (int)c.top_k;
  int *pool = malloc((size_t)E * sizeof *pool);
  if (pool == NULL) return;
  rng_t r = rng_make(layer_key(l, R) ^ ((uint64_t)call << 20), KIND_ROUTE, rank);
  gen_random_routing(&r, E, k, T, pool, ids, wts);
  free(pool);
}

/* ---- per-rank state --------------------------------------------------------------------------- */

/* One call's buffers on one rank. */
typedef struct {
  void *send, *recv;             /* exchange; recv has GUARD_BYTES past the data */
  void *x, *y, *y_iso;           /* MoE: x [max(T,1) rows]; y, y_iso [T + 1 rows];
                                    collective GEMM: A [coll_rows_a x AG_K], C [coll_rows_c + 1
                                    rows x AG_N] */
  int32_t *ids_in, *ids_out, *ids_iso;
  float *wts_in, *wts_out, *wts_iso;
  loom_moe_stats_t *stats, *stats_iso;
} call_bufs;

typedef struct {
  loom_comm_t comm;
  int rank, device;
  cudaStream_t stream;
  loom_moe_t moe[NUM_LAYERS];
  void *gate_w[NUM_LAYERS], *w1[NUM_LAYERS], *w2[NUM_LAYERS];
  void *ag_b;      /* the collective GEMMs' weights [AG_N x AG_K], bf16 */
  call_bufs *bufs; /* [ncalls] */
} rank_ctx;

typedef struct {
  ranks_barrier_t barrier;
} shared_t;

typedef struct {
  int multi, R, nlocal, ncalls;
  ncclComm_t nccl;
  shared_t *sh;
  const seq_call *calls;
  rank_ctx cs[MAX_RANKS];
} world_t;

static int world_barrier(world_t *w, const char *what) {
  if (!w->multi) return 0;
  return ranks_barrier_wait(&w->sh->barrier, w->R, w->cs[0].rank, what, BARRIER_DEADLINE_S);
}

static int wait_streams(world_t *w, const char *what) {
  const double end = now_s() + STREAM_DEADLINE_S;
  for (int i = 0; i < w->nlocal; i++) {
    CUDA_T(cudaSetDevice(w->cs[i].device));
    cudaError_t e;
    while ((e = cudaStreamQuery(w->cs[i].stream)) == cudaErrorNotReady) {
      if (now_s() > end) {
        CHECK(0, "%s: rank %d's stream still busy after %.0f s", what, w->cs[i].rank,
              STREAM_DEADLINE_S);
        return -1;
      }
      sleep_ns(POLL_NS);
    }
    CHECK(e == cudaSuccess, "%s: rank %d stream: %s", what, w->cs[i].rank, cudaGetErrorString(e));
    if (e != cudaSuccess) return -1;
  }
  return 0;
}

/* Async error of each local rank after its stream drained: none wanted. */
static int check_no_async(world_t *w, const char *what) {
  int ok = 1;
  for (int i = 0; i < w->nlocal; i++)
    ok &= check_no_async_error(w->cs[i].comm, w->cs[i].rank, what) == 0;
  return ok ? 0 : -1;
}

/* Workspace and signal slots for every layer and the largest exchanges. */
static int comm_config(int R, loom_comm_config_t *out) {
  size_t bytes = 0, b = 0;
  int slots = 64, s = 0;
  for (int l = 0; l < NUM_LAYERS; l++) {
    const loom_moe_config_t c = layer_config(l, R);
    LOOM_T(loom_moe_workspace_bytes(&c, R, &b, &s));
    if (b > bytes) bytes = b;
    if (s > slots) slots = s;
  }
  LOOM_T(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, R, MAX_BPP, &b));
  if (b > bytes) bytes = b;
  LOOM_T(loom_exchange_workspace_bytes(LOOM_EXCHANGE_ALLTOALL, R, MAX_BPP, &b));
  if (b > bytes) bytes = b;
  loom_gemm_args_t ag = LOOM_GEMM_ARGS_INIT;
  ag.m = AG_MAX_M;
  ag.n = AG_N;
  ag.k = AG_K;
  LOOM_T(loom_ag_gemm_workspace_bytes(&ag, R, &b, &s));
  if (b > bytes) bytes = b;
  if (s > slots) slots = s;
  LOOM_T(loom_gemm_ar_workspace_bytes(&ag, R, &b, &s));
  if (b > bytes) bytes = b;
  if (s > slots) slots = s;
  ag.m = (int64_t)R * AG_MAX_M;
  LOOM_T(loom_gemm_rs_workspace_bytes(&ag, R, &b, &s));
  if (b > bytes) bytes = b;
  if (s > slots) slots = s;
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  c.workspace_bytes = (int64_t)bytes;
  c.signal_slots = slots;
  *out = c;
  return 0;
}

/* Layers A, B, C with this rank's experts (weights in the default layout,
 * OUT_IN); every call's buffers, inputs uploaded, outputs poisoned. */
static int ctx_setup(world_t *w, rank_ctx *rc) {
  const int R = w->R;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaStreamCreateWithFlags(&rc->stream, cudaStreamNonBlocking));
  for (int l = 0; l < NUM_LAYERS; l++) {
    const loom_moe_config_t c = layer_config(l, R);
    const size_t H = (size_t)c.hidden, F = (size_t)c.ffn, E = (size_t)c.num_experts;
    const size_t F1 = c.activation == LOOM_ACT_SWIGLU ? 2 * F : F, El = E / (size_t)R;
    float *g = malloc(H * E * 4), *w1 = malloc(El * H * F1 * 4), *w2 = malloc(El * F * H * 4);
    int ok = g && w1 && w2;
    CHECK(ok, "host allocation");
    if (ok) {
      gen_gate(l, R, g);
      for (size_t le = 0; le < El; le++) {
        const int e = rc->rank * (int)El + (int)le;
        rng_t r1 = rng_make(layer_key(l, R), KIND_W1, e), r2 = rng_make(layer_key(l, R), KIND_W2, e);
        const double s1 = sqrt(3.0 / (double)H), s2 = sqrt(3.0 / (double)F);
        for (size_t i = 0; i < H * F1; i++) w1[le * H * F1 + i] = (float)(rng_sym(&r1) * s1);
        for (size_t i = 0; i < F * H; i++) w2[le * F * H + i] = (float)(rng_sym(&r2) * s2);
      }
      const size_t es = dtype_bytes(c.dtype);
      ok = cudaMalloc(&rc->gate_w[l], H * E * es) == cudaSuccess &&
           cudaMalloc(&rc->w1[l], El * H * F1 * es) == cudaSuccess &&
           cudaMalloc(&rc->w2[l], El * F * H * es) == cudaSuccess &&
           upload_weight(rc->gate_w[l], g, 1, H, E, c.dtype) == 0 &&
           upload_weight(rc->w1[l], w1, El, H, F1, c.dtype) == 0 &&
           upload_weight(rc->w2[l], w2, El, F, H, c.dtype) == 0;
      CHECK(ok, "rank %d: layer %c weights", rc->rank, 'A' + l);
    }
    free(g);
    free(w1);
    free(w2);
    if (!ok) return -1;
    LOOM_T(loom_moe_create(rc->comm, &c, &rc->moe[l]));
    LOOM_T(loom_moe_set_weights(rc->moe[l], rc->gate_w[l], rc->w1[l], rc->w2[l]));
  }
  {
    float *wb = malloc((size_t)AG_N * AG_K * 4);
    int ok = wb != NULL;
    CHECK(ok, "host allocation");
    if (ok) {
      rng_t r = rng_make(layer_key(NUM_LAYERS, R), KIND_W1, rc->rank);
      for (size_t e = 0; e < (size_t)AG_N * AG_K; e++) wb[e] = (float)(rng_sym(&r) * sqrt(3.0 / AG_K));
      ok = cudaMalloc(&rc->ag_b, (size_t)AG_N * AG_K * 2) == cudaSuccess &&
           upload(rc->ag_b, wb, (size_t)AG_N * AG_K, LOOM_BF16) == 0;
      CHECK(ok, "rank %d: collective GEMM weights", rc->rank);
    }
    free(wb);
    if (!ok) return -1;
  }
  rc->bufs = calloc((size_t)w->ncalls, sizeof *rc->bufs);
  unsigned char *host = malloc((size_t)R * MAX_BPP);
  CHECK(rc->bufs != NULL && host != NULL, "host allocation");
  if (rc->bufs == NULL || host == NULL) {
    free(host);
    return -1;
  }
  int ok = 1;
  for (int i = 0; i < w->ncalls && ok; i++) {
    const seq_call *c = &w->calls[i];
    call_bufs *b = &rc->bufs[i];
    if (is_coll(c->op)) {
      const size_t m = coll_rows_a(c->op, R, c->ag_m), cbytes = (coll_rows_c(c->op, R, c->ag_m) + 1) * AG_N * 2;
      float *a = malloc(m * AG_K * 4);
      ok = a != NULL;
      CHECK(ok, "host allocation");
      if (ok) {
        rng_t r = rng_make(layer_key(NUM_LAYERS, R), KIND_X, i * MAX_RANKS + rc->rank);
        for (size_t e = 0; e < m * AG_K; e++) a[e] = (float)rng_sym(&r);
        ok = cudaMalloc(&b->x, m * AG_K * 2) == cudaSuccess && upload(b->x, a, m * AG_K, LOOM_BF16) == 0 &&
             cudaMalloc(&b->y, cbytes) == cudaSuccess && cudaMalloc(&b->y_iso, cbytes) == cudaSuccess &&
             cudaMemset(b->y, 0xFF, cbytes) == cudaSuccess && cudaMemset(b->y_iso, 0xFF, cbytes) == cudaSuccess;
        CHECK(ok, "rank %d: buffers of call %d", rc->rank, i);
      }
      free(a);
      continue;
    }
    if (c->op == OP_RING || c->op == OP_A2A) {
      const int ring = c->op == OP_RING, n = ring ? 1 : R;
      for (int d = 0; d < n; d++)
        payload(i, rc->rank, ring ? (rc->rank + 1) % R : d, c->bpp, host + (size_t)d * c->bpp);
      CUDA_T(cudaMalloc(&b->send, (size_t)n * c->bpp));
      CUDA_T(cudaMalloc(&b->recv, (size_t)n * c->bpp + GUARD_BYTES));
      CUDA_T(cudaMemcpy(b->send, host, (size_t)n * c->bpp, cudaMemcpyHostToDevice));
      CUDA_T(cudaMemset(b->recv, 0xA5, (size_t)n * c->bpp + GUARD_BYTES));
      continue;
    }
    const int l = c->op - OP_MOE_A, T = c->tokens[rc->rank];
    const loom_moe_config_t lc = layer_config(l, R);
    const size_t H = (size_t)lc.hidden, es = dtype_bytes(lc.dtype), k = (size_t)lc.top_k;
    const size_t rows = (size_t)(T > 0 ? T : 1), tk = rows * k;
    float *x = malloc(rows * H * 4), *wts = malloc(tk * 4);
    int32_t *ids = malloc(tk * 4);
    ok = x && wts && ids;
    CHECK(ok, "host allocation");
    if (ok) {
      gen_x(l, R, i, rc->rank, T, x);
      ok = cudaMalloc(&b->x, rows * H * es) == cudaSuccess &&
           cudaMalloc(&b->y, ((size_t)T + 1) * H * es) == cudaSuccess &&
           cudaMalloc(&b->y_iso, ((size_t)T + 1) * H * es) == cudaSuccess &&
           upload(b->x, x, (size_t)T * H, lc.dtype) == 0 &&
           cudaMemset(b->y, 0xFF, ((size_t)T + 1) * H * es) == cudaSuccess &&
           cudaMemset(b->y_iso, 0xFF, ((size_t)T + 1) * H * es) == cudaSuccess;
      if (ok && c->caller[rc->rank]) {
        gen_routing(l, R, i, rc->rank, T, ids, wts);
        ok = cudaMalloc((void **)&b->ids_in, tk * 4) == cudaSuccess &&
             cudaMalloc((void **)&b->wts_in, tk * 4) == cudaSuccess &&
             cudaMemcpy(b->ids_in, ids, (size_t)T * k * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(b->wts_in, wts, (size_t)T * k * 4, cudaMemcpyHostToDevice) == cudaSuccess;
      }
      if (ok && c->outs[rc->rank]) {
        ok = cudaMalloc((void **)&b->ids_out, tk * 4) == cudaSuccess &&
             cudaMalloc((void **)&b->ids_iso, tk * 4) == cudaSuccess &&
             cudaMalloc((void **)&b->wts_out, tk * 4) == cudaSuccess &&
             cudaMalloc((void **)&b->wts_iso, tk * 4) == cudaSuccess &&
             cudaMalloc((void **)&b->stats, sizeof(loom_moe_stats_t)) == cudaSuccess &&
             cudaMalloc((void **)&b->stats_iso, sizeof(loom_moe_stats_t)) == cudaSuccess &&
             cudaMemset(b->ids_out, 0xFF, tk * 4) == cudaSuccess &&
             cudaMemset(b->ids_iso, 0xFF, tk * 4) == cudaSuccess &&
             cudaMemset(b->wts_out, 0xFF, tk * 4) == cudaSuccess &&
             cudaMemset(b->wts_iso, 0xFF, tk * 4) == cudaSuccess &&
             cudaMemset(b->stats, 0xFF, sizeof(loom_moe_stats_t)) == cudaSuccess &&
             cudaMemset(b->stats_iso, 0xFF, sizeof(loom_moe_stats_t)) == cudaSuccess;
      }
      CHECK(ok, "rank %d: buffers of call %d", rc->rank, i);
    }
    free(x);
    free(wts);
    free(ids);
  }
  free(host);
  if (!ok) return -1;
  CUDA_T(cudaDeviceSynchronize()); /* uploads and poison (legacy stream) done */
  return 0;
}

static void ctx_free(world_t *w, rank_ctx *rc) {
  cudaSetDevice(rc->device);
  for (int l = 0; l < NUM_LAYERS; l++) {
    if (rc->moe[l]) {
      const loom_result_t r = loom_moe_destroy(rc->moe[l]);
      CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_destroy: %s", rc->rank, loom_last_error());
    }
    rc->moe[l] = NULL;
    if (rc->gate_w[l]) cudaFree(rc->gate_w[l]);
    if (rc->w1[l]) cudaFree(rc->w1[l]);
    if (rc->w2[l]) cudaFree(rc->w2[l]);
  }
  if (rc->ag_b) cudaFree(rc->ag_b);
  rc->ag_b = NULL;
  for (int i = 0; rc->bufs && i < w->ncalls; i++) {
    call_bufs *b = &rc->bufs[i];
    void *p[] = {b->send, b->recv, b->x, b->y, b->y_iso, b->ids_in, b->ids_out, b->ids_iso,
                 b->wts_in, b->wts_out, b->wts_iso, b->stats, b->stats_iso};
    for (size_t j = 0; j < sizeof p / sizeof p[0]; j++)
      if (p[j]) cudaFree(p[j]);
  }
  free(rc->bufs);
  rc->bufs = NULL;
  if (rc->stream) cudaStreamDestroy(rc->stream);
  rc->stream = NULL;
}

/* ---- launches --------------------------------------------------------------------------------- */

/* Call i on one rank, into the back-to-back outputs or the isolated ones. */
static loom_result_t launch_call(world_t *w, rank_ctx *rc, int i, int iso) {
  const seq_call *c = &w->calls[i];
  call_bufs *b = &rc->bufs[i];
  if (c->op == OP_RING || c->op == OP_A2A)
    return loom_exchange(rc->comm, c->op == OP_RING ? LOOM_EXCHANGE_RING : LOOM_EXCHANGE_ALLTOALL,
                         b->send, b->recv, c->bpp, rc->stream);
  if (is_coll(c->op)) {
    loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
    a.m = (int64_t)coll_rows_a(c->op, w->R, c->ag_m); /* the reduce-scatter: every rank's rows */
    a.n = AG_N;
    a.k = AG_K;
    a.a = b->x;
    a.b = rc->ag_b;
    a.c = iso ? b->y_iso : b->y;
    a.activation = c->ag_act;
    return c->op == OP_AG   ? loom_ag_gemm(rc->comm, &a, rc->stream)
           : c->op == OP_RS ? loom_gemm_rs(rc->comm, &a, rc->stream)
                            : loom_gemm_ar(rc->comm, &a, rc->stream);
  }
  const int r = rc->rank;
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.num_tokens = c->tokens[r];
  if (!c->null_io[r]) {
    a.x = b->x;
    a.y = iso ? b->y_iso : b->y;
  }
  if (c->caller[r]) {
    a.expert_ids_in = b->ids_in;
    a.weights_in = b->wts_in;
  }
  if (c->outs[r]) {
    a.expert_ids_out = iso ? b->ids_iso : b->ids_out;
    a.weights_out = iso ? b->wts_iso : b->wts_out;
    a.stats = iso ? b->stats_iso : b->stats;
  }
  return loom_moe_forward_ex(rc->moe[c->op - OP_MOE_A], &a, rc->stream);
}

/* Every call, back to back, no host synchronisation: call i on every local
 * rank, then call i + 1. */
static int run_back_to_back(world_t *w) {
  for (int i = 0; i < w->ncalls; i++)
    for (int j = 0; j < w->nlocal; j++) {
      rank_ctx *rc = &w->cs[j];
      CUDA_T(cudaSetDevice(rc->device));
      const loom_result_t r = launch_call(w, rc, i, 0);
      CHECK(r == LOOM_SUCCESS, "R=%d call %d (%c) rank %d launch: %s: %s", w->R, i,
            OP_LETTER[w->calls[i].op], rc->rank, loom_result_string(r), loom_last_error());
      if (r != LOOM_SUCCESS) return -1;
    }
  return 0;
}

/* ---- verification ----------------------------------------------------------------------------- */

static int verify_exchange(world_t *w, rank_ctx *rc, int i, unsigned char *got,
                           unsigned char *want) {
  const seq_call *c = &w->calls[i];
  const int R = w->R, ring = c->op == OP_RING, n = ring ? 1 : R;
  const size_t bytes = (size_t)n * c->bpp;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(got, rc->bufs[i].recv, bytes + GUARD_BYTES, cudaMemcpyDeviceToHost));
  for (int s = 0; s < n; s++)
    payload(i, ring ? (rc->rank - 1 + R) % R : s, rc->rank, c->bpp, want + (size_t)s * c->bpp);
  size_t bad = 0, first = 0, guard = 0;
  for (size_t b = 0; b < bytes; b++)
    if (got[b] != want[b] && bad++ == 0) first = b;
  for (size_t b = bytes; b < bytes + GUARD_BYTES; b++) guard += got[b] != 0xA5;
  CHECK(bad == 0,
        "R=%d call %d (%s, %zu bytes/peer) rank %d: %zu of %zu bytes differ from what was sent "
        "(first at byte %zu, from source %zu)",
        R, i, ring ? "ring" : "all-to-all", c->bpp, rc->rank, bad, bytes, first,
        first / c->bpp);
  CHECK(guard == 0, "R=%d call %d rank %d: %zu bytes written past the end of recvbuf", R, i,
        rc->rank, guard);
  return bad == 0 && guard == 0 ? 0 : -1;
}

/* Call i (MoE) on rank rc: back-to-back outputs bitwise equal to the
 * isolated run's; sanity of each. */
static int verify_moe(world_t *w, rank_ctx *rc, int i) {
  const seq_call *c = &w->calls[i];
  const int R = w->R, r = rc->rank, l = c->op - OP_MOE_A, T = c->tokens[r];
  const loom_moe_config_t lc = layer_config(l, R);
  const size_t H = (size_t)lc.hidden, es = dtype_bytes(lc.dtype), k = (size_t)lc.top_k,
               E = (size_t)lc.num_experts, row = H * es;
  const call_bufs *b = &rc->bufs[i];
  char desc[192];
  snprintf(desc, sizeof desc, "R=%d call %d (layer %c, T=%d, %s%s%s) rank %d seed=0x%" PRIx64, R, i,
           'A' + l, T, c->caller[r] ? "caller routing" : "fused gate", c->outs[r] ? ", outputs" : "",
           c->null_io[r] ? ", x = y = NULL" : "", r, g_seed);
  int ok = 1;
  CUDA_T(cudaSetDevice(rc->device));
  if (!c->null_io[r]) {
    const size_t bytes = ((size_t)T + 1) * row;
    unsigned char *y = malloc(bytes), *yi = malloc(bytes);
    float *yf = malloc((size_t)T * H * 4 + 4);
    ok = y && yi && yf;
    CHECK(ok, "host allocation");
    if (ok) {
      CUDA_T(cudaMemcpy(y, b->y, bytes, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(yi, b->y_iso, bytes, cudaMemcpyDeviceToHost));
      size_t diff = 0, first = 0;
      for (size_t t = 0; t < (size_t)T; t++)
        if (memcmp(y + t * row, yi + t * row, row) != 0 && diff++ == 0) first = t;
      CHECK(diff == 0,
            "%s: %zu of %d y rows differ from the isolated run (first row %zu): calls interfere",
            desc, diff, T, first);
      const size_t guard = H - count_poison(y + (size_t)T * row, H, es);
      const size_t guard_iso = H - count_poison(yi + (size_t)T * row, H, es);
      CHECK(guard == 0 && guard_iso == 0,
            "%s: %zu (back to back) / %zu (isolated) elements written past row %d", desc, guard,
            guard_iso, T);
      ref_unpack_array(yf, y, (size_t)T * H, lc.dtype);
      size_t nonfinite = 0;
      for (size_t e = 0; e < (size_t)T * H; e++) nonfinite += !isfinite(yf[e]);
      CHECK(nonfinite == 0, "%s: %zu of %zu y elements not finite (unwritten or garbage)", desc,
            nonfinite, (size_t)T * H);
      ok = diff == 0 && guard == 0 && guard_iso == 0 && nonfinite == 0;
    }
    free(y);
    free(yi);
    free(yf);
  }
  if (c->outs[r] && T > 0) {
    const size_t tk = (size_t)T * k;
    int32_t *ids = malloc(tk * 4), *ids_i = malloc(tk * 4), *want = malloc(tk * 4);
    float *wts = malloc(tk * 4), *wts_i = malloc(tk * 4), *ww = malloc(tk * 4);
    float *x = malloc((size_t)T * H * 4), *g = malloc(H * E * 4);
    int hok = ids && ids_i && want && wts && wts_i && ww && x && g;
    CHECK(hok, "host allocation");
    if (hok) {
      loom_moe_stats_t st, st_i;
      CUDA_T(cudaMemcpy(ids, b->ids_out, tk * 4, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(ids_i, b->ids_iso, tk * 4, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(wts, b->wts_out, tk * 4, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(wts_i, b->wts_iso, tk * 4, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(&st, b->stats, sizeof st, cudaMemcpyDeviceToHost));
      CUDA_T(cudaMemcpy(&st_i, b->stats_iso, sizeof st_i, cudaMemcpyDeviceToHost));
      const int same_routing = memcmp(ids, ids_i, tk * 4) == 0 && memcmp(wts, wts_i, tk * 4) == 0;
      CHECK(same_routing, "%s: expert_ids_out / weights_out differ from the isolated run", desc);
      const int same_stats =
          memcmp(st.rows_sent, st_i.rows_sent, sizeof st.rows_sent) == 0 &&
          memcmp(st.rows_received, st_i.rows_received, sizeof st.rows_received) == 0 &&
          st.rows_dropped == st_i.rows_dropped && st.bytes_sent == st_i.bytes_sent &&
          st.bytes_remote == st_i.bytes_remote;
      CHECK(same_stats, "%s: stats (rows, bytes) differ from the isolated run", desc);
      int64_t sent = st.rows_dropped;
      for (int d = 0; d < R; d++) sent += st.rows_sent[d];
      CHECK(sent == (int64_t)tk,
            "%s: stats rows_sent + rows_dropped = %" PRId64 ", want tokens x top_k = %zu", desc,
            sent, tk);
      /* the routing used: the caller's, or the reference gate's ids */
      int rok;
      if (c->caller[r]) {
        gen_routing(l, R, i, r, T, want, ww);
        rok = memcmp(ids, want, tk * 4) == 0 && memcmp(wts, ww, tk * 4) == 0;
        CHECK(rok, "%s: routing out is not the caller's routing", desc);
      } else {
        gen_x(l, R, i, r, T, x);
        gen_gate(l, R, g);
        rok = ref_moe_gate(T, (int)H, (int)E, (int)k, lc.normalize_top_k, x, g, want, ww, NULL) == 0;
        CHECK(rok, "%s: ref_moe_gate failed", desc);
        size_t bad = 0, badw = 0;
        for (size_t a = 0; rok && a < tk; a++) {
          bad += ids[a] != want[a];
          badw += !(fabs((double)wts[a] - ww[a]) <= TOL_WEIGHTS * fabs(ww[a]));
        }
        CHECK(bad == 0, "%s: %zu of %zu expert_ids_out differ from ref_moe_gate", desc, bad, tk);
        CHECK(badw == 0, "%s: %zu of %zu weights_out off ref_moe_gate's by > %g relative", desc,
              badw, tk, TOL_WEIGHTS);
        rok = rok && bad == 0 && badw == 0;
      }
      ok = ok && same_routing && same_stats && sent == (int64_t)tk && rok;
    }
    free(ids);
    free(ids_i);
    free(want);
    free(wts);
    free(wts_i);
    free(ww);
    free(x);
    free(g);
    ok = ok && hok;
  }
  return ok ? 0 : -1;
}

/* A collective GEMM call: C bitwise equal to the isolated rerun's, every
 * element finite (written), the guard row past C's rows still poison. */
static int verify_coll(world_t *w, rank_ctx *rc, int i) {
  const seq_call *c = &w->calls[i];
  const int R = w->R, r = rc->rank;
  const size_t rows = coll_rows_c(c->op, R, c->ag_m), row = (size_t)AG_N * 2, bytes = (rows + 1) * row;
  char desc[160];
  snprintf(desc, sizeof desc, "R=%d call %d (%s, m=%d, act %d) rank %d seed=0x%" PRIx64, R, i,
           COLL_NAME[c->op - OP_AG], c->ag_m, c->ag_act, r, g_seed);
  unsigned char *y = malloc(bytes), *yi = malloc(bytes);
  float *yf = malloc(rows * AG_N * 4);
  int ok = y && yi && yf;
  CHECK(ok, "host allocation");
  if (ok) {
    CUDA_T(cudaSetDevice(rc->device));
    CUDA_T(cudaMemcpy(y, rc->bufs[i].y, bytes, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(yi, rc->bufs[i].y_iso, bytes, cudaMemcpyDeviceToHost));
    size_t diff = 0, first = 0;
    for (size_t t = 0; t < rows; t++)
      if (memcmp(y + t * row, yi + t * row, row) != 0 && diff++ == 0) first = t;
    CHECK(diff == 0, "%s: %zu of %zu C rows differ from the isolated run (first row %zu): calls interfere",
          desc, diff, rows, first);
    const size_t guard = AG_N - count_poison(y + rows * row, AG_N, 2);
    const size_t guard_iso = AG_N - count_poison(yi + rows * row, AG_N, 2);
    CHECK(guard == 0 && guard_iso == 0, "%s: %zu (back to back) / %zu (isolated) elements written past C",
          desc, guard, guard_iso);
    ref_unpack_array(yf, y, rows * AG_N, LOOM_BF16);
    size_t nonfinite = 0;
    for (size_t e = 0; e < rows * AG_N; e++) nonfinite += !isfinite(yf[e]);
    CHECK(nonfinite == 0, "%s: %zu of %zu C elements not finite (unwritten or garbage)", desc, nonfinite,
          rows * AG_N);
    ok = diff == 0 && guard == 0 && guard_iso == 0 && nonfinite == 0;
  }
  free(y);
  free(yi);
  free(yf);
  return ok ? 0 : -1;
}

static ranks_mode g_mode = RANKS_SINGLE; /* argv[1] */

/* ---- one world size ----------------------------------------------------------------------------- */

static void print_sequence(const world_t *w) {
  int count[NUM_OPS] = {0};
  printf("  R=%d: %d calls: ", w->R, w->ncalls);
  for (int i = 0; i < w->ncalls; i++) {
    putchar(OP_LETTER[w->calls[i].op]);
    count[w->calls[i].op]++;
  }
  printf("\n  (r ring %d, a all-to-all %d, A %d, B %d, C %d, g all-gather GEMM %d, s GEMM reduce-scatter %d, "
         "u GEMM all-reduce %d)\n",
         count[OP_RING], count[OP_A2A], count[OP_MOE_A], count[OP_MOE_B], count[OP_MOE_C], count[OP_AG],
         count[OP_RS], count[OP_AR]);
  fflush(stdout);
}

static int run_world(world_t *w) {
  const int R = w->R;
  if (w->cs[0].rank == 0) print_sequence(w);
  watchdog(STEP_DEADLINE_S, "R=%d: setup (weights, %d calls' buffers)", R, w->ncalls);
  for (int i = 0; i < w->nlocal; i++)
    if (ctx_setup(w, &w->cs[i]) != 0) return -1;
  if (world_barrier(w, "setup") != 0) return -1;

  watchdog(STEP_DEADLINE_S, "R=%d: %d calls back to back", R, w->ncalls);
  double t = now_s();
  if (run_back_to_back(w) != 0) return -1;
  const double launched = now_s() - t;
  if (wait_streams(w, "back-to-back run") != 0) return -1;
  if (w->cs[0].rank == 0)
    printf("  R=%d: back-to-back: launched in %.3f s, done in %.3f s\n", R, launched, now_s() - t);
  if (check_no_async(w, "back-to-back run") != 0) return -1;

  watchdog(STEP_DEADLINE_S, "R=%d: verifying the exchanges", R);
  unsigned char *got = malloc((size_t)R * MAX_BPP + GUARD_BYTES), *want = malloc((size_t)R * MAX_BPP);
  CHECK(got && want, "host allocation");
  int bad = 0, nx = 0, nm = 0, ng = 0;
  for (int i = 0; i < w->ncalls && got && want; i++) {
    if (w->calls[i].op != OP_RING && w->calls[i].op != OP_A2A) continue;
    nx++;
    for (int j = 0; j < w->nlocal; j++) bad |= verify_exchange(w, &w->cs[j], i, got, want) != 0;
  }
  free(got);
  free(want);

  /* each MoE and collective GEMM call again, isolated: launch, drain, meet */
  for (int i = 0; i < w->ncalls; i++) {
    if (is_exchange(w->calls[i].op)) continue;
    nm += is_moe(w->calls[i].op);
    ng += is_coll(w->calls[i].op);
    watchdog(STEP_DEADLINE_S, "R=%d: call %d (%c) isolated", R, i, OP_LETTER[w->calls[i].op]);
    for (int j = 0; j < w->nlocal; j++) {
      rank_ctx *rc = &w->cs[j];
      CUDA_T(cudaSetDevice(rc->device));
      const loom_result_t r = launch_call(w, rc, i, 1);
      CHECK(r == LOOM_SUCCESS, "R=%d isolated call %d rank %d launch: %s", R, i, rc->rank,
            loom_last_error());
      if (r != LOOM_SUCCESS) return -1;
    }
    if (wait_streams(w, "isolated call") != 0 || world_barrier(w, "isolated call") != 0) return -1;
  }
  if (check_no_async(w, "isolated calls") != 0) return -1;
  watchdog(STEP_DEADLINE_S, "R=%d: comparing the MoE and collective GEMM calls", R);
  for (int i = 0; i < w->ncalls; i++) {
    if (is_exchange(w->calls[i].op)) continue;
    for (int j = 0; j < w->nlocal; j++)
      bad |= (is_moe(w->calls[i].op) ? verify_moe(w, &w->cs[j], i) : verify_coll(w, &w->cs[j], i)) != 0;
  }
  if (w->cs[0].rank == 0)
    printf("  R=%d: %d exchanges checked against the payload, %d MoE and %d collective GEMM calls "
           "against isolated reruns: %s\n",
           R, nx, nm, ng, bad ? "MISMATCHES (see above)" : "all results match");
  fflush(stdout);
  return 0;
}

static int single_process(int R, const seq_call *calls, int ncalls) {
  world_t w;
  memset(&w, 0, sizeof w);
  w.R = R;
  w.nlocal = R;
  w.ncalls = ncalls;
  w.calls = calls;
  loom_comm_config_t cfg;
  if (comm_config(R, &cfg) != 0) return -1;
  watchdog(STEP_DEADLINE_S, "R=%d: loom_comm_create_%s", R,
           g_mode == RANKS_LOOPBACK ? "loopback" : "all");
  loom_comm_t comms[MAX_RANKS] = {0};
  if (ranks_world_create(g_mode, R, &cfg, comms) != 0) return -1;
  for (int i = 0; i < R; i++) {
    w.cs[i].comm = comms[i];
    w.cs[i].rank = i;
    w.cs[i].device = ranks_device(g_mode, i);
  }
  const int rc = run_world(&w);
  watchdog(STEP_DEADLINE_S, "R=%d: teardown", R);
  for (int i = 0; i < R; i++) ctx_free(&w, &w.cs[i]);
  const loom_result_t r = loom_comm_destroy_all(R, comms);
  CHECK(r == LOOM_SUCCESS, "R=%d loom_comm_destroy_all: %s", R, loom_last_error());
  return rc;
}

typedef struct {
  shared_t *sh;
  const seq_call *calls;
  int ncalls;
} multi_arg;

static int child_rank(const ranks_child *rc, void *arg) {
  const multi_arg *m = (const multi_arg *)arg;
  const int rank = rc->rank, R = rc->n;
  watchdog(STEP_DEADLINE_S, "rank %d of %d: NCCL bootstrap", rank, R);
  ncclUniqueId id;
  if (ranks_unique_id(rc, &id) != 0) return 1;
  world_t w;
  memset(&w, 0, sizeof w);
  w.multi = 1;
  w.R = R;
  w.nlocal = 1;
  w.ncalls = m->ncalls;
  w.calls = m->calls;
  w.sh = m->sh;
  w.cs[0].rank = rank;
  w.cs[0].device = rank;
  if (cudaSetDevice(rank) != cudaSuccess || ncclCommInitRank(&w.nccl, R, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL init failed\n", rank);
    return 1;
  }
  loom_comm_config_t cfg;
  if (comm_config(R, &cfg) == 0) {
    const loom_result_t r = loom_comm_create(w.nccl, &cfg, &w.cs[0].comm);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_create: %s", rank, loom_last_error());
    if (r == LOOM_SUCCESS) run_world(&w);
  }
  watchdog(STEP_DEADLINE_S, "rank %d of %d: teardown", rank, R);
  ctx_free(&w, &w.cs[0]);
  if (w.cs[0].comm != NULL && world_barrier(&w, "teardown") == 0) {
    const loom_result_t r = loom_comm_destroy(w.cs[0].comm);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_destroy: %s", rank, loom_last_error());
  }
  ncclCommDestroy(w.nccl);
  char name[64];
  snprintf(name, sizeof name, "test_sequence multi rank %d/%d", rank, R);
  return check_summary(name);
}

#define PROG "test_sequence"
#define USAGE_OPTIONS " [--calls N] [--seed S]"

static int usage(void) { return ranks_usage(PROG, USAGE_OPTIONS); }

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (ranks_mode_parse(argc, argv, PROG, USAGE_OPTIONS, &g_mode) != 0) return RANKS_USAGE_EXIT;
  const int multi = g_mode == RANKS_MULTI;
  int ncalls = SEQ_DEFAULT_CALLS;
  for (int a = 2; a < argc; a++) {
    char *end = NULL;
    if (a + 1 >= argc) return usage();
    if (strcmp(argv[a], "--calls") == 0)
      ncalls = (int)strtol(argv[++a], &end, 10);
    else if (strcmp(argv[a], "--seed") == 0)
      g_seed = strtoull(argv[++a], &end, 0);
    else
      return usage();
    if (end == NULL || *end != '\0' || ncalls < 1 || ncalls > SEQ_MAX_CALLS) return usage();
  }
  char name[64];
  snprintf(name, sizeof name, "%s %s", PROG, RANKS_MODE_NAMES[g_mode]);
  watchdog_start(PROG);
  watchdog(STEP_DEADLINE_S, "counting GPUs");
  const int ngpu = ranks_mode_gpu_count(g_mode);
  if (ngpu == 0) {
    CHECK_SKIP("no GPU visible");
    alarm(0);
    return check_summary(name);
  }
  printf("%s: %d GPUs visible, %d calls, seed 0x%" PRIx64 "\n", name, ngpu, ncalls, g_seed);
  fflush(stdout);
  seq_call *calls = malloc((size_t)ncalls * sizeof *calls);
  shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  if (calls == NULL || sh == MAP_FAILED) {
    CHECK(0, "allocation of the sequence or the shared state failed");
    return check_summary(name);
  }
  const int sizes[4] = {1, 2, 4, 8};
  const double start = now_s();
  for (int s = g_mode == RANKS_LOOPBACK ? 1 : 0; s < 4; s++) {
    const int R = sizes[s];
    if (!ranks_world_fits(g_mode, R, ngpu)) {
      CHECK_SKIP("R=%d: %d GPUs needed, %d visible (skipped)", R, R, ngpu);
      continue;
    }
    gen_sequence(R, ncalls, calls);
    atomic_init(&sh->barrier.arrived, 0);
    atomic_init(&sh->barrier.generation, 0);
    const double t = now_s();
    if (multi) {
      watchdog(CHILD_DEADLINE_S, "R=%d: waiting for the rank processes", R);
      multi_arg m = {sh, calls, ncalls};
      char what[32];
      snprintf(what, sizeof what, "R=%d", R);
      ranks_run(R, child_rank, &m, what);
    } else {
      single_process(R, calls, ncalls);
    }
    printf("R=%d done in %.1f s (%.1f s total, %d failed so far)\n", R, now_s() - t,
           now_s() - start, check_failed_);
    fflush(stdout);
  }
  alarm(0);
  free(calls);
  munmap(sh, sizeof *sh);
  return check_summary(name);
}
