/*
 * `loom moe`: the MoE layer forward as an operator of the benchmark harness
 * (harness.h), which sets up the GPUs, generates x, verifies, times and
 * reports. Two implementations side by side on the same data: the fused
 * loom kernel (loom_moe_*, on the harness's loom communicators) and the
 * bulk-synchronous NCCL + cuBLAS baseline (src/baseline, one host thread
 * per GPU on the same NCCL communicators). Weights are generated as
 * [in x out] (the reference's layout) and uploaded in --weights' layout
 * (transposed for out-in, the default); both implementations get the
 * layout through the config.
 *
 * Verify first. The full CPU reference is far too slow at these sizes, so
 * the harness's sampled rows are checked against ref_moe_forward run on
 * just those rows with every expert (tokens are independent: the layer
 * runs dropless): y rows by ||y - ref|| / ||ref|| <= 5e-3 (fp32 on TF32)
 * or 2e-2 (bf16/fp16), every y element written (the harness's checks);
 * here routing exactly (expert ids) and the weights within 1e-6 relative
 * (fused; 1e-5 for the baseline's fp32 softmax). Fused only: the stats
 * must agree with the routing the GPU reports (rows_sent per destination,
 * nothing dropped, rows_sent[s -> d] == rows_received[d <- s]).
 *
 * Reported beside the harness's times: expert TFLOP/s per GPU = two GEMMs,
 * 2 * rows * hidden * ffn FLOPs each (ffn doubled in the first under
 * SwiGLU), rows = every routed row of every GPU, over the median and the
 * GPU count; bytes sent to other GPUs per GPU (mean; fused:
 * stats.bytes_remote, baseline: its dispatch + return rows); the phase
 * ends of the last fused iteration (stats.phase_end_ns).
 *
 * Bound (cli_bound_us), per GPU, from the verified routing:
 *   expert FLOPs of the rows it serves,
 *   bytes it must send to other GPUs (dispatch + return rows),
 *   HBM bytes it must move: x read, y written, the weights of its experts
 *     that get rows read once (at decode a few of them), each row it
 *     serves read once and its output written once (the FFN intermediate
 *     could stay on chip).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "harness.h"
#include "trace.h"
#include "loom.h"
#include "baseline/baseline.h"
#include "reference/reference.h"

#define TOL_TF32 5e-3
#define TOL_16BIT 2e-2
#define TOL_WEIGHTS 1e-6
/* The baseline's logits are cuBLAS fp32 sums of hidden products, whose
 * rounding grows with hidden: 1e-5 relative on the weights at hidden
 * 2048, in proportion above it (at 7168, E = 256, k = 8 the baseline's
 * weights were 1.1e-5 off, session 18). */
#define TOL_WEIGHTS_BASELINE(H) (1e-5 * ((H) > 2048 ? (double)(H) / 2048.0 : 1.0))
#define TRACE_CAPACITY (1 << 21) /* events per GPU for --trace (64 MiB) */
#define NUM_PHASES 5             /* loom_moe_stats_t.phase_end_ns */

_Static_assert(LOOM_ACT_RELU == 0 && LOOM_ACT_GELU == 1 && LOOM_ACT_SILU == 2 &&
                   LOOM_ACT_SWIGLU == 3 && CLI_NUM_ACTS == 4,
               "cli_act_names follow loom_activation_t");
_Static_assert(LOOM_WEIGHTS_OUT_IN == 0 && LOOM_WEIGHTS_IN_OUT == 1 && CLI_NUM_WEIGHT_LAYOUTS == 2,
               "cli_weights_names follow loom_weight_layout_t");
_Static_assert(LOOM_GATE_EXACT == 0 && LOOM_GATE_FAST == 1 && CLI_NUM_GATES == 2,
               "cli_gate_names follow loom_gate_math_t");
_Static_assert(REF_ACT_RELU == 0 && REF_ACT_GELU == 1 && REF_ACT_SILU == 2 && REF_ACT_SWIGLU == 3,
               "ref_activation follows loom_activation_t");
_Static_assert(NUM_PHASES <= CLI_MAX_PHASES, "a row holds the MoE phases");

/* Random streams of the weights (the harness's x is CLI_RNG_X). */
enum { KIND_GATE = 1, KIND_W1, KIND_W2 };
_Static_assert(KIND_W2 < CLI_RNG_X, "the weights' streams are not x's");

