/*
 * GPU tests of the MoE layer (loom_moe_*) against the CPU reference
 * (ref_moe_gate, ref_moe_forward) on 1, 2, 4 and 8 GPUs, skipping the sizes
 * the machine lacks:
 *
 *   test_moe single [options]  one process drives every GPU
 *                              (loom_comm_create_all)
 *   test_moe multi  [options]  one process per GPU: rank 0 makes the NCCL
 *                              unique id and hands it to the others (pipes)
 *   options: --every N (run configs i % N == 0), --seed S (data seed)
 *
 * Configs are enumerated, not hand-picked: the full product
 *   dtype {fp32 (TF32), bf16, fp16} x activation {relu, gelu, silu, swiglu}
 *   x top_k {1, 2, 8} x experts {nranks, 8, 64, 256}
 * is 144 configs per world size, config i = ((experts*3 + top_k)*4 +
 * activation)*3 + dtype (indices into those lists). --every N runs the
 * configs with i % N == 0 (default 1 in single mode, 7 in multi mode; 7 is
 * coprime with the dtype and token periods, so the subset still mixes them).
 * Rank j of config i gets
 *   tokens  = {0, 1, 127, 4096}[(i + j) % 4]
 *   routing = {gate, one-expert, half-experts, gate-ties}[(i / 4 + j) % 4]
 * so the ranks of one call differ in tokens and routing, every value of
 * each axis meets every dtype, and a quarter of the (config, rank) pairs
 * carry 4096 tokens. On top of that:
 *   exact fp32 math (LOOM_MATH_FP32) on fp32 configs with (i / 3) % 5 == 1,
 *   capacity factor 1.0 on configs with i % 13 == 6,
 *   normalize_top_k = 0 on configs with i % 5 == 2,
 *   per rank, the call form: loom_moe_forward (fused-gate ranks with
 *   (i + 3j) % 5 == 4), forward_ex without optional outputs ((i + j) % 7 ==
 *   3), otherwise forward_ex with expert_ids_out, weights_out and stats.
 * A config with top_k > experts must be refused by loom_moe_workspace_bytes
 * and loom_moe_create with LOOM_INVALID_ARGUMENT; experts % nranks != 0
 * would be skipped (no such config with these lists).
 *
 * Routings:
 *   gate          fused gate on random x.
 *   one-expert    caller routing: every token of every rank picks the same
 *                 hot set: one expert e0 first, then e0+1..e0+k-1 (loom.h
 *                 forbids repeating an expert within a token), so e0 gets
 *                 every token.
 *   half-experts  caller routing over a random half of the experts, the same
 *                 half on every rank: the other experts receive nothing (the
 *                 pool widens to top_k experts when half is fewer).
 *   gate-ties     fused gate with logits that tie exactly or differ in the
 *                 last bits: gate_w has groups of 4 columns (at experts
 *                 8g..8g+3) that are equal, or differ by one grid step in
 *                 row 0, where x is tiny (m * 2^-12). x lies on a 2^-8 grid
 *                 and gate_w on a 2^-10 grid, so every fp64 logit sum is
 *                 exact in any summation order and rounds to the same fp32.
 *
 * Inputs are fresh random per case (a pure function of seed, world size,
 * case and rank, so every process can build what any rank holds), scaled so
 * activations are O(1), and rounded to the dtype before the reference sees
 * them. Checks per case and rank:
 *   - y poisoned (0xFF bytes: NaN in every dtype) over its whole buffer; the
 *     T rows must all be written, the rows past T left alone;
 *   - ||y - ref|| / ||ref|| <= 1e-5 (fp32 exact), 5e-3 (TF32), 2e-2
 *     (bf16/fp16), ref = ref_moe_forward on that rank's tokens with every
 *     expert's weights (global expert e lives on rank e / (E/R));
 *   - expert_ids_out exact and weights_out within 1e-6 relative against
 *     ref_moe_gate (fused gate) or the caller's routing (the routing used);
 *   - stats (see expected_stats for the byte formula).
 * Once per world size: determinism (two forwards, bitwise equal y), a CUDA
 * graph (one forward_ex per rank, exactly one kernel node, 100 replays with
 * fresh x copied into the captured buffer, each verified), and a fault case
 * at world size > 1 (rank R-1 never calls forward; every other rank must
 * report LOOM_TIMEOUT within timeout + 1 s and refuse further work, and the
 * communicators must still be destroyed).
 *
 * A watchdog (alarm) names the case in progress and ends the process when
 * one case, replay or setup step takes longer than CASE_DEADLINE_S.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "reference/reference.h"
#include "../check.h"
#include "gpu_check.h"
#include "ranks.h"

_Static_assert(LOOM_FP32 == 0 && LOOM_BF16 == 1 && LOOM_FP16 == 2,
               "ref_*_array formats follow loom_dtype_t");

#define MAX_RANKS 8
#define HIDDEN 128
#define FFN 128
#define MAX_EXPERTS 256
#define MAX_TOPK 8
#define MAX_TOKENS 4096
#define NUM_CONFIGS 144
#define MULTI_EVERY 7
#define REF_CHUNK 64   /* tokens per reference task (dropless cases) */
#define GATE_CHUNK 256 /* tokens per reference gate task */
#define MAX_SPANS (MAX_RANKS * (MAX_TOKENS / REF_CHUNK + 1))
#define MAX_THREADS 256
#define GRAPH_TOKENS 127
#define GRAPH_REPLAYS 100
#define FAULT_TIMEOUT_MS 1000
#define CASE_DEADLINE_S 120 /* watchdog per case, replay or setup step */
#define PARENT_DEADLINE_S 3600

/* Tolerances on ||y - ref|| / ||ref|| and on routing weights. */
#define TOL_FP32 1e-5
#define TOL_TF32 5e-3
#define TOL_16BIT 2e-2
#define TOL_WEIGHTS 1e-6

/* Ids of the once-per-world-size cases (config ids are < NUM_CONFIGS). */
#define ID_DETERMINISM 1000
#define ID_GRAPH 2000
#define ID_FAULT 3000

static const int TOKEN_LIST[4] = {0, 1, 127, MAX_TOKENS};
static const int TOPK_LIST[3] = {1, 2, 8};
static const char *const ACT_NAMES[LOOM_NUM_ACTIVATIONS] = {"relu", "gelu", "silu", "swiglu"};

enum { ROUTE_GATE, ROUTE_ONE, ROUTE_HALF, ROUTE_TIES, NUM_ROUTES };
static const char *const ROUTE_NAMES[NUM_ROUTES] = {"gate", "one-expert", "half-experts",
                                                    "gate-ties"};

/* How a rank calls the layer. */
enum {
  API_FULL, /* loom_moe_forward_ex with expert_ids_out, weights_out, stats */
  API_BARE, /* loom_moe_forward_ex without optional outputs */
  API_SHORT /* loom_moe_forward (fused gate only) */
};
static const char *const API_NAMES[3] = {"", "/bare", "/short"};

/* Streams of random data (the "kind" part of a generator's key). */
enum { KIND_GATE = 1, KIND_W1, KIND_W2, KIND_X, KIND_ROUTE, KIND_PICK };

_Static_assert(REF_ACT_RELU == (int)LOOM_ACT_RELU && REF_ACT_GELU == (int)LOOM_ACT_GELU &&
                   REF_ACT_SILU == (int)LOOM_ACT_SILU && REF_ACT_SWIGLU == (int)LOOM_ACT_SWIGLU,
               "reference and loom activations share their numbering");

static uint64_t g_seed = 0x6c6f6f6d4d6f45ull;
static int g_threads = 1;


/* ---- watchdog ------------------------------------------------------------------------------- */

static char g_doing[1024] = "startup";

static void on_alarm(int sig) {
  (void)sig;
  static const char head[] = "test_moe: WATCHDOG expired; in progress: ";
  if (write(2, head, sizeof head - 1) < 0 ||
      write(2, g_doing, strnlen(g_doing, sizeof g_doing)) < 0 || write(2, "\n", 1) < 0) {
    /* nothing more to do: the process ends either way */
  }
  for (int i = 0; i < RANKS_MAX; i++)
    if (ranks_children[i] > 0) kill(ranks_children[i], SIGKILL);
  _exit(124);
}

/* (Re)arm the watchdog for `seconds` and name what is about to run. */
static void watchdog(int seconds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void watchdog(int seconds, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_doing, sizeof g_doing, fmt, ap);
  va_end(ap);
  alarm((unsigned)seconds);
}

/* ---- deterministic random numbers (splitmix64) ---------------------------------------------- */

typedef struct {
  uint64_t s;
} rng_t;

