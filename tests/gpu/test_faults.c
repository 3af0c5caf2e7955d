/*
 * GPU fault tests: errors that travel between ranks, and the fused gate on
 * non-finite input. World sizes 2, 4 and 8 (sizes the machine lacks are
 * skipped):
 *
 *   test_faults single [--seed S]  one process drives
 *                      every GPU (loom_comm_create_all per case)
 *   test_faults loopback [--seed S] one process, every rank on device 0
 *                      (loom_comm_create_loopback per case)
 *   test_faults multi  [--seed S]  one process per GPU
 *                      (ranks.h); each case makes a loom communicator on
 *                      the rank's one NCCL communicator
 *
 * Every case runs on a fresh communicator, which is destroyed at its end
 * (also after a fault: destroying must not hang and must succeed):
 *
 *   bad-routing/range  rank 0 passes caller routing with one id out of
 *   bad-routing/dup    [0, E) (9999), or with one id repeated within a token
 *                      (token BAD_TOKEN, choice 1). Rank 0 must report
 *                      LOOM_INVALID_ARGUMENT naming the id / "repeats
 *                      expert" and the token; every other rank
 *                      LOOM_PEER_ERROR (LOOM_INVALID_ARGUMENT tolerated),
 *                      its message naming "rank 0" and the same cause.
 *   config/act         rank R-1 builds its layer with another activation
 *   config/topk        (gelu) or top_k (1), which need no more workspace:
 *                      every rank must report LOOM_INVALID_ARGUMENT or
 *                      LOOM_PEER_ERROR, at least one LOOM_INVALID_ARGUMENT,
 *                      every message naming the different config.
 *   extra-call         comm timeout 1 s; every rank makes one forward, rank
 *                      0 a second one: rank 0 must report LOOM_TIMEOUT (or
 *                      LOOM_INVALID_USAGE, call mismatch) within timeout +
 *                      1 s of launching it; the others' one call succeeds;
 *                      afterwards each other rank's next forward must stop
 *                      at once (within half its own timeout) with
 *                      LOOM_PEER_ERROR naming "rank 0 failed first": the
 *                      fault rank 0 stored into their windows while they
 *                      were idle.
 *   Arrival (bad-routing and config cases): comm timeout 10 s, so passing
 *   proves propagation, not timeouts. After a healthy warm-up forward (so
 *   module loading is not timed) and a barrier, every rank launches the
 *   faulty forward and polls loom_comm_get_async_error every ~100 us
 *   without synchronising; the CLOCK_MONOTONIC time of its first
 *   non-success (shared across processes on one machine; in multi mode
 *   passed through a shared mapping) must lie within ARRIVAL_BOUND_S of the
 *   faulty rank's (rank 0's; for the config cases, the earliest rank's).
 *   After each fault every failed communicator must refuse loom_moe_forward
 *   and loom_exchange with LOOM_INVALID_USAGE.
 *
 *   non-finite         fused gate on every config with E in {R, 2R, 3R},
 *                      top_k in {4, 8}, top_k <= E and E/R < top_k (dtype,
 *                      activation and normalize_top_k cycle over the
 *                      configs). Four forwards per config, back to back,
 *                      outputs poisoned with finite values that differ per
 *                      forward (so an unwritten row or weight cannot pass
 *                      as non-finite, nor as equal between forwards):
 *                        0  x with NaN / +Inf / -Inf entries in some rows
 *                        1  the same x with those rows finite (the oracle)
 *                        2  finite x, gate_w with an all-NaN column
 *                           (one expert's weights: a row of the OUT_IN
 *                           [E x H] the layer gets, a column of the host's
 *                           [H x E] the reference reads)
 *                        3  finite x, gate_w with one +Inf and one -Inf
 *                      Checks, per rank and forward: expert_ids_out in
 *                      [0, E) and distinct in every token; equal to
 *                      ref_moe_gate's (finite tokens; bad tokens checked
 *                      separately, as the contract promises it too);
 *                      weights_out within TOL_WEIGHTS of the reference for
 *                      finite tokens, all NaN for tokens with a non-finite
 *                      logit; y rows of those tokens entirely non-finite,
 *                      the other rows finite; y rows, ids and weights of
 *                      finite tokens in forward 0 bitwise equal to forward
 *                      1's; in forwards 2 and 3 every token is bad. No
 *                      async error.
 *
 *   config/experts     a layer of 1024 experts (zero weights, the fused
 *                      gate): where the gate's tile does not fit a block's
 *                      shared memory every rank's forward must return
 *                      LOOM_INVALID_ARGUMENT naming num_experts and how many
 *                      fit, launching nothing, and a layer of that many
 *                      (rounded to a multiple of R) must then run, y all
 *                      zeros; where 1024 fits, it must run the same way.
 *
 *   op-mismatch        at one call number rank 0
 *                      runs a ring exchange, the others a MoE forward:
 *                      every rank, rank 0 included, must report an async
 *                      error (loom.h: out of step means an error, not
 *                      wrong data).
 *
 * A watchdog (alarm) names the step in progress and ends the process when
 * one takes longer than CASE_DEADLINE_S; every wait in the test is bounded.
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
#define NRUNS 4 /* forwards per non-finite config */

/* Layers of the fault cases: E = 2R, bf16, every rank FAULT_TOKENS. */
#define FAULT_HIDDEN 128
#define FAULT_FFN 128
#define FAULT_TMAX 128
#define FAULT_TOKENS 64
#define BAD_TOKEN 37 /* the token whose routing rank 0 corrupts (choice 1) */
#define BAD_ID 9999

/* Layers of the non-finite gate case. */
#define NF_HIDDEN 256
#define NF_FFN 128
#define NF_TMAX 256
#define NF_MAX_CONFIGS 8
#define NF_POISON 0x3C /* + forward index: a finite value in fp32, bf16 and fp16 */
static const int NF_TOKENS[MAX_RANKS] = {150, 33, 1, 256, 97, 0, 64, 200};

/* Bounds of the device buffers (every layer here fits). */
#define MAX_EXPERTS 24      /* 3R at R = 8 */
#define MAX_LOCAL_EXPERTS 3 /* E/R */
#define MAX_TOPK 8
#define MAX_TOKENS NF_TMAX
#define MAX_HIDDEN NF_HIDDEN
#define MAX_FFN NF_FFN

#define SHORT_TIMEOUT_MS 1000
#define LONG_TIMEOUT_MS 10000
#define ARRIVAL_BOUND_S 0.100
#define POLL_NS 100000 /* 100 us between async-error polls */
#define STREAM_DEADLINE_S 30.0
#define BARRIER_DEADLINE_S 60.0
#define CASE_DEADLINE_S 90
#define CHILD_DEADLINE_S 900
#define TOL_WEIGHTS 1e-6

static uint64_t g_seed = 0x6661756c7473ull; /* "faults" */

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* ---- deterministic random numbers (splitmix64) ---------------------------------------------- */

enum { KIND_GATE = 1, KIND_W1, KIND_W2, KIND_X, KIND_ROUTE, KIND_BAD, KIND_PICK };

static rng_t rng_make(uint64_t key, int kind, int index) {
  return rng_stream(g_seed, key, kind, index);
}

/* Key of one case's data: world size, case, config. */
static uint64_t case_key(int R, int case_id, int cfg) {
  return ((uint64_t)R << 56) ^ ((uint64_t)case_id << 40) ^ ((uint64_t)cfg << 24);
}

/* ---- shared state: barrier and per-rank results (a shared mapping in multi mode) ------------- */

typedef struct {
  ranks_barrier_t barrier;
  double t_err[MAX_RANKS];        /* CLOCK_MONOTONIC of the first non-success, 0 if none */
  int res[MAX_RANKS];             /* that async result */
  char msg[MAX_RANKS][1024];      /* its loom_last_error() */
} shared_t;

/* ---- per-rank GPU state --------------------------------------------------------------------- */

typedef struct {
  loom_comm_t comm;
  loom_moe_t moe;
  int rank, device;
  cudaStream_t stream;
  void *x[2];    /* [0] as the case gives it (maybe non-finite), [1] its finite twin */
  void *y[NRUNS];
  void *gate[3]; /* gate_w: normal, NaN column, +-Inf entries */
  void *w1, *w2;
  int32_t *ids_in, *ids_out[NRUNS];
  float *wts_in, *wts_out[NRUNS];
} rank_ctx;

#define X_BYTES ((size_t)MAX_TOKENS * MAX_HIDDEN * 4)
#define GATE_BYTES ((size_t)MAX_HIDDEN * MAX_EXPERTS * 4)
#define W1_BYTES ((size_t)MAX_LOCAL_EXPERTS * MAX_HIDDEN * 2 * MAX_FFN * 4)
#define W2_BYTES ((size_t)MAX_LOCAL_EXPERTS * MAX_FFN * MAX_HIDDEN * 4)
#define ROUTE_BYTES ((size_t)MAX_TOKENS * MAX_TOPK * 4)

typedef struct {
  int multi, R, nlocal;
  ncclComm_t nccl; /* multi: this process's NCCL communicator */
  shared_t *sh;
  rank_ctx cs[MAX_RANKS];
} world_t;

