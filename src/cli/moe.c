/*
 * `loom moe`: the MoE layer forward on the first --gpus local GPUs (default:
 * all) from one process, two ways side by side on the same data: the fused
 * loom kernel (loom_moe_*, comms from loom_comm_create_all) and the
 * bulk-synchronous NCCL + cuBLAS baseline (src/baseline, one host thread
 * per GPU on the same NCCL communicators). For each --tokens value (tokens
 * per GPU): fresh random inputs, each implementation verified, then timed;
 * one table at the end, --json for machines. Weights are generated as
 * [in x out] (the reference's layout) and uploaded in --weights' layout
 * (transposed for out-in, the default); both implementations get the
 * layout through the config.
 *
 * Verify first. The full CPU reference is far too slow at these sizes, so
 * --check-tokens rows per GPU (evenly spaced, first and last included) are
 * checked against ref_moe_forward run on just those rows with every expert
 * (tokens are independent: the layer runs dropless): routing exactly
 * (expert ids) and the weights within 1e-6 relative (fused; 1e-5 for the
 * baseline's fp32 softmax), y rows by ||y - ref|| / ||ref|| <= 5e-3 (fp32 on
 * TF32) or 2e-2 (bf16/fp16). y is poisoned first and every element must be
 * written. Fused only: the stats must agree with the routing the GPU
 * reports (rows_sent per destination, nothing dropped, rows_sent[s -> d] ==
 * rows_received[d <- s]).
 *
 * Timing: --warmup untimed forwards, then --iters timed ones, each between
 * two CUDA events on every GPU's stream (optionally after overwriting the
 * L2 cache, outside the events), x cycling through --rotate copies so
 * consecutive iterations do not find their input in L2. An iteration's
 * layer time is the largest event gap over the GPUs. Reported: median /
 * min / max in microseconds; expert TFLOP/s per GPU = two GEMMs, 2 * rows *
 * hidden * ffn FLOPs each (ffn doubled in the first under SwiGLU), rows =
 * every routed row of every GPU, over the median and the GPU count; bytes
 * sent to other GPUs per GPU (mean) and their GB/s at the median; the
 * bound and the median's % of it; fused speedup = baseline median / fused
 * median.
 *
 * Bound: a lower bound on the layer time, max over GPUs of the largest of
 *   expert FLOPs of the rows it serves / GEMM ceiling,
 *   bytes it must send to other GPUs (dispatch + return rows) / NVLink ceiling,
 *   HBM bytes it must move / HBM ceiling: x read, y written, the weights
 *     of its experts that get rows read once (at decode a few of them),
 *     each row it serves read once and its output
 *     written once (the FFN intermediate could stay on chip).
 * Ceilings are measured here unless given by flags: cuBLAS GEMM at 8192^3
 * in --dtype (TF32 for fp32) on GPU 0; every GPU sending to every other at
 * once, egress per GPU, the faster of the copy engines (cudaMemcpyPeerAsync,
 * a stream per pair) and ncclAlltoAll; a device-to-device copy on GPU 0
 * (read + write bytes).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cli.h"
#include "report.h"
#include "trace.h"
#include "loom.h"
#include "baseline/baseline.h"
#include "reference/reference.h"

#define MOE_MAX_GPUS 64
#define EV_BATCH 32  /* timed iterations between host syncs */
#define GEN_ROWS 256 /* rows generated and uploaded at a time */
#define REF_TOKENS_PER_TASK 2
#define MAX_THREADS 256
#define TOL_TF32 5e-3
#define TOL_16BIT 2e-2
#define TOL_WEIGHTS 1e-6
#define TOL_WEIGHTS_BASELINE 1e-5
#define PEAK_N 8192              /* the GEMM ceiling's M = N = K */
#define HBM_BYTES (1ull << 30)   /* the HBM ceiling's copy */
#define LINK_BYTES (256ull << 20) /* the NVLink ceiling's copy per peer */
#define CEILING_REPS 5
#define BASELINE_DEADLINE_S 300  /* a baseline phase longer than this is a hang */
#define TRACE_CAPACITY (1 << 21) /* events per GPU for --trace (64 MiB) */

static const uint64_t SEED = 0x6c6f6f6d2d6d6f65ull;

_Static_assert(LOOM_FP32 == 0 && LOOM_BF16 == 1 && LOOM_FP16 == 2 && CLI_NUM_DTYPES == 3,
               "cli_dtype_names follow loom_dtype_t");
_Static_assert(LOOM_ACT_RELU == 0 && LOOM_ACT_GELU == 1 && LOOM_ACT_SILU == 2 &&
                   LOOM_ACT_SWIGLU == 3 && CLI_NUM_ACTS == 4,
               "cli_act_names follow loom_activation_t");
_Static_assert(LOOM_WEIGHTS_OUT_IN == 0 && LOOM_WEIGHTS_IN_OUT == 1 && CLI_NUM_WEIGHT_LAYOUTS == 2,
               "cli_weights_names follow loom_weight_layout_t");
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

static rng_t rng_make(uint64_t a, uint64_t b, uint64_t c) {
  rng_t r;
  r.s = ref_splitmix64(SEED ^ ref_splitmix64(a ^ ref_splitmix64(b ^ ref_splitmix64(c))));
  return r;
}

/* Uniform in [-1, 1). */
static float rng_sym(rng_t *r) {
  r->s += 0x9e3779b97f4a7c15ull;
  return (float)((double)(ref_splitmix64(r->s) >> 11) * 0x1.0p-52 - 1.0);
}


/* ---- state -------------------------------------------------------------------- */

enum { IMPL_FUSED = 0, IMPL_BASELINE = 1 };
static const char *const impl_names[2] = {"fused", "baseline"};

