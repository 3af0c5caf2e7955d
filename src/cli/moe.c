/*
 * `loom moe`: the MoE layer forward (loom_moe_*) on the first --gpus local
 * GPUs (default: all) from one process (loom_comm_create_all). For each
 * --tokens value (tokens per GPU): fresh random inputs, verification, then
 * --warmup untimed and --iters timed forwards; one table at the end.
 *
 * Verify first. The full CPU reference is far too slow at these sizes, so
 * --check-tokens rows per GPU (evenly spaced, first and last included) are
 * checked against ref_moe_forward run on just those rows with every expert
 * (tokens are independent: the layer runs dropless): routing exactly
 * (expert_ids_out) and within 1e-6 relative (weights_out), y rows by
 * ||y - ref|| / ||ref|| <= 5e-3 (fp32 on TF32) or 2e-2 (bf16/fp16). Also:
 * y is poisoned first and every element must be written, and the stats
 * must agree with the routing the GPU reports (rows_sent per destination,
 * nothing dropped, rows_sent[s -> d] == rows_received[d <- s]).
 *
 * Timing: iterations run back to back in batches of EV_BATCH with a CUDA
 * event after each forward on every GPU's stream; an iteration's layer time
 * is the largest gap between consecutive events over the GPUs. Reported:
 * median/min/max in microseconds; expert TFLOP/s per GPU = two GEMMs,
 * 2 * rows * hidden * ffn FLOPs each (ffn doubled in the first under
 * SwiGLU), rows = every routed row of every GPU, over the median time and
 * the GPU count; stats.bytes_remote per GPU (mean) and its GB/s at the
 * median time.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "report.h"
#include "loom.h"
#include "reference/reference.h"

#define MOE_MAX_GPUS 64
#define EV_BATCH 32  /* timed iterations between host syncs */
#define GEN_ROWS 256 /* rows generated and uploaded at a time */
#define REF_TOKENS_PER_TASK 2
#define MAX_THREADS 256
#define TOL_TF32 5e-3
#define TOL_16BIT 2e-2
#define TOL_WEIGHTS 1e-6

static const uint64_t SEED = 0x6c6f6f6d2d6d6f65ull;

_Static_assert(LOOM_FP32 == 0 && LOOM_BF16 == 1 && LOOM_FP16 == 2 && CLI_NUM_DTYPES == 3,
               "cli_dtype_names follow loom_dtype_t");
_Static_assert(LOOM_ACT_RELU == 0 && LOOM_ACT_GELU == 1 && LOOM_ACT_SILU == 2 &&
                   LOOM_ACT_SWIGLU == 3 && CLI_NUM_ACTS == 4,
               "cli_act_names follow loom_activation_t");
_Static_assert(REF_ACT_RELU == 0 && REF_ACT_GELU == 1 && REF_ACT_SILU == 2 && REF_ACT_SWIGLU == 3,
               "ref_activation follows loom_activation_t");

#define CUDA_OK(call)                                                          \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "loom moe: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,  \
              cudaGetErrorString(e_));                                         \
      return -1;                                                               \
    }                                                                          \
  } while (0)

#define LOOM_OK(call)                                                          \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    if (r_ != LOOM_SUCCESS) {                                                  \
      fprintf(stderr, "loom moe: %s: %s: %s\n", #call, loom_result_string(r_), \
              loom_last_error());                                              \
      return -1;                                                               \
    }                                                                          \
  } while (0)

/* ---- random numbers (splitmix64), one stream per (kind, index) ------------- */

enum { KIND_GATE = 1, KIND_W1, KIND_W2, KIND_X };

typedef struct {
  uint64_t s;
} rng_t;

static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static rng_t rng_make(uint64_t a, uint64_t b, uint64_t c) {
  rng_t r;
  r.s = mix64(SEED ^ mix64(a ^ mix64(b ^ mix64(c))));
  return r;
}

/* Uniform in [-1, 1). */
static float rng_sym(rng_t *r) {
  r->s += 0x9e3779b97f4a7c15ull;
  return (float)((double)(mix64(r->s) >> 11) * 0x1.0p-52 - 1.0);
}

/* ---- state -------------------------------------------------------------------- */