static rng_t rng_make(uint64_t key, int kind, int index) {
  rng_t r;
  r.s = ref_splitmix64(g_seed ^ ref_splitmix64(key ^ ref_splitmix64(((uint64_t)kind << 32) ^
                                                                    (uint64_t)(uint32_t)index)));
  return r;
}

static uint64_t rng_next(rng_t *r) {
  r->s += 0x9e3779b97f4a7c15ull;
  return ref_splitmix64(r->s);
}

static double rng_unit(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; } /* [0,1) */
static double rng_sym(rng_t *r) { return 2.0 * rng_unit(r) - 1.0; }                  /* [-1,1) */
static int rng_int(rng_t *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }

/* ---- dtypes --------------------------------------------------------------------------------- */

static size_t dtype_bytes(loom_dtype_t t) { return t == LOOM_FP32 ? 4 : 2; }

/* ---- a tiny task pool for the CPU side (references, data) ----------------------------------- */

typedef int (*task_fn)(void *ctx, int task);

typedef struct {
  task_fn fn;
  void *ctx;
  int ntasks;
  atomic_int next;
  atomic_int failed;
} task_pool;

static void *pool_worker(void *p) {
  task_pool *pl = (task_pool *)p;
  for (;;) {
    const int t = atomic_fetch_add(&pl->next, 1);
    if (t >= pl->ntasks) break;
    if (pl->fn(pl->ctx, t) != 0) atomic_store(&pl->failed, 1);
  }
  return NULL;
}

/* Run fn(ctx, 0..ntasks) on up to g_threads threads (the caller is one). */
static int pool_run(int ntasks, task_fn fn, void *ctx) {
  task_pool pl;
  pl.fn = fn;
  pl.ctx = ctx;
  pl.ntasks = ntasks;
  atomic_init(&pl.next, 0);
  atomic_init(&pl.failed, 0);
  pthread_t th[MAX_THREADS];
  int started = 0;
  const int want = ntasks < g_threads ? ntasks : g_threads;
  for (int i = 1; i < want; i++)
    if (pthread_create(&th[started], NULL, pool_worker, &pl) == 0) started++;
  pool_worker(&pl);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  return atomic_load(&pl.failed) ? -1 : 0;
}

/* ---- cases ---------------------------------------------------------------------------------- */

typedef struct {
  int id;   /* config index, or ID_* */
  int salt; /* input variant (graph replays); weights do not depend on it */
  int nranks;
  loom_dtype_t dtype;
  loom_activation_t act;
  int k, E;
  loom_math_t math;
  double capacity; /* 0: dropless */
  int normalize;
  int tokens[MAX_RANKS];
  int route[MAX_RANKS];
  int api[MAX_RANKS];
} moe_case;

static int is_gate_route(int route) { return route == ROUTE_GATE || route == ROUTE_TIES; }

static int pick_api(int i, int j, int route) {
  if (is_gate_route(route) && (i + 3 * j) % 5 == 4) return API_SHORT;
  if ((i + j) % 7 == 3) return API_BARE;
  return API_FULL;
}

/* Config i of the enumeration on R ranks (see the file comment). */
static moe_case make_config_case(int i, int R) {
  moe_case c;
  memset(&c, 0, sizeof c);
  const int experts[4] = {R, 8, 64, 256};
  c.id = i;
  c.nranks = R;
  c.dtype = (loom_dtype_t)(i % 3);
  c.act = (loom_activation_t)((i / 3) % 4);
  c.k = TOPK_LIST[(i / 12) % 3];
  c.E = experts[i / 36];
  c.math = c.dtype == LOOM_FP32 && (i / 3) % 5 == 1 ? LOOM_MATH_FP32 : LOOM_MATH_TF32;
  c.capacity = i % 13 == 6 ? 1.0 : 0.0;
  c.normalize = i % 5 != 2;
  for (int j = 0; j < R; j++) {
    c.tokens[j] = TOKEN_LIST[(i + j) % 4];
    c.route[j] = (i / 4 + j) % 4;
    c.api[j] = pick_api(i, j, c.route[j]);
  }
  return c;
}

/* A hand-set case for the once-per-world-size tests: every rank full API. */
static moe_case make_special_case(int id, int R, loom_dtype_t dtype, loom_activation_t act, int k,
                                  int E) {
  moe_case c;
  memset(&c, 0, sizeof c);
  c.id = id;
  c.nranks = R;
  c.dtype = dtype;
  c.act = act;
  c.k = k;
  c.E = E;
  c.math = LOOM_MATH_TF32;
  c.normalize = 1;
  for (int j = 0; j < R; j++) {
    c.tokens[j] = GRAPH_TOKENS;
    c.route[j] = ROUTE_GATE;
    c.api[j] = API_FULL;
  }
  return c;
}

/* Determinism: many rows, every routing, top_k 8 so the combine has work. */
static moe_case make_determinism_case(int R) {
  moe_case c = make_special_case(ID_DETERMINISM, R, LOOM_BF16, LOOM_ACT_SWIGLU, 8, 64);
  const int tokens[4] = {MAX_TOKENS, 127, 1, 0};
  const int routes[4] = {ROUTE_GATE, ROUTE_TIES, ROUTE_HALF, ROUTE_ONE};
  for (int j = 0; j < R; j++) {
    c.tokens[j] = tokens[j % 4];
    c.route[j] = routes[j % 4];
  }
  return c;
}

static int case_max_tokens(const moe_case *c) {
  int m = 1;
  for (int j = 0; j < c->nranks; j++)
    if (c->tokens[j] > m) m = c->tokens[j];
  return m;
}

static int case_uses_gate(const moe_case *c) {
  for (int j = 0; j < c->nranks; j++)
    if (is_gate_route(c->route[j])) return 1;
  return 0;
}

static int case_f1(const moe_case *c) { return c->act == LOOM_ACT_SWIGLU ? 2 * FFN : FFN; }

static double case_tolerance(const moe_case *c) {
  if (c->dtype != LOOM_FP32) return TOL_16BIT;
  return c->math == LOOM_MATH_FP32 ? TOL_FP32 : TOL_TF32;
}

/* Reference capacity of source rank r: ceil(c * T * k / E), 0 = dropless. */
static int case_capacity(const moe_case *c, int r) {
  if (c->capacity <= 0.0 || c->tokens[r] == 0) return 0;
  return (int)ceil(c->capacity * (double)c->tokens[r] * (double)c->k / (double)c->E);
}

static loom_moe_config_t layer_config(const moe_case *c) {
  loom_moe_config_t cfg = LOOM_MOE_CONFIG_INIT;
  cfg.hidden = HIDDEN;
  cfg.ffn = FFN;
  cfg.num_experts = c->E;
  cfg.top_k = c->k;
  cfg.max_tokens_per_rank = case_max_tokens(c);
  cfg.activation = (int)c->act;
  cfg.dtype = (int)c->dtype;
  if (c->dtype == LOOM_FP32) cfg.fp32_math = (int)c->math;
  cfg.normalize_top_k = c->normalize;
  cfg.capacity_factor = c->capacity;
  return cfg;
}

/* Append printf output to buf at *at, never past n. */
static void appendf(char *buf, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t n, size_t *at, const char *fmt, ...) {
  if (*at >= n) return;
  va_list ap;
  va_start(ap, fmt);
  const int w = vsnprintf(buf + *at, n - *at, fmt, ap);
  va_end(ap);
  if (w > 0) *at += (size_t)w;
}

/* Everything needed to reproduce a case, on one line. */
static void describe(const moe_case *c, char *buf, size_t n) {
  size_t at = 0;
  const char *what = c->id < NUM_CONFIGS       ? "config"
                     : c->id == ID_DETERMINISM ? "determinism"
                     : c->id == ID_GRAPH       ? "graph"
                                               : "fault";
  appendf(buf, n, &at, "%s %d", what, c->id);
  if (c->salt) appendf(buf, n, &at, " replay %d", c->salt);
  appendf(buf, n, &at, " (R=%d seed=0x%" PRIx64 "): %s%s %s top_k=%d experts=%d", c->nranks, g_seed,
          loom_dtype_string(c->dtype),
          c->dtype == LOOM_FP32 ? (c->math == LOOM_MATH_FP32 ? "(exact)" : "(tf32)") : "",
          ACT_NAMES[c->act], c->k, c->E);
  if (c->capacity > 0) appendf(buf, n, &at, " capacity_factor=%g", c->capacity);
  if (!c->normalize) appendf(buf, n, &at, " normalize_top_k=0");
  appendf(buf, n, &at, " |");
  for (int j = 0; j < c->nranks; j++)
    appendf(buf, n, &at, " r%d:T=%d,%s%s", j, c->tokens[j], ROUTE_NAMES[c->route[j]],
            API_NAMES[c->api[j]]);
}