static const char *const phase_names[NUM_PHASES] = {"gate", "place", "dispatch", "experts",
                                                    "combine"};

/* ---- state -------------------------------------------------------------------- */

typedef struct {
  void *gate_w, *w1, *w2;
  int32_t *ids;
  float *wts;
  loom_moe_stats_t *stats;
  loom_moe_trace_event_t *tr_events; /* --trace: TRACE_CAPACITY events */
  loom_moe_trace_info_t *tr_info;
  loom_moe_t moe;
  loom_baseline_t base;
  int64_t rows_to[CLI_MAX_GPUS];         /* routed rows to each GPU (verified forward) */
  unsigned char routed[CLI_MAX_EXPERTS]; /* expert e got >= 1 of this GPU's rows */
  int64_t wire_bytes;                    /* bytes sent to other GPUs, last forward */
  /* host, per token count: the routing of the sampled rows */
  float *ws, *wref;
  int32_t *is, *iref;
  ref_fast_gate *fast; /* --gate fast, fused: each sampled row's check */
  loom_moe_stats_t st;
} moe_gpu;

typedef struct {
  loom_activation_t act;
  loom_weight_layout_t layout; /* of the uploaded weights (--weights) */
  loom_gate_math_t gate;       /* --gate */
  int64_t H, F, F1, E, El, k;
  loom_moe_config_t cfg;
  float *gate_w, *w1, *w2; /* host, all experts, rounded to dtype, [in x out]
                              (the reference's layout) whatever --weights */
  moe_gpu g[CLI_MAX_GPUS];
} moe_state;

static moe_state *state_of(const cli_bench *b) { return (moe_state *)b->state; }

/* ---- setup -------------------------------------------------------------------------- */

/* The layer's config from the options, and the communicators' workspace. */
static int moe_plan(cli_bench *b, loom_comm_config_t *cc) {
  moe_state *m = state_of(b);
  const cli_options *o = b->o;
  if (o->act == CLI_ACT_NONE) {
    fprintf(stderr, "%s: --act none: the MoE layer's experts need an activation (relu, gelu, silu "
            "or swiglu)\n", b->who);
    return -1;
  }
  if (o->bias) {
    fprintf(stderr, "%s: --bias is for ag-gemm, gemm-rs and gemm-ar; the MoE layer takes none\n",
            b->who);
    return -1;
  }
  m->act = (loom_activation_t)o->act;
  m->layout = (loom_weight_layout_t)o->weights;
  m->gate = (loom_gate_math_t)o->gate;
  m->H = o->hidden;
  m->F = o->ffn;
  m->F1 = m->act == LOOM_ACT_SWIGLU ? 2 * o->ffn : o->ffn;
  m->E = o->experts;
  m->k = o->topk;
  b->in_cols = b->out_cols = m->H;
  loom_moe_config_t cfg = LOOM_MOE_CONFIG_INIT;
  cfg.hidden = m->H;
  cfg.ffn = m->F;
  cfg.num_experts = m->E;
  cfg.top_k = m->k;
  cfg.max_tokens_per_rank = b->maxT;
  cfg.activation = (int)m->act;
  cfg.dtype = (int)b->dtype;
  cfg.weight_layout = (int)m->layout;
  cfg.gate_math = (int)m->gate;
  m->cfg = cfg;
  size_t ws = 0;
  int slots = 0;
  CLI_LOOM_OK(b, loom_moe_workspace_bytes(&m->cfg, b->ngpu, &ws, &slots));
  m->El = m->E / b->ngpu; /* the call above checked divisibility */
  char why[1024];
  CLI_LOOM_OK(b, loom_moe_workspace_describe(&m->cfg, b->ngpu, why, sizeof why));
  printf("workspace per GPU: %s\n", why);
  fflush(stdout);
  cc->workspace_bytes = (int64_t)ws;
  cc->signal_slots = slots;
  return 0;
}

/* The header line's shape: experts, top_k, sizes, dtype, activation,
 * layout, gate. */
static void moe_describe(const cli_bench *b, char *out, size_t n) {
  const moe_state *m = state_of(b);
  snprintf(out, n, "experts %lld (%lld per GPU), top_k %lld, hidden %lld, ffn %lld, %s%s, %s, "
           "weights %s, gate %s",
           (long long)m->E, (long long)m->El, (long long)m->k, (long long)m->H, (long long)m->F,
           loom_dtype_string(b->dtype), b->dtype == LOOM_FP32 ? " (TF32)" : "",
           cli_act_names[m->act], cli_weights_names[m->layout], cli_gate_names[m->gate]);
}