typedef struct {
  cudaStream_t stream;
  cudaEvent_t ev0[EV_BATCH], ev1[EV_BATCH];
  int nev;
  void *x[CLI_MAX_ROTATE]; /* x[0] is generated, the others are copies */
  void *y, *gate_w, *w1, *w2, *flush;
  size_t flush_bytes;
  int32_t *ids;
  float *wts;
  loom_moe_stats_t *stats;
  loom_moe_trace_event_t *tr_events; /* --trace: TRACE_CAPACITY events */
  loom_moe_trace_info_t *tr_info;
  loom_moe_t moe;
  loom_baseline_t base;
  double *us; /* this GPU's time of each timed iteration */
  int64_t rows_to[MOE_MAX_GPUS]; /* routed rows to each GPU (verified forward) */
  unsigned char routed[CLI_MAX_EXPERTS]; /* expert e got >= 1 of this GPU's rows */
  int64_t wire_bytes;            /* bytes sent to other GPUs, last forward */
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
  loom_weight_layout_t layout; /* of the uploaded weights (--weights) */
  size_t es; /* bytes per element */
  int64_t H, F, F1, E, El, k, maxT;
  loom_moe_config_t cfg;
  loom_comm_t comms[MOE_MAX_GPUS];
  gpu_state g[MOE_MAX_GPUS];
  float *gate_w, *w1, *w2; /* host, all experts, rounded to dtype, [in x out]
                              (the reference's layout) whatever --weights */
  double peak_tflops, nvlink_gbps, hbm_gbps;
  const char *peak_src, *nvlink_src, *hbm_src;
  /* current token count */
  int T, nsample, ref_done, impl;
  int *sample; /* sampled token indices, ascending */
} moe_bench;

typedef cli_moe_row moe_row;

/* ---- small helpers --------------------------------------------------------------- */

/* Fill n floats with uniform [-scale, scale) from stream (kind, index),
 * rounded to the dtype. */
static void fill_random(float *dst, size_t n, float scale, int kind, int64_t index, uint64_t salt,
                        loom_dtype_t t) {
  rng_t r = rng_make((uint64_t)kind, (uint64_t)index, salt);
  for (size_t i = 0; i < n; i++) dst[i] = rng_sym(&r) * scale;
  ref_round_array(dst, n, (int)t);
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
  b->layout = (loom_weight_layout_t)o->weights;
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
  cfg.weight_layout = (int)b->layout;
  b->cfg = cfg;
  return 0;
}

static int create_comms(moe_bench *b) {
  size_t ws = 0;
  int slots = 0;
  LOOM_OK(loom_moe_workspace_bytes(&b->cfg, b->ngpu, &ws, &slots));
  b->El = b->E / b->ngpu; /* the call above checked divisibility */
  char why[1024];
  LOOM_OK(loom_moe_workspace_describe(&b->cfg, b->ngpu, why, sizeof why));
  printf("workspace per GPU: %s\n", why);
  fflush(stdout);
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
  for (; g->nev < EV_BATCH; g->nev++) {
    CUDA_OK(cudaEventCreate(&g->ev0[g->nev]));
    CUDA_OK(cudaEventCreate(&g->ev1[g->nev]));
  }
  for (int r = 0; r < b->o->rotate; r++) CUDA_OK(cudaMalloc(&g->x[r], T * H * b->es));
  CUDA_OK(cudaMalloc(&g->y, T * H * b->es));
  CUDA_OK(cudaMalloc(&g->gate_w, H * (size_t)b->E * b->es));
  CUDA_OK(cudaMalloc(&g->w1, El * H * (size_t)b->F1 * b->es));
  CUDA_OK(cudaMalloc(&g->w2, El * (size_t)b->F * H * b->es));
  CUDA_OK(cudaMalloc((void **)&g->ids, T * k * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void **)&g->wts, T * k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&g->stats, sizeof(loom_moe_stats_t)));
  if (b->o->trace != NULL && (b->o->impl & CLI_IMPL_FUSED)) {
    CUDA_OK(cudaMalloc((void **)&g->tr_events, TRACE_CAPACITY * sizeof(loom_moe_trace_event_t)));
    CUDA_OK(cudaMalloc((void **)&g->tr_info, sizeof(loom_moe_trace_info_t)));
  }
  if (b->o->flush_l2) {
    int l2 = 0;
    CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, d));
    g->flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
    CUDA_OK(cudaMalloc(&g->flush, g->flush_bytes));
  }
  const size_t n = (size_t)b->o->check_tokens;
  g->us = malloc((size_t)b->o->iters * sizeof *g->us);
  g->xs = malloc(n * H * sizeof(float));
  g->ys = malloc(n * H * sizeof(float));
  g->yref = malloc(n * H * sizeof(float));
  g->ws = malloc(n * k * sizeof(float));
  g->wref = malloc(n * k * sizeof(float));
  g->is = malloc(n * k * sizeof(int32_t));
  g->iref = malloc(n * k * sizeof(int32_t));
  if (!g->us || !g->xs || !g->ys || !g->yref || !g->ws || !g->wref || !g->is || !g->iref) {
    fprintf(stderr, "loom moe: out of host memory\n");
    return -1;
  }
  return 0;
}

/* One [rows x cols] ([in x out]) host matrix into stage, in the layer's
 * layout (transposed through tmp for OUT_IN) and dtype. */
static void pack_weight(const moe_bench *b, void *stage, float *tmp, const float *src, size_t rows,
                        size_t cols) {
  if (b->layout == LOOM_WEIGHTS_OUT_IN) {
    ref_transpose(tmp, src, 1, rows, cols);
    src = tmp;
  }
  ref_pack_array(stage, src, rows * cols, (int)b->dtype);
}

/* Weights of GPU d's experts (host copy kept for the reference) and the
 * shared gate, scaled so pre-activations, outputs and logits are O(1),
 * uploaded in --weights' layout. */
