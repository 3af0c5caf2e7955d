/*
 * `loom gemm-rs` and `loom gemm-ar`: GEMM + reduce-scatter (the row-parallel
 * linear layer) and GEMM + all-reduce (the same layer, every GPU keeping
 * the whole output) as operators of the benchmark harness (harness.h). Per
 * GPU d of R: x = A_d [T x k] (--tokens T rows, k = --ffn / R: the inner
 * dimension split over the GPUs), weights B_d [hidden x k] (nn.Linear
 * layout); S = act(sum_s A_s B_s^T + bias) [T x hidden] (--bias 1: one bias
 * [hidden], the same on every GPU; else none).
 *   gemm-rs  C_d = rows [d T/R, (d+1) T/R) of S, [T/R x hidden] (T a
 *            multiple of R). Fused: loom_gemm_rs; baseline: cublasGemmEx +
 *            ncclReduceScatter (+ the activation kernel).
 *   gemm-ar  C_d = S on every GPU (any T >= 1). Fused: loom_gemm_ar;
 *            baseline: cublasGemmEx + ncclAllReduce in place (+ the
 *            activation kernel).
 * Both baselines: src/baseline/collective.c.
 *
 * gemm-rs: the harness sees C as y [T x hidden/R] (the same bytes): its
 * sampled "row t" is elements [t hidden/R, (t+1) hidden/R) of C, a piece
 * of C row t / R, which needs every GPU's row (d T/R + t/R) of x. gemm-ar:
 * y = C [T x hidden], row t needs every GPU's row t of x, the same on every
 * GPU, so its reference is computed once and copied to each. Those x rows
 * are regenerated on the host once per token count and dotted with every
 * GPU's weights in double. Tolerances: 2e-3 TF32, 1e-2 bf16/fp16. gemm-ar's
 * fused kernel promises the same bits on every GPU: its sampled rows must
 * be bitwise equal to GPU 0's (NCCL's all-reduce is not held to that).
 *
 * Bound per GPU, e = element size:
 *   gemm-rs  GEMM FLOPs 2 T hidden k; bytes to other GPUs (R-1)/R T hidden
 *            e (its partials of the others' rows); HBM: A, B, the partials
 *            written and read back (R T/R hidden), C.
 *   gemm-ar  GEMM FLOPs 2 T hidden k. GPU d owns r_d rows (T/R, one more on
 *            the first T % R GPUs): it sends its partials of the others'
 *            rows, (T - r_d) hidden e (the reduce-scatter), and each of the
 *            R-1 others reads its r_d reduced rows, (R-1) r_d hidden e (the
 *            all-gather): (T + (R-2) r_d) hidden e, which is (R-1)/R T
 *            hidden e for each half when R divides T. HBM: A, B, the R
 *            partials of its rows written and read back (2 R r_d hidden),
 *            its reduced rows read by the others ((R-1) r_d hidden), C
 *            written (T hidden).
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
#include "device/ops/ops.h"
#include "reference/reference.h"

#define TOL_TF32 2e-3
#define TOL_16BIT 1e-2
#define KIND_B 1
#define KIND_BIAS 2

typedef struct {
  void *b;    /* [N x k] */
  void *bias; /* [N] (--bias 1) or NULL */
  loom_rs_baseline_t rs_base;
  loom_ar_baseline_t ar_base;
} rs_gpu;

typedef struct {
  int ar;           /* gemm-ar (else gemm-rs) */
  int64_t N, Kt, k; /* hidden (output columns), ffn over all GPUs, k per GPU */
  int act;
  float *B;         /* host, [ngpu][N x k] */
  float *bias;      /* host, [N], rounded to dtype (--bias 1) or NULL */
  /* host, per token count: [nsample][views][ngpu][k], the row of x of each
   * GPU that sampled row i of view v needs; views: ngpu (gemm-rs: view d
   * is GPU d's y) or 1 (gemm-ar: y is the same on every GPU) */
  float *xrows;
  float *yall; /* gemm-ar, host, per token count: [nsample][N], every GPU's yref */
  rs_gpu g[CLI_MAX_GPUS];
} rs_state;

static rs_state *state_of(const cli_bench *b) { return (rs_state *)b->state; }

static int views(const cli_bench *b) { return state_of(b)->ar ? 1 : b->ngpu; }

