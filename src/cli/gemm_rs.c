/*
 * `loom gemm-rs`: GEMM + reduce-scatter (the row-parallel linear layer) as
 * an operator of the benchmark harness (harness.h). Per GPU d of R: x =
 * A_d [T x k] (--tokens T rows, k = --ffn / R: the inner dimension split
 * over the GPUs), weights B_d [hidden x k] (nn.Linear layout), output
 * C_d = rows [d T/R, (d+1) T/R) of act(sum_s A_s B_s^T), [T/R x hidden].
 * Fused: loom_gemm_rs; baseline: cublasGemmEx + ncclReduceScatter (+ the
 * activation kernel), src/baseline/collective.c.
 *
 * The harness sees C as y [T x hidden/R] (the same bytes): its sampled
 * "row t" is elements [t hidden/R, (t+1) hidden/R) of C, a piece of C row
 * t / R. Its reference reads every GPU's row (d T/R + t/R) of x,
 * regenerated on the host once per token count, and every GPU's weights.
 * Tolerances: 2e-3 TF32, 1e-2 bf16/fp16.
 *
 * Bound per GPU: GEMM FLOPs 2 T hidden k; bytes to other GPUs (R-1)/R T
 * hidden e (its partials of the others' rows); HBM: A, B, the partials
 * written and read back (R T/R hidden), C.
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
#define KIND_B 1

typedef struct {
  void *b; /* [N x k] */
  loom_rs_baseline_t base;
} rs_gpu;

typedef struct {
  int64_t N, Kt, k; /* hidden (output columns), ffn over all GPUs, k per GPU */
  int act;
  float *B;     /* host, [ngpu][N x k] */
  float *xrows; /* host, per token count: [nsample][ngpu][k]: row of each GPU for each sample */
  rs_gpu g[CLI_MAX_GPUS];
} rs_state;

static rs_state *state_of(const cli_bench *b) { return (rs_state *)b->state; }

static int rs_plan(cli_bench *b, loom_comm_config_t *cc) {
  rs_state *s = state_of(b);
  const cli_options *o = b->o;
  const int R = b->ngpu;
  s->N = o->hidden;
  s->Kt = o->ffn;
  s->act = o->act_given ? o->act : LOOM_UNSET;
  if (s->act == LOOM_ACT_SWIGLU) {
    fprintf(stderr, "%s: --act swiglu is the MoE layer's; gemm-rs takes none, relu, gelu or silu\n", b->who);
    return -1;
  }
  if (s->Kt % R || s->N % R) {
    fprintf(stderr, "%s: --ffn %lld and --hidden %lld must be divisible by the %d GPUs\n", b->who,
            (long long)s->Kt, (long long)s->N, R);
    return -1;
  }
  for (int i = 0; i < o->ntokens; i++)
    if (o->tokens[i] % (uint64_t)R || o->tokens[i] == 0) {
      fprintf(stderr, "%s: --tokens %llu: must be a positive multiple of the %d GPUs\n", b->who,
              (unsigned long long)o->tokens[i], R);
      return -1;
    }
  s->k = s->Kt / R;
  b->in_cols = s->k;
  b->out_cols = s->N / R;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = b->dtype;
  a.m = b->maxT;
  a.n = s->N;
  a.k = s->k;
  a.activation = s->act;
  size_t ws = 0;
  int slots = 0;
  CLI_LOOM_OK(b, loom_gemm_rs_workspace_bytes(&a, R, &ws, &slots));
  printf("workspace per GPU: %.1f MiB (every GPU's partial of its %lld x %lld rows), %d signal slots\n",
         (double)ws / 1048576.0, (long long)(b->maxT / R), (long long)s->N, slots);
  fflush(stdout);
  cc->workspace_bytes = (int64_t)ws;
  if (slots > 4096) cc->signal_slots = slots;
  return 0;
}

static void rs_describe(const cli_bench *b, char *out, size_t n) {
  const rs_state *s = state_of(b);
  snprintf(out, n, "hidden %lld, ffn %lld (%lld per GPU), %s%s, act %s", (long long)s->N, (long long)s->Kt,
           (long long)s->k, loom_dtype_string(b->dtype), b->dtype == LOOM_FP32 ? " (TF32)" : "",
           cli_act_name(s->act));
}

static int rs_fields(const cli_bench *b, cli_field *f, int max) {
  const rs_state *s = state_of(b);
  const cli_field all[] = {{"hidden", NULL, (long long)s->N},
                           {"ffn", NULL, (long long)s->Kt},
                           {"dtype", loom_dtype_string(b->dtype), 0},
                           {"act", cli_act_name(s->act), 0}};
  int n = 0;
  for (; n < max && n < (int)(sizeof all / sizeof all[0]); n++) f[n] = all[n];
  return n;
}

static int rs_alloc(cli_bench *b, int d) {
  rs_state *s = state_of(b);
  CLI_CUDA_OK(b, cudaMalloc(&s->g[d].b, (size_t)s->N * (size_t)s->k * b->es));
  return 0;
}

static int upload_b(void *p, int d) {
  cli_bench *b = (cli_bench *)p;
  rs_state *s = state_of(b);
  const size_t cnt = (size_t)s->N * (size_t)s->k;
  return cli_upload_random(b, d, s->g[d].b, s->B + (size_t)d * cnt, cnt, sqrtf(3.0f / (float)s->Kt), KIND_B);
}

static int rs_prepare(cli_bench *b) {
  rs_state *s = state_of(b);
  s->B = malloc((size_t)b->ngpu * (size_t)s->N * (size_t)s->k * sizeof(float));
  s->xrows = malloc((size_t)b->o->check_tokens * (size_t)b->ngpu * (size_t)b->ngpu * (size_t)s->k *
                    sizeof(float));
  if (!s->B || !s->xrows) {
    fprintf(stderr, "%s: out of host memory for the weights\n", b->who);
    return -1;
  }
  return cli_run_tasks(b->ngpu, b->ngpu, upload_b, b);
}