typedef struct {
  cudaStream_t stream;
  cudaEvent_t ev[EV_BATCH + 1];
  int nev;
  void *x, *y, *gate_w, *w1, *w2;
  int32_t *ids;
  float *wts;
  loom_moe_stats_t *stats;
  loom_moe_t moe;
  /* host, per token count: the sampled rows */
  float *xs, *ys, *yref, *ws, *wref;
  int32_t *is, *iref;
  loom_moe_stats_t st;
  double err;
  size_t unwritten;
} gpu_state;

typedef struct {
  const cli_options *o;
  int ngpu, nthreads;
  loom_dtype_t dtype;
  loom_activation_t act;
  size_t es; /* bytes per element */
  int64_t H, F, F1, E, El, k, maxT;
  loom_moe_config_t cfg;
  loom_comm_t comms[MOE_MAX_GPUS];
  gpu_state g[MOE_MAX_GPUS];
  float *gate_w, *w1, *w2; /* host, all experts, rounded to dtype */
  /* current token count */
  int T, nsample;
  int *sample; /* sampled token indices, ascending */
} moe_bench;

typedef cli_moe_row moe_row;

/* ---- small helpers --------------------------------------------------------------- */

static void round_dtype(float *x, size_t n, loom_dtype_t t) {
  if (t == LOOM_BF16) ref_round_bf16_array(x, n);
  if (t == LOOM_FP16) ref_round_fp16_array(x, n);
}

static void to_dtype(void *dst, const float *src, size_t n, loom_dtype_t t) {
  uint16_t *h = (uint16_t *)dst;
  if (t == LOOM_FP32)
    memcpy(dst, src, n * sizeof *src);
  else if (t == LOOM_BF16)
    for (size_t i = 0; i < n; i++) h[i] = ref_float_to_bf16(src[i]);
  else
    for (size_t i = 0; i < n; i++) h[i] = ref_float_to_fp16(src[i]);
}

static float from_dtype1(const void *src, size_t i, loom_dtype_t t) {
  if (t == LOOM_FP32) return ((const float *)src)[i];
  const uint16_t h = ((const uint16_t *)src)[i];
  return t == LOOM_BF16 ? ref_bf16_to_float(h) : ref_fp16_to_float(h);
}

/* Fill n floats with uniform [-scale, scale) from stream (kind, index),
 * rounded to the dtype. */