/* ---- host data ------------------------------------------------------------------------------ */

/* Host copies of one case, for every rank (each process builds them all:
 * the reference of one rank needs every expert, and its stats need every
 * rank's routing). Sized once for the largest case. */
typedef struct {
  float *gate_w;           /* [H x E] */
  float *w1, *w2;          /* E experts back to back: [H x F1], [F x H] */
  float *x[MAX_RANKS];     /* [T x H] */
  int32_t *ids[MAX_RANKS]; /* [T x k]: the routing rank r uses */
  float *wts[MAX_RANKS];   /* [T x k] */
  float *yref[MAX_RANKS];  /* [T x H] */
  int64_t *kept;           /* [R x E]: kept assignments source s -> expert e */
  int64_t dropped[MAX_RANKS];
  float *yhost; /* downloaded y as float */
  void *stage;  /* dtype staging for uploads and downloads */
  size_t stage_bytes;
} host_data;

static void host_free(host_data *d) {
  free(d->gate_w);
  free(d->w1);
  free(d->w2);
  for (int r = 0; r < MAX_RANKS; r++) {
    free(d->x[r]);
    free(d->ids[r]);
    free(d->wts[r]);
    free(d->yref[r]);
  }
  free(d->kept);
  free(d->yhost);
  free(d->stage);
  memset(d, 0, sizeof *d);
}

static size_t max_local_experts(int R) { return MAX_EXPERTS / R > 1 ? MAX_EXPERTS / R : 1; }

static int host_alloc(host_data *d, int R) {
  memset(d, 0, sizeof *d);
  const size_t H = HIDDEN, rows = MAX_TOKENS, tk = (size_t)MAX_TOKENS * MAX_TOPK;
  d->gate_w = malloc(H * MAX_EXPERTS * sizeof(float));
  d->w1 = malloc((size_t)MAX_EXPERTS * H * 2 * FFN * sizeof(float));
  d->w2 = malloc((size_t)MAX_EXPERTS * FFN * H * sizeof(float));
  int ok = d->gate_w && d->w1 && d->w2;
  for (int r = 0; r < R; r++) {
    d->x[r] = malloc(rows * H * sizeof(float));
    d->ids[r] = malloc(tk * sizeof(int32_t));
    d->wts[r] = malloc(tk * sizeof(float));
    d->yref[r] = malloc(rows * H * sizeof(float));
    ok = ok && d->x[r] && d->ids[r] && d->wts[r] && d->yref[r];
  }
  d->kept = malloc((size_t)R * MAX_EXPERTS * sizeof(int64_t));
  d->yhost = malloc(rows * H * sizeof(float));
  size_t stage = max_local_experts(R) * H * 2 * FFN;
  if (stage < rows * H) stage = rows * H;
  if (stage < tk) stage = tk;
  d->stage_bytes = stage * sizeof(float);
  d->stage = malloc(d->stage_bytes);
  ok = ok && d->kept && d->yhost && d->stage;
  CHECK(ok, "host allocation");
  if (!ok) host_free(d);
  return ok ? 0 : -1;
}

/* Generator keys: weights depend on the case, inputs also on its salt. */
static uint64_t weight_key(const moe_case *c) {
  return ((uint64_t)c->nranks << 48) ^ ((uint64_t)c->id << 20);
}
static uint64_t input_key(const moe_case *c) { return weight_key(c) ^ (uint64_t)c->salt; }

typedef struct {
  const moe_case *c;
  host_data *d;
} gen_ctx;

/* Expert e's W1 and W2, uniform and scaled so pre-activations have variance
 * var(x) and outputs stay O(1). */
static int gen_expert_task(void *p, int e) {
  const gen_ctx *g = (const gen_ctx *)p;
  const size_t H = HIDDEN, F = FFN, F1 = (size_t)case_f1(g->c);
  rng_t r1 = rng_make(weight_key(g->c), KIND_W1, e);
  rng_t r2 = rng_make(weight_key(g->c), KIND_W2, e);
  float *w1 = g->d->w1 + (size_t)e * H * F1;
  float *w2 = g->d->w2 + (size_t)e * F * H;
  const double s1 = sqrt(3.0 / (double)H), s2 = sqrt(3.0 / (double)F);
  for (size_t i = 0; i < H * F1; i++) w1[i] = (float)(rng_sym(&r1) * s1);
  for (size_t i = 0; i < F * H; i++) w2[i] = (float)(rng_sym(&r2) * s2);
  ref_round_array(w1, H * F1, (int)g->c->dtype);
  ref_round_array(w2, F * H, (int)g->c->dtype);
  return 0;
}

/* gate_w [H x E] on a 2^-10 grid, |w| <= 2^-2 (exact in every dtype), with
 * near-tie groups: for each g, columns 8g+1 = 8g, 8g+2 = 8g with row 0 one
 * step up, 8g+3 = 8g with row 0 one step down. */
static void gen_gate(const moe_case *c, host_data *d) {
  const int H = HIDDEN, E = c->E;
  rng_t r = rng_make(weight_key(c), KIND_GATE, 0);
  float *w = d->gate_w;
  for (int i = 0; i < H * E; i++) w[i] = (float)(rng_int(&r, 511) - 255) * 0x1.0p-10f;
  for (int g = 0; g < E; g += 8) {
    for (int m = 1; m < 4 && g + m < E; m++)
      for (int h = 0; h < H; h++) w[h * E + g + m] = w[h * E + g];
    if (g + 2 < E) w[g + 2] += 0x1.0p-10f;
    if (g + 3 < E) w[g + 3] -= 0x1.0p-10f;
  }
}

static int gen_weights(const moe_case *c, host_data *d) {
  gen_ctx g = {c, d};
  gen_gate(c, d);
  return pool_run(c->E, gen_expert_task, &g);
}

/* Rank r's x: random O(1), or for gate-ties on the exact grid described in
 * the file comment. */
static void gen_x(const moe_case *c, host_data *d, int r) {
  const size_t H = HIDDEN, T = (size_t)c->tokens[r];
  rng_t g = rng_make(input_key(c), KIND_X, r);
  float *x = d->x[r];
  if (c->route[r] == ROUTE_TIES) {
    static const float tiny[6] = {-3, -2, -1, 1, 2, 3};
    for (size_t i = 0; i < T * H; i++) x[i] = (float)(rng_int(&g, 511) - 255) * 0x1.0p-8f;
    for (size_t t = 0; t < T; t++) x[t * H] = tiny[rng_int(&g, 6)] * 0x1.0p-12f;
  } else {
    for (size_t i = 0; i < T * H; i++) x[i] = (float)rng_sym(&g);
  }
  ref_round_array(x, T * H, (int)c->dtype);
}

/* The experts caller routing draws from, the same on every rank:
 * one-expert: one random expert; half-experts: a random half. */
static int routing_pool(const moe_case *c, int route, int *pool) {
  if (route == ROUTE_ONE) {
    rng_t g = rng_make(weight_key(c), KIND_PICK, 0);
    pool[0] = rng_int(&g, c->E);
    for (int j = 1; j < c->k; j++) pool[j] = (pool[0] + j) % c->E; /* a hot set of k */
    return c->k;
  }
  rng_t g = rng_make(weight_key(c), KIND_PICK, 1);
  for (int e = 0; e < c->E; e++) pool[e] = e;
  for (int e = c->E - 1; e > 0; e--) {
    const int q = rng_int(&g, e + 1), t = pool[e];
    pool[e] = pool[q];
    pool[q] = t;
  }
  const int half = c->E / 2 > 0 ? c->E / 2 : 1;
  return half < c->k ? c->k : half;
}

/* Caller routing of rank r: k ids per token from the pool (distinct while
 * the pool allows), weights in [0.05, 1) used as given. */
static void gen_caller_routing(const moe_case *c, host_data *d, int r) {
  int pool[MAX_EXPERTS], draw[MAX_EXPERTS];
  const int n = routing_pool(c, c->route[r], pool), k = c->k, T = c->tokens[r];
  rng_t g = rng_make(input_key(c), KIND_ROUTE, r);
  for (int t = 0; t < T; t++) {
    memcpy(draw, pool, (size_t)n * sizeof *draw);
    for (int j = 0; j < k; j++) {
      int id;
      if (n >= k) { /* partial Fisher-Yates: distinct */
        const int q = j + rng_int(&g, n - j), s = draw[q];
        draw[q] = draw[j];
        draw[j] = s;
        id = s;
      } else {
        id = pool[rng_int(&g, n)];
      }
      d->ids[r][(size_t)t * k + j] = id;
      d->wts[r][(size_t)t * k + j] = (float)(0.05 + 0.95 * rng_unit(&g));
    }
  }
}