static int upload_weights(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H, F = (size_t)b->F, F1 = (size_t)b->F1, E = (size_t)b->E;
  const size_t n1 = H * F1, n2 = F * H, nmax = n1 > H * E ? n1 : H * E;
  void *stage = malloc(nmax * b->es);
  float *tmp = b->layout == LOOM_WEIGHTS_OUT_IN ? malloc(nmax * sizeof(float)) : NULL;
  int rc = -1;
  if (stage == NULL || (b->layout == LOOM_WEIGHTS_OUT_IN && tmp == NULL)) goto out;
  if (cudaSetDevice(d) != cudaSuccess) goto out;
  pack_weight(b, stage, tmp, b->gate_w, H, E);
  if (cudaMemcpy(g->gate_w, stage, H * E * b->es, cudaMemcpyHostToDevice)) goto out;
  for (int64_t l = 0; l < b->El; l++) {
    const int64_t e = d * b->El + l;
    float *w1 = b->w1 + (size_t)e * n1, *w2 = b->w2 + (size_t)e * n2;
    fill_random(w1, n1, sqrtf(3.0f / (float)H), KIND_W1, e, 0, b->dtype);
    fill_random(w2, n2, sqrtf(3.0f / (float)F), KIND_W2, e, 0, b->dtype);
    pack_weight(b, stage, tmp, w1, H, F1);
    if (cudaMemcpy((char *)g->w1 + (size_t)l * n1 * b->es, stage, n1 * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
    pack_weight(b, stage, tmp, w2, F, H);
    if (cudaMemcpy((char *)g->w2 + (size_t)l * n2 * b->es, stage, n2 * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) goto out;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: GPU %d: uploading weights failed\n", d);
  free(stage);
  free(tmp);
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

/* Run fn(b, d) for every GPU d, each on its own thread (collective host
 * calls: loom_moe_create's peers, the baseline's NCCL calls). */
typedef int (*gpu_fn)(moe_bench *b, int d);
typedef struct {
  moe_bench *b;
  gpu_fn fn;
  int d, rc;
} gpu_job;

static void *gpu_thread(void *p) {
  gpu_job *j = (gpu_job *)p;
  j->rc = cudaSetDevice(j->d) == cudaSuccess ? j->fn(j->b, j->d) : -1;
  return NULL;
}

static int on_every_gpu(moe_bench *b, gpu_fn fn) {
  gpu_job jobs[MOE_MAX_GPUS];
  pthread_t th[MOE_MAX_GPUS];
  int started[MOE_MAX_GPUS] = {0}, rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    jobs[d] = (gpu_job){b, fn, d, -1};
    started[d] = pthread_create(&th[d], NULL, gpu_thread, &jobs[d]) == 0;
    if (!started[d]) fprintf(stderr, "loom moe: GPU %d: could not start a thread\n", d);
  }
  for (int d = 0; d < b->ngpu; d++) {
    if (started[d]) pthread_join(th[d], NULL);
    if (jobs[d].rc != 0) rc = -1;
  }
  return rc;
}

static int create_layer(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  if (b->o->impl & CLI_IMPL_FUSED) {
    LOOM_OK(loom_moe_create(b->comms[d], &b->cfg, &g->moe));
    LOOM_OK(loom_moe_set_weights(g->moe, g->gate_w, g->w1, g->w2));
  }
  if (b->o->impl & CLI_IMPL_BASELINE) {
    ncclComm_t nccl = NULL;
    LOOM_OK(loom_comm_nccl(b->comms[d], &nccl));
    LOOM_OK(loom_baseline_create(nccl, &b->cfg, &g->base));
    LOOM_OK(loom_baseline_set_weights(g->base, g->gate_w, g->w1, g->w2));
  }
  return 0;
}

/* ---- ceilings of the bound ------------------------------------------------------------ */

/* cuBLAS at PEAK_N^3 in the layer's dtype on GPU 0: best of CEILING_REPS. */
static int measure_gemm(moe_bench *b) {
  const size_t n = PEAK_N, bytes = n * n * b->es;
  const cudaDataType_t t = b->dtype == LOOM_BF16 ? CUDA_R_16BF
                           : b->dtype == LOOM_FP16 ? CUDA_R_16F
                                                   : CUDA_R_32F;
  const cublasComputeType_t ct =
      b->dtype == LOOM_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  void *A = NULL, *B = NULL, *C = NULL;
  cublasHandle_t h = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  const float one = 1.f, zero = 0.f;
  int rc = -1;
  double best = 1e30;
  if (cudaSetDevice(0) || cudaMalloc(&A, bytes) || cudaMalloc(&B, bytes) || cudaMalloc(&C, bytes) ||
      cudaMemset(A, 0, bytes) || cudaMemset(B, 0, bytes) || cudaEventCreate(&e0) ||
      cudaEventCreate(&e1) || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    goto out;
  for (int r = -2; r < CEILING_REPS; r++) { /* two untimed */
    float ms = 0;
    if (cudaEventRecord(e0, 0) ||
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, PEAK_N, PEAK_N, PEAK_N, &one, A, t, PEAK_N, B, t,
                     PEAK_N, &zero, C, t, PEAK_N, ct, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
        cudaEventRecord(e1, 0) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1))
      goto out;
    if (r >= 0 && ms < best) best = ms;
  }
  b->peak_tflops = 2.0 * n * n * n / (best * 1e-3) / 1e12;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: measuring the GEMM ceiling failed\n");
  if (h) cublasDestroy(h);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return rc;
}

/* A device-to-device copy of HBM_BYTES on GPU 0: (read + write) / time. */
static int measure_hbm(moe_bench *b) {
  void *src = NULL, *dst = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  int rc = -1;
  double best = 1e30;
  if (cudaSetDevice(0) || cudaMalloc(&src, HBM_BYTES) || cudaMalloc(&dst, HBM_BYTES) ||
      cudaMemset(src, 1, HBM_BYTES) || cudaEventCreate(&e0) || cudaEventCreate(&e1))
    goto out;
  for (int r = -1; r < CEILING_REPS; r++) {
    float ms = 0;
    if (cudaEventRecord(e0, 0) || cudaMemcpyAsync(dst, src, HBM_BYTES, cudaMemcpyDeviceToDevice, 0) ||
        cudaEventRecord(e1, 0) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1))
      goto out;
    if (r >= 0 && ms < best) best = ms;
  }
  b->hbm_gbps = 2.0 * HBM_BYTES / (best * 1e-3) / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: measuring the HBM ceiling failed\n");
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(src);
  cudaFree(dst);
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every GPU copies LINK_BYTES to every other GPU at once (copy engines, a
 * stream per pair, peer access on): egress per GPU = (n-1) * LINK_BYTES
 * over the wall time of the slowest, best of CEILING_REPS. */
static int measure_nvlink(moe_bench *b) {
  const int n = b->ngpu;
  void *src[MOE_MAX_GPUS] = {0}, *dst[MOE_MAX_GPUS] = {0};
  cudaStream_t st[MOE_MAX_GPUS][MOE_MAX_GPUS];
  memset(st, 0, sizeof st);
  int rc = -1;
  double best = 1e30;
  for (int d = 0; d < n; d++) {
    if (cudaSetDevice(d) || cudaMalloc(&src[d], LINK_BYTES) ||
        cudaMalloc(&dst[d], LINK_BYTES * (size_t)(n - 1)) || cudaMemset(src[d], 1, LINK_BYTES))
      goto out;
    for (int p = 0; p < n; p++) {
      if (p == d) continue;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, d, p) || !can) {
        fprintf(stderr, "loom moe: GPU %d cannot access GPU %d\n", d, p);
        goto out;
      }
      const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) goto out;
      (void)cudaGetLastError();
      if (cudaStreamCreateWithFlags(&st[d][p], cudaStreamNonBlocking)) goto out;
    }
  }
  for (int r = -1; r < CEILING_REPS; r++) {
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t0 = now_s();
    for (int d = 0; d < n; d++) {
      if (cudaSetDevice(d)) goto out;
      for (int p = 0; p < n; p++) {
        if (p == d) continue;
        const int slot = d < p ? d : d - 1; /* d's slot in p's receive buffer */
        if (cudaMemcpyPeerAsync((char *)dst[p] + (size_t)slot * LINK_BYTES, p, src[d], d,
                                LINK_BYTES, st[d][p]))
          goto out;
      }
    }
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t = now_s() - t0;
    if (r >= 0 && t < best) best = t;
  }
  b->nvlink_gbps = (double)(n - 1) * LINK_BYTES / best / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: measuring the NVLink ceiling failed\n");
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    for (int p = 0; p < n; p++)
      if (st[d][p]) cudaStreamDestroy(st[d][p]);
    cudaFree(src[d]);
    cudaFree(dst[d]);
  }
  return rc;
}

