/*
 * `loom ag-gemm`: all-gather + GEMM (the column-parallel linear layer) as an
 * operator of the benchmark harness (harness.h). Per GPU d of R: x = its
 * rows A_d [T x hidden] (--tokens T, --hidden), weights B_d [n x hidden]
 * with n = --ffn / R (the ffn split over the GPUs, nn.Linear layout), output
 * C_d = act([A_0; ...; A_{R-1}] B_d^T + bias_d), [R*T x n] (--bias 1: bias_d,
 * [n], this GPU's shard of the layer's bias; else none). Fused: loom_ag_gemm on
 * the harness's communicators; baseline: ncclAllGather + cublasGemmEx (+
 * the activation kernel), src/baseline/collective.c, on their NCCL ones.
 *
 * The harness sees C as y [T x R*n] (the same bytes): its sampled "row t"
 * is C rows t*R .. t*R + R-1, rows of several sources. Their reference
 * reads other GPUs' rows of x, regenerated on the host once per token
 * count (reference_prepare), then dotted with B_d in double. Tolerances
 * (per sampled row group): 2e-3 TF32, 1e-2 bf16/fp16 (tests/gpu/
 * test_collective.c has the reasoning).
 *
 * Bound per GPU: GEMM FLOPs 2 R T n hidden; bytes to other GPUs T
 * hidden e (its rows to every peer); HBM: its rows, the gathered rows, B
 * and C once each.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "harness.h"
#include "loom.h"
#include "baseline/baseline.h"
#include "reference/reference.h"

#define TOL_TF32 2e-3
#define TOL_16BIT 1e-2
#define KIND_B 1    /* random stream of the weights (x is CLI_RNG_X) */
#define KIND_BIAS 2 /* of the bias */

typedef struct {
  void *b;    /* [n x K] */
  void *bias; /* [n] (--bias 1) or NULL */
  loom_ag_baseline_t base;
} ag_gpu;

typedef struct {
  int64_t K, N, n; /* hidden, ffn over all GPUs, ffn per GPU */
  int act;         /* loom_activation_t or LOOM_UNSET */
  float *B;        /* host, [ngpu][n x K], rounded to dtype */
  float *bias;     /* host, [ngpu][n], rounded to dtype (--bias 1) or NULL */
  float *xrows;    /* host, per token count: [nsample][R][K], the x rows of
                      each sampled row group */
  ag_gpu g[CLI_MAX_GPUS];
} ag_state;

static ag_state *state_of(const cli_bench *b) { return (ag_state *)b->state; }


static int ag_plan(cli_bench *b, loom_comm_config_t *cc) {
  ag_state *s = state_of(b);
  const cli_options *o = b->o;
  s->K = o->hidden;
  s->N = o->ffn;
  s->act = o->act_given ? o->act : LOOM_UNSET;
  if (s->act == LOOM_ACT_SWIGLU) {
    fprintf(stderr, "%s: --act swiglu is the MoE layer's; ag-gemm takes none, relu, gelu or silu\n",
            b->who);
    return -1;
  }
  if (s->N % b->ngpu) {
    fprintf(stderr, "%s: --ffn %lld is not divisible by the %d GPUs\n", b->who, (long long)s->N,
            b->ngpu);
    return -1;
  }
  s->n = s->N / b->ngpu;
  b->in_cols = s->K;
  b->out_cols = (int64_t)b->ngpu * s->n;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = b->dtype;
  a.m = b->maxT;
  a.n = s->n;
  a.k = s->K;
  a.activation = s->act;
  size_t ws = 0;
  int slots = 0;
  CLI_LOOM_OK(b, loom_ag_gemm_workspace_bytes(&a, b->ngpu, &ws, &slots));
  printf("workspace per GPU: %.1f MiB (every GPU's %lld x %lld rows), %d signal slots\n",
         (double)ws / 1048576.0, (long long)b->maxT, (long long)s->K, slots);
  fflush(stdout);
  cc->workspace_bytes = (int64_t)ws;
  if (slots > 4096) cc->signal_slots = slots;
  return 0;
}