/* ---- reference work, split into token spans ------------------------------------------------- */

typedef struct {
  int rank, t0, t1;
} span;

typedef struct {
  const moe_case *c;
  host_data *d;
  span spans[MAX_SPANS];
  int n;
} span_set;

static void add_spans(span_set *s, int rank, int T, int chunk) {
  for (int t0 = 0; t0 < T; t0 += chunk) {
    s->spans[s->n].rank = rank;
    s->spans[s->n].t0 = t0;
    s->spans[s->n].t1 = t0 + chunk < T ? t0 + chunk : T;
    s->n++;
  }
}

static int gate_task(void *p, int i) {
  const span_set *s = (const span_set *)p;
  const span sp = s->spans[i];
  const size_t H = HIDDEN, k = (size_t)s->c->k;
  return ref_moe_gate(sp.t1 - sp.t0, HIDDEN, s->c->E, s->c->k, s->c->normalize,
                      s->d->x[sp.rank] + sp.t0 * H, s->d->gate_w, s->d->ids[sp.rank] + sp.t0 * k,
                      s->d->wts[sp.rank] + sp.t0 * k, NULL);
}

static int round_mode(loom_dtype_t t) { return t == LOOM_BF16 ? 1 : t == LOOM_FP16 ? 2 : 0; }

/* ref_moe_forward on one span of one rank's tokens with every expert; the
 * routing (reference gate's or caller's) goes in as ids_in/weights_in,
 * which is exactly what ref_moe_forward does internally after its gate. */
static int ref_task(void *p, int i) {
  const span_set *s = (const span_set *)p;
  const moe_case *c = s->c;
  const span sp = s->spans[i];
  const size_t H = HIDDEN, k = (size_t)c->k;
  ref_moe_shape sh;
  sh.T = sp.t1 - sp.t0;
  sh.H = HIDDEN;
  sh.F = FFN;
  sh.E = c->E;
  sh.k = c->k;
  sh.act = (ref_activation)c->act;
  sh.renormalize = c->normalize;
  sh.capacity = case_capacity(c, sp.rank); /* spans are whole ranks then */
  sh.h_round = round_mode(c->dtype);
  sh.out_round = round_mode(c->dtype);
  return ref_moe_forward(&sh, s->d->x[sp.rank] + sp.t0 * H, NULL, s->d->w1, s->d->w2,
                         s->d->ids[sp.rank] + sp.t0 * k, s->d->wts[sp.rank] + sp.t0 * k, NULL, NULL,
                         s->d->yref[sp.rank] + sp.t0 * H);
}

/* Per source rank and expert: assignments kept under the capacity (token-
 * major: t ascending, then j), and per rank the number dropped. */
static void count_kept(const moe_case *c, host_data *d) {
  const int E = c->E, k = c->k;
  for (int s = 0; s < c->nranks; s++) {
    int64_t *kept = d->kept + (size_t)s * E;
    const int cap = case_capacity(c, s);
    const size_t n = (size_t)c->tokens[s] * k;
    for (int e = 0; e < E; e++) kept[e] = 0;
    int64_t total = 0;
    for (size_t a = 0; a < n; a++) {
      const int e = d->ids[s][a];
      if (cap == 0 || kept[e] < cap) {
        kept[e]++;
        total++;
      }
    }
    d->dropped[s] = (int64_t)n - total;
  }
}

/* Every rank's x and routing (caller's, or the reference gate's), then the
 * kept counts. */
static int gen_inputs(const moe_case *c, host_data *d) {
  static span_set gates; /* large; one case at a time */
  gates.c = c;
  gates.d = d;
  gates.n = 0;
  for (int r = 0; r < c->nranks; r++) {
    gen_x(c, d, r);
    if (is_gate_route(c->route[r]))
      add_spans(&gates, r, c->tokens[r], GATE_CHUNK);
    else
      gen_caller_routing(c, d, r);
  }
  if (pool_run(gates.n, gate_task, &gates) != 0) return -1;
  count_kept(c, d);
  return 0;
}

/* y references of the ranks this process drives. */
static int compute_refs(const moe_case *c, host_data *d, const int *ranks, int nlocal) {
  static span_set refs;
  refs.c = c;
  refs.d = d;
  refs.n = 0;
  for (int i = 0; i < nlocal; i++) {
    const int r = ranks[i], T = c->tokens[r];
    add_spans(&refs, r, T, c->capacity > 0 ? (T > 0 ? T : 1) : REF_CHUNK);
  }
  return pool_run(refs.n, ref_task, &refs);
}

/* ---- expected statistics -------------------------------------------------------------------- */

/* Stats of rank r, from every rank's kept assignments:
 *   rows_sent[d]     = kept (t, j) of rank r whose expert lives on rank d
 *   rows_received[s] = kept (t, j) of rank s whose expert lives on rank r
 *   rows_dropped     = rank r's assignments past capacity
 *   bytes_sent       = (sum_d rows_sent[d] + sum_s rows_received[s])
 *                        * hidden * dtype_size  +  nranks * header
 *   bytes_remote     = the same with d != r, s != r, and (nranks - 1) headers
 *   header           = round_up((experts_per_rank + 1) * 4, 16) bytes: one
 *                      per destination, its per-expert int32 row counts and
 *                      the config hash (loom.h).
 * (Dispatch stores rows into the owner's window, the owner stores each
 * expert output row back into the source's window; rows for self count in
 * bytes_sent, not in bytes_remote.) */
static void expected_stats(const moe_case *c, const host_data *d, int r, loom_moe_stats_t *st) {
  const int R = c->nranks, E = c->E, El = c->E / c->nranks;
  const int64_t row_bytes = (int64_t)HIDDEN * (int64_t)dtype_bytes(c->dtype);
  const int64_t header = ((int64_t)(El + 1) * 4 + 15) / 16 * 16;
  memset(st, 0, sizeof *st);
  int64_t rows = 0, remote = 0;
  for (int p = 0; p < R; p++) {
    for (int e = p * El; e < (p + 1) * El; e++) st->rows_sent[p] += d->kept[(size_t)r * E + e];
    for (int e = r * El; e < (r + 1) * El; e++) st->rows_received[p] += d->kept[(size_t)p * E + e];
    rows += st->rows_sent[p] + st->rows_received[p];
    if (p != r) remote += st->rows_sent[p] + st->rows_received[p];
  }
  st->rows_dropped = d->dropped[r];
  st->bytes_sent = rows * row_bytes + R * header;
  st->bytes_remote = remote * row_bytes + (R - 1) * header;
}

/* ---- per-rank GPU state --------------------------------------------------------------------- */

typedef struct {
  loom_comm_t comm;
  int rank, device;
  cudaStream_t stream;
  void *x, *y, *y2, *gate_w, *w1, *w2;
  int32_t *ids_in, *ids_out;
  float *wts_in, *wts_out;
  loom_moe_stats_t *stats;
  loom_moe_t moe;
} rank_ctx;

#define Y_BYTES ((size_t)MAX_TOKENS * HIDDEN * 4)
#define ROUTE_BYTES ((size_t)MAX_TOKENS * MAX_TOPK * 4)

static int ctx_setup(rank_ctx *c, int R) {
  const size_t el = max_local_experts(R);
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUDA_T(cudaMalloc(&c->x, Y_BYTES));
  CUDA_T(cudaMalloc(&c->y, Y_BYTES));
  CUDA_T(cudaMalloc(&c->y2, Y_BYTES));
  CUDA_T(cudaMalloc(&c->gate_w, (size_t)HIDDEN * MAX_EXPERTS * 4));
  CUDA_T(cudaMalloc(&c->w1, el * HIDDEN * 2 * FFN * 4));
  CUDA_T(cudaMalloc(&c->w2, el * FFN * HIDDEN * 4));
  CUDA_T(cudaMalloc((void **)&c->ids_in, ROUTE_BYTES));
  CUDA_T(cudaMalloc((void **)&c->ids_out, ROUTE_BYTES));
  CUDA_T(cudaMalloc((void **)&c->wts_in, ROUTE_BYTES));
  CUDA_T(cudaMalloc((void **)&c->wts_out, ROUTE_BYTES));
  CUDA_T(cudaMalloc((void **)&c->stats, sizeof(loom_moe_stats_t)));
  return 0;
}