static int plan(cli_bench *b, loom_comm_config_t *cc) {
  rs_state *s = state_of(b);
  const cli_options *o = b->o;
  const int R = b->ngpu;
  s->N = o->hidden;
  s->Kt = o->ffn;
  s->act = o->act_given ? o->act : LOOM_UNSET;
  if (s->act == LOOM_ACT_SWIGLU) {
    fprintf(stderr, "%s: --act swiglu is the MoE layer's; %s takes none, relu, gelu or silu\n", b->who,
            b->op->name);
    return -1;
  }
  if (s->Kt % R) {
    fprintf(stderr, "%s: --ffn %lld must be divisible by the %d GPUs (k = ffn / GPUs)\n", b->who,
            (long long)s->Kt, R);
    return -1;
  }
  if (!s->ar && s->N % R) {
    fprintf(stderr, "%s: --hidden %lld must be divisible by the %d GPUs (y's hidden / GPUs columns)\n",
            b->who, (long long)s->N, R);
    return -1;
  }
  for (int i = 0; i < o->ntokens; i++)
    if (o->tokens[i] == 0 || (!s->ar && o->tokens[i] % (uint64_t)R)) {
      fprintf(stderr, "%s: --tokens %llu: must be a positive %s\n", b->who,
              (unsigned long long)o->tokens[i], s->ar ? "count" : "multiple of the GPU count");
      return -1;
    }
  s->k = s->Kt / R;
  b->in_cols = s->k;
  b->out_cols = s->ar ? s->N : s->N / R;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = b->dtype;
  a.m = b->maxT;
  a.n = s->N;
  a.k = s->k;
  a.activation = s->act;
  size_t ws = 0;
  int slots = 0;
  if (s->ar) {
    CLI_LOOM_OK(b, loom_gemm_ar_workspace_bytes(&a, R, &ws, &slots));
    printf("workspace per GPU: %.1f MiB (every GPU's partial of up to %lld x %lld rows, and "
           "those rows reduced; or, one-shot, of all rows of a small call), %d signal slots\n",
           (double)ws / 1048576.0, (long long)((b->maxT + R - 1) / R), (long long)s->N, slots);
  } else {
    CLI_LOOM_OK(b, loom_gemm_rs_workspace_bytes(&a, R, &ws, &slots));
    printf("workspace per GPU: %.1f MiB (every GPU's partial of its %lld x %lld rows), %d signal "
           "slots\n",
           (double)ws / 1048576.0, (long long)(b->maxT / R), (long long)s->N, slots);
  }
  fflush(stdout);
  if (ws > 0) /* gemm-ar on one GPU needs none; a communicator takes no 0 */
    cc->workspace_bytes = (int64_t)ws;
  if (slots > 4096) cc->signal_slots = slots;
  return 0;
}

static int rs_plan(cli_bench *b, loom_comm_config_t *cc) {
  state_of(b)->ar = 0;
  return plan(b, cc);
}

static int ar_plan(cli_bench *b, loom_comm_config_t *cc) {
  state_of(b)->ar = 1;
  return plan(b, cc);
}

static void rs_describe(const cli_bench *b, char *out, size_t n) {
  cli_linear_describe(b, state_of(b)->N, state_of(b)->Kt, state_of(b)->act, out, n);
}

static int rs_fields(const cli_bench *b, cli_field *f, int max) {
  return cli_linear_fields(b, state_of(b)->N, state_of(b)->Kt, state_of(b)->act, f, max);
}

static int rs_alloc(cli_bench *b, int d) {
  rs_state *s = state_of(b);
  CLI_CUDA_OK(b, cudaMalloc(&s->g[d].b, (size_t)s->N * (size_t)s->k * b->es));
  if (b->o->bias) CLI_CUDA_OK(b, cudaMalloc(&s->g[d].bias, (size_t)s->N * b->es));
  return 0;
}

static int upload_b(void *p, int d) {
  cli_bench *b = (cli_bench *)p;
  rs_state *s = state_of(b);
  const size_t cnt = (size_t)s->N * (size_t)s->k;
  return cli_upload_random(b, d, s->g[d].b, s->B + (size_t)d * cnt, cnt, sqrtf(3.0f / (float)s->Kt), KIND_B);
}

/* The bias, the same on every GPU: GPU 0's random stream (host copy kept),
 * copied to the others. */
static int upload_bias(cli_bench *b) {
  rs_state *s = state_of(b);
  const size_t n = (size_t)s->N;
  int rc = cli_upload_random(b, 0, s->g[0].bias, s->bias, n, 1.0f, KIND_BIAS);
  for (int d = 1; rc == 0 && d < b->ngpu; d++)
    rc = cudaMemcpyPeer(s->g[d].bias, d, s->g[0].bias, 0, n * b->es) == cudaSuccess ? 0 : -1;
  if (rc) fprintf(stderr, "%s: uploading the bias failed\n", b->who);
  return rc;
}