/* ncclAlltoAll of LINK_BYTES per peer on every GPU at once (one thread,
 * grouped): egress per GPU = (n-1) * LINK_BYTES over the wall time, best of
 * CEILING_REPS. NVLink through NCCL's own kernels, for comparison with the
 * copy engines. */
static int measure_nvlink_nccl(moe_bench *b, double *gbps) {
  const int n = b->ngpu;
  void *src[MOE_MAX_GPUS] = {0}, *dst[MOE_MAX_GPUS] = {0};
  ncclComm_t nc[MOE_MAX_GPUS];
  int rc = -1;
  double best = 1e30;
  for (int d = 0; d < n; d++)
    if (loom_comm_nccl(b->comms[d], &nc[d]) != LOOM_SUCCESS || cudaSetDevice(d) ||
        cudaMalloc(&src[d], LINK_BYTES * (size_t)n) || cudaMalloc(&dst[d], LINK_BYTES * (size_t)n) ||
        cudaMemset(src[d], 1, LINK_BYTES * (size_t)n))
      goto out;
  for (int r = -1; r < CEILING_REPS; r++) {
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t0 = now_s();
    if (ncclGroupStart() != ncclSuccess) goto out;
    int bad = 0;
    for (int d = 0; d < n; d++)
      bad |= ncclAlltoAll(src[d], dst[d], LINK_BYTES, ncclUint8, nc[d], b->g[d].stream) != ncclSuccess;
    if ((ncclGroupEnd() != ncclSuccess) | bad) goto out;
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaStreamSynchronize(b->g[d].stream)) goto out;
    const double t = now_s() - t0;
    if (r >= 0 && t < best) best = t;
  }
  *gbps = (double)(n - 1) * LINK_BYTES / best / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: measuring NVLink with ncclAlltoAll failed\n");
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    cudaFree(src[d]);
    cudaFree(dst[d]);
  }
  return rc;
}

static int measure_ceilings(moe_bench *b) {
  const cli_options *o = b->o;
  b->peak_tflops = o->peak_tflops;
  b->nvlink_gbps = o->nvlink_gbps;
  b->hbm_gbps = o->hbm_gbps;
  b->peak_src = o->peak_tflops > 0 ? "given" : "measured";
  b->nvlink_src = o->nvlink_gbps > 0 ? "given" : b->ngpu > 1 ? "measured" : "unused (1 GPU)";
  b->hbm_src = o->hbm_gbps > 0 ? "given" : "measured";
  if (o->peak_tflops <= 0 && measure_gemm(b) != 0) return -1;
  if (o->hbm_gbps <= 0 && measure_hbm(b) != 0) return -1;
  char how[160] = "";
  if (o->nvlink_gbps <= 0 && b->ngpu > 1) {
    double ce = 0, nccl = 0;
    if (measure_nvlink(b) != 0) return -1;
    ce = b->nvlink_gbps;
    if (measure_nvlink_nccl(b, &nccl) != 0) return -1;
    b->nvlink_gbps = ce > nccl ? ce : nccl; /* a bound takes the fastest seen */
    snprintf(how, sizeof how,
             ", every GPU sending to every other at once: copy engines %.1f, ncclAlltoAll %.1f",
             ce, nccl);
  }
  printf("ceilings: GEMM %.1f TFLOP/s (%s%s), NVLink %.1f GB/s egress per GPU (%s%s), "
         "HBM %.1f GB/s (%s%s)\n",
         b->peak_tflops, b->peak_src, o->peak_tflops > 0 ? "" : ", cuBLAS 8192^3 on GPU 0",
         b->nvlink_gbps, b->nvlink_src, how, b->hbm_gbps, b->hbm_src,
         o->hbm_gbps > 0 ? "" : ", 1 GiB device copy on GPU 0");
  fflush(stdout);
  return 0;
}

/* ---- one token count: inputs, verify ------------------------------------------------- */

/* GPU d's x for this token count, GEN_ROWS rows at a time, and its
 * --rotate copies; keeps the sampled rows. */