static void ag_describe(const cli_bench *b, char *out, size_t n) {
  cli_linear_describe(b, state_of(b)->K, state_of(b)->N, state_of(b)->act, out, n);
}

static int ag_fields(const cli_bench *b, cli_field *f, int max) {
  return cli_linear_fields(b, state_of(b)->K, state_of(b)->N, state_of(b)->act, f, max);
}

static int ag_alloc(cli_bench *b, int d) {
  ag_state *s = state_of(b);
  CLI_CUDA_OK(b, cudaMalloc(&s->g[d].b, (size_t)s->n * (size_t)s->K * b->es));
  if (b->o->bias) CLI_CUDA_OK(b, cudaMalloc(&s->g[d].bias, (size_t)s->n * b->es));
  return 0;
}

/* GPU d's weights, scaled so outputs are O(1); the host copy stays. */
static int upload_b(void *p, int d) {
  cli_bench *b = (cli_bench *)p;
  ag_state *s = state_of(b);
  const size_t cnt = (size_t)s->n * (size_t)s->K;
  if (cli_upload_random(b, d, s->g[d].b, s->B + (size_t)d * cnt, cnt, sqrtf(3.0f / (float)s->K), KIND_B))
    return -1;
  return s->bias ? cli_upload_random(b, d, s->g[d].bias, s->bias + (size_t)d * (size_t)s->n, (size_t)s->n,
                                     1.0f, KIND_BIAS)
                 : 0;
}

static int ag_prepare(cli_bench *b) {
  ag_state *s = state_of(b);
  s->B = malloc((size_t)b->ngpu * (size_t)s->n * (size_t)s->K * sizeof(float));
  s->xrows = malloc((size_t)b->o->check_tokens * (size_t)b->ngpu * (size_t)s->K * sizeof(float));
  if (b->o->bias) s->bias = malloc((size_t)b->ngpu * (size_t)s->n * sizeof(float));
  if (!s->B || !s->xrows || (b->o->bias && !s->bias)) {
    fprintf(stderr, "%s: out of host memory for the weights\n", b->who);
    return -1;
  }
  return cli_run_tasks(b->ngpu, b->ngpu, upload_b, b);
}

static int ag_create(cli_bench *b, int d) {
  ag_state *s = state_of(b);
  if (b->o->impl & CLI_IMPL_BASELINE) {
    ncclComm_t nccl = NULL;
    CLI_LOOM_OK(b, loom_comm_nccl(b->comms[d], &nccl));
    CLI_LOOM_OK(b, loom_ag_baseline_create(nccl, b->dtype, b->maxT, s->K, &s->g[d].base));
  }
  return 0;
}

static int ag_forward(cli_bench *b, int d, const void *x, int verified) {
  ag_state *s = state_of(b);
  (void)verified;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = b->dtype;
  a.m = b->T;
  a.n = s->n;
  a.k = s->K;
  a.a = x;
  a.b = s->g[d].b;
  a.c = b->g[d].y;
  a.activation = s->act;
  a.bias = s->g[d].bias;
  if (b->impl == CLI_BASELINE)
    CLI_LOOM_OK(b, loom_ag_baseline_forward(s->g[d].base, &a, b->g[d].stream));
  else
    CLI_LOOM_OK(b, loom_ag_gemm(b->comms[d], &a, b->g[d].stream));
  return 0;
}

/* Sampled row group q of row t is C row g = t*R + q: source g / T, its row g % T. */
typedef struct {
  cli_bench *b;
} prep_ctx;