static void ctx_free(rank_ctx *c) {
  cudaSetDevice(c->device);
  if (c->moe) loom_moe_destroy(c->moe);
  c->moe = NULL;
  void *bufs[] = {c->x,      c->y,       c->y2,     c->gate_w,  c->w1,   c->w2,
                  c->ids_in, c->ids_out, c->wts_in, c->wts_out, c->stats};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  if (c->stream) cudaStreamDestroy(c->stream);
  memset(c, 0, sizeof *c);
}

static int upload(void *dev, const float *src, size_t n, loom_dtype_t t, host_data *d) {
  if (n == 0) return 0;
  ref_pack_array(d->stage, src, n, (int)t);
  CUDA_T(cudaMemcpy(dev, d->stage, n * dtype_bytes(t), cudaMemcpyHostToDevice));
  return 0;
}

static int upload_weights(rank_ctx *rc, const moe_case *c, host_data *d) {
  const size_t H = HIDDEN, F = FFN, F1 = (size_t)case_f1(c), El = (size_t)(c->E / c->nranks);
  const size_t e0 = (size_t)rc->rank * El;
  CUDA_T(cudaSetDevice(rc->device));
  if (upload(rc->gate_w, d->gate_w, H * (size_t)c->E, c->dtype, d)) return -1;
  if (upload(rc->w1, d->w1 + e0 * H * F1, El * H * F1, c->dtype, d)) return -1;
  return upload(rc->w2, d->w2 + e0 * F * H, El * F * H, c->dtype, d);
}

/* x (and caller routing) of this rank; every output poisoned with 0xFF. */
static int upload_inputs(rank_ctx *rc, const moe_case *c, host_data *d) {
  const int r = rc->rank;
  const size_t T = (size_t)c->tokens[r], tk = T * (size_t)c->k;
  CUDA_T(cudaSetDevice(rc->device));
  if (upload(rc->x, d->x[r], T * HIDDEN, c->dtype, d)) return -1;
  if (!is_gate_route(c->route[r]) && tk > 0) {
    CUDA_T(cudaMemcpy(rc->ids_in, d->ids[r], tk * 4, cudaMemcpyHostToDevice));
    CUDA_T(cudaMemcpy(rc->wts_in, d->wts[r], tk * 4, cudaMemcpyHostToDevice));
  }
  CUDA_T(cudaMemset(rc->y, 0xFF, Y_BYTES));
  CUDA_T(cudaMemset(rc->y2, 0xFF, Y_BYTES));
  CUDA_T(cudaMemset(rc->ids_out, 0xFF, ROUTE_BYTES));
  CUDA_T(cudaMemset(rc->wts_out, 0xFF, ROUTE_BYTES));
  CUDA_T(cudaMemset(rc->stats, 0xFF, sizeof(loom_moe_stats_t)));
  return 0;
}

/* ---- layers: create (collective: one thread per local rank), destroy ------------------------ */

typedef struct {
  rank_ctx *rc;
  const loom_moe_config_t *cfg;
  loom_result_t res;
  char msg[512];
} create_job;

static void *create_thread(void *p) {
  create_job *j = (create_job *)p;
  j->rc->moe = NULL;
  if (cudaSetDevice(j->rc->device) != cudaSuccess) {
    j->res = LOOM_CUDA_ERROR;
    snprintf(j->msg, sizeof j->msg, "cudaSetDevice(%d) failed", j->rc->device);
    return NULL;
  }
  j->res = loom_moe_create(j->rc->comm, j->cfg, &j->rc->moe);
  snprintf(j->msg, sizeof j->msg, "%s", loom_last_error());
  if (j->res != LOOM_SUCCESS) j->rc->moe = NULL;
  return NULL;
}

/* loom_moe_create on every local rank at once (it is collective). */
static void create_layers(rank_ctx *cs, int nlocal, const loom_moe_config_t *cfg,
                          create_job *jobs) {
  pthread_t th[MAX_RANKS];
  int started[MAX_RANKS] = {0};
  for (int i = 0; i < nlocal; i++) {
    jobs[i].rc = &cs[i];
    jobs[i].cfg = cfg;
    jobs[i].res = LOOM_INTERNAL_ERROR;
    snprintf(jobs[i].msg, sizeof jobs[i].msg, "thread not started");
  }
  if (nlocal == 1) {
    create_thread(&jobs[0]);
    return;
  }
  for (int i = 0; i < nlocal; i++)
    started[i] = pthread_create(&th[i], NULL, create_thread, &jobs[i]) == 0;
  for (int i = 0; i < nlocal; i++)
    if (started[i]) pthread_join(th[i], NULL);
}

static void destroy_layers(rank_ctx *cs, int nlocal) {
  for (int i = 0; i < nlocal; i++) {
    if (cs[i].moe == NULL) continue;
    loom_result_t r = loom_moe_destroy(cs[i].moe);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_destroy: %s", cs[i].rank, loom_last_error());
    cs[i].moe = NULL;
  }
}

/* Create the case's layer on every local rank and point it at its weights
 * (gate_w NULL when no rank uses the fused gate, as the contract allows). */
static int setup_layers(rank_ctx *cs, int nlocal, const moe_case *c, const char *desc) {
  const loom_moe_config_t cfg = layer_config(c);
  create_job jobs[MAX_RANKS];
  create_layers(cs, nlocal, &cfg, jobs);
  int ok = 1;
  for (int i = 0; i < nlocal; i++) {
    CHECK(jobs[i].res == LOOM_SUCCESS, "rank %d loom_moe_create: %s: %s [%s]", cs[i].rank,
          loom_result_string(jobs[i].res), jobs[i].msg, desc);
    ok &= jobs[i].res == LOOM_SUCCESS;
  }
  for (int i = 0; i < nlocal && ok; i++) {
    loom_result_t r = loom_moe_set_weights(cs[i].moe, case_uses_gate(c) ? cs[i].gate_w : NULL,
                                           cs[i].w1, cs[i].w2);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_set_weights: %s [%s]", cs[i].rank, loom_last_error(),
          desc);
    ok &= r == LOOM_SUCCESS;
  }
  if (!ok) destroy_layers(cs, nlocal);
  return ok ? 0 : -1;
}

/* ---- forward, sync, async errors ------------------------------------------------------------ */

static loom_result_t forward(rank_ctx *rc, const moe_case *c, void *y) {
  const int r = rc->rank;
  if (c->api[r] == API_SHORT) return loom_moe_forward(rc->moe, rc->x, c->tokens[r], y, rc->stream);
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = rc->x;
  a.num_tokens = c->tokens[r];
  a.y = y;
  if (!is_gate_route(c->route[r])) {
    a.expert_ids_in = rc->ids_in;
    a.weights_in = rc->wts_in;
  }
  if (c->api[r] == API_FULL) {
    a.expert_ids_out = rc->ids_out;
    a.weights_out = rc->wts_out;
    a.stats = rc->stats;
  }
  return loom_moe_forward_ex(rc->moe, &a, rc->stream);
}

/* Launch one forward on every local rank (rank `skip` excepted). */
static int launch_all(rank_ctx *cs, int nlocal, const moe_case *c, int second, int skip,
                      const char *desc) {
  int ok = 1;
  for (int i = 0; i < nlocal; i++) {
    if (cs[i].rank == skip) continue;
    if (cudaSetDevice(cs[i].device) != cudaSuccess) return -1;
    loom_result_t r = forward(&cs[i], c, second ? cs[i].y2 : cs[i].y);
    CHECK(r == LOOM_SUCCESS, "rank %d forward: %s: %s [%s]", cs[i].rank, loom_result_string(r),
          loom_last_error(), desc);
    ok &= r == LOOM_SUCCESS;
  }
  return ok ? 0 : -1;
}

/* Finish the uploads and poison fills (cudaMemcpy/cudaMemset run on the
 * legacy stream, which does not order the non-blocking launch streams). */
static int sync_devices(rank_ctx *cs, int nlocal) {
  for (int i = 0; i < nlocal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaDeviceSynchronize());
  }
  return 0;
}

/* Wait for every local stream. Only called after launches that the
 * library's timeout bounds. */
static int sync_all(rank_ctx *cs, int nlocal) {
  for (int i = 0; i < nlocal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaStreamSynchronize(cs[i].stream));
  }
  return 0;
}

static int check_async(rank_ctx *cs, int nlocal, const char *desc) {
  int ok = 1;
  for (int i = 0; i < nlocal; i++) {
    loom_result_t async = LOOM_SUCCESS;
    LOOM_T(loom_comm_get_async_error(cs[i].comm, &async));
    CHECK(async == LOOM_SUCCESS, "rank %d async error %s: %s [%s]", cs[i].rank,
          loom_result_string(async), loom_last_error(), desc);
    ok &= async == LOOM_SUCCESS;
  }
  return ok ? 0 : -1;
}

/* ---- verification --------------------------------------------------------------------------- */