static int upload_inputs(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  const size_t H = (size_t)b->H;
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
    ref_pack_array(stage, rows, (size_t)n * H, (int)b->dtype);
    if (cudaMemcpy((char *)g->x[0] + (size_t)t0 * H * b->es, stage, (size_t)n * H * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
  }
  for (int r = 1; r < b->o->rotate; r++)
    if (cudaMemcpy(g->x[r], g->x[0], (size_t)b->T * H * b->es, cudaMemcpyDeviceToDevice)) goto out;
  if (cudaDeviceSynchronize()) goto out;
  rc = 0;
out:
  if (rc) fprintf(stderr, "loom moe: GPU %d: uploading inputs failed\n", d);
  free(rows);
  free(stage);
  return rc;
}

static int inputs_task(void *p, int d) { return upload_inputs((moe_bench *)p, d); }

/* Poison y and the routing outputs before a verified forward. */
static int poison(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  CUDA_OK(cudaSetDevice(d));
  CUDA_OK(cudaMemset(g->y, 0xFF, (size_t)b->maxT * (size_t)b->H * b->es));
  CUDA_OK(cudaMemset(g->ids, 0xFF, (size_t)b->maxT * (size_t)b->k * sizeof(int32_t)));
  CUDA_OK(cudaMemset(g->wts, 0xFF, (size_t)b->maxT * (size_t)b->k * sizeof(float)));
  CUDA_OK(cudaMemset(g->stats, 0xFF, sizeof(loom_moe_stats_t)));
  CUDA_OK(cudaDeviceSynchronize());
  return 0;
}

/* A hung NCCL call cannot be interrupted: past the deadline the process
 * says so and exits rather than burn the machine's time. */
static void on_deadline(int sig) {
  (void)sig;
  static const char msg[] = "loom moe: the baseline did not finish within its deadline "
                            "(a hung NCCL call?); exiting\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

static void deadline(int on) {
  signal(SIGALRM, on_deadline);
  alarm(on ? BASELINE_DEADLINE_S : 0);
}

static int baseline_verified_forward(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  LOOM_OK(loom_baseline_forward(g->base, g->x[0], b->T, g->y, g->ids, g->wts, g->stream));
  CUDA_OK(cudaStreamSynchronize(g->stream));
  return 0;
}

static int launch_verified_forward(moe_bench *b) {
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    loom_moe_args_t a;
    memset(&a, 0, sizeof a);
    a.x = g->x[0];
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
 * and, for the fused layer, the stats to the host; note the bytes the
 * forward sent to other GPUs; count the routed rows per destination GPU. */
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
    ref_unpack_array(g->ys + s * H, y + t * H * b->es, H, (int)b->dtype);
    memcpy(g->is + s * k, ids + t * k, k * sizeof *ids);
    memcpy(g->ws + s * k, wts + t * k, k * sizeof *wts);
  }
  g->wire_bytes = b->impl == IMPL_FUSED ? g->st.bytes_remote : loom_baseline_bytes_remote(g->base);
  for (int p = 0; p < b->ngpu; p++) g->rows_to[p] = 0;
  memset(g->routed, 0, sizeof g->routed);
  for (size_t a = 0; a < (size_t)b->T * k; a++)
    if (ids[a] >= 0 && ids[a] < b->E) {
      g->rows_to[ids[a] / b->El]++;
      g->routed[ids[a]] = 1;
    }
  rc = 0;
  /* fused: rows_sent per destination must match the routing it reports */
  for (int p = 0; b->impl == IMPL_FUSED && p < b->ngpu; p++)
    if (g->st.rows_sent[p] != g->rows_to[p]) {
      fprintf(stderr, "loom moe: GPU %d: stats.rows_sent[%d] = %lld but its routing sends %lld\n",
              d, p, (long long)g->st.rows_sent[p], (long long)g->rows_to[p]);
      rc = -1;
    }
out:
  if (rc && (!y || !ids || !wts)) fprintf(stderr, "loom moe: out of host memory\n");
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
  const double tol_w = b->impl == IMPL_FUSED ? TOL_WEIGHTS : TOL_WEIGHTS_BASELINE;
  const char *who = impl_names[b->impl];
  int rc = 0;
  if (g->unwritten) {
    fprintf(stderr, "loom moe: %s: GPU %d: %zu of %zu y elements never written\n", who, d,
            g->unwritten, (size_t)b->T * H);
    rc = -1;
  }
  for (size_t a = 0; a < nk; a++) {
    const double want = g->wref[a], got = g->ws[a];
    if (g->is[a] != g->iref[a] || !(fabs(got - want) <= tol_w * fabs(want))) {
      fprintf(stderr,
              "loom moe: %s: GPU %d: token %d choice %zu: expert %d weight %.9g, reference "
              "expert %d weight %.9g%s\n",
              who, d, b->sample[a / k], a % k, g->is[a], got, g->iref[a], want,
              b->impl == IMPL_BASELINE && g->is[a] != g->iref[a]
                  ? " (the baseline's fp32 logits can flip a near-tie)"
                  : "");
      rc = -1;
      break;
    }
  }
  g->err = ref_rel_error(g->ys, g->yref, (size_t)b->nsample * H);
  if (!(g->err <= tol)) {
    fprintf(stderr, "loom moe: %s: GPU %d: y rel error %.3g over %d sampled tokens > %.1g\n", who,
            d, g->err, b->nsample, tol);
    rc = -1;
  }
  if (b->impl != IMPL_FUSED) return rc;
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
  for (int d = 0; d < b->ngpu; d++)
    if (poison(b, d) != 0) return -1;
  if (b->impl == IMPL_FUSED) {
    if (launch_verified_forward(b) != 0 || sync_and_check(b) != 0) return -1;
  } else {
    deadline(1);
    const int rc = on_every_gpu(b, baseline_verified_forward);
    deadline(0);
    if (rc != 0) return -1;
  }
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) rc |= download(b, d);
  if (rc != 0) return -1;
  if (!b->ref_done) {
    const int per_gpu = (b->nsample + REF_TOKENS_PER_TASK - 1) / REF_TOKENS_PER_TASK;
    if (run_tasks(per_gpu * b->ngpu, b->nthreads, ref_task, b) != 0) {
      fprintf(stderr, "loom moe: the CPU reference failed\n");
      return -1;
    }
    b->ref_done = 1;
  }
  double worst = 0;
  for (int d = 0; d < b->ngpu; d++) {
    rc |= compare(b, d, tol);
    if (b->g[d].err > worst) worst = b->g[d].err;
  }
  if (rc != 0) {
    printf("  %-8s verify: FAILED (details on stderr)\n", impl_names[b->impl]);
    return -1;
  }
  printf("  %-8s verify: ok (%d sampled tokens x %d GPUs, routing exact, max rel err %.2e <= "
         "%.0e, y fully written%s)\n",
         impl_names[b->impl], b->nsample, b->ngpu, worst, tol,
         b->impl == IMPL_FUSED ? ", stats consistent" : "");
  fflush(stdout);
  return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

/* Before a timed iteration: overwrite L2 (outside the events) if asked. */
static int pre_iteration(moe_bench *b, int d, int it) {
  gpu_state *g = &b->g[d];
  if (g->flush) CUDA_OK(cudaMemsetAsync(g->flush, it & 0xFF, g->flush_bytes, g->stream));
  return 0;
}

static const void *x_of(moe_bench *b, int d, int it) { return b->g[d].x[it % b->o->rotate]; }

/* Fused: one host thread launches every GPU's forward of iteration `it`;
 * slot >= 0 brackets it with events. */
static int fused_iteration(moe_bench *b, int it, int slot) {
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    CUDA_OK(cudaSetDevice(d));
    if (slot >= 0 && pre_iteration(b, d, it) != 0) return -1;
    loom_moe_args_t a;
    memset(&a, 0, sizeof a);
    a.x = x_of(b, d, it);
    a.num_tokens = b->T;
    a.y = g->y;
    a.stats = g->stats; /* the in-kernel phase trace of the last iteration */
    if (slot >= 0) CUDA_OK(cudaEventRecord(g->ev0[slot], g->stream));
    LOOM_OK(loom_moe_forward_ex(g->moe, &a, g->stream));
    if (slot >= 0) CUDA_OK(cudaEventRecord(g->ev1[slot], g->stream));
  }
  return 0;
}