static int rs_prepare(cli_bench *b) {
  rs_state *s = state_of(b);
  const size_t nsample = (size_t)b->o->check_tokens;
  s->B = malloc((size_t)b->ngpu * (size_t)s->N * (size_t)s->k * sizeof(float));
  s->xrows = malloc(nsample * (size_t)views(b) * (size_t)b->ngpu * (size_t)s->k * sizeof(float));
  if (s->ar) s->yall = malloc(nsample * (size_t)s->N * sizeof(float));
  if (b->o->bias) s->bias = malloc((size_t)s->N * sizeof(float));
  if (!s->B || !s->xrows || (s->ar && !s->yall) || (b->o->bias && !s->bias)) {
    fprintf(stderr, "%s: out of host memory for the weights\n", b->who);
    return -1;
  }
  if (s->bias && upload_bias(b)) return -1;
  return cli_run_tasks(b->ngpu, b->ngpu, upload_b, b);
}

static int rs_create(cli_bench *b, int d) {
  rs_state *s = state_of(b);
  if (b->o->impl & CLI_IMPL_BASELINE) {
    ncclComm_t nccl = NULL;
    CLI_LOOM_OK(b, loom_comm_nccl(b->comms[d], &nccl));
    if (s->ar)
      CLI_LOOM_OK(b, loom_ar_baseline_create(nccl, b->dtype, b->maxT, s->N, &s->g[d].ar_base));
    else
      CLI_LOOM_OK(b, loom_rs_baseline_create(nccl, b->dtype, b->maxT, s->N, &s->g[d].rs_base));
  }
  return 0;
}

static int rs_forward(cli_bench *b, int d, const void *x, int verified) {
  rs_state *s = state_of(b);
  const cudaStream_t st = b->g[d].stream;
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
  a.bias = s->g[d].bias;
  if (b->impl == CLI_BASELINE && s->ar)
    CLI_LOOM_OK(b, loom_ar_baseline_forward(s->g[d].ar_base, &a, st));
  else if (b->impl == CLI_BASELINE)
    CLI_LOOM_OK(b, loom_rs_baseline_forward(s->g[d].rs_base, &a, st));
  else if (s->ar)
    CLI_LOOM_OK(b, loom_gemm_ar(b->comms[d], &a, st));
  else
    CLI_LOOM_OK(b, loom_gemm_rs(b->comms[d], &a, st));
  return 0;
}

/* The x row sampled row i of view v needs from every GPU (see xrows);
 * ascending in (v, i). */
static int x_row(const cli_bench *b, int v, int i) {
  const int R = b->ngpu;
  return state_of(b)->ar ? b->sample[i] : v * (b->T / R) + b->sample[i] / R;
}

static float *xrows_of(const cli_bench *b, int i, int v) {
  const rs_state *s = state_of(b);
  return s->xrows + ((size_t)i * views(b) + v) * b->ngpu * (size_t)s->k;
}

/* GPU src's rows of every (sample, view) into xrows. One task per source GPU. */
static int prep_source(void *p, int src) {
  cli_bench *b = (cli_bench *)p;
  rs_state *s = state_of(b);
  const int T = b->T;
  const size_t K = (size_t)s->k;
  float *chunk = malloc((size_t)CLI_X_CHUNK_ROWS * K * sizeof(float));
  if (chunk == NULL) return -1;
  int have = -1;
  for (int v = 0; v < views(b); v++)
    for (int i = 0; i < b->nsample; i++) {
      const int row = x_row(b, v, i), c0 = row / CLI_X_CHUNK_ROWS * CLI_X_CHUNK_ROWS;
      if (c0 != have) {
        cli_x_chunk(b, src, c0, T - c0 < CLI_X_CHUNK_ROWS ? T - c0 : CLI_X_CHUNK_ROWS, chunk);
        have = c0;
      }
      memcpy(xrows_of(b, i, v) + src * K, chunk + (size_t)(row - c0) * K, K * sizeof(float));
    }
  free(chunk);
  return 0;
}

/* out[j] = act(sum over GPUs src of x[src] . B_src row col0 + j), j < W, in
 * double; x: [ngpu][k]. */
static void ref_row(const cli_bench *b, const float *x, size_t col0, size_t W, float *out) {
  const rs_state *s = state_of(b);
  const size_t K = (size_t)s->k, N = (size_t)s->N;
  for (size_t j = 0; j < W; j++) {
    double acc = 0;
    for (int src = 0; src < b->ngpu; src++) {
      const float *xs = x + src * K, *w = s->B + ((size_t)src * N + col0 + j) * K;
      for (size_t p = 0; p < K; p++) acc += (double)xs[p] * (double)w[p];
    }
    if (s->bias) acc += (double)s->bias[col0 + j];
    out[j] = (float)(s->act == LOOM_UNSET ? acc : ref_act((ref_activation)s->act, acc));
  }
}