static int ctx_setup(rank_ctx *c) {
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  for (int i = 0; i < 2; i++) CUDA_T(cudaMalloc(&c->x[i], X_BYTES));
  for (int i = 0; i < 3; i++) CUDA_T(cudaMalloc(&c->gate[i], GATE_BYTES));
  CUDA_T(cudaMalloc(&c->w1, W1_BYTES));
  CUDA_T(cudaMalloc(&c->w2, W2_BYTES));
  CUDA_T(cudaMalloc((void **)&c->ids_in, ROUTE_BYTES));
  CUDA_T(cudaMalloc((void **)&c->wts_in, ROUTE_BYTES));
  for (int i = 0; i < NRUNS; i++) {
    CUDA_T(cudaMalloc(&c->y[i], X_BYTES));
    CUDA_T(cudaMalloc((void **)&c->ids_out[i], ROUTE_BYTES));
    CUDA_T(cudaMalloc((void **)&c->wts_out[i], ROUTE_BYTES));
  }
  return 0;
}

static void ctx_free(rank_ctx *c) {
  cudaSetDevice(c->device);
  void *bufs[] = {c->x[0], c->x[1], c->gate[0], c->gate[1], c->gate[2], c->w1, c->w2,
                  c->ids_in, c->wts_in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  for (int i = 0; i < NRUNS; i++) {
    if (c->y[i]) cudaFree(c->y[i]);
    if (c->ids_out[i]) cudaFree(c->ids_out[i]);
    if (c->wts_out[i]) cudaFree(c->wts_out[i]);
  }
  if (c->stream) cudaStreamDestroy(c->stream);
  c->stream = NULL;
}

/* ---- world: communicators, barrier, bounded waits ------------------------------------------- */

static ranks_mode g_mode = RANKS_SINGLE; /* argv[1] */

/* Every rank of the world (multi: every process) meets here; bounded. */
static int world_barrier(world_t *w, const char *what) {
  if (!w->multi) return 0;
  return ranks_barrier_wait(&w->sh->barrier, w->R, w->cs[0].rank, what, BARRIER_DEADLINE_S);
}

static int world_comm_create(world_t *w, const loom_comm_config_t *cfg) {
  if (!w->multi) {
    loom_comm_t comms[MAX_RANKS] = {0};
    if (ranks_world_create(g_mode, w->R, cfg, comms) != 0) return -1;
    for (int i = 0; i < w->R; i++) w->cs[i].comm = comms[i];
    return 0;
  }
  CUDA_T(cudaSetDevice(w->cs[0].device));
  LOOM_T(loom_comm_create(w->nccl, cfg, &w->cs[0].comm));
  return 0;
}

static void destroy_layers(world_t *w) {
  for (int i = 0; i < w->nlocal; i++) {
    if (w->cs[i].moe == NULL) continue;
    const loom_result_t r = loom_moe_destroy(w->cs[i].moe);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_destroy: %s", w->cs[i].rank, loom_last_error());
    w->cs[i].moe = NULL;
  }
}

/* Layers, then the communicators (collective: multi mode meets first so no
 * rank frees its window while a peer still runs). */
static int world_comm_destroy(world_t *w, const char *what) {
  watchdog(CASE_DEADLINE_S, "%s: destroying layers and communicators", what);
  destroy_layers(w);
  if (!w->multi) {
    loom_comm_t comms[MAX_RANKS] = {0};
    for (int i = 0; i < w->R; i++) {
      comms[i] = w->cs[i].comm;
      w->cs[i].comm = NULL;
    }
    const loom_result_t r = loom_comm_destroy_all(w->R, comms);
    CHECK(r == LOOM_SUCCESS, "%s: loom_comm_destroy_all: %s", what, loom_last_error());
    return r == LOOM_SUCCESS ? 0 : -1;
  }
  if (world_barrier(w, "destroy") != 0) return -1;
  const loom_result_t r = loom_comm_destroy(w->cs[0].comm);
  w->cs[0].comm = NULL;
  CHECK(r == LOOM_SUCCESS, "%s: rank %d loom_comm_destroy: %s", what, w->cs[0].rank,
        loom_last_error());
  return r == LOOM_SUCCESS ? 0 : -1;
}

/* Every local stream drained, polling (never an unbounded wait). */
static int wait_streams(world_t *w, double seconds, const char *what) {
  const double end = now_s() + seconds;
  for (int i = 0; i < w->nlocal; i++) {
    CUDA_T(cudaSetDevice(w->cs[i].device));
    cudaError_t e;
    while ((e = cudaStreamQuery(w->cs[i].stream)) == cudaErrorNotReady) {
      if (now_s() > end) {
        CHECK(0, "%s: rank %d's stream still busy after %.0f s", what, w->cs[i].rank, seconds);
        return -1;
      }
      sleep_ns(POLL_NS);
    }
    CHECK(e == cudaSuccess, "%s: rank %d stream: %s", what, w->cs[i].rank, cudaGetErrorString(e));
    if (e != cudaSuccess) return -1;
  }
  return 0;
}

/* Uploads and poison fills (legacy stream) done before the launches. */
static int sync_devices(world_t *w) {
  for (int i = 0; i < w->nlocal; i++) {
    CUDA_T(cudaSetDevice(w->cs[i].device));
    CUDA_T(cudaDeviceSynchronize());
  }
  return 0;
}

/* Poll every local rank's async error every POLL_NS, without synchronising
 * any stream, until each reported one or `seconds` passed. Records the time
 * of the first non-success, the result and the message in w->sh. */
static void poll_errors(world_t *w, double seconds) {
  shared_t *s = w->sh;
  int done[MAX_RANKS] = {0}, left = w->nlocal;
  for (int i = 0; i < w->nlocal; i++) {
    const int r = w->cs[i].rank;
    s->t_err[r] = 0;
    s->res[r] = LOOM_SUCCESS;
    s->msg[r][0] = '\0';
  }
  const double end = now_s() + seconds;
  while (left > 0 && now_s() < end) {
    for (int i = 0; i < w->nlocal; i++) {
      if (done[i]) continue;
      loom_result_t a = LOOM_SUCCESS;
      const loom_result_t q = loom_comm_get_async_error(w->cs[i].comm, &a);
      const double t = now_s();
      if (q != LOOM_SUCCESS) a = q; /* the query itself failed: report that */
      if (a == LOOM_SUCCESS) continue;
      const int r = w->cs[i].rank;
      s->t_err[r] = t;
      s->res[r] = (int)a;
      snprintf(s->msg[r], sizeof s->msg[r], "%s", loom_last_error());
      done[i] = 1;
      left--;
    }
    if (left > 0) sleep_ns(POLL_NS);
  }
}

/* Async error of each local rank after its stream drained: none wanted. */
static int check_no_async(world_t *w, const char *what) {
  int ok = 1;
  for (int i = 0; i < w->nlocal; i++)
    ok &= check_no_async_error(w->cs[i].comm, w->cs[i].rank, what) == 0;
  return ok ? 0 : -1;
}

/* ---- host data ------------------------------------------------------------------------------ */

static int f1_of(const loom_moe_config_t *c) {
  return c->activation == LOOM_ACT_SWIGLU ? 2 * (int)c->ffn : (int)c->ffn;
}

/* gate_w [H x E]: logits of O(1) spread for x in [-1, 1). */
static void gen_gate(const loom_moe_config_t *c, uint64_t key, float *g) {
  const size_t n = (size_t)c->hidden * (size_t)c->num_experts;
  const double s = 2.0 / sqrt((double)c->hidden);
  rng_t r = rng_make(key, KIND_GATE, 0);
  for (size_t i = 0; i < n; i++) g[i] = (float)(rng_sym(&r) * s);
  ref_round_array(g, n, c->dtype);
}

/* This rank's experts' W1 and W2 (expert e from its own stream), gate_w
 * into gate[0]; generated [in x out], uploaded OUT_IN (the layers here
 * leave weight_layout at its default). */
static int upload_weights(rank_ctx *rc, const loom_moe_config_t *c, uint64_t key, int R) {
  const size_t H = (size_t)c->hidden, F = (size_t)c->ffn, F1 = (size_t)f1_of(c);
  const int El = (int)c->num_experts / R;
  float *w1 = malloc((size_t)El * H * F1 * sizeof(float));
  float *w2 = malloc((size_t)El * F * H * sizeof(float));
  float *g = malloc(H * (size_t)c->num_experts * sizeof(float));
  int rc_ = w1 && w2 && g ? 0 : -1;
  CHECK(rc_ == 0, "host allocation");
  for (int le = 0; le < El && rc_ == 0; le++) {
    const int e = rc->rank * El + le;
    rng_t r1 = rng_make(key, KIND_W1, e), r2 = rng_make(key, KIND_W2, e);
    const double s1 = sqrt(3.0 / (double)H), s2 = sqrt(3.0 / (double)F);
    for (size_t i = 0; i < H * F1; i++) w1[(size_t)le * H * F1 + i] = (float)(rng_sym(&r1) * s1);
    for (size_t i = 0; i < F * H; i++) w2[(size_t)le * F * H + i] = (float)(rng_sym(&r2) * s2);
  }
  if (rc_ == 0) {
    gen_gate(c, key, g);
    if (cudaSetDevice(rc->device) != cudaSuccess ||
        upload_weight(rc->w1, w1, (size_t)El, H, F1, c->dtype) != 0 ||
        upload_weight(rc->w2, w2, (size_t)El, F, H, c->dtype) != 0 ||
        upload_weight(rc->gate[0], g, 1, H, (size_t)c->num_experts, c->dtype) != 0)
      rc_ = -1;
  }
  free(w1);
  free(w2);
  free(g);
  return rc_;
}

/* x of `rank`: T rows in [-1, 1), rounded to the dtype. */
static void gen_x(const loom_moe_config_t *c, uint64_t key, int rank, int T, float *x) {
  const size_t n = (size_t)T * (size_t)c->hidden;
  rng_t r = rng_make(key, KIND_X, rank);
  for (size_t i = 0; i < n; i++) x[i] = (float)rng_sym(&r);
  ref_round_array(x, n, c->dtype);
}

/* Valid caller routing of `rank`: k distinct ids per token, weights in
 * [0.05, 1). */
static void gen_routing(int E, int k, uint64_t key, int rank, int T, int32_t *ids, float *wts) {
  int pool[MAX_EXPERTS];
  rng_t r = rng_make(key, KIND_ROUTE, rank);
  gen_random_routing(&r, E, k, T, pool, ids, wts);
}

/* ---- forwards ------------------------------------------------------------------------------- */

static loom_result_t forward(rank_ctx *rc, const void *x, int T, void *y, int caller,
                             int32_t *ids_out, float *wts_out) {
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.num_tokens = T;
  a.y = y;
  if (caller) {
    a.expert_ids_in = rc->ids_in;
    a.weights_in = rc->wts_in;
  }
  a.expert_ids_out = ids_out;
  a.weights_out = wts_out;
  return loom_moe_forward_ex(rc->moe, &a, rc->stream);
}

/* ---- the fault cases ------------------------------------------------------------------------ */

enum { CASE_RANGE = 1, CASE_DUP, CASE_CFG_ACT, CASE_CFG_TOPK, CASE_EXTRA, CASE_NONFINITE,
       CASE_OP_MISMATCH };

static loom_moe_config_t fault_layer(int R, int act, int k) {
  loom_moe_config_t c = LOOM_MOE_CONFIG_INIT;
  c.hidden = FAULT_HIDDEN;
  c.ffn = FAULT_FFN;
  c.num_experts = 2 * R;
  c.top_k = k;
  c.max_tokens_per_rank = FAULT_TMAX;
  c.activation = act;
  c.dtype = LOOM_BF16;
  return c;
}

/* Caller routing on even ranks (rank 0 always), the fused gate on odd. */
static int fault_caller(int rank) { return rank % 2 == 0; }

/* Comm config big enough for every layer in cfgs[0..n). */
static int comm_config(const loom_moe_config_t *cfgs, int n, int R, int timeout_ms,
                       loom_comm_config_t *out) {
  size_t bytes = 0;
  int slots = 2;
  for (int i = 0; i < n; i++) {
    size_t b = 0;
    int s = 0;
    LOOM_T(loom_moe_workspace_bytes(&cfgs[i], R, &b, &s));
    if (b > bytes) bytes = b;
    if (s > slots) slots = s;
  }
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  c.workspace_bytes = (int64_t)bytes;
  c.signal_slots = slots;
  c.timeout_ms = timeout_ms;
  *out = c;
  return 0;
}

/* Weights of `base`, FAULT_TOKENS rows of x and caller routing (for each
 * rank's own top_k) on every local rank; layers created, rank R-1's from
 * `last` when given. Outputs poisoned. */
static int fault_setup(world_t *w, const loom_moe_config_t *base, const loom_moe_config_t *last,
                       uint64_t key) {
  const int T = FAULT_TOKENS;
  float *x = malloc((size_t)T * FAULT_HIDDEN * sizeof(float));
  float *wts = malloc((size_t)T * MAX_TOPK * sizeof(float));
  int32_t *ids = malloc((size_t)T * MAX_TOPK * sizeof(int32_t));
  int ok = x && wts && ids;
  CHECK(ok, "host allocation");
  for (int i = 0; i < w->nlocal && ok; i++) {
    rank_ctx *rc = &w->cs[i];
    const loom_moe_config_t *cfg = last != NULL && rc->rank == w->R - 1 ? last : base;
    const int k = (int)cfg->top_k;
    ok = upload_weights(rc, base, key, w->R) == 0;
    gen_x(base, key, rc->rank, T, x);
    gen_routing((int)base->num_experts, k, key, rc->rank, T, ids, wts);
    ok = ok && upload(rc->x[0], x, (size_t)T * FAULT_HIDDEN, base->dtype) == 0;
    ok = ok && cudaMemcpy(rc->ids_in, ids, (size_t)T * k * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    ok = ok && cudaMemcpy(rc->wts_in, wts, (size_t)T * k * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    for (int j = 0; j < NRUNS && ok; j++)
      ok = cudaMemset(rc->y[j], 0xFF, X_BYTES) == cudaSuccess;
    CHECK(ok, "rank %d: uploads failed", rc->rank);
    if (!ok) break;
    const loom_result_t r = loom_moe_create(rc->comm, cfg, &rc->moe);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_create: %s", rc->rank, loom_last_error());
    ok = r == LOOM_SUCCESS;
    if (ok) {
      const loom_result_t s = loom_moe_set_weights(rc->moe, rc->gate[0], rc->w1, rc->w2);
      CHECK(s == LOOM_SUCCESS, "rank %d loom_moe_set_weights: %s", rc->rank, loom_last_error());
      ok = s == LOOM_SUCCESS;
    }
  }
  free(x);
  free(wts);
  free(ids);
  if (ok) ok = sync_devices(w) == 0;
  return ok ? 0 : -1;
}

/* One forward on every local rank into y[run]; launches must succeed. */
static int launch_all(world_t *w, int run, const char *what) {
  int ok = 1;
  for (int i = 0; i < w->nlocal; i++) {
    rank_ctx *rc = &w->cs[i];
    CUDA_T(cudaSetDevice(rc->device));
    const loom_result_t r =
        forward(rc, rc->x[0], FAULT_TOKENS, rc->y[run], fault_caller(rc->rank), NULL, NULL);
    CHECK(r == LOOM_SUCCESS, "%s: rank %d forward: %s: %s", what, rc->rank, loom_result_string(r),
          loom_last_error());
    ok &= r == LOOM_SUCCESS;
  }
  return ok ? 0 : -1;
}

/* A healthy forward on every rank (loads the kernel, so the timed call
 * below does not include module loading); no async error allowed. */
static int warm_up(world_t *w, const char *what) {
  char step[160];
  snprintf(step, sizeof step, "%s (warm-up)", what);
  if (world_barrier(w, "warm-up") != 0 || launch_all(w, 0, step) != 0) return -1;
  if (wait_streams(w, STREAM_DEADLINE_S, step) != 0) return -1;
  if (check_no_async(w, step) != 0) return -1;
  return world_barrier(w, "warm-up done");
}

/* The faulty call: launch on every local rank after a barrier, poll the
 * async errors (no stream sync), then drain the streams and meet. */
static int faulty_call(world_t *w, const char *what) {
  if (world_barrier(w, "fault launch") != 0) return -1;
  if (launch_all(w, 1, what) != 0) return -1;
  poll_errors(w, LONG_TIMEOUT_MS / 1000.0 + 2.0);
  if (wait_streams(w, STREAM_DEADLINE_S, what) != 0) return -1;
  return world_barrier(w, "fault polled");
}

/* Arrival times: every local rank within ARRIVAL_BOUND_S of the reference
 * rank's (ref < 0: the earliest rank). The process holding rank 0 prints
 * the whole picture. Call after faulty_call (all times recorded). */
static void check_arrival(world_t *w, int ref, const char *what) {
  const shared_t *s = w->sh;
  double t_ref = 0;
  if (ref >= 0) {
    t_ref = s->t_err[ref];
  } else {
    for (int r = 0; r < w->R; r++)
      if (s->t_err[r] > 0 && (t_ref == 0 || s->t_err[r] < t_ref)) t_ref = s->t_err[r];
  }
  for (int i = 0; i < w->nlocal; i++) {
    const int r = w->cs[i].rank;
    const double t = s->t_err[r];
    CHECK(t > 0 && t_ref > 0 && fabs(t - t_ref) <= ARRIVAL_BOUND_S,
          "%s: rank %d's error arrived %+.1f ms from the %s rank's (bound %.0f ms)%s", what, r,
          (t - t_ref) * 1e3, ref >= 0 ? "faulty" : "earliest", ARRIVAL_BOUND_S * 1e3,
          t > 0 && t_ref > 0 ? "" : " (a rank reported no error)");
  }
  if (w->cs[0].rank != 0) return;
  printf("  %s:", what);
  for (int r = 0; r < w->R; r++)
    printf(" r%d %s %+.2f ms%s", r, loom_result_string((loom_result_t)s->res[r]),
           s->t_err[r] > 0 && t_ref > 0 ? (s->t_err[r] - t_ref) * 1e3 : 0.0,
           r + 1 < w->R ? ";" : "\n");
  printf("    r0: %s\n    r%d: %s\n", s->msg[0], w->R - 1, s->msg[w->R - 1]);
  fflush(stdout);
}

/* A communicator with an async error refuses further operators. */
static void check_refuses(world_t *w, const char *what) {
  for (int i = 0; i < w->nlocal; i++) {
    rank_ctx *rc = &w->cs[i];
    if (w->sh->res[rc->rank] == LOOM_SUCCESS) continue; /* would launch a real call */
    const loom_result_t f =
        forward(rc, rc->x[0], FAULT_TOKENS, rc->y[2], fault_caller(rc->rank), NULL, NULL);
    CHECK(f == LOOM_INVALID_USAGE, "%s: rank %d: forward after an async error returned %s, want "
          "invalid usage", what, rc->rank, loom_result_string(f));
    const loom_result_t x =
        loom_exchange(rc->comm, LOOM_EXCHANGE_RING, rc->x[0], rc->y[3], 1024, rc->stream);
    CHECK(x == LOOM_INVALID_USAGE, "%s: rank %d: exchange after an async error returned %s, "
          "want invalid usage", what, rc->rank, loom_result_string(x));
  }
}

/* a: rank 0's caller routing holds an id out of range, or a repeated id. */
static int case_bad_routing(world_t *w, int dup) {
  const int R = w->R;
  char what[96];
  snprintf(what, sizeof what, "R=%d bad-routing/%s", R, dup ? "dup" : "range");
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  const loom_moe_config_t cfg = fault_layer(R, LOOM_ACT_SILU, 2);
  loom_comm_config_t cc;
  if (comm_config(&cfg, 1, R, LONG_TIMEOUT_MS, &cc) != 0 || world_comm_create(w, &cc) != 0)
    return -1;
  int rc = fault_setup(w, &cfg, NULL, case_key(R, dup ? CASE_DUP : CASE_RANGE, 0));
  if (rc == 0) rc = warm_up(w, what);
  /* corrupt entry (BAD_TOKEN, 1) of rank 0's routing */
  for (int i = 0; i < w->nlocal && rc == 0; i++) {
    rank_ctx *c = &w->cs[i];
    if (c->rank != 0) continue;
    int32_t ids[2];
    CUDA_T(cudaSetDevice(c->device));
    CUDA_T(cudaMemcpy(ids, c->ids_in + (size_t)BAD_TOKEN * 2, sizeof ids, cudaMemcpyDeviceToHost));
    ids[1] = dup ? ids[0] : BAD_ID;
    CUDA_T(cudaMemcpy(c->ids_in + (size_t)BAD_TOKEN * 2, ids, sizeof ids, cudaMemcpyHostToDevice));
    CUDA_T(cudaDeviceSynchronize());
  }
  watchdog(CASE_DEADLINE_S, "%s: faulty forward", what);
  if (rc == 0) rc = faulty_call(w, what);
  if (rc == 0) {
    char id_text[32], token_text[32];
    snprintf(id_text, sizeof id_text, "%d", BAD_ID);
    snprintf(token_text, sizeof token_text, "(token %d)", BAD_TOKEN);
    const char *cause = dup ? "repeats expert" : id_text;
    for (int i = 0; i < w->nlocal; i++) {
      const int r = w->cs[i].rank, res = w->sh->res[r];
      const char *m = w->sh->msg[r];
      if (r == 0) {
        CHECK(res == LOOM_INVALID_ARGUMENT, "%s: rank 0 reported %s (%s), want invalid argument",
              what, loom_result_string((loom_result_t)res), m);
        CHECK(strstr(m, token_text) != NULL, "%s: rank 0's message does not name %s: %s", what,
              token_text, m);
      } else {
        CHECK(res == LOOM_PEER_ERROR || res == LOOM_INVALID_ARGUMENT,
              "%s: rank %d reported %s (%s), want peer error", what, r,
              loom_result_string((loom_result_t)res), m);
        if (res == LOOM_PEER_ERROR)
          CHECK(strstr(m, "rank 0 failed first") != NULL && strstr(m, "invalid argument") != NULL,
                "%s: rank %d's message does not say rank 0 failed first (invalid argument): %s",
                what, r, m);
      }
      CHECK(strstr(m, "rank 0") != NULL, "%s: rank %d's message does not name rank 0: %s", what,
            r, m);
      CHECK(strstr(m, cause) != NULL, "%s: rank %d's message does not give the cause (\"%s\"): %s",
            what, r, cause, m);
    }
    check_arrival(w, 0, what);
    check_refuses(w, what);
  }
  const int d = world_comm_destroy(w, what);
  return rc != 0 ? rc : d;
}

/* b: rank R-1's layer has another activation or top_k. */
static int case_config(world_t *w, int topk) {
  const int R = w->R;
  char what[96];
  snprintf(what, sizeof what, "R=%d config/%s", R, topk ? "topk" : "act");
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  loom_moe_config_t cfgs[2];
  cfgs[0] = fault_layer(R, LOOM_ACT_SILU, 2);
  cfgs[1] = topk ? fault_layer(R, LOOM_ACT_SILU, 1) : fault_layer(R, LOOM_ACT_GELU, 2);
  loom_comm_config_t cc;
  if (comm_config(cfgs, 2, R, LONG_TIMEOUT_MS, &cc) != 0 || world_comm_create(w, &cc) != 0)
    return -1;
  const uint64_t key = case_key(R, topk ? CASE_CFG_TOPK : CASE_CFG_ACT, 0);
  /* warm-up on matching layers, then the mismatched ones */
  int rc = fault_setup(w, &cfgs[0], NULL, key);
  if (rc == 0) rc = warm_up(w, what);
  destroy_layers(w);
  if (rc == 0) rc = fault_setup(w, &cfgs[0], &cfgs[1], key);
  watchdog(CASE_DEADLINE_S, "%s: mismatched forward", what);
  if (rc == 0) rc = faulty_call(w, what);
  if (rc == 0) {
    for (int i = 0; i < w->nlocal; i++) {
      const int r = w->cs[i].rank, res = w->sh->res[r];
      const char *m = w->sh->msg[r];
      CHECK(res == LOOM_INVALID_ARGUMENT || res == LOOM_PEER_ERROR,
            "%s: rank %d reported %s (%s), want invalid argument or peer error", what, r,
            loom_result_string((loom_result_t)res), m);
      CHECK(strstr(m, "different config") != NULL,
            "%s: rank %d's message does not name the config mismatch: %s", what, r, m);
      if (res == LOOM_PEER_ERROR)
        CHECK(strstr(m, "failed first (invalid argument)") != NULL,
              "%s: rank %d's peer error does not name the first failure's cause: %s", what, r, m);
    }
    if (w->cs[0].rank == 0) {
      int invalid = 0;
      for (int r = 0; r < R; r++) invalid += w->sh->res[r] == LOOM_INVALID_ARGUMENT;
      CHECK(invalid >= 1, "%s: no rank reported invalid argument itself", what);
    }
    check_arrival(w, -1, what);
    check_refuses(w, what);
  }
  const int d = world_comm_destroy(w, what);
  return rc != 0 ? rc : d;
}

/* c: rank 0 makes one forward more than the others. */
static int case_extra_call(world_t *w) {
  const int R = w->R;
  char what[96];
  snprintf(what, sizeof what, "R=%d extra-call", R);
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  const loom_moe_config_t cfg = fault_layer(R, LOOM_ACT_SILU, 2);
  loom_comm_config_t cc;
  if (comm_config(&cfg, 1, R, SHORT_TIMEOUT_MS, &cc) != 0 || world_comm_create(w, &cc) != 0)
    return -1;
  int rc = fault_setup(w, &cfg, NULL, case_key(R, CASE_EXTRA, 0));
  if (rc == 0) rc = world_barrier(w, "extra-call launch");
  const double limit = SHORT_TIMEOUT_MS / 1000.0 + 1.0;
  double t_launch = 0;
  if (rc == 0) {
    rc = launch_all(w, 0, what);
    for (int i = 0; i < w->nlocal && rc == 0; i++) {
      rank_ctx *c = &w->cs[i];
      if (c->rank != 0) continue;
      CUDA_T(cudaSetDevice(c->device));
      const loom_result_t r = forward(c, c->x[0], FAULT_TOKENS, c->y[1], fault_caller(0), NULL, NULL);
      t_launch = now_s();
      CHECK(r == LOOM_SUCCESS, "%s: rank 0's second forward: %s", what, loom_last_error());
      if (r != LOOM_SUCCESS) rc = -1;
    }
  }
  if (rc == 0) {
    poll_errors(w, limit + 2.0); /* returns at once where none comes */
    rc = wait_streams(w, STREAM_DEADLINE_S, what);
  }
  for (int i = 0; i < w->nlocal && rc == 0; i++) {
    const int r = w->cs[i].rank, res = w->sh->res[r];
    const char *m = w->sh->msg[r];
    if (r == 0) {
      const double waited = w->sh->t_err[0] - t_launch;
      CHECK(res == LOOM_TIMEOUT || res == LOOM_INVALID_USAGE,
            "%s: rank 0 (one call too many) reported %s (%s), want timeout or invalid usage",
            what, loom_result_string((loom_result_t)res), m);
      CHECK(res != LOOM_SUCCESS && waited <= limit,
            "%s: rank 0's error came %.2f s after its extra launch (timeout %d ms + 1 s allowed)",
            what, waited, SHORT_TIMEOUT_MS);
      printf("  %s: rank 0 reported %s after %.2f s: %s\n", what,
             loom_result_string((loom_result_t)res), waited, m);
    } else {
      /* poll_errors waited out its deadline for these ranks */
      loom_result_t a = LOOM_SUCCESS;
      LOOM_T(loom_comm_get_async_error(w->cs[i].comm, &a));
      CHECK(a == LOOM_SUCCESS, "%s: rank %d's one call reported %s: %s", what, r,
            loom_result_string(a), loom_last_error());
    }
  }
  if (rc == 0) rc = world_barrier(w, "extra-call: rank 0 done");
  /* the others' next call must stop at once on rank 0's recorded fault */
  if (rc == 0) {
    watchdog(CASE_DEADLINE_S, "%s: the others' next forward", what);
    double t0 = now_s();
    for (int i = 0; i < w->nlocal && rc == 0; i++) {
      rank_ctx *c = &w->cs[i];
      if (c->rank == 0) continue;
      CUDA_T(cudaSetDevice(c->device));
      const loom_result_t r =
          forward(c, c->x[0], FAULT_TOKENS, c->y[1], fault_caller(c->rank), NULL, NULL);
      CHECK(r == LOOM_SUCCESS, "%s: rank %d's next forward: %s", what, c->rank, loom_last_error());
      if (r != LOOM_SUCCESS) rc = -1;
    }
    if (rc == 0) {
      world_t others = *w; /* poll only the ranks that made the call (not rank 0) */
      others.nlocal = 0;
      for (int i = 0; i < w->nlocal; i++)
        if (w->cs[i].rank != 0) others.cs[others.nlocal++] = w->cs[i];
      poll_errors(&others, SHORT_TIMEOUT_MS / 1000.0 + 2.0);
      rc = wait_streams(&others, STREAM_DEADLINE_S, what);
      for (int i = 0; i < others.nlocal && rc == 0; i++) {
        const int r = others.cs[i].rank, res = w->sh->res[r];
        const char *m = w->sh->msg[r];
        const double waited = w->sh->t_err[r] - t0;
        CHECK(res == LOOM_PEER_ERROR && strstr(m, "rank 0 failed first") != NULL,
              "%s: rank %d's call after rank 0's failure reported %s (%s), want peer error naming "
              "rank 0",
              what, r, loom_result_string((loom_result_t)res), m);
        CHECK(res != LOOM_SUCCESS && waited <= SHORT_TIMEOUT_MS / 2000.0,
              "%s: rank %d stopped %.3f s after launch; the recorded fault should stop it at once "
              "(bound: half its %d ms timeout)",
              what, r, waited, SHORT_TIMEOUT_MS);
      }
    }
  }
  if (rc == 0) rc = world_barrier(w, "extra-call: others done");
  if (rc == 0) check_refuses(w, what);
  const int d = world_comm_destroy(w, what);
  return rc != 0 ? rc : d;
}

/* At the same call number rank 0 runs a ring
 * exchange while every other rank runs a MoE forward. loom.h: "a rank that
 * is out of step gets an asynchronous error, not wrong data", so every
 * rank, rank 0 included, must end with an async error. */
static int case_op_mismatch(world_t *w) {
  const int R = w->R;
  char what[96];
  snprintf(what, sizeof what, "R=%d op-mismatch", R);
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  const loom_moe_config_t cfg = fault_layer(R, LOOM_ACT_SILU, 2);
  const size_t bpp = 1024;
  loom_comm_config_t cc;
  size_t xb = 0;
  if (comm_config(&cfg, 1, R, LONG_TIMEOUT_MS, &cc) != 0) return -1;
  LOOM_T(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, R, bpp, &xb));
  if ((int64_t)xb > cc.workspace_bytes) cc.workspace_bytes = (int64_t)xb;
  if (world_comm_create(w, &cc) != 0) return -1;
  int rc = fault_setup(w, &cfg, NULL, case_key(R, CASE_OP_MISMATCH, 0));
  if (rc == 0) rc = warm_up(w, what);
  if (rc == 0) rc = world_barrier(w, "op-mismatch launch");
  watchdog(CASE_DEADLINE_S, "%s: exchange against forwards", what);
  for (int i = 0; i < w->nlocal && rc == 0; i++) {
    rank_ctx *c = &w->cs[i];
    CUDA_T(cudaSetDevice(c->device));
    const loom_result_t r =
        c->rank == 0
            ? loom_exchange(c->comm, LOOM_EXCHANGE_RING, c->x[0], c->y[1], bpp, c->stream)
            : forward(c, c->x[0], FAULT_TOKENS, c->y[1], fault_caller(c->rank), NULL, NULL);
    CHECK(r == LOOM_SUCCESS, "%s: rank %d launch: %s", what, c->rank, loom_last_error());
    if (r != LOOM_SUCCESS) rc = -1;
  }
  if (rc == 0) {
    poll_errors(w, LONG_TIMEOUT_MS / 1000.0 + 2.0);
    rc = wait_streams(w, STREAM_DEADLINE_S, what);
  }
  if (rc == 0) rc = world_barrier(w, "op-mismatch polled");
  if (rc == 0) {
    for (int i = 0; i < w->nlocal; i++) {
      const int r = w->cs[i].rank, res = w->sh->res[r];
      CHECK(res != LOOM_SUCCESS,
            "%s: rank %d (%s while the others ran %s) reported no error: out-of-step ranks must "
            "get an async error, not wrong data",
            what, r, r == 0 ? "exchange" : "moe forward", r == 0 ? "moe forwards" : "an exchange");
    }
    check_arrival(w, -1, what);
    check_refuses(w, what);
  }
  const int d = world_comm_destroy(w, what);
  return rc != 0 ? rc : d;
}

/* config/experts: a layer of 1024 experts (loom.h's bound), every rank's
 * gate weights, W1 and W2 zero and x finite. Where the gate's logits tile
 * does not fit a block's shared memory (H100 / H200), every rank's first
 * forward must return LOOM_INVALID_ARGUMENT naming num_experts and how many
 * experts fit, launch nothing (no async error once the streams drain), and
 * a layer of that many experts (rounded down to a multiple of R) must then
 * run on the same communicator: y, poisoned first, comes back all zeros
 * (zero weights). Where 1024 fits, the first layer must run the same way. */
static int experts_layers(world_t *w, const loom_moe_config_t *cfg, void **bufs) {
  const int R = w->R;
  const size_t H = (size_t)cfg->hidden, F = (size_t)cfg->ffn, El = (size_t)cfg->num_experts / R;
  const size_t bytes[3] = {H * (size_t)cfg->num_experts * 2, El * (size_t)f1_of(cfg) * H * 2, El * H * F * 2};
  for (int i = 0; i < w->nlocal; i++) {
    rank_ctx *rc = &w->cs[i];
    CUDA_T(cudaSetDevice(rc->device));
    for (int j = 0; j < 3; j++) {
      void **b = &bufs[3 * i + j];
      if (*b) cudaFree(*b);
      *b = NULL;
      CUDA_T(cudaMalloc(b, bytes[j]));
      CUDA_T(cudaMemset(*b, 0, bytes[j]));
    }
    CUDA_T(cudaMemset(rc->x[0], 0x3C, (size_t)FAULT_TOKENS * H * 2)); /* bf16 0x3C3C: finite */
    CUDA_T(cudaMemset(rc->y[0], 0xFF, (size_t)FAULT_TOKENS * H * 2));
    LOOM_T(loom_moe_create(rc->comm, cfg, &rc->moe));
    LOOM_T(loom_moe_set_weights(rc->moe, bufs[3 * i], bufs[3 * i + 1], bufs[3 * i + 2]));
  }
  return sync_devices(w);
}

/* The forwards of experts_layers' layers ran: streams drained, no async
 * error, every element of y +-0. */
static int experts_ran(world_t *w, const loom_moe_config_t *cfg, const char *what) {
  if (wait_streams(w, STREAM_DEADLINE_S, what) != 0 || check_no_async(w, what) != 0) return -1;
  const size_t n = (size_t)FAULT_TOKENS * (size_t)cfg->hidden;
  uint16_t *y = malloc(n * 2);
  CHECK(y != NULL, "host allocation");
  if (y == NULL) return -1;
  int ok = 1;
  for (int i = 0; i < w->nlocal && ok; i++) {
    CUDA_T(cudaSetDevice(w->cs[i].device));
    CUDA_T(cudaMemcpy(y, w->cs[i].y[0], n * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t j = 0; j < n; j++) bad += (y[j] & 0x7FFFu) != 0;
    CHECK(bad == 0, "%s: rank %d, E = %d: %zu of %zu y elements not zero (zero weights)", what,
          w->cs[i].rank, (int)cfg->num_experts, bad, n);
    ok = bad == 0;
  }
  free(y);
  return ok ? 0 : -1;
}

static int case_experts(world_t *w) {
  const int R = w->R;
  char what[96];
  snprintf(what, sizeof what, "R=%d config/experts", R);
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  loom_moe_config_t cfg = fault_layer(R, LOOM_ACT_SILU, 2);
  cfg.num_experts = 1024;
  loom_comm_config_t cc;
  if (comm_config(&cfg, 1, R, LONG_TIMEOUT_MS, &cc) != 0 || world_comm_create(w, &cc) != 0) return -1;
  void *bufs[3 * MAX_RANKS] = {0};
  int rc = experts_layers(w, &cfg, bufs);
  int fit = -1, refused = 0;
  for (int i = 0; i < w->nlocal && rc == 0; i++) {
    rank_ctx *c = &w->cs[i];
    CUDA_T(cudaSetDevice(c->device));
    const loom_result_t r = forward(c, c->x[0], FAULT_TOKENS, c->y[0], 0, NULL, NULL);
    const char *m = loom_last_error();
    if (r == LOOM_SUCCESS) continue;
    refused++;
    CHECK(r == LOOM_INVALID_ARGUMENT, "%s: rank %d forward returned %s (%s), want invalid argument",
          what, c->rank, loom_result_string(r), m);
    CHECK(strstr(m, "num_experts 1024") != NULL && strstr(m, "experts fit") != NULL,
          "%s: rank %d's message does not name num_experts and how many fit: %s", what, c->rank, m);
    const char *at = strstr(m, "at most ");
    const int f = at != NULL ? atoi(at + 8) : -1;
    CHECK(f >= R && f < 1024 && (fit < 0 || f == fit), "%s: rank %d: at most %d experts fit? (%s)",
          what, c->rank, f, m);
    if (r != LOOM_INVALID_ARGUMENT || f < R || f >= 1024 || (fit >= 0 && f != fit)) rc = -1;
    fit = f;
  }
  CHECK(refused == 0 || refused == w->nlocal, "%s: %d of %d ranks refused the layer", what, refused,
        w->nlocal);
  if (refused != 0 && refused != w->nlocal) rc = -1;
  if (rc == 0 && refused == 0) rc = experts_ran(w, &cfg, what); /* 1024 fits this GPU */
  if (rc == 0 && refused != 0) {
    /* nothing launched: the streams are idle and no rank has an error */
    if (wait_streams(w, STREAM_DEADLINE_S, what) != 0 || check_no_async(w, what) != 0) rc = -1;
    destroy_layers(w);
    cfg.num_experts = fit / R * R;
    if (rc == 0) rc = experts_layers(w, &cfg, bufs);
    watchdog(CASE_DEADLINE_S, "%s: forward of %d experts", what, (int)cfg.num_experts);
    for (int i = 0; i < w->nlocal && rc == 0; i++) {
      rank_ctx *c = &w->cs[i];
      CUDA_T(cudaSetDevice(c->device));
      const loom_result_t r = forward(c, c->x[0], FAULT_TOKENS, c->y[0], 0, NULL, NULL);
      CHECK(r == LOOM_SUCCESS, "%s: rank %d forward of the %d experts that fit: %s", what, c->rank,
            (int)cfg.num_experts, loom_last_error());
      if (r != LOOM_SUCCESS) rc = -1;
    }
    if (rc == 0) rc = experts_ran(w, &cfg, what);
  }
  if (rc == 0 && w->cs[0].rank == 0)
    printf("  %s: %s\n", what, refused ? "1024 experts refused, the number named runs" : "1024 experts run");
  const int d = world_comm_destroy(w, what);
  for (int i = 0; i < 3 * MAX_RANKS; i++)
    if (bufs[i]) {
      cudaSetDevice(w->cs[i / 3].device);
      cudaFree(bufs[i]);
    }
  return rc != 0 ? rc : d;
}

/* ---- non-finite gate ------------------------------------------------------------------------ */

typedef struct {
  int E, k, dtype, act, normalize;
} nf_cfg;

/* Every (E, k) with E in {R, 2R, 3R}, k in {4, 8}, k <= E, E/R < k. */
static int nf_configs(int R, nf_cfg *out) {
  static const int dtypes[3] = {LOOM_BF16, LOOM_FP32, LOOM_FP16};
  static const int acts[4] = {LOOM_ACT_SILU, LOOM_ACT_SWIGLU, LOOM_ACT_RELU, LOOM_ACT_GELU};
  static const int ks[2] = {4, 8};
  int n = 0;
  for (int m = 1; m <= 3; m++)
    for (int j = 0; j < 2; j++) {
      const int E = m * R, k = ks[j];
      if (k > E || E / R >= k || n >= NF_MAX_CONFIGS) continue;
      out[n].E = E;
      out[n].k = k;
      out[n].dtype = dtypes[n % 3];
      out[n].act = acts[n % 4];
      out[n].normalize = n % 2 == 0;
      n++;
    }
  return n;
}

static loom_moe_config_t nf_layer(const nf_cfg *c) {
  loom_moe_config_t l = LOOM_MOE_CONFIG_INIT;
  l.hidden = NF_HIDDEN;
  l.ffn = NF_FFN;
  l.num_experts = c->E;
  l.top_k = c->k;
  l.max_tokens_per_rank = NF_TMAX;
  l.activation = c->act;
  l.dtype = c->dtype;
  l.normalize_top_k = c->normalize;
  return l;
}

/* Host copies for one rank of one non-finite config. */
typedef struct {
  int T;
  float *x_bad, *x_good;      /* [T x H] */
  float *gate[3];             /* [H x E]: normal, NaN column, +-Inf */
  unsigned char *bad;         /* [T] token made non-finite in x_bad */
  int32_t *ref_ids;           /* [T x k] */
  float *ref_wts, *logits;    /* [T x k], [T x E] */
  unsigned char *ref_bad;     /* [T] token with a non-finite logit */
  int32_t *ids;               /* downloads */
  float *wts, *yf;
  unsigned char *yraw[2];     /* runs 0 and 1, raw dtype bytes */
} nf_host;

static void nf_free(nf_host *h) {
  free(h->x_bad);
  free(h->x_good);
  for (int i = 0; i < 3; i++) free(h->gate[i]);
  free(h->bad);
  free(h->ref_ids);
  free(h->ref_wts);
  free(h->logits);
  free(h->ref_bad);
  free(h->ids);
  free(h->wts);
  free(h->yf);
  free(h->yraw[0]);
  free(h->yraw[1]);
  memset(h, 0, sizeof *h);
}

static int nf_alloc(nf_host *h) {
  memset(h, 0, sizeof *h);
  const size_t xs = (size_t)MAX_TOKENS * MAX_HIDDEN, tk = (size_t)MAX_TOKENS * MAX_TOPK;
  h->x_bad = malloc(xs * 4);
  h->x_good = malloc(xs * 4);
  int ok = h->x_bad && h->x_good;
  for (int i = 0; i < 3; i++) ok = ok && (h->gate[i] = malloc(GATE_BYTES)) != NULL;
  h->bad = malloc(MAX_TOKENS);
  h->ref_bad = malloc(MAX_TOKENS);
  h->ref_ids = malloc(tk * 4);
  h->ref_wts = malloc(tk * 4);
  h->logits = malloc((size_t)MAX_TOKENS * MAX_EXPERTS * 4);
  h->ids = malloc(tk * 4);
  h->wts = malloc(tk * 4);
  h->yf = malloc(xs * 4);
  h->yraw[0] = malloc(xs * 4);
  h->yraw[1] = malloc(xs * 4);
  ok = ok && h->bad && h->ref_bad && h->ref_ids && h->ref_wts && h->logits && h->ids && h->wts &&
       h->yf && h->yraw[0] && h->yraw[1];
  CHECK(ok, "host allocation");
  if (!ok) nf_free(h);
  return ok ? 0 : -1;
}

/* Rank `rank`'s x: finite x_good; x_bad equal but for the bad tokens
 * (t == T-1, or (7t + 3 rank) % 13 == 0), where 1-3 entries become NaN,
 * +Inf, -Inf, both infinities, or NaN and +Inf (by token). The gates: gate
 * (normal), gate with column e_nan all NaN, gate with one +Inf and one -Inf
 * entry in two columns. */
static void nf_gen(const loom_moe_config_t *l, uint64_t key, int rank, nf_host *h) {
  const int H = (int)l->hidden, E = (int)l->num_experts, T = h->T;
  gen_x(l, key, rank, T, h->x_good);
  memcpy(h->x_bad, h->x_good, (size_t)T * H * sizeof(float));
  rng_t r = rng_make(key, KIND_BAD, rank);
  for (int t = 0; t < T; t++) {
    h->bad[t] = t == T - 1 || (7 * t + 3 * rank) % 13 == 0;
    if (!h->bad[t]) continue;
    const int kind = (t + rank) % 5, n = 1 + rng_int(&r, 3);
    for (int i = 0; i < n; i++) {
      float v = kind == 0 ? NAN : kind == 1 ? INFINITY : kind == 2 ? -INFINITY
                : kind == 3 ? (i % 2 ? -INFINITY : INFINITY) : (i % 2 ? NAN : INFINITY);
      h->x_bad[(size_t)t * H + rng_int(&r, H)] = v;
    }
  }
  gen_gate(l, key, h->gate[0]);
  const size_t gn = (size_t)H * E;
  memcpy(h->gate[1], h->gate[0], gn * sizeof(float));
  memcpy(h->gate[2], h->gate[0], gn * sizeof(float));
  rng_t p = rng_make(key, KIND_PICK, 0);
  const int e_nan = rng_int(&p, E);
  for (int hh = 0; hh < H; hh++) h->gate[1][(size_t)hh * E + e_nan] = NAN;
  const int e1 = rng_int(&p, E), e2 = (e1 + 1 + rng_int(&p, E - 1)) % E;
  h->gate[2][(size_t)rng_int(&p, H) * E + e1] = INFINITY;
  h->gate[2][(size_t)rng_int(&p, H) * E + e2] = -INFINITY;
}

static int all_nonfinite(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) return 0;
  return 1;
}
static int all_finite(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i])) return 0;
  return 1;
}