static int read_batch(moe_bench *b, int d, int done, int n) {
  gpu_state *g = &b->g[d];
  for (int i = 0; i < n; i++) {
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, g->ev0[i], g->ev1[i]));
    g->us[done + i] = ms * 1e3;
  }
  return 0;
}

static int time_fused(moe_bench *b) {
  for (int i = 0; i < b->o->warmup; i++)
    if (fused_iteration(b, i, -1) != 0) return -1;
  if (sync_and_check(b) != 0) return -1;
  for (int done = 0; done < b->o->iters;) {
    const int n = b->o->iters - done < EV_BATCH ? b->o->iters - done : EV_BATCH;
    for (int i = 0; i < n; i++)
      if (fused_iteration(b, done + i, i) != 0) return -1;
    if (sync_and_check(b) != 0) return -1;
    for (int d = 0; d < b->ngpu; d++)
      if (read_batch(b, d, done, n) != 0) return -1;
    done += n;
  }
  return 0;
}

/* Baseline: each GPU's thread runs its own forwards (each synchronises the
 * thread once); NCCL keeps the iterations of the GPUs in step. */
static int baseline_timing(moe_bench *b, int d) {
  gpu_state *g = &b->g[d];
  for (int i = 0; i < b->o->warmup; i++)
    LOOM_OK(loom_baseline_forward(g->base, x_of(b, d, i), b->T, g->y, NULL, NULL, g->stream));
  for (int done = 0; done < b->o->iters;) {
    const int n = b->o->iters - done < EV_BATCH ? b->o->iters - done : EV_BATCH;
    for (int i = 0; i < n; i++) {
      if (pre_iteration(b, d, done + i) != 0) return -1;
      CUDA_OK(cudaEventRecord(g->ev0[i], g->stream));
      LOOM_OK(loom_baseline_forward(g->base, x_of(b, d, done + i), b->T, g->y, NULL, NULL,
                                    g->stream));
      CUDA_OK(cudaEventRecord(g->ev1[i], g->stream));
    }
    CUDA_OK(cudaStreamSynchronize(g->stream));
    if (read_batch(b, d, done, n) != 0) return -1;
    done += n;
  }
  return 0;
}

static int time_baseline(moe_bench *b) {
  deadline(1);
  const int rc = on_every_gpu(b, baseline_timing);
  deadline(0);
  return rc;
}

/* Where the time went in the last timed fused iteration: the end of each
 * phase, max over blocks and GPUs (loom_moe_stats_t.phase_end_ns). */
static int read_phases(moe_bench *b, double phase[5]) {
  for (int i = 0; i < 5; i++) phase[i] = 0;
  for (int d = 0; d < b->ngpu; d++) {
    loom_moe_stats_t st;
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMemcpy(&st, b->g[d].stats, sizeof st, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 5; i++)
      if (st.phase_end_ns[i] / 1e3 > phase[i]) phase[i] = st.phase_end_ns[i] / 1e3;
  }
  return 0;
}

/* The bound of this token count (file comment), from the verified routing. */
static double bound_us(const moe_bench *b) {
  const double H = (double)b->H, es = (double)b->es;
  const double expert_bytes = H * (double)(b->F1 + b->F) * es;
  double worst = 0;
  for (int d = 0; d < b->ngpu; d++) {
    double served = 0, wire = 0, weights = 0;
    for (int le = 0; le < b->El; le++) { /* only experts that get rows are read */
      int any = 0;
      for (int s = 0; s < b->ngpu && !any; s++) any = b->g[s].routed[d * b->El + le];
      weights += any ? expert_bytes : 0.0;
    }
    for (int s = 0; s < b->ngpu; s++) {
      served += (double)b->g[s].rows_to[d];
      if (s != d) wire += (double)b->g[d].rows_to[s] + (double)b->g[s].rows_to[d];
    }
    const double flops = 2.0 * served * H * (double)(b->F1 + b->F);
    const double hbm = (2.0 * b->T + 2.0 * served) * H * es + weights;
    double t = flops / (b->peak_tflops * 1e12);
    if (b->ngpu > 1 && b->nvlink_gbps > 0) {
      const double tw = wire * H * es / (b->nvlink_gbps * 1e9);
      if (tw > t) t = tw;
    }
    const double th = hbm / (b->hbm_gbps * 1e9);
    if (th > t) t = th;
    if (t > worst) worst = t;
  }
  return worst * 1e6;
}