/* Source GPU src's rows that any sampled group needs, chunk by chunk. */
static int prep_source(void *p, int src) {
  cli_bench *b = ((prep_ctx *)p)->b;
  ag_state *s = state_of(b);
  const int R = b->ngpu, T = b->T;
  const size_t K = (size_t)s->K;
  float *chunk = malloc((size_t)CLI_X_CHUNK_ROWS * K * sizeof(float));
  if (chunk == NULL) return -1;
  int have = -1; /* the chunk in `chunk` */
  for (int i = 0; i < b->nsample; i++)
    for (int q = 0; q < R; q++) {
      const int64_t g = (int64_t)b->sample[i] * R + q;
      if (g / T != src) continue;
      const int row = (int)(g % T), c0 = row / CLI_X_CHUNK_ROWS * CLI_X_CHUNK_ROWS;
      if (c0 != have) {
        const int n = T - c0 < CLI_X_CHUNK_ROWS ? T - c0 : CLI_X_CHUNK_ROWS;
        cli_x_chunk(b, src, c0, n, chunk);
        have = c0;
      }
      memcpy(s->xrows + ((size_t)i * R + q) * K, chunk + (size_t)(row - c0) * K, K * sizeof(float));
    }
  free(chunk);
  return 0;
}

static int ag_reference_prepare(cli_bench *b) {
  prep_ctx c = {b};
  return cli_run_tasks(b->ngpu, b->nthreads, prep_source, &c);
}

static int ag_reference(cli_bench *b, int d, int s0, int n) {
  ag_state *s = state_of(b);
  const int R = b->ngpu;
  const size_t K = (size_t)s->K, nn = (size_t)s->n, W = (size_t)b->out_cols;
  const float *B = s->B + (size_t)d * nn * K;
  const float *bias = s->bias ? s->bias + (size_t)d * nn : NULL;
  for (int i = s0; i < s0 + n; i++)
    for (int q = 0; q < R; q++) {
      const float *x = s->xrows + ((size_t)i * R + q) * K;
      float *out = b->g[d].yref + (size_t)i * W + (size_t)q * nn;
      for (size_t j = 0; j < nn; j++) {
        const float *w = B + j * K;
        double acc = 0;
        for (size_t p = 0; p < K; p++) acc += (double)x[p] * (double)w[p];
        if (bias) acc += (double)bias[j];
        out[j] = (float)(s->act == LOOM_UNSET ? acc : ref_act((ref_activation)s->act, acc));
      }
    }
  return 0;
}

static void ag_need(const cli_bench *b, int d, cli_work *w) {
  const ag_state *s = state_of(b);
  const double R = b->ngpu, T = b->T, K = (double)s->K, n = (double)s->n, es = (double)b->es;
  (void)d;
  w->flops = 2.0 * R * T * n * K;
  w->link_bytes = (R - 1) * T * K * es;
  w->hbm_bytes = (T * K + R * T * K + n * K + R * T * n) * es;
}

static void ag_done(const cli_bench *b, double *flops, double *wire_bytes) {
  const ag_state *s = state_of(b);
  const double R = b->ngpu, T = b->T, K = (double)s->K;
  *flops = R * 2.0 * R * T * (double)s->n * K;
  *wire_bytes = R * (R - 1) * T * K * (double)b->es;
}

static int ag_destroy(cli_bench *b) {
  ag_state *s = state_of(b);
  for (int d = 0; d < b->ngpu; d++) {
    cudaSetDevice(d);
    if (s->g[d].b) cudaFree(s->g[d].b);
    if (s->g[d].bias) cudaFree(s->g[d].bias);
    loom_ag_baseline_destroy(s->g[d].base);
  }
  free(s->B);
  free(s->bias);
  free(s->xrows);
  return 0;
}

static const cli_op ag_op = {
    .name = "ag-gemm",
    .state_bytes = sizeof(ag_state),
    .tol = {TOL_TF32, TOL_16BIT, TOL_16BIT},
    .verify_before = {"", ""},
    .verify_after = {"", ""},
    .plan = ag_plan,
    .describe = ag_describe,
    .fields = ag_fields,
    .alloc = ag_alloc,
    .prepare = ag_prepare,
    .create = ag_create,
    .forward = ag_forward,
    .reference_prepare = ag_reference_prepare,
    .reference = ag_reference,
    .need = ag_need,
    .done = ag_done,
    .phases = cli_coll_phases,
    .destroy = ag_destroy,
};

int cli_ag_gemm(const cli_options *o) { return cli_bench_main(o, &ag_op); }