/* Elements of `n` (each `size` bytes) at p that are still all 0xFF. */
static size_t count_poison(const unsigned char *p, size_t n, size_t size) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) {
    size_t b = 0;
    while (b < size && p[i * size + b] == 0xFF) b++;
    c += b == size;
  }
  return c;
}

/* y of one rank: every row < T written, rows >= T untouched, error bound. */
static int verify_y(const rank_ctx *rc, const moe_case *c, host_data *d, const void *ydev,
                    const char *which, const char *desc) {
  const int r = rc->rank;
  const size_t T = (size_t)c->tokens[r], H = HIDDEN, es = dtype_bytes(c->dtype);
  const unsigned char *raw = (const unsigned char *)d->stage;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(d->stage, ydev, (size_t)MAX_TOKENS * H * es, cudaMemcpyDeviceToHost));
  const size_t unwritten = count_poison(raw, T * H, es);
  const size_t beyond =
      (MAX_TOKENS - T) * H - count_poison(raw + T * H * es, (MAX_TOKENS - T) * H, es);
  CHECK(unwritten == 0, "rank %d %s: %zu of %zu elements never written [%s]", r, which, unwritten,
        T * H, desc);
  CHECK(beyond == 0, "rank %d %s: %zu elements written past row %zu [%s]", r, which, beyond, T,
        desc);
  ref_unpack_array(d->yhost, d->stage, T * H, (int)c->dtype);
  const double err = ref_rel_error(d->yhost, d->yref[r], T * H), tol = case_tolerance(c);
  CHECK(err <= tol, "rank %d %s: rel error %.3g > %.1g [%s]", r, which, err, tol, desc);
  return unwritten == 0 && beyond == 0 && err <= tol ? 0 : -1;
}

/* expert_ids_out / weights_out against the routing the rank used. */
static int verify_routing(const rank_ctx *rc, const moe_case *c, host_data *d, const char *desc) {
  const int r = rc->rank;
  const size_t tk = (size_t)c->tokens[r] * (size_t)c->k, all = (size_t)MAX_TOKENS * MAX_TOPK;
  int32_t *ids = (int32_t *)d->stage;
  float *wts = (float *)d->yhost;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(ids, rc->ids_out, all * 4, cudaMemcpyDeviceToHost));
  CUDA_T(cudaMemcpy(wts, rc->wts_out, all * 4, cudaMemcpyDeviceToHost));
  size_t bad_id = 0, bad_w = 0, first_id = 0, first_w = 0;
  for (size_t a = 0; a < tk; a++) {
    const double want = d->wts[r][a], got = wts[a];
    if (ids[a] != d->ids[r][a] && bad_id++ == 0) first_id = a;
    if (!(fabs(got - want) <= TOL_WEIGHTS * fabs(want)) && bad_w++ == 0) first_w = a;
  }
  const size_t beyond = 2 * (all - tk) -
                        count_poison((const unsigned char *)(ids + tk), all - tk, 4) -
                        count_poison((const unsigned char *)(wts + tk), all - tk, 4);
  CHECK(bad_id == 0,
        "rank %d expert_ids_out: %zu of %zu differ, first (t=%zu, j=%zu): %d, want %d [%s]", r,
        bad_id, tk, first_id / c->k, first_id % c->k, bad_id ? ids[first_id] : 0,
        bad_id ? d->ids[r][first_id] : 0, desc);
  CHECK(bad_w == 0,
        "rank %d weights_out: %zu of %zu off by > %g relative, first (t=%zu, j=%zu): %.9g, want "
        "%.9g [%s]",
        r, bad_w, tk, TOL_WEIGHTS, first_w / c->k, first_w % c->k, bad_w ? wts[first_w] : 0.0,
        bad_w ? d->wts[r][first_w] : 0.0, desc);
  CHECK(beyond == 0, "rank %d routing outputs: %zu entries written past %zu [%s]", r, beyond, tk,
        desc);
  return bad_id == 0 && bad_w == 0 && beyond == 0 ? 0 : -1;
}

static int verify_stats(const rank_ctx *rc, const moe_case *c, const host_data *d,
                        const char *desc) {
  const int r = rc->rank;
  loom_moe_stats_t got, want;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(&got, rc->stats, sizeof got, cudaMemcpyDeviceToHost));
  expected_stats(c, d, r, &want);
  int bad = 0;
  for (int p = 0; p < c->nranks; p++) {
    if (got.rows_sent[p] != want.rows_sent[p] && bad++ < 4)
      CHECK(0, "rank %d stats.rows_sent[%d] = %" PRId64 ", want %" PRId64 " [%s]", r, p,
            got.rows_sent[p], want.rows_sent[p], desc);
    if (got.rows_received[p] != want.rows_received[p] && bad++ < 4)
      CHECK(0, "rank %d stats.rows_received[%d] = %" PRId64 ", want %" PRId64 " [%s]", r, p,
            got.rows_received[p], want.rows_received[p], desc);
  }
  CHECK(got.rows_dropped == want.rows_dropped,
        "rank %d stats.rows_dropped = %" PRId64 ", want %" PRId64 " [%s]", r, got.rows_dropped,
        want.rows_dropped, desc);
  CHECK(got.bytes_sent == want.bytes_sent,
        "rank %d stats.bytes_sent = %" PRId64 ", want %" PRId64 " [%s]", r, got.bytes_sent,
        want.bytes_sent, desc);
  CHECK(got.bytes_remote == want.bytes_remote,
        "rank %d stats.bytes_remote = %" PRId64 ", want %" PRId64 " [%s]", r, got.bytes_remote,
        want.bytes_remote, desc);
  if (bad == 0) CHECK(1, "stats rows");
  return bad == 0 && got.rows_dropped == want.rows_dropped && got.bytes_sent == want.bytes_sent &&
                 got.bytes_remote == want.bytes_remote
             ? 0
             : -1;
}

static int verify_rank(const rank_ctx *rc, const moe_case *c, host_data *d, const char *desc) {
  int rc_ = verify_y(rc, c, d, rc->y, "y", desc);
  if (c->api[rc->rank] == API_FULL) {
    rc_ |= verify_routing(rc, c, d, desc);
    rc_ |= verify_stats(rc, c, d, desc);
  }
  return rc_;
}

/* y2 of a repeated forward must equal y bit for bit. */
static int verify_same(const rank_ctx *rc, const moe_case *c, host_data *d, const char *desc) {
  const size_t bytes = (size_t)c->tokens[rc->rank] * HIDDEN * dtype_bytes(c->dtype);
  unsigned char *a = (unsigned char *)d->stage, *b = (unsigned char *)d->yhost;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(a, rc->y, bytes, cudaMemcpyDeviceToHost));
  CUDA_T(cudaMemcpy(b, rc->y2, bytes, cudaMemcpyDeviceToHost));
  size_t diff = 0;
  for (size_t i = 0; i < bytes; i++) diff += a[i] != b[i];
  CHECK(diff == 0, "rank %d: two forwards on the same inputs differ in %zu of %zu bytes [%s]",
        rc->rank, diff, bytes, desc);
  return diff == 0 ? 0 : -1;
}

/* ---- one case ------------------------------------------------------------------------------- */

static void local_ranks(const rank_ctx *cs, int nlocal, int *ranks) {
  for (int i = 0; i < nlocal; i++) ranks[i] = cs[i].rank;
}

/* top_k > experts: refused by the sizing function and by every rank's
 * loom_moe_create, with a message naming top_k. */
static int expect_refused(rank_ctx *cs, int nlocal, const moe_case *c, const char *desc) {
  const loom_moe_config_t cfg = layer_config(c);
  size_t bytes = 0;
  int slots = 0;
  loom_result_t r = loom_moe_workspace_bytes(&cfg, c->nranks, &bytes, &slots);
  CHECK(r == LOOM_INVALID_ARGUMENT,
        "loom_moe_workspace_bytes returned %s, want invalid argument [%s]", loom_result_string(r),
        desc);
  create_job jobs[MAX_RANKS];
  create_layers(cs, nlocal, &cfg, jobs);
  for (int i = 0; i < nlocal; i++) {
    CHECK(jobs[i].res == LOOM_INVALID_ARGUMENT,
          "rank %d loom_moe_create returned %s (%s), want invalid argument [%s]", cs[i].rank,
          loom_result_string(jobs[i].res), jobs[i].msg, desc);
    CHECK(strstr(jobs[i].msg, "top_k") != NULL, "rank %d message \"%s\" does not name top_k [%s]",
          cs[i].rank, jobs[i].msg, desc);
  }
  destroy_layers(cs, nlocal); /* only if one was wrongly created */
  return 0;
}