static int time_impl(moe_bench *b, moe_row *row) {
  const int rc = b->impl == IMPL_FUSED ? time_fused(b) : time_baseline(b);
  if (rc != 0) return -1;
  const int n = b->o->iters;
  double *us = b->g[0].us;
  for (int i = 0; i < n; i++)
    for (int d = 1; d < b->ngpu; d++)
      if (b->g[d].us[i] > us[i]) us[i] = b->g[d].us[i];
  qsort(us, (size_t)n, sizeof *us, cmp_double);
  memset(row, 0, sizeof *row);
  row->T = b->T;
  row->impl = impl_names[b->impl];
  row->med_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  row->min_us = us[0];
  row->max_us = us[n - 1];
  double rows = 0, wire = 0;
  for (int d = 0; d < b->ngpu; d++) {
    for (int p = 0; p < b->ngpu; p++) rows += (double)b->g[d].rows_to[p];
    wire += (double)b->g[d].wire_bytes;
  }
  const double flops = 2.0 * rows * (double)b->H * (double)(b->F1 + b->F);
  const double sec = row->med_us * 1e-6;
  row->tflops = sec > 0 ? flops / sec / b->ngpu / 1e12 : 0;
  row->wire_mb = wire / b->ngpu / 1e6;
  row->gbps = sec > 0 ? wire / b->ngpu / sec / 1e9 : 0;
  row->bound_us = bound_us(b);
  row->pct_bound = row->med_us > 0 ? 100.0 * row->bound_us / row->med_us : 0;
  if (b->impl == IMPL_FUSED) {
    row->has_phases = 1;
    if (read_phases(b, row->phase_us) != 0) return -1;
  }
  printf("  %-8s median %.1f us (min %.1f, max %.1f), %.1f TFLOP/s/GPU, %.1f%% of bound",
         row->impl, row->med_us, row->min_us, row->max_us, row->tflops, row->pct_bound);
  if (row->has_phases)
    printf("; phases end at gate %.0f, place %.0f, dispatch %.0f, experts %.0f, combine %.0f us",
           row->phase_us[0], row->phase_us[1], row->phase_us[2], row->phase_us[3],
           row->phase_us[4]);
  printf("\n");
  fflush(stdout);
  return 0;
}

/* --trace: one more fused forward on every GPU with the in-kernel trace
 * on (the timed ones ran without), written as a Perfetto timeline; prints
 * how busy the SMs were (cli_trace_sm_busy), per GPU and over all. */
static int trace_fused(moe_bench *b) {
  cli_trace_gpu tg[MOE_MAX_GPUS];
  memset(tg, 0, sizeof tg);
  int rc = -1;
  for (int d = 0; d < b->ngpu; d++) {
    CUDA_OK(cudaSetDevice(d));
    LOOM_OK(loom_moe_set_trace(b->g[d].moe, b->g[d].tr_events, TRACE_CAPACITY, b->g[d].tr_info));
  }
  const int ran = fused_iteration(b, 0, -1) == 0 && sync_and_check(b) == 0;
  for (int d = 0; d < b->ngpu; d++) {
    CUDA_OK(cudaSetDevice(d));
    LOOM_OK(loom_moe_set_trace(b->g[d].moe, NULL, 0, NULL));
  }
  if (!ran) return -1;
  char path[4096];
  FILE *f = NULL;
  cli_trace_busy all = {0, 0, 1.0, 0};
  double sum = 0;
  for (int d = 0; d < b->ngpu; d++) {
    gpu_state *g = &b->g[d];
    tg[d].gpu = d;
    if (cudaSetDevice(d) != cudaSuccess ||
        cudaMemcpy(&tg[d].info, g->tr_info, sizeof tg[d].info, cudaMemcpyDeviceToHost) !=
            cudaSuccess)
      goto out;
    const size_t n = tg[d].info.recorded > 0 ? (size_t)tg[d].info.recorded : 0;
    loom_moe_trace_event_t *ev = malloc((n > 0 ? n : 1) * sizeof *ev);
    tg[d].events = ev;
    if (ev == NULL ||
        cudaMemcpy(ev, g->tr_events, n * sizeof *ev, cudaMemcpyDeviceToHost) != cudaSuccess)
      goto out;
    cli_trace_busy busy;
    if (cli_trace_sm_busy(&tg[d].info, ev, NULL, 0, &busy) != 0) {
      fprintf(stderr, "loom moe: GPU %d: the trace has no kernel time\n", d);
      goto out;
    }
    printf("  trace    GPU %d: %lld events%s, kernel %.1f us, SM busy mean %.1f%% (min %.1f%%, "
           "max %.1f%%, %d SMs)\n",
           d, (long long)tg[d].info.recorded, tg[d].info.dropped ? " (some DROPPED)" : "",
           (double)(tg[d].info.end_ns - tg[d].info.start_ns) / 1e3, 100 * busy.mean,
           100 * busy.min, 100 * busy.max, busy.sms);
    if (tg[d].info.dropped)
      fprintf(stderr, "loom moe: GPU %d: %lld trace events dropped (capacity %d)\n", d,
              (long long)tg[d].info.dropped, TRACE_CAPACITY);
    sum += busy.mean * busy.sms;
    all.sms += busy.sms;
    if (busy.min < all.min) all.min = busy.min;
    if (busy.max > all.max) all.max = busy.max;
  }
  all.mean = all.sms > 0 ? sum / all.sms : 0;
  if (cli_trace_path(b->o->trace, b->T, b->o->ntokens > 1, path, sizeof path) != 0 ||
      (f = fopen(path, "w")) == NULL) {
    fprintf(stderr, "loom moe: cannot write the trace to %s\n", b->o->trace);
    goto out;
  }
  rc = cli_write_trace_json(f, tg, b->ngpu);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) {
    fprintf(stderr, "loom moe: error writing %s\n", path);
    goto out;
  }
  printf("  trace    SM busy over %d GPUs: mean %.1f%%, min %.1f%%, max %.1f%% of the kernel's "
         "time in work slices (not waiting) -> %s (ui.perfetto.dev)\n",
         b->ngpu, 100 * all.mean, 100 * all.min, 100 * all.max, path);
  fflush(stdout);