/* The same shape as JSON header fields, in the order `loom moe --json` has
 * always written them ("gate" last, since it was added). */
static int moe_fields(const cli_bench *b, cli_field *f, int max) {
  const moe_state *m = state_of(b);
  const cli_field all[] = {{"experts", NULL, (long long)m->E},
                           {"top_k", NULL, (long long)m->k},
                           {"hidden", NULL, (long long)m->H},
                           {"ffn", NULL, (long long)m->F},
                           {"dtype", loom_dtype_string(b->dtype), 0},
                           {"act", cli_act_names[m->act], 0},
                           {"weights", cli_weights_names[m->layout], 0},
                           {"gate", cli_gate_names[m->gate], 0}};
  int n = 0;
  for (; n < max && n < (int)(sizeof all / sizeof all[0]); n++) f[n] = all[n];
  return n;
}

/* GPU d's weights, routing outputs, stats, trace buffers, and the host
 * copies of the sampled rows' routing. */
static int moe_alloc(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  const size_t T = (size_t)b->maxT, H = (size_t)m->H, k = (size_t)m->k, El = (size_t)m->El;
  CLI_CUDA_OK(b, cudaMalloc(&g->gate_w, H * (size_t)m->E * b->es));
  CLI_CUDA_OK(b, cudaMalloc(&g->w1, El * H * (size_t)m->F1 * b->es));
  CLI_CUDA_OK(b, cudaMalloc(&g->w2, El * (size_t)m->F * H * b->es));
  CLI_CUDA_OK(b, cudaMalloc((void **)&g->ids, T * k * sizeof(int32_t)));
  CLI_CUDA_OK(b, cudaMalloc((void **)&g->wts, T * k * sizeof(float)));
  CLI_CUDA_OK(b, cudaMalloc((void **)&g->stats, sizeof(loom_moe_stats_t)));
  if (b->o->trace != NULL && (b->o->impl & CLI_IMPL_FUSED)) {
    CLI_CUDA_OK(b, cudaMalloc((void **)&g->tr_events,
                              TRACE_CAPACITY * sizeof(loom_moe_trace_event_t)));
    CLI_CUDA_OK(b, cudaMalloc((void **)&g->tr_info, sizeof(loom_moe_trace_info_t)));
  }
  const size_t n = (size_t)b->o->check_tokens;
  g->ws = malloc(n * k * sizeof(float));
  g->wref = malloc(n * k * sizeof(float));
  g->is = malloc(n * k * sizeof(int32_t));
  g->iref = malloc(n * k * sizeof(int32_t));
  g->fast = malloc(n * sizeof *g->fast);
  if (!g->ws || !g->wref || !g->is || !g->iref || !g->fast) {
    fprintf(stderr, "%s: out of host memory\n", b->who);
    return -1;
  }
  return 0;
}

/* A host [rows x cols] ([in x out]) matrix in the layer's layout
 * (transposed through tmp for OUT_IN) and dtype, copied to dev on the
 * current GPU. 0, or -1. */