/* Run one case on the local ranks. repeats == 2 also runs a second forward
 * into y2 and requires it bitwise equal. Returns -1 when the communicators
 * may be unusable (a launch or async failure): the caller stops. */
static int run_case(rank_ctx *cs, int nlocal, const moe_case *c, host_data *d, int repeats) {
  char desc[1024];
  int ranks[MAX_RANKS];
  describe(c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s", desc);
  local_ranks(cs, nlocal, ranks);
  if (c->k > c->E) return expect_refused(cs, nlocal, c, desc);
  if (c->E % c->nranks != 0) {
    CHECK_SKIP("experts %% nranks != 0 [%s]", desc);
    return 0;
  }
  if (gen_weights(c, d) != 0 || gen_inputs(c, d) != 0) {
    CHECK(0, "host data generation failed [%s]", desc);
    return -1;
  }
  for (int i = 0; i < nlocal; i++)
    if (upload_weights(&cs[i], c, d) != 0 || upload_inputs(&cs[i], c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, c, desc) != 0) return -1;
  int fatal = 0;
  for (int rep = 0; rep < repeats && !fatal; rep++)
    fatal = launch_all(cs, nlocal, c, rep == 1, -1, desc) != 0;
  /* the CPU reference runs while the GPUs work */
  const int ref_ok = compute_refs(c, d, ranks, nlocal) == 0;
  CHECK(ref_ok, "reference failed [%s]", desc);
  fatal |= sync_all(cs, nlocal) != 0;
  fatal |= check_async(cs, nlocal, desc) != 0;
  if (!fatal && ref_ok) {
    for (int i = 0; i < nlocal; i++) {
      verify_rank(&cs[i], c, d, desc);
      if (repeats == 2) verify_same(&cs[i], c, d, desc);
    }
  }
  destroy_layers(cs, nlocal);
  return fatal ? -1 : 0;
}

/* Every enumerated config (i % every == 0) on this world size. */
static int run_configs(rank_ctx *cs, int nlocal, int R, int every, host_data *d, int *run,
                       int *refused) {
  for (int i = 0; i < NUM_CONFIGS; i += every) {
    const moe_case c = make_config_case(i, R);
    if (c.k > c.E)
      (*refused)++;
    else
      (*run)++;
    if (run_case(cs, nlocal, &c, d, 1) != 0) return -1;
  }
  return 0;
}

/* ---- CUDA graph: capture one forward per rank, replay with fresh x -------------------------- */

static int graph_case_experts(int R) { return 64 % R == 0 ? 64 : R; }

static int capture(rank_ctx *rc, const moe_case *c, cudaGraph_t *graph, cudaGraphExec_t *exec,
                   const char *desc) {
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaStreamBeginCapture(rc->stream, cudaStreamCaptureModeThreadLocal));
  const loom_result_t r = forward(rc, c, rc->y);
  const cudaError_t e = cudaStreamEndCapture(rc->stream, graph);
  CHECK(r == LOOM_SUCCESS, "rank %d forward under capture: %s [%s]", rc->rank, loom_last_error(),
        desc);
  CHECK(e == cudaSuccess, "rank %d cudaStreamEndCapture: %s [%s]", rc->rank, cudaGetErrorString(e),
        desc);
  if (r != LOOM_SUCCESS || e != cudaSuccess) return -1;
  size_t nodes = 0, one = 1;
  CUDA_T(cudaGraphGetNodes(*graph, NULL, &nodes));
  cudaGraphNode_t node;
  enum cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  if (nodes == 1 && cudaGraphGetNodes(*graph, &node, &one) == cudaSuccess)
    cudaGraphNodeGetType(node, &type);
  CHECK(nodes == 1 && type == cudaGraphNodeTypeKernel,
        "rank %d: graph of one forward has %zu nodes (want exactly one kernel node) [%s]", rc->rank,
        nodes, desc);
  CUDA_T(cudaGraphInstantiate(exec, *graph, 0));
  return 0;
}

/* One replay: new x (salt) into the captured buffer, poison, launch every
 * local graph, verify. */