/* Verify forward `run` of rank rc against the reference gate; keeps run 0
 * and 1's raw y for the bitwise comparison. */
static int nf_verify_run(rank_ctx *rc, const loom_moe_config_t *l, nf_host *h, int run,
                         const char *desc) {
  const int T = h->T, H = (int)l->hidden, E = (int)l->num_experts, k = (int)l->top_k;
  const size_t es = dtype_bytes(l->dtype);
  const float *x = run == 0 ? h->x_bad : h->x_good;
  const float *g = h->gate[run <= 1 ? 0 : run - 1];
  if (T == 0) return 0;
  const int ref = ref_moe_gate(T, H, E, k, l->normalize_top_k, x, g, h->ref_ids, h->ref_wts,
                               h->logits);
  CHECK(ref == 0, "ref_moe_gate failed [%s]", desc);
  if (ref != 0) return -1;
  int mismatch_data = 0;
  for (int t = 0; t < T; t++) {
    h->ref_bad[t] = !all_finite(h->logits + (size_t)t * E, (size_t)E);
    const int want = run == 0 ? h->bad[t] : run == 1 ? 0 : 1;
    mismatch_data += h->ref_bad[t] != want;
  }
  CHECK(mismatch_data == 0,
        "run %d rank %d: %d tokens' logits are not (non-)finite as the test data intends [%s]", run,
        rc->rank, mismatch_data, desc);
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(h->ids, rc->ids_out[run], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
  CUDA_T(cudaMemcpy(h->wts, rc->wts_out[run], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
  unsigned char *raw = h->yraw[0]; /* scratch; nf_compare_oracle downloads again */
  CUDA_T(cudaMemcpy(raw, rc->y[run], (size_t)T * H * es, cudaMemcpyDeviceToHost));
  ref_unpack_array(h->yf, raw, (size_t)T * H, l->dtype);
  int bad_range = 0, bad_dup = 0, ids_fin = 0, ids_bad = 0, w_fin = 0, w_bad = 0, y_bad = 0,
      y_fin = 0, first = -1;
  for (int t = 0; t < T; t++) {
    const int32_t *id = h->ids + (size_t)t * k;
    for (int j = 0; j < k; j++) {
      if (id[j] < 0 || id[j] >= E) bad_range++;
      for (int i = 0; i < j; i++) bad_dup += id[i] == id[j];
    }
    const int same = memcmp(id, h->ref_ids + (size_t)t * k, (size_t)k * 4) == 0;
    const float *wt = h->wts + (size_t)t * k, *rw = h->ref_wts + (size_t)t * k;
    const float *yr = h->yf + (size_t)t * H;
    if (h->ref_bad[t]) {
      ids_bad += !same;
      for (int j = 0; j < k; j++) w_bad += !isnan(wt[j]);
      if (!all_nonfinite(yr, (size_t)H) && y_bad++ == 0) first = t;
    } else {
      ids_fin += !same;
      for (int j = 0; j < k; j++) w_fin += !(fabs((double)wt[j] - rw[j]) <= TOL_WEIGHTS * fabs(rw[j]));
      if (!all_finite(yr, (size_t)H) && y_fin++ == 0 && first < 0) first = t;
    }
  }
  CHECK(bad_range == 0 && bad_dup == 0,
        "run %d rank %d: expert_ids_out has %d ids outside [0, %d) and %d repeats within a token "
        "[%s]",
        run, rc->rank, bad_range, E, bad_dup, desc);
  CHECK(ids_fin == 0, "run %d rank %d: %d finite tokens routed differently from ref_moe_gate [%s]",
        run, rc->rank, ids_fin, desc);
  CHECK(ids_bad == 0,
        "run %d rank %d: %d tokens with non-finite logits routed differently from ref_moe_gate "
        "(the gate's order: NaN lowest, ties to the lower index) [%s]",
        run, rc->rank, ids_bad, desc);
  CHECK(w_fin == 0, "run %d rank %d: %d weights of finite tokens off by > %g relative [%s]", run,
        rc->rank, w_fin, TOL_WEIGHTS, desc);
  CHECK(w_bad == 0, "run %d rank %d: %d weights of tokens with non-finite logits are not NaN [%s]",
        run, rc->rank, w_bad, desc);
  CHECK(y_bad == 0, "run %d rank %d: %d y rows of tokens with non-finite logits have finite "
        "elements (first token %d) [%s]", run, rc->rank, y_bad, first, desc);
  CHECK(y_fin == 0, "run %d rank %d: %d y rows of finite tokens are not finite (first token %d) "
        "[%s]", run, rc->rank, y_fin, first, desc);
  return 0;
}

/* Runs 0 and 1: every finite token's y row, ids and weights bitwise equal. */
static int nf_compare_oracle(rank_ctx *rc, const loom_moe_config_t *l, nf_host *h,
                             const char *desc) {
  const int T = h->T, H = (int)l->hidden, k = (int)l->top_k;
  const size_t es = dtype_bytes(l->dtype), row = (size_t)H * es;
  if (T == 0) return 0;
  int32_t *ids1 = malloc((size_t)T * k * 4), *ids0 = malloc((size_t)T * k * 4);
  float *w0 = malloc((size_t)T * k * 4), *w1 = malloc((size_t)T * k * 4);
  int ok = ids0 && ids1 && w0 && w1;
  CHECK(ok, "host allocation");
  if (ok) {
    CUDA_T(cudaSetDevice(rc->device));
    CUDA_T(cudaMemcpy(ids0, rc->ids_out[0], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(ids1, rc->ids_out[1], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(w0, rc->wts_out[0], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(w1, rc->wts_out[1], (size_t)T * k * 4, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(h->yraw[0], rc->y[0], (size_t)T * row, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(h->yraw[1], rc->y[1], (size_t)T * row, cudaMemcpyDeviceToHost));
    int ydiff = 0, rdiff = 0, first = -1, nfin = 0;
    for (int t = 0; t < T; t++) {
      if (h->bad[t]) continue;
      nfin++;
      if (memcmp(h->yraw[0] + t * row, h->yraw[1] + t * row, row) != 0 && ydiff++ == 0) first = t;
      rdiff += memcmp(ids0 + (size_t)t * k, ids1 + (size_t)t * k, (size_t)k * 4) != 0 ||
               memcmp(w0 + (size_t)t * k, w1 + (size_t)t * k, (size_t)k * 4) != 0;
    }
    CHECK(ydiff == 0,
          "rank %d: %d of %d finite tokens' y rows differ from the all-finite run (first token "
          "%d): a non-finite token changed another token's row [%s]",
          rc->rank, ydiff, nfin, first, desc);
    CHECK(rdiff == 0,
          "rank %d: %d finite tokens' routing differs from the all-finite run [%s]", rc->rank,
          rdiff, desc);
  }
  free(ids0);
  free(ids1);
  free(w0);
  free(w1);
  return ok ? 0 : -1;
}

/* One non-finite config on the open communicator. */
static int nf_run_config(world_t *w, const nf_cfg *nc, int ci, nf_host *hs) {
  const int R = w->R;
  const loom_moe_config_t l = nf_layer(nc);
  char desc[256];
  static const char *const acts[LOOM_NUM_ACTIVATIONS] = {"relu", "gelu", "silu", "swiglu"};
  snprintf(desc, sizeof desc,
           "R=%d non-finite config %d: %s %s E=%d top_k=%d normalize_top_k=%d seed=0x%" PRIx64, R,
           ci, loom_dtype_string((loom_dtype_t)nc->dtype), acts[nc->act], nc->E, nc->k,
           nc->normalize, g_seed);
  watchdog(CASE_DEADLINE_S, "%s", desc);
  const uint64_t key = case_key(R, CASE_NONFINITE, ci);
  const size_t H = NF_HIDDEN;
  for (int i = 0; i < w->nlocal; i++) {
    rank_ctx *rc = &w->cs[i];
    nf_host *h = &hs[i];
    h->T = NF_TOKENS[rc->rank];
    nf_gen(&l, key, rc->rank, h);
    if (upload_weights(rc, &l, key, R) != 0) return -1;
    if (upload(rc->x[0], h->x_bad, (size_t)h->T * H, l.dtype) != 0 ||
        upload(rc->x[1], h->x_good, (size_t)h->T * H, l.dtype) != 0 ||
        upload_weight(rc->gate[1], h->gate[1], 1, H, (size_t)nc->E, l.dtype) != 0 ||
        upload_weight(rc->gate[2], h->gate[2], 1, H, (size_t)nc->E, l.dtype) != 0)
      return -1;
    /* Finite poisons, different per forward (NaN would pass for an
     * unwritten bad row or weight, and equal poisons for an unwritten row
     * in both forwards 0 and 1): 0x3C.. is finite in every dtype. Ids
     * poisoned with -1 (out of range). */
    for (int j = 0; j < NRUNS; j++) {
      CUDA_T(cudaMemset(rc->y[j], NF_POISON + j, X_BYTES));
      CUDA_T(cudaMemset(rc->ids_out[j], 0xFF, ROUTE_BYTES));
      CUDA_T(cudaMemset(rc->wts_out[j], NF_POISON + j, ROUTE_BYTES));
    }
    LOOM_T(loom_moe_create(rc->comm, &l, &rc->moe));
  }
  if (sync_devices(w) != 0) return -1;
  /* four forwards back to back; gate_w switched between them */
  int ok = 1;
  for (int run = 0; run < NRUNS && ok; run++)
    for (int i = 0; i < w->nlocal && ok; i++) {
      rank_ctx *rc = &w->cs[i];
      CUDA_T(cudaSetDevice(rc->device));
      LOOM_T(loom_moe_set_weights(rc->moe, rc->gate[run <= 1 ? 0 : run - 1], rc->w1, rc->w2));
      const loom_result_t r = forward(rc, rc->x[run == 0 ? 0 : 1], hs[i].T, rc->y[run], 0,
                                      rc->ids_out[run], rc->wts_out[run]);
      CHECK(r == LOOM_SUCCESS, "run %d rank %d forward: %s [%s]", run, rc->rank, loom_last_error(),
            desc);
      ok = r == LOOM_SUCCESS;
    }
  if (!ok || wait_streams(w, STREAM_DEADLINE_S, desc) != 0 || check_no_async(w, desc) != 0)
    return -1;
  for (int i = 0; i < w->nlocal; i++) {
    for (int run = 0; run < NRUNS; run++)
      if (nf_verify_run(&w->cs[i], &l, &hs[i], run, desc) != 0) return -1;
    if (nf_compare_oracle(&w->cs[i], &l, &hs[i], desc) != 0) return -1;
  }
  destroy_layers(w);
  return 0;
}

/* f: every non-finite config of this world size on one communicator. */
static int case_nonfinite(world_t *w) {
  const int R = w->R;
  nf_cfg cfgs[NF_MAX_CONFIGS];
  loom_moe_config_t layers[NF_MAX_CONFIGS];
  const int n = nf_configs(R, cfgs);
  if (n == 0) {
    CHECK_SKIP("R=%d: no non-finite config with E/R < top_k <= E", R);
    return 0;
  }
  for (int i = 0; i < n; i++) layers[i] = nf_layer(&cfgs[i]);
  char what[64];
  snprintf(what, sizeof what, "R=%d non-finite", R);
  watchdog(CASE_DEADLINE_S, "%s: setup", what);
  loom_comm_config_t cc;
  if (comm_config(layers, n, R, LONG_TIMEOUT_MS, &cc) != 0 || world_comm_create(w, &cc) != 0)
    return -1;
  nf_host hs[MAX_RANKS];
  memset(hs, 0, sizeof hs);
  int rc = 0;
  for (int i = 0; i < w->nlocal && rc == 0; i++) rc = nf_alloc(&hs[i]);
  const int failed_before = check_failed_;
  for (int i = 0; i < n && rc == 0; i++) rc = nf_run_config(w, &cfgs[i], i, hs);
  if (w->cs[0].rank == 0)
    printf("  %s: %d configs (E/R < top_k), %s\n", what, n,
           rc == 0 && check_failed_ == failed_before ? "all checks passed" : "FAILED");
  for (int i = 0; i < w->nlocal; i++) nf_free(&hs[i]);
  const int d = world_comm_destroy(w, what);
  return rc != 0 ? rc : d;
}

/* ---- one world size --------------------------------------------------------------------------- */

static int run_world(world_t *w) {
  int rc = case_bad_routing(w, 0);
  if (rc == 0) rc = case_bad_routing(w, 1);
  if (rc == 0) rc = case_config(w, 0);
  if (rc == 0) rc = case_config(w, 1);
  if (rc == 0) rc = case_extra_call(w);
  if (rc == 0) rc = case_nonfinite(w);
  if (rc == 0) rc = case_op_mismatch(w);
  if (rc == 0) rc = case_experts(w);
  return rc;
}

static int single_process(int R, shared_t *sh) {
  world_t w;
  memset(&w, 0, sizeof w);
  w.R = R;
  w.nlocal = R;
  w.sh = sh;
  int rc = 0;
  watchdog(CASE_DEADLINE_S, "R=%d: buffers", R);
  for (int i = 0; i < R && rc == 0; i++) {
    w.cs[i].rank = i;
    w.cs[i].device = ranks_device(g_mode, i);
    rc = ctx_setup(&w.cs[i]);
  }
  if (rc == 0) rc = run_world(&w);
  watchdog(CASE_DEADLINE_S, "R=%d: teardown", R);
  for (int i = 0; i < R; i++) ctx_free(&w.cs[i]);
  return rc;
}

static int child_rank(const ranks_child *rc, void *arg) {
  const int rank = rc->rank, R = rc->n;
  watchdog(CASE_DEADLINE_S, "rank %d of %d: NCCL bootstrap", rank, R);
  ncclUniqueId id;
  if (ranks_unique_id(rc, &id) != 0) return 1;
  world_t w;
  memset(&w, 0, sizeof w);
  w.multi = 1;
  w.R = R;
  w.nlocal = 1;
  w.sh = (shared_t *)arg;
  w.cs[0].rank = rank;
  w.cs[0].device = rank;
  if (cudaSetDevice(rank) != cudaSuccess || ncclCommInitRank(&w.nccl, R, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL init failed\n", rank);
    return 1;
  }
  if (ctx_setup(&w.cs[0]) == 0) run_world(&w);
  watchdog(CASE_DEADLINE_S, "rank %d of %d: teardown", rank, R);
  ctx_free(&w.cs[0]);
  ncclCommDestroy(w.nccl);
  char name[64];
  snprintf(name, sizeof name, "test_faults multi rank %d/%d", rank, R);
  return check_summary(name);
}

#define PROG "test_faults"
#define USAGE_OPTIONS " [--seed S]"

static int usage(void) { return ranks_usage(PROG, USAGE_OPTIONS); }

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (ranks_mode_parse(argc, argv, PROG, USAGE_OPTIONS, &g_mode) != 0) return RANKS_USAGE_EXIT;
  const int multi = g_mode == RANKS_MULTI;
  for (int a = 2; a < argc; a++) {
    char *end = NULL;
    if (a + 1 >= argc || strcmp(argv[a], "--seed") != 0) return usage();
    g_seed = strtoull(argv[++a], &end, 0);
    if (end == NULL || *end != '\0') return usage();
  }
  char name[64];
  snprintf(name, sizeof name, "%s %s", PROG, RANKS_MODE_NAMES[g_mode]);
  watchdog_start(PROG);
  watchdog(CASE_DEADLINE_S, "counting GPUs");
  const int ngpu = ranks_mode_gpu_count(g_mode);
  const int sizes[3] = {2, 4, 8};
  if (!ranks_world_fits(g_mode, sizes[0], ngpu)) {
    CHECK_SKIP("%d GPU(s) visible; the fault tests need %d", ngpu, sizes[0]);
    alarm(0);
    return check_summary(name);
  }
  printf("%s: %d GPUs visible, seed 0x%" PRIx64 "\n", name, ngpu, g_seed);
  fflush(stdout);
  shared_t *sh = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  if (sh == MAP_FAILED) {
    CHECK(0, "mmap of the shared state failed");
    return check_summary(name);
  }
  const double start = now_s();
  for (int s = 0; s < 3; s++) {
    const int R = sizes[s];
    if (!ranks_world_fits(g_mode, R, ngpu)) {
      CHECK_SKIP("R=%d: %d GPUs needed, %d visible (skipped)", R, R, ngpu);
      continue;
    }
    memset(sh, 0, sizeof *sh);
    atomic_init(&sh->barrier.arrived, 0);
    atomic_init(&sh->barrier.generation, 0);
    const double t = now_s();
    if (multi) {
      watchdog(CHILD_DEADLINE_S, "R=%d: waiting for the rank processes", R);
      char what[32];
      snprintf(what, sizeof what, "R=%d", R);
      ranks_run(R, child_rank, sh, what);
    } else {
      single_process(R, sh);
    }
    printf("R=%d done in %.1f s (%.1f s total, %d failed so far)\n", R, now_s() - t,
           now_s() - start, check_failed_);
    fflush(stdout);
  }
  alarm(0);
  munmap(sh, sizeof *sh);
  return check_summary(name);
}