static int upload_packed(const cli_bench *b, void *dev, const float *src, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  const int out_in = state_of(b)->layout == LOOM_WEIGHTS_OUT_IN;
  void *stage = malloc(n * b->es);
  float *tmp = out_in ? malloc(n * sizeof(float)) : NULL;
  int rc = -1;
  if (stage != NULL && (!out_in || tmp != NULL)) {
    if (out_in) {
      ref_transpose(tmp, src, 1, rows, cols);
      src = tmp;
    }
    ref_pack_array(stage, src, n, (int)b->dtype);
    rc = cudaMemcpy(dev, stage, n * b->es, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
  }
  free(stage);
  free(tmp);
  return rc;
}

/* Expert e's weights (host copy kept for the reference), scaled so
 * pre-activations and outputs are O(1), uploaded to its GPU in --weights'
 * layout. One task of the pool per expert: the random streams are per
 * expert (cli_fill_random's KIND and index), so the values do not depend
 * on the threads (at E = 256, H = 7168 the host generates ~30 GB). */
static int expert_task(void *ctx, int e) {
  cli_bench *b = (cli_bench *)ctx;
  moe_state *m = state_of(b);
  const int d = (int)(e / m->El);
  const size_t l = (size_t)(e % m->El);
  const size_t H = (size_t)m->H, F = (size_t)m->F, F1 = (size_t)m->F1;
  const size_t n1 = H * F1, n2 = F * H;
  float *w1 = m->w1 + (size_t)e * n1, *w2 = m->w2 + (size_t)e * n2;
  const moe_gpu *g = &m->g[d];
  cli_fill_random(w1, n1, sqrtf(3.0f / (float)H), KIND_W1, e, 0, b->dtype);
  cli_fill_random(w2, n2, sqrtf(3.0f / (float)F), KIND_W2, e, 0, b->dtype);
  if (cudaSetDevice(d) != cudaSuccess || upload_packed(b, (char *)g->w1 + l * n1 * b->es, w1, H, F1) != 0 ||
      upload_packed(b, (char *)g->w2 + l * n2 * b->es, w2, F, H) != 0) {
    fprintf(stderr, "%s: GPU %d: uploading expert %d's weights failed\n", b->who, d, e);
    return -1;
  }
  return 0;
}

/* The shared gate on GPU d. */
static int gate_task(void *ctx, int d) {
  cli_bench *b = (cli_bench *)ctx;
  moe_state *m = state_of(b);
  if (cudaSetDevice(d) != cudaSuccess ||
      upload_packed(b, m->g[d].gate_w, m->gate_w, (size_t)m->H, (size_t)m->E) != 0) {
    fprintf(stderr, "%s: GPU %d: uploading the gate weights failed\n", b->who, d);
    return -1;
  }
  return 0;
}

/* Every expert's weights and the gate on the host (kept for the
 * reference) and on their GPUs: the experts on the CPU pool, a task each. */
static int moe_prepare(cli_bench *b) {
  moe_state *m = state_of(b);
  const size_t H = (size_t)m->H, E = (size_t)m->E;
  m->gate_w = malloc(H * E * sizeof(float));
  m->w1 = malloc(E * H * (size_t)m->F1 * sizeof(float));
  m->w2 = malloc(E * (size_t)m->F * H * sizeof(float));
  if (!m->gate_w || !m->w1 || !m->w2) {
    fprintf(stderr, "%s: out of host memory for the weights (%.1f GB)\n", b->who,
            (double)E * H * (double)(m->F1 + m->F) * 4 / 1e9);
    return -1;
  }
  cli_fill_random(m->gate_w, H * E, 3.0f / sqrtf((float)H), KIND_GATE, 0, 0, b->dtype);
  if (cli_run_tasks(b->ngpu, b->ngpu, gate_task, b) != 0) return -1;
  if (cli_run_tasks((int)E, b->nthreads, expert_task, b) != 0) return -1;
  for (int d = 0; d < b->ngpu; d++) /* the copies have landed before any stream uses them */
    if (cudaSetDevice(d) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      fprintf(stderr, "%s: GPU %d: uploading weights failed\n", b->who, d);
      return -1;
    }
  return 0;
}

/* The fused layer and / or the baseline on GPU d (collective). */
static int moe_create(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  if (b->o->impl & CLI_IMPL_FUSED) {
    CLI_LOOM_OK(b, loom_moe_create(b->comms[d], &m->cfg, &g->moe));
    CLI_LOOM_OK(b, loom_moe_set_weights(g->moe, g->gate_w, g->w1, g->w2));
  }
  if (b->o->impl & CLI_IMPL_BASELINE) {
    ncclComm_t nccl = NULL;
    CLI_LOOM_OK(b, loom_comm_nccl(b->comms[d], &nccl));
    CLI_LOOM_OK(b, loom_baseline_create(nccl, &m->cfg, &g->base));
    CLI_LOOM_OK(b, loom_baseline_set_weights(g->base, g->gate_w, g->w1, g->w2));
  }
  return 0;
}

/* ---- forward and verification ---------------------------------------------------------- */

/* Poison the routing outputs and the stats before a verified forward. */
static int moe_poison(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  CLI_CUDA_OK(b, cudaMemset(g->ids, 0xFF, (size_t)b->maxT * (size_t)m->k * sizeof(int32_t)));
  CLI_CUDA_OK(b, cudaMemset(g->wts, 0xFF, (size_t)b->maxT * (size_t)m->k * sizeof(float)));
  CLI_CUDA_OK(b, cudaMemset(g->stats, 0xFF, sizeof(loom_moe_stats_t)));
  return 0;
}

/* One forward of b->impl: verified ones also write the routing. */
static int moe_forward(cli_bench *b, int d, const void *x, int verified) {
  moe_gpu *g = &state_of(b)->g[d];
  const cli_gpu *h = &b->g[d];
  if (b->impl == CLI_BASELINE) {
    CLI_LOOM_OK(b, loom_baseline_forward(g->base, x, b->T, h->y, verified ? g->ids : NULL,
                                         verified ? g->wts : NULL, h->stream));
    return 0;
  }
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.num_tokens = b->T;
  a.y = h->y;
  if (verified) {
    a.expert_ids_out = g->ids;
    a.weights_out = g->wts;
  }
  a.stats = g->stats; /* timed: the in-kernel phase trace of the last iteration */
  CLI_LOOM_OK(b, loom_moe_forward_ex(g->moe, &a, h->stream));
  return 0;
}

/* Copy the sampled rows' routing and, for the fused layer, the stats to
 * the host; note the bytes the forward sent to other GPUs; count the
 * routed rows per destination GPU. */
static int moe_download(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  const size_t k = (size_t)m->k;
  int32_t *ids = malloc((size_t)b->T * k * sizeof(int32_t) + 1);
  float *wts = malloc((size_t)b->T * k * sizeof(float) + 1);
  int rc = -1;
  if (!ids || !wts || cudaSetDevice(d) != cudaSuccess ||
      cudaMemcpy(ids, g->ids, (size_t)b->T * k * 4, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(wts, g->wts, (size_t)b->T * k * 4, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(&g->st, g->stats, sizeof g->st, cudaMemcpyDeviceToHost))
    goto out;
  for (int s = 0; s < b->nsample; s++) {
    const size_t t = (size_t)b->sample[s];
    memcpy(g->is + s * k, ids + t * k, k * sizeof *ids);
    memcpy(g->ws + s * k, wts + t * k, k * sizeof *wts);
  }
  g->wire_bytes =
      b->impl == CLI_FUSED ? g->st.bytes_remote : loom_baseline_bytes_remote(g->base);
  for (int p = 0; p < b->ngpu; p++) g->rows_to[p] = 0;
  memset(g->routed, 0, sizeof g->routed);
  for (size_t a = 0; a < (size_t)b->T * k; a++)
    if (ids[a] >= 0 && ids[a] < m->E) {
      g->rows_to[ids[a] / m->El]++;
      g->routed[ids[a]] = 1;
    }
  rc = 0;
  /* fused: rows_sent per destination must match the routing it reports */
  for (int p = 0; b->impl == CLI_FUSED && p < b->ngpu; p++)
    if (g->st.rows_sent[p] != g->rows_to[p]) {
      fprintf(stderr, "%s: GPU %d: stats.rows_sent[%d] = %lld but its routing sends %lld\n",
              b->who, d, p, (long long)g->st.rows_sent[p], (long long)g->rows_to[p]);
      rc = -1;
    }
out:
  if (rc && (!ids || !wts)) fprintf(stderr, "%s: out of host memory\n", b->who);
  free(ids);
  free(wts);
  return rc;
}

/* Reference of sampled tokens s0 .. s0+n of GPU d. The fused layer with
 * the fast gate may rank a near tie otherwise than the exact gate: its
 * routing is checked against the fast gate's contract here
 * (ref_moe_gate_fast_check, per row into g->fast), and y's reference uses
 * the routing it chose once every row passes (moe_check reports which
 * did not); iref / wref stay the exact gate's. */
static int moe_reference(cli_bench *b, int d, int s0, int n) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  const cli_gpu *h = &b->g[d];
  const size_t H = (size_t)m->H, k = (size_t)m->k;
  const int round = b->dtype == LOOM_BF16 ? 1 : b->dtype == LOOM_FP16 ? 2 : 0;
  const ref_moe_shape sh = {.T = n,
                            .H = (int)m->H,
                            .F = (int)m->F,
                            .E = (int)m->E,
                            .k = (int)m->k,
                            .act = (ref_activation)m->act,
                            .renormalize = 1, /* normalize_top_k's default */
                            .capacity = 0,    /* dropless */
                            .h_round = round,
                            .out_round = round};
  const float *x = h->xs + s0 * H;
  if (b->impl != CLI_FUSED || m->gate != LOOM_GATE_FAST)
    return ref_moe_forward(&sh, x, m->gate_w, m->w1, m->w2, NULL, NULL, g->iref + s0 * k,
                           g->wref + s0 * k, h->yref + s0 * H);
  if (ref_moe_gate(n, (int)m->H, (int)m->E, (int)m->k, sh.renormalize, x, m->gate_w,
                   g->iref + s0 * k, g->wref + s0 * k, NULL) != 0)
    return -1;
  int all_ok = 1;
  for (int s = 0; s < n; s++) {
    const size_t r = (size_t)(s0 + s);
    if (ref_moe_gate_fast_check((int)m->H, (int)m->E, (int)m->k, sh.renormalize, x + s * H,
                                m->gate_w, g->is + r * k, g->ws + r * k, &g->fast[r]) != 0)
      return -1;
    all_ok &= g->fast[r].ok;
  }
  return ref_moe_forward(&sh, x, m->gate_w, m->w1, m->w2, all_ok ? g->is + s0 * k : NULL,
                         all_ok ? g->ws + s0 * k : NULL, NULL, NULL, h->yref + s0 * H);
}

/* --gate fast, fused: GPU d's sampled routing against the fast gate's
 * contract (moe_reference ran the checks); after the last GPU, one line
 * of what the fast gate did over all of them. 0 when every row passes. */
static int check_fast_gate(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  const moe_gpu *g = &m->g[d];
  const size_t k = (size_t)m->k;
  for (int s = 0; s < b->nsample; s++) {
    const ref_fast_gate *f = &g->fast[s];
    if (f->ok) continue;
    const size_t a = (size_t)s * k;
    fprintf(stderr,
            "%s: fused: GPU %d: token %d: the fast gate's routing is outside its bound (%s; "
            "weight error %.3g, tolerance %.3g); first choice expert %d weight %.9g, exact gate "
            "expert %d weight %.9g\n",
            b->who, d, b->sample[s],
            f->consistent ? "weights" : "ids not a ranking of logits within the error bound",
            f->w_err, f->w_tol, g->is[a], g->ws[a], g->iref[a], g->wref[a]);
    return -1;
  }
  if (d == b->ngpu - 1) {
    int moved = 0, near = 0;
    double w_err = 0, w_tol = 0;
    for (int p = 0; p < b->ngpu; p++)
      for (int s = 0; s < b->nsample; s++) {
        const ref_fast_gate *f = &m->g[p].fast[s];
        moved += !f->same;
        near += f->near;
        if (f->w_err > w_err) w_err = f->w_err;
        if (f->w_tol > w_tol) w_tol = f->w_tol;
      }
    printf("  fused    gate fast: %d sampled tokens x %d GPUs within its bound; %d routed "
           "otherwise than the exact gate, %d within their band of a tie; weights max rel err "
           "%.2e (tolerance up to %.2e)\n",
           b->nsample, b->ngpu, moved, near, w_err, w_tol);
    fflush(stdout);
    b->ref_done = 0; /* y's reference used the fused routing: the baseline gets the exact one */
  }
  return 0;
}

/* GPU d's routing against the reference, and (fused) its stats; 0 when
 * all agree. */
static int moe_check(cli_bench *b, int d) {
  moe_state *m = state_of(b);
  moe_gpu *g = &m->g[d];
  const size_t k = (size_t)m->k, nk = (size_t)b->nsample * k;
  const double tol_w = b->impl == CLI_FUSED ? TOL_WEIGHTS : TOL_WEIGHTS_BASELINE(m->H);
  const char *who = cli_impl_names[b->impl];
  const int fast = b->impl == CLI_FUSED && m->gate == LOOM_GATE_FAST;
  int rc = fast ? check_fast_gate(b, d) : 0;
  for (size_t a = 0; a < nk && !fast; a++) {
    const double want = g->wref[a], got = g->ws[a];
    if (g->is[a] != g->iref[a] || !(fabs(got - want) <= tol_w * fabs(want))) {
      fprintf(stderr,
              "%s: %s: GPU %d: token %d choice %zu: expert %d weight %.9g, reference "
              "expert %d weight %.9g%s\n",
              b->who, who, d, b->sample[a / k], a % k, g->is[a], got, g->iref[a], want,
              b->impl == CLI_BASELINE && g->is[a] != g->iref[a]
                  ? " (the baseline's fp32 logits can flip a near-tie)"
                  : "");
      rc = -1;
      break;
    }
  }
  if (b->impl != CLI_FUSED) return rc;
  if (g->st.rows_dropped != 0) {
    fprintf(stderr, "%s: GPU %d: stats.rows_dropped = %lld in a dropless layer\n", b->who, d,
            (long long)g->st.rows_dropped);
    rc = -1;
  }
  for (int p = 0; p < b->ngpu; p++)
    if (g->st.rows_sent[p] != m->g[p].st.rows_received[d]) {
      fprintf(stderr, "%s: GPU %d sent %lld rows to GPU %d, which received %lld\n", b->who, d,
              (long long)g->st.rows_sent[p], p, (long long)m->g[p].st.rows_received[d]);
      rc = -1;
    }
  return rc;
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* GPU d's share of the bound at this token count (file comment). */
static void moe_need(const cli_bench *b, int d, cli_work *w) {
  const moe_state *m = state_of(b);
  const double H = (double)m->H, es = (double)b->es;
  const double expert_bytes = H * (double)(m->F1 + m->F) * es;
  double served = 0, wire = 0, weights = 0;
  for (int le = 0; le < m->El; le++) { /* only experts that get rows are read */
    int any = 0;
    for (int s = 0; s < b->ngpu && !any; s++) any = m->g[s].routed[d * m->El + le];
    weights += any ? expert_bytes : 0.0;
  }
  for (int s = 0; s < b->ngpu; s++) {
    served += (double)m->g[s].rows_to[d];
    if (s != d) wire += (double)m->g[d].rows_to[s] + (double)m->g[s].rows_to[d];
  }
  w->flops = 2.0 * served * H * (double)(m->F1 + m->F);
  w->link_bytes = wire * H * es;
  w->hbm_bytes = (2.0 * b->T + 2.0 * served) * H * es + weights;
}

/* Expert FLOPs of every routed row and the bytes the last verified
 * forward sent to other GPUs, over all GPUs. */
static void moe_done(const cli_bench *b, double *flops, double *wire_bytes) {
  const moe_state *m = state_of(b);
  double rows = 0, wire = 0;
  for (int d = 0; d < b->ngpu; d++) {
    for (int p = 0; p < b->ngpu; p++) rows += (double)m->g[d].rows_to[p];
    wire += (double)m->g[d].wire_bytes;
  }
  *flops = 2.0 * rows * (double)m->H * (double)(m->F1 + m->F);
  *wire_bytes = wire;
}

/* Fused: where the time went in the last timed iteration, the end of each
 * phase, max over blocks and GPUs (loom_moe_stats_t.phase_end_ns). */
static int moe_phases(cli_bench *b, cli_row *row) {
  moe_state *m = state_of(b);
  if (b->impl != CLI_FUSED) return 0;
  row->nphases = NUM_PHASES;
  row->phase_names = phase_names;
  for (int i = 0; i < NUM_PHASES; i++) row->phase_us[i] = 0;
  for (int d = 0; d < b->ngpu; d++) {
    loom_moe_stats_t st;
    CLI_CUDA_OK(b, cudaSetDevice(d));
    CLI_CUDA_OK(b, cudaMemcpy(&st, m->g[d].stats, sizeof st, cudaMemcpyDeviceToHost));
    for (int i = 0; i < NUM_PHASES; i++) {
      const double us = st.phase_end_ns[i] / 1e3;
      if (us > row->phase_us[i]) row->phase_us[i] = us;
    }
  }
  return 0;
}

/* --trace: one more fused forward on every GPU with the in-kernel trace
 * on (the timed ones ran without), written as a Perfetto timeline; prints
 * how busy the SMs were (cli_trace_sm_busy), per GPU and over all. */
static int moe_trace(cli_bench *b) {
  if (b->impl != CLI_FUSED || b->o->trace == NULL) return 0;
  moe_state *m = state_of(b);
  cli_trace_gpu tg[CLI_MAX_GPUS];
  memset(tg, 0, sizeof tg);
  int rc = -1;
  for (int d = 0; d < b->ngpu; d++) {
    CLI_CUDA_OK(b, cudaSetDevice(d));
    CLI_LOOM_OK(b, loom_moe_set_trace(m->g[d].moe, m->g[d].tr_events, TRACE_CAPACITY,
                                      m->g[d].tr_info));
  }
  const int ran = cli_fused_once(b) == 0;
  for (int d = 0; d < b->ngpu; d++) {
    CLI_CUDA_OK(b, cudaSetDevice(d));
    CLI_LOOM_OK(b, loom_moe_set_trace(m->g[d].moe, NULL, 0, NULL));
  }
  if (!ran) return -1;
  char path[4096];
  FILE *f = NULL;
  cli_trace_busy all = {0, 0, 1.0, 0};
  double sum = 0;
  for (int d = 0; d < b->ngpu; d++) {
    moe_gpu *g = &m->g[d];
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
      fprintf(stderr, "%s: GPU %d: the trace has no kernel time\n", b->who, d);
      goto out;
    }
    printf("  trace    GPU %d: %lld events%s, kernel %.1f us, SM busy mean %.1f%% (min %.1f%%, "
           "max %.1f%%, %d SMs)\n",
           d, (long long)tg[d].info.recorded, tg[d].info.dropped ? " (some DROPPED)" : "",
           (double)(tg[d].info.end_ns - tg[d].info.start_ns) / 1e3, 100 * busy.mean,
           100 * busy.min, 100 * busy.max, busy.sms);
    if (tg[d].info.dropped)
      fprintf(stderr, "%s: GPU %d: %lld trace events dropped (capacity %d)\n", b->who, d,
              (long long)tg[d].info.dropped, TRACE_CAPACITY);
    sum += busy.mean * busy.sms;
    all.sms += busy.sms;
    if (busy.min < all.min) all.min = busy.min;
    if (busy.max > all.max) all.max = busy.max;
  }
  all.mean = all.sms > 0 ? sum / all.sms : 0;
  if (cli_trace_path(b->o->trace, b->T, b->o->ntokens > 1, path, sizeof path) != 0 ||
      (f = fopen(path, "w")) == NULL) {
    fprintf(stderr, "%s: cannot write the trace to %s\n", b->who, b->o->trace);
    goto out;
  }
  rc = cli_write_trace_json(f, tg, b->ngpu);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) {
    fprintf(stderr, "%s: error writing %s\n", b->who, path);
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

/* ---- teardown ------------------------------------------------------------------------------ */

static int moe_destroy(cli_bench *b) {
  moe_state *m = state_of(b);
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    moe_gpu *g = &m->g[d];
    cudaSetDevice(d);
    if (g->moe && loom_moe_destroy(g->moe) != LOOM_SUCCESS) {
      fprintf(stderr, "%s: GPU %d: loom_moe_destroy: %s\n", b->who, d, loom_last_error());
      rc = -1;
    }
    if (g->base && loom_baseline_destroy(g->base) != LOOM_SUCCESS) {
      fprintf(stderr, "%s: GPU %d: loom_baseline_destroy: %s\n", b->who, d, loom_last_error());
      rc = -1;
    }
    void *dev[] = {g->gate_w, g->w1,    g->w2,        g->ids,
                   g->wts,    g->stats, g->tr_events, g->tr_info};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
      if (dev[i]) cudaFree(dev[i]);
    free(g->ws);
    free(g->wref);
    free(g->is);
    free(g->iref);
    free(g->fast);
  }
  free(m->gate_w);
  free(m->w1);
  free(m->w2);
  return rc;
}

static const cli_op moe_op = {
    .name = "moe",
    .state_bytes = sizeof(moe_state),
    .tol = {TOL_TF32, TOL_16BIT, TOL_16BIT}, /* fp32 (on TF32), bf16, fp16 */
    .verify_before = {"routing exact, ", "routing exact, "},
    .verify_after = {", stats consistent", ""},
    .plan = moe_plan,
    .describe = moe_describe,
    .fields = moe_fields,
    .alloc = moe_alloc,
    .prepare = moe_prepare,
    .create = moe_create,
    .poison = moe_poison,
    .forward = moe_forward,
    .download = moe_download,
    .reference = moe_reference,
    .check = moe_check,
    .need = moe_need,
    .done = moe_done,
    .phases = moe_phases,
    .after_timing = moe_trace,
    .destroy = moe_destroy,
};

int cli_moe(const cli_options *o) {
  cli_op op = moe_op;
  if (o->gate == LOOM_GATE_FAST) op.verify_before[CLI_FUSED] = "routing within the fast gate's bound, ";
  return cli_bench_main(o, &op);
}