static int ar_ref_task(void *p, int i) {
  cli_bench *b = (cli_bench *)p;
  const size_t N = (size_t)state_of(b)->N;
  ref_row(b, xrows_of(b, i, 0), 0, N, state_of(b)->yall + (size_t)i * N);
  return 0;
}

static int rs_reference_prepare(cli_bench *b) {
  if (cli_run_tasks(b->ngpu, b->nthreads, prep_source, b) != 0) return -1;
  return state_of(b)->ar ? cli_run_tasks(b->nsample, b->nthreads, ar_ref_task, b) : 0;
}

static int rs_reference(cli_bench *b, int d, int s0, int n) {
  const rs_state *s = state_of(b);
  const size_t W = (size_t)b->out_cols;
  if (s->ar) {
    memcpy(b->g[d].yref + (size_t)s0 * W, s->yall + (size_t)s0 * W, (size_t)n * W * sizeof(float));
    return 0;
  }
  for (int i = s0; i < s0 + n; i++) /* view d: piece t % R of C row t / R */
    ref_row(b, xrows_of(b, i, d), (size_t)(b->sample[i] % b->ngpu) * W, W,
            b->g[d].yref + (size_t)i * W);
  return 0;
}

/* gemm-ar, fused: GPU d's sampled rows are GPU 0's, bit for bit. */
static int ar_check(cli_bench *b, int d) {
  if (b->impl != CLI_FUSED || d == 0) return 0;
  const size_t n = (size_t)b->nsample * (size_t)b->out_cols;
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) differ += memcmp(&b->g[d].ys[i], &b->g[0].ys[i], sizeof(float)) != 0;
  if (differ == 0) return 0;
  fprintf(stderr, "%s: fused: GPU %d's C differs from GPU 0's in %zu of %zu sampled elements (the "
                  "all-reduce must give every GPU the same bits)\n",
          b->who, d, differ, n);
  return -1;
}

static void rs_need(const cli_bench *b, int d, cli_work *w) {
  const rs_state *s = state_of(b);
  const double R = b->ngpu, T = b->T, K = (double)s->k, N = (double)s->N, es = (double)b->es;
  w->flops = 2.0 * T * N * K;
  if (s->ar) {
    const double r = (double)loom_ar_rows(b->T, b->ngpu, d);
    w->link_bytes = (T + (R - 2) * r) * N * es;
    w->hbm_bytes = (T * K + N * K + (3 * R - 1) * r * N + T * N) * es;
  } else {
    w->link_bytes = (R - 1) / R * T * N * es;
    w->hbm_bytes = (T * K + N * K + 2.0 * T * N + T / R * N) * es;
  }
}

/* gemm-ar sends twice gemm-rs's bytes: the partials, then the reduced rows. */
static void rs_done(const cli_bench *b, double *flops, double *wire_bytes) {
  const rs_state *s = state_of(b);
  const double R = b->ngpu, T = b->T;
  *flops = R * 2.0 * T * (double)s->N * (double)s->k;
  *wire_bytes = (s->ar ? 2 : 1) * (R - 1) * T * (double)s->N * (double)b->es;
}

static int rs_destroy(cli_bench *b) {
  rs_state *s = state_of(b);
  for (int d = 0; d < b->ngpu; d++) {
    cudaSetDevice(d);
    if (s->g[d].b) cudaFree(s->g[d].b);
    if (s->g[d].bias) cudaFree(s->g[d].bias);
    loom_rs_baseline_destroy(s->g[d].rs_base);
    loom_ar_baseline_destroy(s->g[d].ar_base);
  }
  free(s->B);
  free(s->bias);
  free(s->xrows);
  free(s->yall);
  return 0;
}

static const cli_op rs_op = {
    .name = "gemm-rs",
    .state_bytes = sizeof(rs_state),
    .tol = {TOL_TF32, TOL_16BIT, TOL_16BIT},
    .verify_before = {"", ""},
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
    .phases = cli_coll_phases,
    .destroy = rs_destroy,
};

int cli_gemm_rs(const cli_options *o) { return cli_bench_main(o, &rs_op); }

/* gemm-ar: gemm-rs's callbacks (they read rs_state.ar, which ar_plan sets),
 * plus the bitwise check. */
int cli_gemm_ar(const cli_options *o) {
  cli_op ar_op = rs_op;
  ar_op.name = "gemm-ar";
  ar_op.verify_after[CLI_FUSED] = ", sampled rows bitwise equal on every GPU";
  ar_op.plan = ar_plan;
  ar_op.check = ar_check;
  return cli_bench_main(o, &ar_op);
}