static void fill_random(float *dst, size_t n, float scale, int kind, int64_t index, uint64_t salt,
                        loom_dtype_t t) {
  rng_t r = rng_make((uint64_t)kind, (uint64_t)index, salt);
  for (size_t i = 0; i < n; i++) dst[i] = rng_sym(&r) * scale;
  round_dtype(dst, n, t);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Run fn(ctx, 0..n) on up to `threads` threads (the caller is one of them). */
typedef int (*task_fn)(void *ctx, int i);
typedef struct {
  task_fn fn;
  void *ctx;
  int n;
  atomic_int next, failed;
} task_pool;

static void *pool_worker(void *p) {
  task_pool *pl = (task_pool *)p;
  for (int i; (i = atomic_fetch_add(&pl->next, 1)) < pl->n;)
    if (pl->fn(pl->ctx, i) != 0) atomic_store(&pl->failed, 1);
  return NULL;
}

static int run_tasks(int n, int threads, task_fn fn, void *ctx) {
  task_pool pl;
  pl.fn = fn;
  pl.ctx = ctx;
  pl.n = n;
  atomic_init(&pl.next, 0);
  atomic_init(&pl.failed, 0);
  pthread_t th[MAX_THREADS];
  int started = 0;
  const int want = n < threads ? n : threads;
  for (int i = 1; i < want && i < MAX_THREADS; i++)
    if (pthread_create(&th[started], NULL, pool_worker, &pl) == 0) started++;
  pool_worker(&pl);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  return atomic_load(&pl.failed) ? -1 : 0;
}

/* ---- setup -------------------------------------------------------------------------- */

static int resolve_shape(moe_bench *b, const cli_options *o) {
  int visible = 0;
  CUDA_OK(cudaGetDeviceCount(&visible));
  b->ngpu = o->gpus > 0 ? o->gpus : visible;
  if (b->ngpu > visible || b->ngpu > MOE_MAX_GPUS) {
    fprintf(stderr, "loom moe: --gpus %d but %d visible (at most %d)\n", b->ngpu, visible,
            MOE_MAX_GPUS);
    return -1;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  b->nthreads = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
  b->dtype = (loom_dtype_t)o->dtype;
  b->act = (loom_activation_t)o->act;
  b->es = b->dtype == LOOM_FP32 ? 4 : 2;
  b->H = o->hidden;
  b->F = o->ffn;
  b->F1 = b->act == LOOM_ACT_SWIGLU ? 2 * o->ffn : o->ffn;
  b->E = o->experts;
  b->k = o->topk;
  b->maxT = 1;
  for (int i = 0; i < o->ntokens; i++)
    if ((int64_t)o->tokens[i] > b->maxT) b->maxT = (int64_t)o->tokens[i];
  loom_moe_config_t cfg = LOOM_MOE_CONFIG_INIT;
  cfg.hidden = b->H;
  cfg.ffn = b->F;
  cfg.num_experts = b->E;
  cfg.top_k = b->k;
  cfg.max_tokens_per_rank = b->maxT;
  cfg.activation = (int)b->act;
  cfg.dtype = (int)b->dtype;
  b->cfg = cfg;
  return 0;
}

static int create_comms(moe_bench *b) {
  size_t ws = 0;
  int slots = 0;
  LOOM_OK(loom_moe_workspace_bytes(&b->cfg, b->ngpu, &ws, &slots));
  b->El = b->E / b->ngpu; /* the call above checked divisibility */
  loom_comm_config_t cc = LOOM_COMM_CONFIG_INIT;
  cc.workspace_bytes = (int64_t)ws;
  cc.signal_slots = slots;
  LOOM_OK(loom_comm_create_all(b->ngpu, NULL, &cc, b->comms));
  return 0;
}

static int alloc_gpu(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t T = (size_t)b->maxT, H = (size_t)b->H, k = (size_t)b->k, El = (size_t)b->El;
  CUDA_OK(cudaSetDevice(d));
  CUDA_OK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  for (; g->nev < EV_BATCH + 1; g->nev++) CUDA_OK(cudaEventCreate(&g->ev[g->nev]));
  CUDA_OK(cudaMalloc(&g->x, T * H * b->es));
  CUDA_OK(cudaMalloc(&g->y, T * H * b->es));
  CUDA_OK(cudaMalloc(&g->gate_w, H * (size_t)b->E * b->es));
  CUDA_OK(cudaMalloc(&g->w1, El * H * (size_t)b->F1 * b->es));
  CUDA_OK(cudaMalloc(&g->w2, El * (size_t)b->F * H * b->es));
  CUDA_OK(cudaMalloc((void **)&g->ids, T * k * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void **)&g->wts, T * k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&g->stats, sizeof(loom_moe_stats_t)));
  const size_t n = (size_t)b->o->check_tokens;
  g->xs = malloc(n * H * sizeof(float));
  g->ys = malloc(n * H * sizeof(float));
  g->yref = malloc(n * H * sizeof(float));
  g->ws = malloc(n * k * sizeof(float));
  g->wref = malloc(n * k * sizeof(float));
  g->is = malloc(n * k * sizeof(int32_t));
  g->iref = malloc(n * k * sizeof(int32_t));
  if (!g->xs || !g->ys || !g->yref || !g->ws || !g->wref || !g->is || !g->iref) {
    fprintf(stderr, "loom moe: out of host memory\n");
    return -1;
  }
  return 0;
}

/* Weights of GPU d's experts (host copy kept for the reference) and the
 * shared gate, scaled so pre-activations, outputs and logits are O(1). */
static int upload_weights(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H, F = (size_t)b->F, F1 = (size_t)b->F1;
  const size_t n1 = H * F1, n2 = F * H, nmax = n1 > H * (size_t)b->E ? n1 : H * (size_t)b->E;
  void *stage = malloc(nmax * b->es);
  if (stage == NULL) return -1;
  int rc = -1;
  if (cudaSetDevice(d) != cudaSuccess) goto out;
  to_dtype(stage, b->gate_w, H * (size_t)b->E, b->dtype);
  if (cudaMemcpy(g->gate_w, stage, H * (size_t)b->E * b->es, cudaMemcpyHostToDevice)) goto out;
  for (int64_t l = 0; l < b->El; l++) {
    const int64_t e = d * b->El + l;
    float *w1 = b->w1 + (size_t)e * n1, *w2 = b->w2 + (size_t)e * n2;
    fill_random(w1, n1, sqrtf(3.0f / (float)H), KIND_W1, e, 0, b->dtype);
    fill_random(w2, n2, sqrtf(3.0f / (float)F), KIND_W2, e, 0, b->dtype);
    to_dtype(stage, w1, n1, b->dtype);
    if (cudaMemcpy((char *)g->w1 + (size_t)l * n1 * b->es, stage, n1 * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
    to_dtype(stage, w2, n2, b->dtype);
    if (cudaMemcpy((char *)g->w2 + (size_t)l * n2 * b->es, stage, n2 * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) goto out;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: GPU %d: uploading weights failed\n", d);
  free(stage);
  return rc;
}

static int weights_task(void *p, int d) { return upload_weights((moe_bench *)p, d); }

static int make_weights(moe_bench *b) {
  const size_t H = (size_t)b->H, E = (size_t)b->E;
  b->gate_w = malloc(H * E * sizeof(float));
  b->w1 = malloc(E * H * (size_t)b->F1 * sizeof(float));
  b->w2 = malloc(E * (size_t)b->F * H * sizeof(float));
  if (!b->gate_w || !b->w1 || !b->w2) {
    fprintf(stderr, "loom moe: out of host memory for the weights (%.1f GB)\n",
            (double)E * H * (double)(b->F1 + b->F) * 4 / 1e9);
    return -1;
  }
  fill_random(b->gate_w, H * E, 3.0f / sqrtf((float)H), KIND_GATE, 0, 0, b->dtype);
  return run_tasks(b->ngpu, b->ngpu, weights_task, b);
}

typedef struct {
  moe_bench *b;
  int d;
  loom_result_t res;
  char msg[512];
} create_job;

static void *create_thread(void *p) {
  create_job *j = (create_job *)p;
  gpu_state *g = &j->b->g[j->d];
  j->res = LOOM_CUDA_ERROR;
  snprintf(j->msg, sizeof j->msg, "cudaSetDevice(%d) failed", j->d);
  if (cudaSetDevice(j->d) != cudaSuccess) return NULL;
  j->res = loom_moe_create(j->b->comms[j->d], &j->b->cfg, &g->moe);
  if (j->res == LOOM_SUCCESS) j->res = loom_moe_set_weights(g->moe, g->gate_w, g->w1, g->w2);
  snprintf(j->msg, sizeof j->msg, "%s", loom_last_error());
  return NULL;
}

/* loom_moe_create is collective: one thread per GPU. */
static int create_layers(moe_bench *b) {
  create_job jobs[MOE_MAX_GPUS];
  pthread_t th[MOE_MAX_GPUS];
  int started[MOE_MAX_GPUS] = {0}, rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    jobs[d].b = b;
    jobs[d].d = d;
    jobs[d].res = LOOM_INTERNAL_ERROR;
    snprintf(jobs[d].msg, sizeof jobs[d].msg, "could not start a thread");
    started[d] = pthread_create(&th[d], NULL, create_thread, &jobs[d]) == 0;
  }
  for (int d = 0; d < b->ngpu; d++) {
    if (started[d]) pthread_join(th[d], NULL);
    if (jobs[d].res != LOOM_SUCCESS) {
      fprintf(stderr, "loom moe: GPU %d: creating the layer: %s: %s\n", d,
              loom_result_string(jobs[d].res), jobs[d].msg);
      rc = -1;
    }
  }
  return rc;
}

/* ---- one token count: inputs, verify ------------------------------------------------- */

/* GPU d's x for this token count, GEN_ROWS rows at a time; keeps the
 * sampled rows. Poisons y and the routing outputs. */
static int upload_inputs(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H, k = (size_t)b->k;
  float *rows = malloc(GEN_ROWS * H * sizeof(float));
  void *stage = malloc(GEN_ROWS * H * b->es);
  int rc = -1, next = 0;
  if (rows == NULL || stage == NULL || cudaSetDevice(d) != cudaSuccess) goto out;
  for (int t0 = 0; t0 < b->T; t0 += GEN_ROWS) {
    const int n = b->T - t0 < GEN_ROWS ? b->T - t0 : GEN_ROWS;
    fill_random(rows, (size_t)n * H, 1.0f, KIND_X, d, ((uint64_t)b->T << 32) | (uint64_t)t0,
                b->dtype);
    for (; next < b->nsample && b->sample[next] < t0 + n; next++)
      memcpy(g->xs + (size_t)next * H, rows + (size_t)(b->sample[next] - t0) * H,
             H * sizeof(float));
    to_dtype(stage, rows, (size_t)n * H, b->dtype);
    if (cudaMemcpy((char *)g->x + (size_t)t0 * H * b->es, stage, (size_t)n * H * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
  }
  if (cudaMemset(g->y, 0xFF, (size_t)b->maxT * H * b->es) ||
      cudaMemset(g->ids, 0xFF, (size_t)b->maxT * k * sizeof(int32_t)) ||
      cudaMemset(g->wts, 0xFF, (size_t)b->maxT * k * sizeof(float)) ||
      cudaMemset(g->stats, 0xFF, sizeof(loom_moe_stats_t)) || cudaDeviceSynchronize())
    goto out;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: GPU %d: uploading inputs failed\n", d);
  free(rows);
  free(stage);
  return rc;
}

static int inputs_task(void *p, int d) { return upload_inputs((moe_bench *)p, d); }

static int launch_verified_forward(moe_bench *b) {
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    loom_moe_args_t a;
    memset(&a, 0, sizeof a);
    a.x = g->x;
    a.num_tokens = b->T;
    a.y = g->y;
    a.expert_ids_out = g->ids;
    a.weights_out = g->wts;
    a.stats = g->stats;
    CUDA_OK(cudaSetDevice(d));
    LOOM_OK(loom_moe_forward_ex(g->moe, &a, g->stream));
  }
  return 0;
}

/* Wait for every GPU (bounded: loom kernels end by the comm's timeout) and
 * report asynchronous errors. */
static int sync_and_check(moe_bench *b) {
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaStreamSynchronize(b->g[d].stream));
  }
  for (int d = 0; d < b->ngpu; d++) {
    loom_result_t async = LOOM_SUCCESS;
    LOOM_OK(loom_comm_get_async_error(b->comms[d], &async));
    if (async != LOOM_SUCCESS) {
      fprintf(stderr, "loom moe: GPU %d: %s: %s\n", d, loom_result_string(async),
              loom_last_error());
      rc = -1;
    }
  }
  return rc;
}

/* Count the y elements still poisoned; copy the sampled rows (y, routing)
 * and the stats to the host. */
static int download(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H, k = (size_t)b->k, n = (size_t)b->T * H;
  unsigned char *y = malloc(n * b->es + 1);
  int32_t *ids = malloc((size_t)b->T * k * sizeof(int32_t) + 1);
  float *wts = malloc((size_t)b->T * k * sizeof(float) + 1);
  int rc = -1;
  if (!y || !ids || !wts || cudaSetDevice(d) != cudaSuccess ||
      cudaMemcpy(y, g->y, n * b->es, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(ids, g->ids, (size_t)b->T * k * 4, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(wts, g->wts, (size_t)b->T * k * 4, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(&g->st, g->stats, sizeof g->st, cudaMemcpyDeviceToHost))
    goto out;
  g->unwritten = 0;
  for (size_t i = 0; i < n; i++) {
    size_t c = 0;
    while (c < b->es && y[i * b->es + c] == 0xFF) c++;
    g->unwritten += c == b->es;
  }
  for (int s = 0; s < b->nsample; s++) {
    const size_t t = (size_t)b->sample[s];
    for (size_t h = 0; h < H; h++) g->ys[s * H + h] = from_dtype1(y, t * H + h, b->dtype);
    memcpy(g->is + s * k, ids + t * k, k * sizeof *ids);
    memcpy(g->ws + s * k, wts + t * k, k * sizeof *wts);
  }
  /* rows_sent per destination must match the routing the GPU reports */
  for (int p = 0; p < b->ngpu; p++) {
    int64_t want = 0;
    for (size_t a = 0; a < (size_t)b->T * k; a++) want += ids[a] >= 0 && ids[a] / b->El == p;
    if (g->st.rows_sent[p] != want) {
      fprintf(stderr, "loom moe: GPU %d: stats.rows_sent[%d] = %lld but its routing sends %lld\n",
              d, p, (long long)g->st.rows_sent[p], (long long)want);
      goto out;
    }
  }
  rc = 0;
out:
  free(y);
  free(ids);
  free(wts);
  return rc;
}

/* Reference for REF_TOKENS_PER_TASK sampled tokens of one GPU. */
static int ref_task(void *p, int i) {
  moe_bench *b = (moe_bench *)p;
  const int per_gpu = (b->nsample + REF_TOKENS_PER_TASK - 1) / REF_TOKENS_PER_TASK;
  const int d = i / per_gpu, s0 = i % per_gpu * REF_TOKENS_PER_TASK;
  const int n = b->nsample - s0 < REF_TOKENS_PER_TASK ? b->nsample - s0 : REF_TOKENS_PER_TASK;
  const size_t H = (size_t)b->H, k = (size_t)b->k;
  gpu_state *g = &b->g[d];
  const int round = b->dtype == LOOM_BF16 ? 1 : b->dtype == LOOM_FP16 ? 2 : 0;
  const ref_moe_shape sh = {.T = n,
                            .H = (int)b->H,
                            .F = (int)b->F,
                            .E = (int)b->E,
                            .k = (int)b->k,
                            .act = (ref_activation)b->act,
                            .renormalize = 1, /* normalize_top_k's default */
                            .capacity = 0,    /* dropless */
                            .h_round = round,
                            .out_round = round};
  return ref_moe_forward(&sh, g->xs + s0 * H, b->gate_w, b->w1, b->w2, NULL, NULL, g->iref + s0 * k,
                         g->wref + s0 * k, g->yref + s0 * H);
}

/* Compare GPU d's sampled rows with the reference; 0 when all agree. */
static int compare(moe_bench *b, int d, double tol) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H, k = (size_t)b->k, nk = (size_t)b->nsample * k;
  int rc = 0;
  if (g->unwritten) {
    fprintf(stderr, "loom moe: GPU %d: %zu of %zu y elements never written\n", d, g->unwritten,
            (size_t)b->T * H);
    rc = -1;
  }
  for (size_t a = 0; a < nk; a++) {
    const double want = g->wref[a], got = g->ws[a];
    if (g->is[a] != g->iref[a] || !(fabs(got - want) <= TOL_WEIGHTS * fabs(want))) {
      fprintf(stderr,
              "loom moe: GPU %d: token %d choice %zu: expert %d weight %.9g, reference "
              "expert %d weight %.9g\n",
              d, b->sample[a / k], a % k, g->is[a], got, g->iref[a], want);
      rc = -1;
      break;
    }
  }
  g->err = ref_rel_error(g->ys, g->yref, (size_t)b->nsample * H);
  if (!(g->err <= tol)) {
    fprintf(stderr, "loom moe: GPU %d: y rel error %.3g over %d sampled tokens > %.1g\n", d, g->err,
            b->nsample, tol);
    rc = -1;
  }
  if (g->st.rows_dropped != 0) {
    fprintf(stderr, "loom moe: GPU %d: stats.rows_dropped = %lld in a dropless layer\n", d,
            (long long)g->st.rows_dropped);
    rc = -1;
  }
  for (int p = 0; p < b->ngpu; p++)
    if (g->st.rows_sent[p] != b->g[p].st.rows_received[d]) {
      fprintf(stderr, "loom moe: GPU %d sent %lld rows to GPU %d, which received %lld\n", d,
              (long long)g->st.rows_sent[p], p, (long long)b->g[p].st.rows_received[d]);
      rc = -1;
    }
  return rc;
}

static int verify(moe_bench *b) {
  const double tol = b->dtype == LOOM_FP32 ? TOL_TF32 : TOL_16BIT;
  if (launch_verified_forward(b) != 0 || sync_and_check(b) != 0) return -1;
  for (int d = 0; d < b->ngpu; d++)
    if (download(b, d) != 0) return -1;
  const int per_gpu = (b->nsample + REF_TOKENS_PER_TASK - 1) / REF_TOKENS_PER_TASK;
  if (run_tasks(per_gpu * b->ngpu, b->nthreads, ref_task, b) != 0) {
    fprintf(stderr, "loom moe: the CPU reference failed\n");
    return -1;
  }
  int rc = 0;
  double worst = 0;
  for (int d = 0; d < b->ngpu; d++) {
    rc |= compare(b, d, tol);
    if (b->g[d].err > worst) worst = b->g[d].err;
  }
  if (rc != 0) {
    printf("verify: FAILED (tokens/GPU %d; details on stderr)\n", b->T);
    return -1;
  }
  printf("verify: ok (tokens/GPU %d: %d sampled x %d GPUs, routing exact, max rel err %.2e <= "
         "%.0e, y fully written, stats consistent)\n",
         b->T, b->nsample, b->ngpu, worst, tol);
  fflush(stdout);
  return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

static int launch_timed(moe_bench *b, int slot) {
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    CUDA_OK(cudaSetDevice(d));
    loom_moe_args_t a;
    memset(&a, 0, sizeof a);
    a.x = g->x;
    a.num_tokens = b->T;
    a.y = g->y;
    a.stats = g->stats; /* the in-kernel phase trace of the last iteration */
    LOOM_OK(loom_moe_forward_ex(g->moe, &a, g->stream));
    if (slot >= 0) CUDA_OK(cudaEventRecord(g->ev[slot], g->stream));
  }
  return 0;
}

/* Layer time of each of `iters` iterations, in microseconds. */
static int time_iterations(moe_bench *b, double *us) {
  for (int i = 0; i < b->o->warmup; i++)
    if (launch_timed(b, -1) != 0) return -1;
  for (int done = 0; done < b->o->iters;) {
    const int n = b->o->iters - done < EV_BATCH ? b->o->iters - done : EV_BATCH;
    for (int d = 0; d < b->ngpu; d++) {
      CUDA_OK(cudaSetDevice(d));
      CUDA_OK(cudaEventRecord(b->g[d].ev[0], b->g[d].stream));
    }
    for (int i = 0; i < n; i++)
      if (launch_timed(b, i + 1) != 0) return -1;
    if (sync_and_check(b) != 0) return -1;
    for (int i = 0; i < n; i++) {
      double worst = 0;
      for (int d = 0; d < b->ngpu; d++) {
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, b->g[d].ev[i], b->g[d].ev[i + 1]));
        if (ms * 1e3 > worst) worst = ms * 1e3;
      }
      us[done + i] = worst;
    }
    done += n;
  }
  return 0;
}

/* Where the time went in the last timed iteration: the end of each phase,
 * max over blocks and GPUs (loom_moe_stats_t.phase_end_ns). */
static int print_phases(moe_bench *b, double phase[5]) {
  for (int i = 0; i < 5; i++) phase[i] = 0;
  for (int d = 0; d < b->ngpu; d++) {
    loom_moe_stats_t st;
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMemcpy(&st, b->g[d].stats, sizeof st, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 5; i++)
      if (st.phase_end_ns[i] / 1e3 > phase[i]) phase[i] = st.phase_end_ns[i] / 1e3;
  }
  printf("phases (last iteration, end of each, us): gate %.0f  place %.0f  dispatch %.0f  "
         "experts %.0f  combine %.0f\n",
         phase[0], phase[1], phase[2], phase[3], phase[4]);
  return 0;
}

static int run_tokens(moe_bench *b, int T, moe_row *row) {
  b->T = T;
  b->nsample = T < b->o->check_tokens ? T : b->o->check_tokens;
  for (int s = 0; s < b->nsample; s++)
    b->sample[s] = b->nsample == 1 ? 0 : (int)((int64_t)s * (T - 1) / (b->nsample - 1));
  if (run_tasks(b->ngpu, b->ngpu, inputs_task, b) != 0 || verify(b) != 0) return -1;
  double *us = malloc((size_t)b->o->iters * sizeof *us);
  if (us == NULL || time_iterations(b, us) != 0) {
    free(us);
    return -1;
  }
  if (print_phases(b, row->phase_us) != 0) {
    free(us);
    return -1;
  }
  qsort(us, (size_t)b->o->iters, sizeof *us, cmp_double);
  row->T = T;
  row->med_us = us[b->o->iters / 2];
  if (b->o->iters % 2 == 0) row->med_us = 0.5 * (us[b->o->iters / 2 - 1] + us[b->o->iters / 2]);
  row->min_us = us[0];
  row->max_us = us[b->o->iters - 1];
  free(us);
  double rows = 0, remote = 0;
  for (int d = 0; d < b->ngpu; d++) {
    for (int p = 0; p < b->ngpu; p++) rows += (double)b->g[d].st.rows_sent[p];
    remote += (double)b->g[d].st.bytes_remote;
  }
  const double flops = 2.0 * rows * (double)b->H * (double)(b->F1 + b->F);
  const double sec = row->med_us * 1e-6;
  row->tflops = sec > 0 ? flops / sec / b->ngpu / 1e12 : 0;
  row->remote_mb = remote / b->ngpu / 1e6;
  row->gbps = sec > 0 ? remote / b->ngpu / sec / 1e9 : 0;
  return 0;
}

/* ---- report and teardown ---------------------------------------------------------------- */

static void print_header(const moe_bench *b) {
  struct cudaDeviceProp p;
  const char *name = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  printf("loom moe: %d x %s, experts %lld (%lld per GPU), top_k %lld, hidden %lld, ffn %lld, "
         "%s%s, %s; %d iters after %d warm-up\n",
         b->ngpu, name, (long long)b->E, (long long)b->El, (long long)b->k, (long long)b->H,
         (long long)b->F, loom_dtype_string(b->dtype), b->dtype == LOOM_FP32 ? " (TF32)" : "",
         cli_act_names[b->act], b->o->iters, b->o->warmup);
  fflush(stdout);
}

static void print_table(const moe_row *rows, int n) {
  printf("\n%10s %11s %11s %11s %12s %14s %10s\n", "tokens/GPU", "median_us", "min_us", "max_us",
         "TFLOP/s/GPU", "remote_MB/GPU", "GB/s/GPU");
  for (int i = 0; i < n; i++)
    printf("%10d %11.1f %11.1f %11.1f %12.1f %14.2f %10.1f\n", rows[i].T, rows[i].med_us,
           rows[i].min_us, rows[i].max_us, rows[i].tflops, rows[i].remote_mb, rows[i].gbps);
  fflush(stdout);
}

static int teardown(moe_bench *b) {
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    cudaSetDevice(d);
    if (g->moe && loom_moe_destroy(g->moe) != LOOM_SUCCESS) {
      fprintf(stderr, "loom moe: GPU %d: loom_moe_destroy: %s\n", d, loom_last_error());
      rc = -1;
    }
    void *dev[] = {g->x, g->y, g->gate_w, g->w1, g->w2, g->ids, g->wts, g->stats};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) cudaFree(dev[i]);
    for (int e = 0; e < g->nev; e++) cudaEventDestroy(g->ev[e]);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->xs);
    free(g->ys);
    free(g->yref);
    free(g->ws);
    free(g->wref);
    free(g->is);
    free(g->iref);
  }
  if (loom_comm_destroy_all(b->ngpu, b->comms) != LOOM_SUCCESS) {
    fprintf(stderr, "loom moe: loom_comm_destroy_all: %s\n", loom_last_error());
    rc = -1;
  }
  free(b->gate_w);
  free(b->w1);
  free(b->w2);
  free(b->sample);
  return rc;
}