out:
  for (int d = 0; d < b->ngpu; d++) free((void *)tg[d].events);
  return rc;
}

/* Verify and time every chosen implementation at T tokens per GPU; rows
 * gets one row per implementation. Returns the number of rows, -1 on error. */
static int run_tokens(moe_bench *b, int T, moe_row *rows) {
  b->T = T;
  b->ref_done = 0;
  b->nsample = T < b->o->check_tokens ? T : b->o->check_tokens;
  for (int s = 0; s < b->nsample; s++)
    b->sample[s] = b->nsample == 1 ? 0 : (int)((int64_t)s * (T - 1) / (b->nsample - 1));
  if (run_tasks(b->ngpu, b->ngpu, inputs_task, b) != 0) return -1;
  int n = 0;
  for (int impl = IMPL_FUSED; impl <= IMPL_BASELINE; impl++) {
    if (!(b->o->impl & (impl == IMPL_FUSED ? CLI_IMPL_FUSED : CLI_IMPL_BASELINE))) continue;
    b->impl = impl;
    if (verify(b) != 0 || time_impl(b, &rows[n]) != 0) return -1;
    if (impl == IMPL_FUSED && b->o->trace != NULL && trace_fused(b) != 0) return -1;
    n++;
  }
  if (n == 2) rows[0].speedup = rows[1].med_us / rows[0].med_us;
  return n;
}

/* ---- report and teardown ---------------------------------------------------------------- */

static void print_header(const moe_bench *b) {
  struct cudaDeviceProp p;
  const char *name = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  printf("loom moe: %d x %s, experts %lld (%lld per GPU), top_k %lld, hidden %lld, ffn %lld, "
         "%s%s, %s, weights %s; %d iters after %d warm-up, %d rotating inputs, L2 flush %s\n",
         b->ngpu, name, (long long)b->E, (long long)b->El, (long long)b->k, (long long)b->H,
         (long long)b->F, loom_dtype_string(b->dtype), b->dtype == LOOM_FP32 ? " (TF32)" : "",
         cli_act_names[b->act], cli_weights_names[b->layout], b->o->iters, b->o->warmup, b->o->rotate,
         b->o->flush_l2 ? "on" : "off");
  fflush(stdout);
}

static void print_table(const moe_row *rows, int n) {
  printf("\n%10s %-8s %10s %10s %10s %11s %12s %9s %9s %7s %8s\n", "tokens/GPU", "impl",
         "median_us", "min_us", "max_us", "TFLOP/s/GPU", "wire_MB/GPU", "GB/s/GPU", "bound_us",
         "%bound", "speedup");
  for (int i = 0; i < n; i++) {
    const moe_row *r = &rows[i];
    char sp[16] = "-";
    if (r->speedup > 0) snprintf(sp, sizeof sp, "%.2fx", r->speedup);
    printf("%10d %-8s %10.1f %10.1f %10.1f %11.1f %12.2f %9.1f %9.1f %6.1f%% %8s\n", r->T,
           r->impl, r->med_us, r->min_us, r->max_us, r->tflops, r->wire_mb, r->gbps, r->bound_us,
           r->pct_bound, sp);
  }
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
    if (g->base && loom_baseline_destroy(g->base) != LOOM_SUCCESS) {
      fprintf(stderr, "loom moe: GPU %d: loom_baseline_destroy: %s\n", d, loom_last_error());
      rc = -1;
    }
    void *dev[] = {g->y,     g->gate_w, g->w1,    g->w2,        g->ids,
                   g->wts,   g->stats,  g->flush, g->tr_events, g->tr_info};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) cudaFree(dev[i]);
    for (int r = 0; r < CLI_MAX_ROTATE; r++)
      if (g->x[r]) cudaFree(g->x[r]);
    for (int e = 0; e < g->nev; e++) {
      cudaEventDestroy(g->ev0[e]);
      cudaEventDestroy(g->ev1[e]);
    }
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->us);
    free(g->xs);
    free(g->ys);
    free(g->yref);
    free(g->ws);
    free(g->wref);
    free(g->is);
    free(g->iref);
  }
  if (b->comms[0] != NULL && loom_comm_destroy_all(b->ngpu, b->comms) != LOOM_SUCCESS) {
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
  memset(&run, 0, sizeof run);
  run.gpus = b->ngpu;
  run.device = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  run.experts = (long long)b->E;
  run.top_k = (long long)b->k;
  run.hidden = (long long)b->H;
  run.ffn = (long long)b->F;
  run.dtype = loom_dtype_string(b->dtype);
  run.act = cli_act_names[b->act];
  run.weights = cli_weights_names[b->layout];
  run.iters = b->o->iters;
  run.warmup = b->o->warmup;
  run.flush_l2 = b->o->flush_l2;
  run.rotate = b->o->rotate;
  run.peak_tflops = b->peak_tflops;
  run.nvlink_gbps = b->nvlink_gbps;
  run.hbm_gbps = b->hbm_gbps;
  run.peak_src = b->peak_src;
  run.nvlink_src = b->nvlink_src;
  run.hbm_src = b->hbm_src;
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
  if (measure_ceilings(b) != 0 || make_weights(b) != 0) return -1;
  return on_every_gpu(b, create_layer);
}

int cli_moe(const cli_options *o) {
  moe_bench *b = calloc(1, sizeof *b);
  moe_row rows[2 * CLI_MAX_LIST];
  int n = 0, done = 0, rc = 1;
  if (b == NULL) {
    fprintf(stderr, "loom moe: out of host memory\n");
    return 1;
  }
  b->o = o;
  if (resolve_shape(b, o) == 0) {
    const int ok = setup(b) == 0;
    for (; ok && done < o->ntokens; done++) {
      printf("\n[%d/%d] tokens/GPU %d\n", done + 1, o->ntokens, (int)o->tokens[done]);
      fflush(stdout);
      const int got = run_tokens(b, (int)o->tokens[done], &rows[n]);
      if (got < 0) break;
      n += got;
    }
    if (ok && done == o->ntokens) {
      print_table(rows, n);
      rc = write_json(b, rows, n) == 0 ? 0 : 1;
    }
    if (teardown(b) != 0) rc = 1;
  }
  free(b);
  return rc;
}