static int rs_create(cli_bench *b, int d) {
  rs_state *s = state_of(b);
  if (b->o->impl & CLI_IMPL_BASELINE) {
    ncclComm_t nccl = NULL;
    CLI_LOOM_OK(b, loom_comm_nccl(b->comms[d], &nccl));
    CLI_LOOM_OK(b, loom_rs_baseline_create(nccl, b->dtype, b->maxT, s->N, &s->g[d].base));
  }
  return 0;
}

static int rs_forward(cli_bench *b, int d, const void *x, int verified) {
  rs_state *s = state_of(b);
  (void)verified;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = b->dtype;
  a.m = b->T;
  a.n = s->N;
  a.k = s->k;
  a.a = x;
  a.b = s->g[d].b;
  a.c = b->g[d].y;
  a.activation = s->act;
  if (b->impl == CLI_BASELINE)
    CLI_LOOM_OK(b, loom_rs_baseline_forward(s->g[d].base, &a, b->g[d].stream));
  else
    CLI_LOOM_OK(b, loom_gemm_rs(b->comms[d], &a, b->g[d].stream));
  return 0;
}

/* xrows[i][d][src] = GPU src's row (d T/R + sample_i / R) of x: what GPU
 * d's sampled row i needs from src. One task per source GPU. */
static int prep_source(void *p, int src) {
  cli_bench *b = (cli_bench *)p;
  rs_state *s = state_of(b);
  const int R = b->ngpu, T = b->T, mo = T / R;
  const size_t K = (size_t)s->k;
  float *chunk = malloc((size_t)CLI_X_CHUNK_ROWS * K * sizeof(float));
  if (chunk == NULL) return -1;
  /* rows needed, ascending: for d = 0.., sample i = 0..: d mo + sample[i] / R */
  int have = -1;
  for (int d = 0; d < R; d++)
    for (int i = 0; i < b->nsample; i++) {
      const int row = d * mo + b->sample[i] / R, c0 = row / CLI_X_CHUNK_ROWS * CLI_X_CHUNK_ROWS;
      if (c0 != have) {
        cli_x_chunk(b, src, c0, T - c0 < CLI_X_CHUNK_ROWS ? T - c0 : CLI_X_CHUNK_ROWS, chunk);
        have = c0;
      }
      memcpy(s->xrows + (((size_t)i * R + d) * R + src) * K, chunk + (size_t)(row - c0) * K, K * sizeof(float));
    }
  free(chunk);
  return 0;
}

static int rs_reference_prepare(cli_bench *b) {
  return cli_run_tasks(b->ngpu, b->nthreads, prep_source, b);
}

static int rs_reference(cli_bench *b, int d, int s0, int n) {
  rs_state *s = state_of(b);
  const int R = b->ngpu;
  const size_t K = (size_t)s->k, N = (size_t)s->N, W = (size_t)b->out_cols;
  for (int i = s0; i < s0 + n; i++) {
    const int t = b->sample[i];
    const size_t col0 = (size_t)(t % R) * W; /* the piece of C row t / R */
    float *out = b->g[d].yref + (size_t)i * W;
    for (size_t j = 0; j < W; j++) {
      double acc = 0;
      for (int src = 0; src < R; src++) {
        const float *x = s->xrows + (((size_t)i * R + d) * R + src) * K;
        const float *w = s->B + ((size_t)src * N + col0 + j) * K;
        for (size_t p = 0; p < K; p++) acc += (double)x[p] * (double)w[p];
      }
      out[j] = (float)(s->act == LOOM_UNSET ? acc : ref_act((ref_activation)s->act, acc));
    }
  }
  return 0;
}

static void rs_need(const cli_bench *b, int d, cli_work *w) {
  const rs_state *s = state_of(b);
  const double R = b->ngpu, T = b->T, K = (double)s->k, N = (double)s->N, es = (double)b->es;
  (void)d;
  w->flops = 2.0 * T * N * K;
  w->link_bytes = (R - 1) / R * T * N * es;
  w->hbm_bytes = (T * K + N * K + 2.0 * T * N + T / R * N) * es;
}

static void rs_done(const cli_bench *b, double *flops, double *wire_bytes) {
  const rs_state *s = state_of(b);
  const double R = b->ngpu, T = b->T;
  *flops = R * 2.0 * T * (double)s->N * (double)s->k;
  *wire_bytes = (R - 1) * T * (double)s->N * (double)b->es;
}

static int rs_destroy(cli_bench *b) {
  rs_state *s = state_of(b);
  for (int d = 0; d < b->ngpu; d++) {
    cudaSetDevice(d);
    if (s->g[d].b) cudaFree(s->g[d].b);
    loom_rs_baseline_destroy(s->g[d].base);
  }
  free(s->B);
  free(s->xrows);
  return 0;
}

static const cli_op rs_op = {
    .name = "gemm-rs",
    .state_bytes = sizeof(rs_state),
    .tol = {TOL_TF32, TOL_16BIT, TOL_16BIT},
    .verify_before = "",
    .verify_after = {"", ""},
    .plan = rs_plan,
    .describe = rs_describe,
    .fields = rs_fields,
    .alloc = rs_alloc,
    .prepare = rs_prepare,
    .create = rs_create,
    .forward = rs_forward,
    .reference_prepare = rs_reference_prepare,
    .reference = rs_reference,
    .need = rs_need,
    .done = rs_done,
    .destroy = rs_destroy,
};

int cli_gemm_rs(const cli_options *o) { return cli_bench_main(o, &rs_op); }