/* --json: the same rows, machine-readable. */
static int write_json(const moe_bench *b, const moe_row *rows, int n) {
  if (b->o->json == NULL) return 0;
  struct cudaDeviceProp p;
  cli_moe_run run;
  run.gpus = b->ngpu;
  run.device = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  run.experts = (long long)b->E;
  run.top_k = (long long)b->k;
  run.hidden = (long long)b->H;
  run.ffn = (long long)b->F;
  run.dtype = loom_dtype_string(b->dtype);
  run.act = cli_act_names[b->act];
  run.iters = b->o->iters;
  run.warmup = b->o->warmup;
  FILE *f = fopen(b->o->json, "w");
  if (f == NULL) {
    fprintf(stderr, "loom moe: cannot write %s\n", b->o->json);
    return -1;
  }
  int rc = cli_write_moe_json(f, &run, rows, n);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) fprintf(stderr, "loom moe: error writing %s\n", b->o->json);
  return rc;
}

static int setup(moe_bench *b) {
  if (create_comms(b) != 0) return -1;
  for (int d = 0; d < b->ngpu; d++)
    if (alloc_gpu(b, d) != 0) return -1;
  b->sample = malloc((size_t)b->o->check_tokens * sizeof *b->sample);
  if (b->sample == NULL) return -1;
  print_header(b);
  if (make_weights(b) != 0) return -1;
  return create_layers(b);
}

int cli_moe(const cli_options *o) {
  moe_bench *b = calloc(1, sizeof *b);
  moe_row rows[CLI_MAX_LIST];
  int n = 0, rc = 1;
  if (b == NULL) {
    fprintf(stderr, "loom moe: out of host memory\n");
    return 1;
  }
  b->o = o;
  if (resolve_shape(b, o) == 0) {
    const int ok = setup(b) == 0;
    for (; ok && n < o->ntokens; n++) {
      printf("\ntokens/GPU %d\n", (int)o->tokens[n]);
      if (run_tokens(b, (int)o->tokens[n], &rows[n]) != 0) break;
    }
    if (ok && n == o->ntokens) {
      print_table(rows, n);
      rc = write_json(b, rows, n) == 0 ? 0 : 1;
    }
    if (teardown(b) != 0) rc = 1;
  }
  free(b);
  return rc;
}