static int replay(rank_ctx *cs, int nlocal, moe_case *c, host_data *d, cudaGraphExec_t *exec,
                  int rep) {
  char desc[1024];
  int ranks[MAX_RANKS];
  local_ranks(cs, nlocal, ranks);
  c->salt = rep + 1;
  describe(c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s", desc);
  if (gen_inputs(c, d) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_inputs(&cs[i], c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0) return -1;
  for (int i = 0; i < nlocal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaGraphLaunch(exec[i], cs[i].stream));
  }
  const int ref_ok = compute_refs(c, d, ranks, nlocal) == 0;
  CHECK(ref_ok, "reference failed [%s]", desc);
  if (sync_all(cs, nlocal) != 0 || check_async(cs, nlocal, desc) != 0) return -1;
  int bad = 0;
  for (int i = 0; i < nlocal && ref_ok; i++) bad |= verify_rank(&cs[i], c, d, desc) != 0;
  return bad ? 1 : 0;
}

static int run_graph(rank_ctx *cs, int nlocal, int R, host_data *d) {
  moe_case c = make_special_case(ID_GRAPH, R, LOOM_BF16, LOOM_ACT_SILU, 2, graph_case_experts(R));
  char desc[1024];
  describe(&c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s (capture)", desc);
  if (gen_weights(&c, d) != 0 || gen_inputs(&c, d) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_weights(&cs[i], &c, d) != 0 || upload_inputs(&cs[i], &c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, &c, desc) != 0) return -1;
  cudaGraph_t graph[MAX_RANKS] = {0};
  cudaGraphExec_t exec[MAX_RANKS] = {0};
  int ok = 1, bad_replays = 0;
  for (int i = 0; i < nlocal && ok; i++) ok = capture(&cs[i], &c, &graph[i], &exec[i], desc) == 0;
  for (int rep = 0; rep < GRAPH_REPLAYS && ok; rep++) {
    const int r = replay(cs, nlocal, &c, d, exec, rep);
    ok = r >= 0;
    bad_replays += r != 0;
  }
  CHECK(ok && bad_replays == 0, "graph: %d of %d replays failed verification [%s]", bad_replays,
        GRAPH_REPLAYS, desc);
  for (int i = 0; i < nlocal; i++) {
    cudaSetDevice(cs[i].device);
    if (exec[i]) cudaGraphExecDestroy(exec[i]);
    if (graph[i]) cudaGraphDestroy(graph[i]);
  }
  destroy_layers(cs, nlocal);
  return ok ? 0 : -1;
}

/* ---- fault: rank R-1 never calls forward ---------------------------------------------------- */

static moe_case make_fault_case(int R) {
  return make_special_case(ID_FAULT, R, LOOM_BF16, LOOM_ACT_SILU, 2, 8 % R == 0 ? 8 : R);
}

static int run_fault(rank_ctx *cs, int nlocal, int R, host_data *d) {
  const moe_case c = make_fault_case(R);
  const int silent = R - 1;
  char desc[1024];
  describe(&c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s (warm-up)", desc);
  if (gen_weights(&c, d) != 0 || gen_inputs(&c, d) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_weights(&cs[i], &c, d) != 0 || upload_inputs(&cs[i], &c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, &c, desc) != 0) return -1;
  /* a healthy call first, so module loading is not timed below */
  int fatal = launch_all(cs, nlocal, &c, 0, -1, desc) != 0;
  fatal |= sync_all(cs, nlocal) != 0;
  fatal |= check_async(cs, nlocal, desc) != 0;
  if (fatal) {
    destroy_layers(cs, nlocal);
    return -1;
  }
  watchdog(CASE_DEADLINE_S, "%s (rank %d silent)", desc, silent);
  const double t0 = now_s();
  launch_all(cs, nlocal, &c, 0, silent, desc);
  for (int i = 0; i < nlocal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaStreamSynchronize(cs[i].stream));
    const double waited = now_s() - t0;
    loom_result_t async = LOOM_SUCCESS;
    LOOM_T(loom_comm_get_async_error(cs[i].comm, &async));
    if (cs[i].rank == silent) {
      CHECK(async == LOOM_SUCCESS, "silent rank %d reports %s: %s", cs[i].rank,
            loom_result_string(async), loom_last_error());
      continue;
    }
    CHECK(async == LOOM_TIMEOUT, "rank %d: async error %s (%s), want timeout [%s]", cs[i].rank,
          loom_result_string(async), loom_last_error(), desc);
    CHECK(waited <= FAULT_TIMEOUT_MS / 1000.0 + 1.0,
          "rank %d returned after %.2f s (timeout %d ms + 1 s allowed)", cs[i].rank, waited,
          FAULT_TIMEOUT_MS);
    printf("  fault: rank %d reported after %.2f s: %s\n", cs[i].rank, waited, loom_last_error());
    const loom_result_t again = forward(&cs[i], &c, cs[i].y);
    CHECK(again == LOOM_INVALID_USAGE,
          "rank %d: after a timeout, forward returns %s, want invalid usage", cs[i].rank,
          loom_result_string(again));
  }
  destroy_layers(cs, nlocal);
  return 0;
}

/* ---- communicator sizing -------------------------------------------------------------------- */

static int add_workspace(const moe_case *c, size_t *bytes, int *slots) {
  if (c->k > c->E || c->E % c->nranks != 0) return 0;
  const loom_moe_config_t cfg = layer_config(c);
  size_t b = 0;
  int s = 0;
  LOOM_T(loom_moe_workspace_bytes(&cfg, c->nranks, &b, &s));
  if (b > *bytes) *bytes = b;
  if (s > *slots) *slots = s;
  return 0;
}

/* Workspace and signal slots for the largest case this world size runs. */
static int comm_config(int R, int fault, loom_comm_config_t *cfg) {
  size_t bytes = 0;
  int slots = 2;
  if (fault) {
    const moe_case f = make_fault_case(R);
    if (add_workspace(&f, &bytes, &slots)) return -1;
  } else {
    for (int i = 0; i < NUM_CONFIGS; i++) {
      const moe_case c = make_config_case(i, R);
      if (add_workspace(&c, &bytes, &slots)) return -1;
    }
    const moe_case det = make_determinism_case(R);
    const moe_case gr =
        make_special_case(ID_GRAPH, R, LOOM_BF16, LOOM_ACT_SILU, 2, graph_case_experts(R));
    if (add_workspace(&det, &bytes, &slots) || add_workspace(&gr, &bytes, &slots)) return -1;
  }
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  c.workspace_bytes = (int64_t)bytes;
  c.signal_slots = slots;
  c.timeout_ms = fault ? FAULT_TIMEOUT_MS : LOOM_UNSET;
  *cfg = c;
  return 0;
}

/* Everything one world size runs on the local ranks. */
static int run_world(rank_ctx *cs, int nlocal, int R, int fault, int every, host_data *d) {
  if (fault) return run_fault(cs, nlocal, R, d);
  int run = 0, refused = 0;
  const double t = now_s();
  int rc = run_configs(cs, nlocal, R, every, d, &run, &refused);
  if (cs[0].rank == 0)
    printf("  n=%d: %d configs run, %d refused as expected, in %.1f s\n", R, run, refused,
           now_s() - t);
  if (rc == 0) {
    const moe_case det = make_determinism_case(R);
    rc = run_case(cs, nlocal, &det, d, 2);
  }
  if (rc == 0) rc = run_graph(cs, nlocal, R, d);
  return rc;
}

/* ---- one process, all GPUs ------------------------------------------------------------------ */

static int single_process(int R, int fault, int every) {
  rank_ctx cs[MAX_RANKS];
  loom_comm_t comms[MAX_RANKS] = {0};
  host_data d;
  loom_comm_config_t cfg;
  memset(cs, 0, sizeof cs);
  if (comm_config(R, fault, &cfg) != 0) return -1;
  watchdog(CASE_DEADLINE_S, "loom_comm_create_all(%d)", R);
  LOOM_T(loom_comm_create_all(R, NULL, &cfg, comms));
  int rc = host_alloc(&d, R);
  for (int i = 0; i < R && rc == 0; i++) {
    cs[i].comm = comms[i];
    cs[i].rank = i;
    cs[i].device = i;
    rc = ctx_setup(&cs[i], R);
  }
  if (rc == 0) rc = run_world(cs, R, R, fault, every, &d);
  watchdog(CASE_DEADLINE_S, "teardown of %d ranks", R);
  for (int i = 0; i < R; i++) ctx_free(&cs[i]);
  host_free(&d);
  loom_result_t r = loom_comm_destroy_all(R, comms);
  CHECK(r == LOOM_SUCCESS, "loom_comm_destroy_all: %s", loom_last_error());
  return rc;
}

/* ---- one process per GPU -------------------------------------------------------------------- */

typedef struct {
  int fault, every;
} multi_arg;

static int child_rank(const ranks_child *rc, void *arg) {
  const int rank = rc->rank, R = rc->n;
  const int fault = ((const multi_arg *)arg)->fault, every = ((const multi_arg *)arg)->every;
  ncclUniqueId id;
  watchdog(CASE_DEADLINE_S, "rank %d of %d: NCCL bootstrap", rank, R);
  if (ranks_unique_id(rc, &id) != 0) return 1;
  rank_ctx c;
  host_data d;
  memset(&c, 0, sizeof c);
  memset(&d, 0, sizeof d);
  c.rank = rank;
  c.device = rank;
  ncclComm_t nccl;
  if (cudaSetDevice(rank) != cudaSuccess || ncclCommInitRank(&nccl, R, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL init failed\n", rank);
    return 1;
  }
  loom_comm_config_t cfg;
  if (comm_config(R, fault, &cfg) == 0) {
    loom_result_t r = loom_comm_create(nccl, &cfg, &c.comm);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_create: %s", rank, loom_last_error());
    if (r == LOOM_SUCCESS && host_alloc(&d, R) == 0 && ctx_setup(&c, R) == 0)
      run_world(&c, 1, R, fault, every, &d);
  }
  watchdog(CASE_DEADLINE_S, "rank %d of %d: teardown", rank, R);
  loom_comm_t comm = c.comm;
  ctx_free(&c);
  host_free(&d);
  loom_result_t r = loom_comm_destroy(comm);
  CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_destroy: %s", rank, loom_last_error());
  ncclCommDestroy(nccl);
  char name[64];
  snprintf(name, sizeof name, "test_moe multi rank %d/%d%s", rank, R, fault ? " fault" : "");
  return check_summary(name);
}

static int multi_process(int R, int fault, int every) {
  multi_arg a = {fault, every};
  char what[32];
  snprintf(what, sizeof what, "n=%d%s", R, fault ? " fault" : "");
  return ranks_run(R, child_rank, &a, what);
}

static int usage(void) {
  fprintf(stderr, "usage: test_moe single|multi [--every N] [--seed S]\n");
  return 2;
}

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (argc < 2 || (strcmp(argv[1], "single") != 0 && strcmp(argv[1], "multi") != 0)) return usage();
  const int multi = strcmp(argv[1], "multi") == 0;
  int every = multi ? MULTI_EVERY : 1;
  for (int a = 2; a < argc; a++) {
    char *end = NULL;
    if (a + 1 >= argc) return usage();
    if (strcmp(argv[a], "--every") == 0)
      every = (int)strtol(argv[++a], &end, 10);
    else if (strcmp(argv[a], "--seed") == 0)
      g_seed = strtoull(argv[++a], &end, 0);
    else
      return usage();
    if (end == NULL || *end != '\0' || every < 1) return usage();
  }
  const char *name = multi ? "test_moe multi" : "test_moe single";
  signal(SIGALRM, on_alarm);
  watchdog(CASE_DEADLINE_S, "counting GPUs");
  int ngpu = multi ? ranks_gpu_count() : 0;
  if (!multi && cudaGetDeviceCount(&ngpu) != cudaSuccess) ngpu = 0;
  if (ngpu == 0) {
    CHECK_SKIP("no GPU visible");
    return check_summary(name);
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  printf("%s: %d GPUs visible, seed 0x%" PRIx64 ", every %d config(s), %ld CPU threads\n", name,
         ngpu, g_seed, every, ncpu);
  fflush(stdout);
  const int sizes[] = {1, 2, 4, 8};
  const double start = now_s();
  for (int s = 0; s < 4; s++) {
    const int R = sizes[s];
    if (R > ngpu) {
      CHECK_SKIP("%d GPUs needed, %d visible", R, ngpu);
      continue;
    }
    long th = multi ? ncpu / R : ncpu;
    g_threads = (int)(th < 1 ? 1 : th > MAX_THREADS ? MAX_THREADS : th);
    for (int fault = 0; fault <= (R > 1); fault++) {
      const double t = now_s();
      if (multi) {
        alarm(PARENT_DEADLINE_S); /* children run their own watchdogs */
        multi_process(R, fault, every);
      } else {
        single_process(R, fault, every);
      }
      printf("n=%d %s done in %.1f s (%.1f s total, %d failed so far)\n", R,
             fault ? "fault" : "moe", now_s() - t, now_s() - start, check_failed_);
      fflush(stdout);
    }
  }
  alarm(0);
  return check_summary(name);
}
