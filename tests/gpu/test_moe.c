/*
 * GPU tests of the MoE layer (loom_moe_*) against the CPU reference
 * (ref_moe_gate, ref_moe_forward) on 1, 2, 4 and 8 GPUs, skipping the sizes
 * the machine lacks:
 *
 *   test_moe single [options]  one process drives every GPU
 *                              (loom_comm_create_all)
 *   test_moe multi  [options]  one process per GPU: rank 0 makes the NCCL
 *                              unique id and hands it to the others (pipes)
 *   test_moe loopback [options] one process, 2, 4 and 8 ranks on device 0
 *                              (loom_comm_create_loopback): the multi-rank
 *                              protocols where one GPU is at hand
 *   options: --every N (run configs i % N == 0 and real cases j with
 *            (j + log2 R) % N == 0), --seed S (data seed),
 *            --configs / --real / --special (run only those families;
 *            --special: the determinism, graph, layouts, trace, decode and fault
 *            cases). Default: everything.
 *
 * Two families of cases per world size, then the special cases.
 *
 * 1. Configs, enumerated, not hand-picked, at small shapes: the full product
 *      dtype {fp32 (TF32), bf16, fp16} x activation {relu, gelu, silu, swiglu}
 *      x top_k {1, 2, 8} x experts {nranks, 8, 64, 256}
 *    is 144 configs per world size, config i = ((experts*3 + top_k)*4 +
 *    activation)*3 + dtype (indices into those lists). --every N runs the
 *    configs with i % N == 0 (default 1 in single mode, 7 in multi mode; 7 is
 *    coprime with the dtype and token periods, so the subset still mixes them).
 *    (hidden, ffn) is one of (128, 128), (192, 128), (128, 320), (192, 320),
 *    picked by a fixed hash of i so it lines up with no other axis; 192 and
 *    320 are odd multiples of 64 (one 64-wide tile past a power of two).
 *    Rank j of config i gets
 *      tokens  = {0, 1, 127, 4096}[(i + j) % 4]
 *      routing = {gate, one-expert, half-experts, gate-ties}[(i / 4 + j) % 4]
 *    so the ranks of one call differ in tokens and routing, every value of
 *    each axis meets every dtype, and a quarter of the (config, rank) pairs
 *    carry 4096 tokens. On top of that:
 *      exact fp32 math (LOOM_MATH_FP32) on fp32 configs with (i / 3) % 5 == 1,
 *      capacity factor 1.0 on configs with i % 13 == 6,
 *      normalize_top_k = 0 on configs with i % 5 == 2,
 *      weight layout OUT_IN on configs with (i / 5) % 2 == 0, IN_OUT on
 *      the others (period 10: every value of every axis above meets both
 *      layouts, and so does a --every 7 subset but for the axes that
 *      occur once in it),
 *      per rank, the call form: loom_moe_forward (fused-gate ranks with
 *      (i + 3j) % 5 == 4), forward_ex without optional outputs ((i + j) % 7 ==
 *      3), otherwise forward_ex with expert_ids_out, weights_out and stats.
 *    A config with top_k > experts must be refused by loom_moe_workspace_bytes
 *    and loom_moe_create with LOOM_INVALID_ARGUMENT; experts % nranks != 0
 *    would be skipped (no such config with these lists).
 *
 * 2. Real sizes (REAL_CASES below, 8 per world size): hidden {576, 1024,
 *    2048, 2880, 7168} x ffn {1408, 768, 2048}, each value at least once,
 *    576 = 9 x 64 and 2880 = 45 x 64 among them, 7168 x 2048 (both GEMMs' K
 *    loops far past the pipeline depth); bf16, fp16, TF32 and exact fp32;
 *    every activation; top_k 2 and 8; experts nranks, 8 and 64; one case
 *    with capacity factor 1.0 (tokens whose every assignment is dropped),
 *    one with normalize_top_k = 0. Tokens are uneven: rank j % R holds
 *    T_big (16384 in one case), rank (j % R + R / 2) % R none (world size
 *    > 1), rank q between T_other * {1/2, 1, 3/2}[q % 3] + q. Rank q routes
 *    with routing (j + q + log2 R) % 4 (so the big rank meets different
 *    routings at different world sizes) and calls as for configs, with the
 *    case id in place of i. Weight layout OUT_IN when (j / 2 + log2 R) % 2
 *    == 0, else IN_OUT (each case meets both over the world sizes). T_big and T_other are set per case so that its
 *    CPU reference (2 x tokens x top_k x hidden x (ffn1 + ffn) double
 *    FLOPs, ffn1 = 2 x ffn for SwiGLU) stays under ~20 s on 16 cores at a
 *    pessimistic 1.5 GFLOP/s a core (the scalar loop ran at 3.3-4.5 GFLOP/s
 *    a core on an AMD EPYC, 1-2 threads); the whole single run on 8 GPUs
 *    (world sizes 1, 2, 4, 8, both families) comes to ~3.5 min of
 *    reference at that rate. With a capacity a rank's reference is one task
 *    (one core), so that case keeps T_big at 300. Each real case prints its
 *    reference GFLOP, time and worst row error.
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
 *                 exact in any summation order and rounds to the same fp32
 *                 (products are multiples of 2^-18 below 2^-2: at hidden
 *                 7168 a sum needs 29 bits).
 *
 * Inputs are fresh random per case (a pure function of seed, world size,
 * case and rank, so every process can build what any rank holds), scaled so
 * activations are O(1), and rounded to the dtype before the reference sees
 * them. Weights are generated [in x out] (the reference's layout) and
 * uploaded in the case's layout (transposed for OUT_IN). Host and device buffers are sized once per world size for the
 * largest case it runs. Checks per case and rank:
 *   - y poisoned (0xFF bytes: NaN in every dtype) over its whole buffer; the
 *     T rows must all be written, the rows from T to max_tokens + 128 left
 *     alone;
 *   - per row: max over rows t of ||y_t - ref_t|| / ||ref_t|| <= 1e-5 (fp32
 *     exact), 5e-3 (TF32), 2e-2 (bf16/fp16), so one wrong token fails even
 *     among 16384; a row whose reference is exactly 0 (every assignment
 *     dropped under capacity) must be exactly 0. ref = ref_moe_forward on
 *     that rank's tokens with every expert's weights (global expert e lives
 *     on rank e / (E/R)). A failure names the worst row, its error, how many
 *     rows fail and the case. Why the bounds hold per row: a bf16/fp16 y row
 *     is rounded once more than the reference's (2^-9 / 2^-11 relative per
 *     element) and its h and expert rows may round to the neighbouring
 *     value where the fp32 sums differ in the last bits (a few elements of
 *     2^-8); with hidden >= 64 elements per row and independent random
 *     weights, no row's norm is dominated by one element, so a row's error
 *     is ~1e-3, whatever hidden is. TF32 rounds inputs to 2^-11 (~1e-3
 *     per row even if the hardware truncates); exact fp32 accumulates
 *     ~2^-24 x sqrt(K / 2) relative (K = 2880: ~2e-6; K = 7168: ~4e-6);
 *   - expert_ids_out exact and weights_out within 1e-6 relative against
 *     ref_moe_gate (fused gate) or the caller's routing (the routing used);
 *     for the fast-gate cases (config.gate_math = LOOM_GATE_FAST) instead
 *     every token's routing within the fast gate's contract
 *     (ref_moe_gate_fast_check: ids a ranking that logits within their
 *     error bound give, weights within its tolerance), y's reference then
 *     computed with the routing the GPU chose (adopt_fast_routing);
 *   - stats (see expected_stats for the byte formula).
 * Once per world size: determinism (two forwards, bitwise equal y), a CUDA
 * graph (one forward_ex per rank, exactly one kernel node, 100 replays with
 * fresh x copied into the captured buffer, each verified), and a fault case
 * at world size > 1 (rank R-1 never calls forward; every other rank must
 * report LOOM_TIMEOUT within timeout + 1 s and refuse further work, and the
 * communicators must still be destroyed). These run at hidden = ffn = 128
 * with weight_layout left unset (the default, OUT_IN). Then the layouts
 * cases, one per math path (bf16 swiglu, fp16 gelu, TF32 silu, exact fp32
 * relu) at hidden 192, ffn 320 (partial 128-column tasks in both GEMMs):
 * the same weights and inputs through an IN_OUT layer and then an OUT_IN
 * one; y of the first verified, y of the second bitwise equal to it.
 * Last, the trace case (run_trace): the determinism shape without, with a
 * large and with a tiny loom_moe_set_trace buffer, y bitwise equal each
 * time; the large trace checked event by event and counted per kind
 * against the routing, the tiny one for its dropped count and for no
 * store past its capacity. Then the decode cases (make_decode_case): 1 to
 * 200 tokens a rank (the last rank none) at hidden 1024-2048, ffn
 * 1408-4096, OUT_IN, each run twice (bitwise equal y). Then the 4
 * fast-gate cases (make_fast_case: bf16 and fp16, both layouts, hidden
 * 192-2048, 32-128 experts, the gate jobs of 3 tokens, gate-ties inputs
 * on rank 0), each run twice; the run prints how many of their tokens the
 * fast gate routed otherwise than the exact gate and how many were within
 * their band of a tie.
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
#include <sys/mman.h>
#include <sys/wait.h>
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
#define SMALL_DIM 128     /* hidden and ffn of the determinism, graph, fault cases */
#define MAX_EXPERTS 256
#define MAX_TOKENS 4096   /* the configs' largest token count */
#define MAX_CASE_TOKENS 16384 /* any case's */
#define GUARD_ROWS 128    /* rows past max_tokens that must stay poisoned */
#define NUM_CONFIGS 144
#define NUM_REAL 8
#define MULTI_EVERY 7
#define REF_CHUNK 64   /* most tokens per reference task (dropless cases) */
#define GATE_CHUNK 256 /* tokens per reference gate task */
#define MAX_SPANS (MAX_RANKS * (MAX_CASE_TOKENS / REF_CHUNK + 1))
#define MAX_THREADS 256
#define GRAPH_TOKENS 127
#define GRAPH_REPLAYS 100
#define FAULT_TIMEOUT_MS 1000
#define CASE_DEADLINE_S 120 /* watchdog per case, replay or setup step */
#define PARENT_DEADLINE_S 3600

/* Tolerances on max over rows of ||y_t - ref_t|| / ||ref_t||, and on
 * routing weights. */
#define TOL_FP32 1e-5
#define TOL_TF32 5e-3
#define TOL_16BIT 2e-2
#define TOL_WEIGHTS 1e-6

/* Ids of the real-size cases and of the once-per-world-size ones (config
 * ids are < NUM_CONFIGS). */
#define ID_REAL 500
#define ID_DETERMINISM 1000
#define ID_GRAPH 2000
#define ID_FAULT 3000
#define ID_LAYOUTS 4000 /* + v, v < NUM_LAYOUT_CASES */
#define NUM_LAYOUT_CASES 4
#define LAYOUT_DIM_H 192
#define LAYOUT_DIM_F 320
#define ID_TRACE 5000
#define ID_DECODE 6000 /* + v, v < NUM_DECODE_CASES */
#define NUM_DECODE_CASES 6
#define ID_FAST 7000 /* + v, v < NUM_FAST_CASES */
#define NUM_FAST_CASES 4
#define TRACE_CAPACITY (1 << 18) /* events: far more than the trace case records */
#define TRACE_TINY 5             /* the small-capacity run's capacity */
#define TRACE_GUARD 64           /* events past it that must stay poisoned */

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
static ranks_mode g_mode = RANKS_SINGLE; /* argv[1] */

/* ---- deterministic random numbers (splitmix64) ---------------------------------------------- */

static rng_t rng_make(uint64_t key, int kind, int index) {
  return rng_stream(g_seed, key, kind, index);
}

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
  int H, F; /* hidden, ffn */
  loom_dtype_t dtype;
  loom_activation_t act;
  int k, E;
  loom_math_t math;
  double capacity; /* 0: dropless */
  int normalize;
  int layout; /* loom_weight_layout_t; LOOM_UNSET: left to the default (OUT_IN) */
  int gate_math; /* loom_gate_math_t; 0 (exact) is left unset: the default */
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

/* (hidden, ffn) of config i: a fixed hash of i, so the shape lines up
 * with none of the axes that are periodic in i. */
static void config_dims(int i, int *H, int *F) {
  static const int dims[4][2] = {{128, 128}, {192, 128}, {128, 320}, {192, 320}};
  const int m = (int)(ref_splitmix64(0x6d6f6544696d73ull + (uint64_t)i) & 3);
  *H = dims[m][0];
  *F = dims[m][1];
}

/* Config i of the enumeration on R ranks (see the file comment). */
static moe_case make_config_case(int i, int R) {
  moe_case c;
  memset(&c, 0, sizeof c);
  const int experts[4] = {R, 8, 64, 256};
  c.id = i;
  c.nranks = R;
  config_dims(i, &c.H, &c.F);
  c.dtype = (loom_dtype_t)(i % 3);
  c.act = (loom_activation_t)((i / 3) % 4);
  c.k = TOPK_LIST[(i / 12) % 3];
  c.E = experts[i / 36];
  c.math = c.dtype == LOOM_FP32 && (i / 3) % 5 == 1 ? LOOM_MATH_FP32 : LOOM_MATH_TF32;
  c.capacity = i % 13 == 6 ? 1.0 : 0.0;
  c.normalize = i % 5 != 2;
  c.layout = (i / 5) % 2 == 0 ? LOOM_WEIGHTS_OUT_IN : LOOM_WEIGHTS_IN_OUT;
  for (int j = 0; j < R; j++) {
    c.tokens[j] = TOKEN_LIST[(i + j) % 4];
    c.route[j] = (i / 4 + j) % 4;
    c.api[j] = pick_api(i, j, c.route[j]);
  }
  return c;
}

/* The real-size family (file comment, item 2). experts 0 means "one per
 * rank", raised to top_k when there are fewer ranks (E must be >= top_k).
 * t_big: the big rank's tokens; t_other: scale of the ranks between. */
typedef struct {
  int H, F;
  loom_dtype_t dtype;
  loom_math_t math;
  loom_activation_t act;
  int k, experts, t_big, t_other;
  double capacity;
  int normalize;
} real_shape;

static const real_shape REAL_CASES[NUM_REAL] = {
    /* H     F     dtype      math            act              k  E   T_big  T_other cap norm */
    {576, 1408, LOOM_FP16, LOOM_MATH_TF32, LOOM_ACT_SWIGLU, 8, 64, 4000, 256, 0.0, 1},
    {1024, 768, LOOM_BF16, LOOM_MATH_TF32, LOOM_ACT_SILU, 2, 64, 16384, 256, 0.0, 1},
    {2048, 768, LOOM_BF16, LOOM_MATH_TF32, LOOM_ACT_SWIGLU, 8, 64, 3000, 128, 0.0, 1},
    {7168, 2048, LOOM_BF16, LOOM_MATH_TF32, LOOM_ACT_SWIGLU, 2, 8, 1000, 96, 0.0, 1},
    {2880, 1408, LOOM_FP32, LOOM_MATH_FP32, LOOM_ACT_GELU, 2, 0, 1500, 200, 0.0, 0},
    {2880, 2048, LOOM_FP32, LOOM_MATH_TF32, LOOM_ACT_RELU, 8, 8, 500, 64, 0.0, 1},
    /* capacity: the reference of a rank is one task (one core), so few tokens */
    {1024, 2048, LOOM_FP16, LOOM_MATH_TF32, LOOM_ACT_GELU, 8, 64, 300, 64, 1.0, 1},
    {7168, 1408, LOOM_FP32, LOOM_MATH_TF32, LOOM_ACT_SWIGLU, 2, 0, 300, 40, 0.0, 1},
};

static int log2_int(int R) {
  int l = 0;
  while ((1 << (l + 1)) <= R) l++;
  return l;
}

/* Real case j on R ranks: rank j % R holds t_big tokens, rank (j % R +
 * R / 2) % R none, rank q between t_other * (1 + q % 3) / 2 + q; routing
 * (j + q + log2 R) % 4, so the big rank meets different routings at
 * different world sizes. */
static moe_case make_real_case(int j, int R) {
  const real_shape *s = &REAL_CASES[j];
  moe_case c;
  memset(&c, 0, sizeof c);
  c.id = ID_REAL + j;
  c.nranks = R;
  c.H = s->H;
  c.F = s->F;
  c.dtype = s->dtype;
  c.act = s->act;
  c.k = s->k;
  c.E = s->experts > 0 ? s->experts : (R >= s->k ? R : s->k);
  c.math = s->math;
  c.capacity = s->capacity;
  c.normalize = s->normalize;
  c.layout = (j / 2 + log2_int(R)) % 2 == 0 ? LOOM_WEIGHTS_OUT_IN : LOOM_WEIGHTS_IN_OUT;
  const int big = j % R, none = (big + R / 2) % R;
  for (int q = 0; q < R; q++) {
    c.tokens[q] = q == big    ? s->t_big
                  : q == none ? 0
                              : s->t_other * (1 + q % 3) / 2 + q;
    c.route[q] = (j + q + log2_int(R)) % 4; /* the big rank's routing varies with R */
    c.api[q] = pick_api(c.id, q, c.route[q]);
  }
  return c;
}

static int is_real(const moe_case *c) { return c->id >= ID_REAL && c->id < ID_REAL + NUM_REAL; }

/* A hand-set case for the once-per-world-size tests: every rank full API. */
static moe_case make_special_case(int id, int R, loom_dtype_t dtype, loom_activation_t act, int k,
                                  int E) {
  moe_case c;
  memset(&c, 0, sizeof c);
  c.id = id;
  c.nranks = R;
  c.H = SMALL_DIM;
  c.F = SMALL_DIM;
  c.dtype = dtype;
  c.act = act;
  c.k = k;
  c.E = E;
  c.math = LOOM_MATH_TF32;
  c.normalize = 1;
  c.layout = LOOM_UNSET;
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

static moe_case make_graph_case(int R) {
  return make_special_case(ID_GRAPH, R, LOOM_BF16, LOOM_ACT_SILU, 2, 64 % R == 0 ? 64 : R);
}

static moe_case make_fault_case(int R) {
  return make_special_case(ID_FAULT, R, LOOM_BF16, LOOM_ACT_SILU, 2, 8 % R == 0 ? 8 : R);
}

/* Layouts case v: one per math path of the tile engine (so each B-operand
 * loader of both layouts runs), odd multiples of 64 in both dimensions;
 * every routing over the ranks, rotated by v. run_layouts sets the layout
 * of each pass. */
static moe_case make_layouts_case(int R, int v) {
  static const loom_dtype_t dt[NUM_LAYOUT_CASES] = {LOOM_BF16, LOOM_FP16, LOOM_FP32, LOOM_FP32};
  static const loom_activation_t act[NUM_LAYOUT_CASES] = {LOOM_ACT_SWIGLU, LOOM_ACT_GELU,
                                                          LOOM_ACT_SILU, LOOM_ACT_RELU};
  static const int k[NUM_LAYOUT_CASES] = {8, 2, 2, 8}, E[NUM_LAYOUT_CASES] = {64, 8, 8, 64};
  moe_case c = make_special_case(ID_LAYOUTS + v, R, dt[v], act[v], k[v], E[v]);
  c.H = LAYOUT_DIM_H;
  c.F = LAYOUT_DIM_F;
  c.math = v == 3 ? LOOM_MATH_FP32 : LOOM_MATH_TF32;
  c.layout = LOOM_WEIGHTS_IN_OUT;
  const int tokens[4] = {1000, 127, 1, 0};
  const int routes[4] = {ROUTE_GATE, ROUTE_TIES, ROUTE_HALF, ROUTE_ONE};
  for (int j = 0; j < R; j++) {
    c.tokens[j] = tokens[j % 4];
    c.route[j] = routes[(j + v) % 4];
  }
  return c;
}

/* Trace: the determinism case's shape and token spread (a rank with many
 * rows, ranks with a few or none, every routing). */
static moe_case make_trace_case(int R) {
  moe_case c = make_determinism_case(R);
  c.id = ID_TRACE;
  return c;
}

/* Decode case v: few tokens a rank (the last rank none) at model-sized
 * hidden / ffn, where the other families have either small dimensions or
 * hundreds of tokens: the expert phase's decode path on the Hopper engine
 * (OUT_IN weights: the GEMMs with few column tasks take half-width tasks,
 * moe.cu moe_task_cols), each dtype path, SwiGLU and plain activations,
 * tiles of a few rows and of 100 (both consumer warpgroups), GEMM1 K from
 * 1408 to 4096; case 5 (k = E = 8: every expert gets every token, 24
 * rows an expert at one rank) more rows than the 16-row swapped tile
 * takes: the 32-row kernel, its GEMM1 in K shares (loom_launch_moe picks
 * it where T R K / E > 8; a rank without tokens runs the 16-row one).
 * Run twice: the second forward must give the same bits.
 * (Session 38 tried splitting such GEMMs' K over several tasks against
 * these cases; not kept: bench/RESULTS.md session 38.) */
static moe_case make_decode_case(int R, int v) {
  static const loom_dtype_t dt[NUM_DECODE_CASES] = {LOOM_BF16, LOOM_BF16, LOOM_BF16,
                                                    LOOM_FP32, LOOM_FP16, LOOM_BF16};
  static const loom_activation_t act[NUM_DECODE_CASES] = {LOOM_ACT_SWIGLU, LOOM_ACT_SILU, LOOM_ACT_SWIGLU,
                                                          LOOM_ACT_GELU,   LOOM_ACT_RELU, LOOM_ACT_SWIGLU};
  static const int H[NUM_DECODE_CASES] = {2048, 2048, 1024, 1024, 1024, 1024},
                   F[NUM_DECODE_CASES] = {1408, 2048, 4096, 2048, 2048, 2048},
                   k[NUM_DECODE_CASES] = {8, 8, 2, 2, 2, 8}, E[NUM_DECODE_CASES] = {64, 64, 8, 8, 4, 8},
                   T[NUM_DECODE_CASES] = {1, 1, 1, 16, 200, 24};
  moe_case c = make_special_case(ID_DECODE + v, R, dt[v], act[v], k[v], E[v]);
  c.H = H[v];
  c.F = F[v];
  c.layout = LOOM_WEIGHTS_OUT_IN;
  for (int j = 0; j < R; j++) c.tokens[j] = j == R - 1 && R > 1 ? 0 : T[v];
  return c;
}
static int is_decode(const moe_case *c) { return c->id >= ID_DECODE && c->id < ID_DECODE + NUM_DECODE_CASES; }

/* Fast-gate case v (LOOM_GATE_FAST; verified by adopt_fast_routing): each
 * 16-bit dtype, both weight layouts (so both engines' kernels), a model
 * hidden (2048: the fp32 accumulators chained over many chunks), the
 * gate jobs of a few tokens (v = 2), 128 experts (8 passes, v = 3), and
 * gate-ties inputs, whose constructed near ties the fast gate may rank
 * otherwise within its band. Every rank full API (the routing it used is
 * what the check reads). */
static moe_case make_fast_case(int R, int v) {
  static const loom_dtype_t dt[NUM_FAST_CASES] = {LOOM_BF16, LOOM_FP16, LOOM_BF16, LOOM_FP16};
  static const loom_activation_t act[NUM_FAST_CASES] = {LOOM_ACT_SWIGLU, LOOM_ACT_GELU, LOOM_ACT_SILU,
                                                        LOOM_ACT_SWIGLU};
  static const int H[NUM_FAST_CASES] = {2048, 192, 2048, 1024}, F[NUM_FAST_CASES] = {256, 320, 256, 128},
                   k[NUM_FAST_CASES] = {2, 8, 8, 8}, E[NUM_FAST_CASES] = {32, 64, 64, 128},
                   T[NUM_FAST_CASES] = {2000, 1000, 3, 600};
  static const int layout[NUM_FAST_CASES] = {LOOM_WEIGHTS_OUT_IN, LOOM_WEIGHTS_IN_OUT, LOOM_WEIGHTS_OUT_IN,
                                             LOOM_WEIGHTS_OUT_IN};
  moe_case c = make_special_case(ID_FAST + v, R, dt[v], act[v], k[v], E[v]);
  c.H = H[v];
  c.F = F[v];
  c.layout = layout[v];
  c.gate_math = LOOM_GATE_FAST;
  for (int j = 0; j < R; j++) {
    c.tokens[j] = j == R - 1 && R > 1 ? T[v] / 3 : T[v];
    c.route[j] = (v == 1 || v == 3) && j == 0 ? ROUTE_TIES : ROUTE_GATE;
  }
  return c;
}
static int is_fast(const moe_case *c) { return c->id >= ID_FAST && c->id < ID_FAST + NUM_FAST_CASES; }

static int is_layouts(const moe_case *c) {
  return c->id >= ID_LAYOUTS && c->id < ID_LAYOUTS + NUM_LAYOUT_CASES;
}

/* The layout the case's weights are uploaded in. */
static loom_weight_layout_t case_layout(const moe_case *c) {
  return c->layout == LOOM_UNSET ? LOOM_WEIGHTS_OUT_IN : (loom_weight_layout_t)c->layout;
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

static int case_f1(const moe_case *c) { return c->act == LOOM_ACT_SWIGLU ? 2 * c->F : c->F; }

/* Rows of y (and of the routing outputs) checked per rank: the layer's
 * max_tokens and GUARD_ROWS beyond, which must stay poisoned. */
static size_t case_rows(const moe_case *c) { return (size_t)case_max_tokens(c) + GUARD_ROWS; }

/* Double FLOPs of the dropless reference of one rank's tokens. */
static double ref_flops(const moe_case *c, int r) {
  return 2.0 * c->tokens[r] * c->k * (double)c->H * (double)(case_f1(c) + c->F);
}

static double case_tolerance(const moe_case *c) {
  if (c->dtype != LOOM_FP32) return TOL_16BIT;
  return c->math == LOOM_MATH_FP32 ? TOL_FP32 : TOL_TF32;
}

/* Reference capacity of source rank r: ceil(c * T * k / E), 0 = dropless
 * (also when it reaches T * k, the rank's assignments: moe.cu capacity_of). */
static int case_capacity(const moe_case *c, int r) {
  if (c->capacity <= 0.0 || c->tokens[r] == 0) return 0;
  const double cap = ceil(c->capacity * (double)c->tokens[r] * (double)c->k / (double)c->E);
  return cap >= (double)c->tokens[r] * c->k ? 0 : (int)cap;
}

static loom_moe_config_t layer_config(const moe_case *c) {
  loom_moe_config_t cfg = LOOM_MOE_CONFIG_INIT;
  cfg.hidden = c->H;
  cfg.ffn = c->F;
  cfg.num_experts = c->E;
  cfg.top_k = c->k;
  cfg.max_tokens_per_rank = case_max_tokens(c);
  cfg.activation = (int)c->act;
  cfg.dtype = (int)c->dtype;
  if (c->dtype == LOOM_FP32) cfg.fp32_math = (int)c->math;
  cfg.normalize_top_k = c->normalize;
  cfg.capacity_factor = c->capacity;
  cfg.weight_layout = c->layout; /* LOOM_UNSET stays unset: the default */
  if (c->gate_math != LOOM_GATE_EXACT) cfg.gate_math = c->gate_math;
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
                     : is_real(c)              ? "real"
                     : c->id == ID_DETERMINISM ? "determinism"
                     : c->id == ID_GRAPH       ? "graph"
                     : is_layouts(c)           ? "layouts"
                     : c->id == ID_TRACE       ? "trace"
                     : is_decode(c)            ? "decode"
                                               : "fault";
  appendf(buf, n, &at, "%s %d", what, c->id);
  if (c->salt) appendf(buf, n, &at, " replay %d", c->salt);
  appendf(buf, n, &at,
          " (R=%d seed=0x%" PRIx64 "): hidden=%d ffn=%d %s%s %s top_k=%d experts=%d", c->nranks,
          g_seed, c->H, c->F, loom_dtype_string(c->dtype),
          c->dtype == LOOM_FP32 ? (c->math == LOOM_MATH_FP32 ? "(exact)" : "(tf32)") : "",
          ACT_NAMES[c->act], c->k, c->E);
  if (c->capacity > 0) appendf(buf, n, &at, " capacity_factor=%g", c->capacity);
  if (!c->normalize) appendf(buf, n, &at, " normalize_top_k=0");
  if (c->gate_math == LOOM_GATE_FAST) appendf(buf, n, &at, " gate=fast");
  if (is_layouts(c))
    appendf(buf, n, &at, " weights=in-out then out-in");
  else
    appendf(buf, n, &at, " weights=%s%s",
            case_layout(c) == LOOM_WEIGHTS_OUT_IN ? "out-in" : "in-out",
            c->layout == LOOM_UNSET ? "(default)" : "");
  appendf(buf, n, &at, " |");
  for (int j = 0; j < c->nranks; j++)
    appendf(buf, n, &at, " r%d:T=%d,%s%s", j, c->tokens[j], ROUTE_NAMES[c->route[j]],
            API_NAMES[c->api[j]]);
}

/* ---- what one world size runs -------------------------------------------------------------- */

/* Which families run (--configs, --real; default all). SEL_SPECIAL: the
 * determinism, graph and fault cases. */
enum { SEL_CONFIGS = 1, SEL_REAL = 2, SEL_SPECIAL = 4, SEL_ALL = 7 };
static int g_select = SEL_ALL;

#define MAX_PLAN (NUM_CONFIGS + NUM_REAL + 3 + NUM_LAYOUT_CASES + NUM_DECODE_CASES + NUM_FAST_CASES)

typedef struct {
  moe_case c[MAX_PLAN];
  int n;
} plan_t;

/* The cases of world size R in the order they run: the fault pass runs the
 * fault case alone; otherwise configs (i % every == 0), real cases ((j +
 * log2 R) % every == 0, so a thinned multi run still sees different real
 * cases at each world size), determinism, graph, layouts. */
static void make_plan(int R, int fault, int every, plan_t *pl) {
  pl->n = 0;
  if (fault) {
    pl->c[pl->n++] = make_fault_case(R);
    return;
  }
  if (g_select & SEL_CONFIGS)
    for (int i = 0; i < NUM_CONFIGS; i += every) pl->c[pl->n++] = make_config_case(i, R);
  if (g_select & SEL_REAL)
    for (int j = 0; j < NUM_REAL; j++)
      if ((j + log2_int(R)) % every == 0) pl->c[pl->n++] = make_real_case(j, R);
  if (g_select & SEL_SPECIAL) {
    pl->c[pl->n++] = make_determinism_case(R);
    pl->c[pl->n++] = make_graph_case(R);
    for (int v = 0; v < NUM_LAYOUT_CASES; v++) pl->c[pl->n++] = make_layouts_case(R, v);
    pl->c[pl->n++] = make_trace_case(R);
    for (int v = 0; v < NUM_DECODE_CASES; v++) pl->c[pl->n++] = make_decode_case(R, v);
    for (int v = 0; v < NUM_FAST_CASES; v++) pl->c[pl->n++] = make_fast_case(R, v);
  }
}

/* A case that only has to be refused (top_k > experts) or skipped. */
static int case_runs(const moe_case *c) { return c->k <= c->E && c->E % c->nranks == 0; }

/* Elements of every host and device buffer, for the largest case of a
 * plan (per quantity, so a long-token case and a wide-hidden case do not
 * multiply). */
typedef struct {
  size_t rows;    /* case_rows * hidden: x, y, y2, yref, yhost per rank */
  size_t route;   /* case_rows * top_k: routing in and out per rank */
  size_t gate;    /* hidden * experts */
  size_t w1, w2;  /* every expert: E * hidden * ffn1, E * ffn * hidden */
  size_t w1l, w2l; /* one rank's experts */
  size_t experts;
} buf_sizes;

static void grow(size_t *v, size_t x) {
  if (x > *v) *v = x;
}

static buf_sizes plan_sizes(const plan_t *pl) {
  buf_sizes z = {1, 1, 1, 1, 1, 1, 1, 1}; /* never malloc(0), even for an empty plan */
  for (int i = 0; i < pl->n; i++) {
    const moe_case *c = &pl->c[i];
    if (!case_runs(c)) continue;
    const size_t H = (size_t)c->H, F = (size_t)c->F, F1 = (size_t)case_f1(c), E = (size_t)c->E;
    const size_t El = E / (size_t)c->nranks;
    grow(&z.rows, case_rows(c) * H);
    grow(&z.route, case_rows(c) * (size_t)c->k);
    grow(&z.gate, H * E);
    grow(&z.w1, E * H * F1);
    grow(&z.w2, E * F * H);
    grow(&z.w1l, El * H * F1);
    grow(&z.w2l, El * F * H);
    grow(&z.experts, E);
  }
  return z;
}

/* ---- host data ------------------------------------------------------------------------------ */

/* Host copies of one case, for every rank (each process builds them all:
 * the reference of one rank needs every expert, and its stats need every
 * rank's routing). Sized once per world size for its largest case. */
typedef struct {
  buf_sizes sz;
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

static int host_alloc(host_data *d, int R, const buf_sizes *z) {
  memset(d, 0, sizeof *d);
  d->sz = *z;
  const size_t f = sizeof(float);
  d->gate_w = malloc(z->gate * f);
  d->w1 = malloc(z->w1 * f);
  d->w2 = malloc(z->w2 * f);
  int ok = d->gate_w && d->w1 && d->w2;
  for (int r = 0; r < R; r++) {
    d->x[r] = malloc(z->rows * f);
    d->ids[r] = malloc(z->route * sizeof(int32_t));
    d->wts[r] = malloc(z->route * f);
    d->yref[r] = malloc(z->rows * f);
    ok = ok && d->x[r] && d->ids[r] && d->wts[r] && d->yref[r];
  }
  d->kept = malloc((size_t)R * z->experts * sizeof(int64_t));
  d->yhost = malloc(z->rows * f);
  size_t stage = z->rows;
  grow(&stage, z->route);
  grow(&stage, z->gate);
  grow(&stage, z->w1l);
  grow(&stage, z->w2l);
  d->stage_bytes = stage * f;
  d->stage = malloc(d->stage_bytes);
  ok = ok && d->kept && d->yhost && d->stage;
  CHECK(ok, "host allocation (%.2f GiB)",
        (double)(z->gate + z->w1 + z->w2 + (size_t)R * (2 * z->rows + 2 * z->route) + z->rows +
                 stage) *
            f / (double)(1 << 30));
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
  const size_t H = (size_t)g->c->H, F = (size_t)g->c->F, F1 = (size_t)case_f1(g->c);
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
  const int H = c->H, E = c->E;
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
  const size_t H = (size_t)c->H, T = (size_t)c->tokens[r];
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

static int add_spans(span_set *s, int rank, int T, int chunk) {
  for (int t0 = 0; t0 < T; t0 += chunk) {
    if (s->n == MAX_SPANS) {
      CHECK(0, "more than %d reference tasks", MAX_SPANS);
      return -1;
    }
    s->spans[s->n].rank = rank;
    s->spans[s->n].t0 = t0;
    s->spans[s->n].t1 = t0 + chunk < T ? t0 + chunk : T;
    s->n++;
  }
  return 0;
}

static int gate_task(void *p, int i) {
  const span_set *s = (const span_set *)p;
  const span sp = s->spans[i];
  const size_t H = (size_t)s->c->H, k = (size_t)s->c->k;
  return ref_moe_gate(sp.t1 - sp.t0, s->c->H, s->c->E, s->c->k, s->c->normalize,
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
  const size_t H = (size_t)c->H, k = (size_t)c->k;
  ref_moe_shape sh;
  sh.T = sp.t1 - sp.t0;
  sh.H = c->H;
  sh.F = c->F;
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
    if (is_gate_route(c->route[r])) {
      if (add_spans(&gates, r, c->tokens[r], GATE_CHUNK) != 0) return -1;
    } else {
      gen_caller_routing(c, d, r);
    }
  }
  if (pool_run(gates.n, gate_task, &gates) != 0) return -1;
  count_kept(c, d);
  return 0;
}

/* y references of the ranks this process drives. Dropless: spans of at
 * most REF_CHUNK tokens, fewer when that leaves threads idle (a real-size
 * token costs up to ~0.2 GFLOP, so balance matters more than per-task
 * overhead). With a capacity a rank is one task: which assignments are
 * kept depends on all its tokens in order. */
static int compute_refs(const moe_case *c, host_data *d, const int *ranks, int nlocal) {
  static span_set refs;
  refs.c = c;
  refs.d = d;
  refs.n = 0;
  int total = 0;
  for (int i = 0; i < nlocal; i++) total += c->tokens[ranks[i]];
  int chunk = (total + 4 * g_threads - 1) / (4 * g_threads);
  chunk = chunk < 1 ? 1 : chunk > REF_CHUNK ? REF_CHUNK : chunk;
  for (int i = 0; i < nlocal; i++) {
    const int r = ranks[i], T = c->tokens[r];
    if (add_spans(&refs, r, T, c->capacity > 0 ? (T > 0 ? T : 1) : chunk) != 0) return -1;
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
 *   header           = round_up((experts_per_rank + 2) * 4, 16) bytes: one
 *                      per destination, its per-expert int32 row counts, the
 *                      config hash and the call number (loom.h).
 * (Dispatch stores rows into the owner's window, the owner stores each
 * expert output row back into the source's window; rows for self count in
 * bytes_sent, not in bytes_remote.) */
static void expected_stats(const moe_case *c, const host_data *d, int r, loom_moe_stats_t *st) {
  const int R = c->nranks, E = c->E, El = c->E / c->nranks;
  const int64_t row_bytes = (int64_t)c->H * (int64_t)dtype_bytes(c->dtype);
  const int64_t header = ((int64_t)(c->E + 2) * 4 + 15) / 16 * 16; /* every expert's count */
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
  size_t y_bytes, route_bytes; /* of x, y, y2 and of each routing buffer */
} rank_ctx;

/* Device buffers for the largest case of the world size (fp32 bytes, so
 * any dtype fits). */
static int ctx_setup(rank_ctx *c, const buf_sizes *z) {
  c->y_bytes = z->rows * 4;
  c->route_bytes = z->route * 4;
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUDA_T(cudaMalloc(&c->x, c->y_bytes));
  CUDA_T(cudaMalloc(&c->y, c->y_bytes));
  CUDA_T(cudaMalloc(&c->y2, c->y_bytes));
  CUDA_T(cudaMalloc(&c->gate_w, z->gate * 4));
  CUDA_T(cudaMalloc(&c->w1, z->w1l * 4));
  CUDA_T(cudaMalloc(&c->w2, z->w2l * 4));
  CUDA_T(cudaMalloc((void **)&c->ids_in, c->route_bytes));
  CUDA_T(cudaMalloc((void **)&c->ids_out, c->route_bytes));
  CUDA_T(cudaMalloc((void **)&c->wts_in, c->route_bytes));
  CUDA_T(cudaMalloc((void **)&c->wts_out, c->route_bytes));
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

static int upload_staged(void *dev, const float *src, size_t n, loom_dtype_t t, host_data *d) {
  if (n == 0) return 0;
  ref_pack_array(d->stage, src, n, (int)t);
  CUDA_T(cudaMemcpy(dev, d->stage, n * dtype_bytes(t), cudaMemcpyHostToDevice));
  return 0;
}

/* count matrices of [rows x cols] (the host's [in x out]) in the case's
 * layout: as they are for IN_OUT, each transposed for OUT_IN. */
static int upload_case_weight(void *dev, const float *src, size_t count, size_t rows, size_t cols,
                         const moe_case *c, host_data *d) {
  const size_t n = count * rows * cols;
  if (n == 0 || case_layout(c) == LOOM_WEIGHTS_IN_OUT)
    return upload_staged(dev, src, n, c->dtype, d);
  float *t = malloc(n * sizeof(float));
  CHECK(t != NULL, "host allocation (%zu floats to transpose)", n);
  if (t == NULL) return -1;
  ref_transpose(t, src, count, rows, cols);
  const int rc = upload_staged(dev, t, n, c->dtype, d);
  free(t);
  return rc;
}

static int upload_weights(rank_ctx *rc, const moe_case *c, host_data *d) {
  const size_t H = (size_t)c->H, F = (size_t)c->F, F1 = (size_t)case_f1(c);
  const size_t El = (size_t)(c->E / c->nranks);
  const size_t e0 = (size_t)rc->rank * El;
  CUDA_T(cudaSetDevice(rc->device));
  if (upload_case_weight(rc->gate_w, d->gate_w, 1, H, (size_t)c->E, c, d)) return -1;
  if (upload_case_weight(rc->w1, d->w1 + e0 * H * F1, El, H, F1, c, d)) return -1;
  return upload_case_weight(rc->w2, d->w2 + e0 * F * H, El, F, H, c, d);
}

/* x (and caller routing) of this rank; every output poisoned with 0xFF. */
static int upload_inputs(rank_ctx *rc, const moe_case *c, host_data *d) {
  const int r = rc->rank;
  const size_t T = (size_t)c->tokens[r], tk = T * (size_t)c->k;
  CUDA_T(cudaSetDevice(rc->device));
  if (upload_staged(rc->x, d->x[r], T * (size_t)c->H, c->dtype, d)) return -1;
  if (!is_gate_route(c->route[r]) && tk > 0) {
    CUDA_T(cudaMemcpy(rc->ids_in, d->ids[r], tk * 4, cudaMemcpyHostToDevice));
    CUDA_T(cudaMemcpy(rc->wts_in, d->wts[r], tk * 4, cudaMemcpyHostToDevice));
  }
  CUDA_T(cudaMemset(rc->y, 0xFF, rc->y_bytes));
  CUDA_T(cudaMemset(rc->y2, 0xFF, rc->y_bytes));
  CUDA_T(cudaMemset(rc->ids_out, 0xFF, rc->route_bytes));
  CUDA_T(cudaMemset(rc->wts_out, 0xFF, rc->route_bytes));
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

/* Per-row errors of T rows of H elements against the reference. */
typedef struct {
  double worst;      /* max over rows with ||ref_t|| > 0 of ||y_t - ref_t|| / ||ref_t|| */
  size_t worst_row;  /* its row (Inf: a non-finite y element) */
  size_t over;       /* rows above the tolerance */
  size_t zero_rows;  /* rows whose reference is exactly 0 */
  size_t zero_bad;   /* of those, rows of y that are not exactly 0 */
  size_t zero_first; /* the first of them */
  double zero_norm;  /* its ||y_t|| */
  double whole;      /* ||y - ref|| / ||ref|| over all rows, for context */
} row_errors;

static row_errors row_check(const float *y, const float *ref, size_t T, size_t H, double tol) {
  row_errors e;
  memset(&e, 0, sizeof e);
  for (size_t t = 0; t < T; t++) {
    const float *yt = y + t * H, *rt = ref + t * H;
    double d2 = 0.0, r2 = 0.0, y2 = 0.0;
    int finite = 1;
    for (size_t h = 0; h < H; h++) {
      finite &= isfinite(yt[h]) && isfinite(rt[h]);
      const double d = (double)yt[h] - (double)rt[h];
      d2 += d * d;
      r2 += (double)rt[h] * (double)rt[h];
      y2 += (double)yt[h] * (double)yt[h];
    }
    double err;
    if (!finite) {
      err = INFINITY;
    } else if (r2 == 0.0) { /* every contribution dropped: y_t must be 0 */
      e.zero_rows++;
      if (y2 != 0.0 && e.zero_bad++ == 0) {
        e.zero_first = t;
        e.zero_norm = sqrt(y2);
      }
      continue;
    } else {
      err = sqrt(d2 / r2);
    }
    e.over += !(err <= tol);
    if (!(err <= e.worst)) {
      e.worst = err;
      e.worst_row = t;
    }
  }
  e.whole = ref_rel_error(y, ref, T * H);
  return e;
}

/* y of one rank: every row < T written, rows from T to case_rows
 * untouched, the per-row error bound. *worst (may be NULL) gets the
 * worst row error. */
static int verify_y(const rank_ctx *rc, const moe_case *c, host_data *d, const void *ydev,
                    const char *which, const char *desc, double *worst) {
  const int r = rc->rank;
  const size_t T = (size_t)c->tokens[r], H = (size_t)c->H, es = dtype_bytes(c->dtype);
  const size_t rows = case_rows(c); /* <= y_bytes / (H * 4): sized from the plan */
  const unsigned char *raw = (const unsigned char *)d->stage;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(d->stage, ydev, rows * H * es, cudaMemcpyDeviceToHost));
  const size_t unwritten = count_poison(raw, T * H, es);
  const size_t beyond = (rows - T) * H - count_poison(raw + T * H * es, (rows - T) * H, es);
  CHECK(unwritten == 0, "rank %d %s: %zu of %zu elements never written [%s]", r, which, unwritten,
        T * H, desc);
  CHECK(beyond == 0, "rank %d %s: %zu elements written past row %zu (checked to row %zu) [%s]", r,
        which, beyond, T, rows, desc);
  ref_unpack_array(d->yhost, d->stage, T * H, (int)c->dtype);
  const double tol = case_tolerance(c);
  const row_errors e = row_check(d->yhost, d->yref[r], T, H, tol);
  if (worst != NULL && e.worst > *worst) *worst = e.worst;
  CHECK(e.over == 0,
        "rank %d %s: row %zu of %zu: rel error %.3g > %.1g (%zu rows over; y[%zu][0] = %.6g, "
        "ref %.6g; whole-tensor error %.3g) [%s]",
        r, which, e.worst_row, T, e.worst, tol, e.over, e.worst_row,
        T ? (double)d->yhost[e.worst_row * H] : 0.0,
        T ? (double)d->yref[r][e.worst_row * H] : 0.0, e.whole, desc);
  CHECK(e.zero_bad == 0,
        "rank %d %s: %zu of %zu rows whose reference is exactly 0 (every assignment dropped) are "
        "not 0, first row %zu with ||y_t|| = %.3g [%s]",
        r, which, e.zero_bad, e.zero_rows, e.zero_first, e.zero_norm, desc);
  return unwritten == 0 && beyond == 0 && e.over == 0 && e.zero_bad == 0 ? 0 : -1;
}

/* expert_ids_out / weights_out against the routing the rank used. */
static int verify_routing(const rank_ctx *rc, const moe_case *c, host_data *d, const char *desc) {
  const int r = rc->rank;
  const size_t tk = (size_t)c->tokens[r] * (size_t)c->k, all = case_rows(c) * (size_t)c->k;
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
  /* the phase ends (max over the blocks): written over the 0xFF poison, in
   * phase order (every block marks its phases in order, from its own
   * start), and the last one after the start (the timer ticks ~1 us; a
   * kernel takes longer) */
  int phases = got.phase_end_ns[4] > 0 && got.phase_end_ns[4] < 60000000000LL;
  for (int i = 0; i < 4; i++) phases &= got.phase_end_ns[i] >= 0 && got.phase_end_ns[i] <= got.phase_end_ns[i + 1];
  CHECK(phases,
        "rank %d stats.phase_end_ns = {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
        "}: written and in phase order [%s]",
        r, got.phase_end_ns[0], got.phase_end_ns[1], got.phase_end_ns[2], got.phase_end_ns[3],
        got.phase_end_ns[4], desc);
  return bad == 0 && phases && got.rows_dropped == want.rows_dropped && got.bytes_sent == want.bytes_sent &&
                 got.bytes_remote == want.bytes_remote
             ? 0
             : -1;
}

static int verify_rank(const rank_ctx *rc, const moe_case *c, host_data *d, const char *desc,
                       double *worst) {
  int rc_ = verify_y(rc, c, d, rc->y, "y", desc, worst);
  if (c->api[rc->rank] == API_FULL) {
    rc_ |= verify_routing(rc, c, d, desc);
    /* a fast-gate case's stats depend on every rank's routing, which is
     * the GPUs' (adopt_fast_routing): known here only for local ranks */
    if (c->gate_math == LOOM_GATE_FAST && g_mode == RANKS_MULTI)
      CHECK_SKIP("stats of a fast-gate case in multi-process mode: other ranks' routing is not known here [%s]",
                 desc);
    else
      rc_ |= verify_stats(rc, c, d, desc);
  }
  return rc_;
}

/* y2 must equal y bit for bit; `what` names the two forwards. */
static int verify_same(const rank_ctx *rc, const moe_case *c, host_data *d, const char *what,
                       const char *desc) {
  const size_t bytes = (size_t)c->tokens[rc->rank] * (size_t)c->H * dtype_bytes(c->dtype);
  unsigned char *a = (unsigned char *)d->stage, *b = (unsigned char *)d->yhost;
  CUDA_T(cudaSetDevice(rc->device));
  CUDA_T(cudaMemcpy(a, rc->y, bytes, cudaMemcpyDeviceToHost));
  CUDA_T(cudaMemcpy(b, rc->y2, bytes, cudaMemcpyDeviceToHost));
  size_t diff = 0;
  for (size_t i = 0; i < bytes; i++) diff += a[i] != b[i];
  CHECK(diff == 0, "rank %d: %s differ in %zu of %zu bytes of y [%s]", rc->rank, what, diff,
        bytes, desc);
  return diff == 0 ? 0 : -1;
}

/* ---- the fast gate --------------------------------------------------------------------------- */

/* Tokens of the fast-gate cases so far: checked, routed otherwise than the
 * exact gate, and within their band of a tie (ref_fast_gate.near). */
static struct {
  int tokens, moved, near;
} g_fast;

/* A fast-gate case (LOOM_GATE_FAST) on the local ranks, before the usual
 * checks: every token's expert_ids_out / weights_out must satisfy the fast
 * gate's contract (ref_moe_gate_fast_check: ids the exact gate's, or
 * another ranking that logits within their error bounds give; weights
 * within the bound's tolerance). Where it routed a token otherwise, the
 * reference of that row is recomputed with the GPU's routing; the
 * routing the host data holds becomes the GPU's (so verify_routing then
 * checks the bytes out against it, and the stats are recounted). -1 when
 * a token breaks the contract. */
static int adopt_fast_routing(const rank_ctx *cs, int nlocal, const moe_case *c, host_data *d,
                              const char *desc) {
  const size_t H = (size_t)c->H, k = (size_t)c->k;
  int bad = 0;
  for (int i = 0; i < nlocal; i++) {
    const int r = cs[i].rank;
    const size_t T = (size_t)c->tokens[r];
    if (T == 0 || !is_gate_route(c->route[r])) continue;
    int32_t *ids = (int32_t *)malloc(T * k * sizeof *ids);
    float *wts = (float *)malloc(T * k * sizeof *wts);
    if (ids == NULL || wts == NULL) {
      CHECK(0, "out of host memory [%s]", desc);
      free(ids);
      free(wts);
      return -1;
    }
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemcpy(ids, cs[i].ids_out, T * k * 4, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(wts, cs[i].wts_out, T * k * 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < T; t++) {
      ref_fast_gate f;
      const float *xt = d->x[r] + t * H;
      if (ref_moe_gate_fast_check(c->H, c->E, c->k, c->normalize, xt, d->gate_w, ids + t * k, wts + t * k,
                                  &f) != 0 ||
          !f.ok) {
        if (bad++ == 0)
          CHECK(0,
                "rank %d token %zu: the fast gate's routing breaks its contract: ids %d %d.. (exact %d %d..), "
                "consistent %d, weight error %.3g > %.3g (eps %.3g) [%s]",
                r, t, ids[t * k], k > 1 ? ids[t * k + 1] : -1, d->ids[r][t * k],
                k > 1 ? d->ids[r][t * k + 1] : -1, f.consistent, f.w_err, f.w_tol, f.eps_max, desc);
        continue;
      }
      g_fast.tokens++;
      g_fast.near += f.near;
      memcpy(d->wts[r] + t * k, wts + t * k, k * sizeof *wts);
      if (f.same) continue;
      g_fast.moved++;
      memcpy(d->ids[r] + t * k, ids + t * k, k * sizeof *ids);
      ref_moe_shape sh;
      sh.T = 1;
      sh.H = c->H;
      sh.F = c->F;
      sh.E = c->E;
      sh.k = c->k;
      sh.act = (ref_activation)c->act;
      sh.renormalize = c->normalize;
      sh.capacity = 0; /* the fast cases are dropless */
      sh.h_round = round_mode(c->dtype);
      sh.out_round = round_mode(c->dtype);
      if (ref_moe_forward(&sh, xt, NULL, d->w1, d->w2, d->ids[r] + t * k, d->wts[r] + t * k, NULL, NULL,
                          d->yref[r] + t * H) != 0 && bad++ == 0)
        CHECK(0, "rank %d token %zu: reference with the GPU's routing failed [%s]", r, t, desc);
    }
    free(ids);
    free(wts);
  }
  if (bad > 1) CHECK(0, "%d tokens break the fast gate's contract [%s]", bad, desc);
  count_kept(c, d);
  return bad ? -1 : 0;
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

/* What a case measured, for the real-size lines. */
typedef struct {
  double ref_s;  /* CPU reference wall time */
  double gflop;  /* its dropless FLOPs, local ranks */
  double worst;  /* worst row error over local ranks */
} case_report;

/* Case c's weights and every rank's x and routing into d (host); a failure
 * is a failed check. */
static int gen_case(const moe_case *c, host_data *d, const char *desc) {
  if (gen_weights(c, d) == 0 && gen_inputs(c, d) == 0) return 0;
  CHECK(0, "host data generation failed [%s]", desc);
  return -1;
}

/* Run one case on the local ranks. repeats == 2 also runs a second forward
 * into y2 and requires it bitwise equal. rep (may be NULL) receives the
 * reference time and the worst row error. Returns -1 when the
 * communicators may be unusable (a launch or async failure): the caller
 * stops. */
static int run_case(rank_ctx *cs, int nlocal, const moe_case *c, host_data *d, int repeats,
                    case_report *rep) {
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
  if (gen_case(c, d, desc) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_weights(&cs[i], c, d) != 0 || upload_inputs(&cs[i], c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, c, desc) != 0) return -1;
  int fatal = 0;
  for (int rep = 0; rep < repeats && !fatal; rep++)
    fatal = launch_all(cs, nlocal, c, rep == 1, -1, desc) != 0;
  /* the CPU reference runs while the GPUs work */
  const double t_ref = now_s();
  const int ref_ok = compute_refs(c, d, ranks, nlocal) == 0;
  CHECK(ref_ok, "reference failed [%s]", desc);
  double worst = 0.0;
  if (rep != NULL) {
    rep->ref_s = now_s() - t_ref;
    rep->gflop = 0.0;
    for (int i = 0; i < nlocal; i++) rep->gflop += ref_flops(c, ranks[i]) * 1e-9;
  }
  fatal |= sync_all(cs, nlocal) != 0;
  fatal |= check_async(cs, nlocal, desc) != 0;
  if (!fatal && ref_ok) {
    if (c->gate_math == LOOM_GATE_FAST) adopt_fast_routing(cs, nlocal, c, d, desc);
    for (int i = 0; i < nlocal; i++) {
      verify_rank(&cs[i], c, d, desc, &worst);
      if (repeats == 2) verify_same(&cs[i], c, d, "two forwards on the same inputs", desc);
    }
  }
  if (rep != NULL) rep->worst = worst;
  destroy_layers(cs, nlocal);
  return fatal ? -1 : 0;
}

/* ---- layouts: the same weights as IN_OUT and as OUT_IN ------------------------------------- */

/* One layouts case: the same weights and inputs through an IN_OUT layer
 * (into y) and an OUT_IN layer (into y2), each on freshly uploaded weights;
 * y verified against the reference. y2 is bitwise equal to y where both
 * layers run their expert GEMMs on the same engine (exact fp32 math: the
 * mma.sync engine for both layouts); otherwise (bf16, fp16, TF32: OUT_IN
 * runs on the Hopper engine, IN_OUT on mma.sync, which sum in different
 * orders) y2 is verified against the reference on its own. Returns -1 when
 * the communicators may be unusable. */
static int run_layouts(rank_ctx *cs, int nlocal, moe_case *c, host_data *d) {
  char desc[1024];
  int ranks[MAX_RANKS];
  describe(c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s", desc);
  local_ranks(cs, nlocal, ranks);
  if (gen_case(c, d, desc) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_inputs(&cs[i], c, d) != 0) return -1;
  int fatal = 0;
  for (int pass = 0; pass < 2 && !fatal; pass++) {
    c->layout = pass == 0 ? LOOM_WEIGHTS_IN_OUT : LOOM_WEIGHTS_OUT_IN;
    for (int i = 0; i < nlocal; i++)
      if (upload_weights(&cs[i], c, d) != 0) return -1;
    if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, c, desc) != 0) return -1;
    fatal = launch_all(cs, nlocal, c, pass == 1, -1, desc) != 0;
    fatal |= sync_all(cs, nlocal) != 0;
    fatal |= check_async(cs, nlocal, desc) != 0;
    destroy_layers(cs, nlocal);
  }
  const int ref_ok = compute_refs(c, d, ranks, nlocal) == 0;
  CHECK(ref_ok, "reference failed [%s]", desc);
  if (!fatal && ref_ok)
    for (int i = 0; i < nlocal; i++) {
      verify_rank(&cs[i], c, d, desc, NULL);
      if (c->dtype == LOOM_FP32 && c->math == LOOM_MATH_FP32)
        verify_same(&cs[i], c, d, "the IN_OUT and OUT_IN layers on the same weights and inputs",
                    desc);
      else
        verify_y(&cs[i], c, d, cs[i].y2, "y of the OUT_IN layer", desc, NULL);
    }
  return fatal ? -1 : 0;
}

/* ---- CUDA graph: capture one forward per rank, replay with fresh x -------------------------- */

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
  for (int i = 0; i < nlocal && ref_ok; i++) bad |= verify_rank(&cs[i], c, d, desc, NULL) != 0;
  return bad ? 1 : 0;
}

static int run_graph(rank_ctx *cs, int nlocal, int R, host_data *d) {
  moe_case c = make_graph_case(R);
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
  int timeouts = 0;
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
    /* Every waiting rank times out on the silent one, unless another
     * waiting rank's timeout reached it first: then it stops with a peer
     * error that carries that timeout on the silent rank. */
    char on_silent[64];
    snprintf(on_silent, sizeof on_silent, "waiting for peer %d", silent);
    const int relayed = async == LOOM_PEER_ERROR &&
                        strstr(loom_last_error(), "failed first (timeout)") != NULL &&
                        strstr(loom_last_error(), on_silent) != NULL;
    timeouts += async == LOOM_TIMEOUT;
    CHECK(async == LOOM_TIMEOUT || relayed,
          "rank %d: async error %s (%s), want timeout (or a peer's timeout on rank %d) [%s]",
          cs[i].rank, loom_result_string(async), loom_last_error(), silent, desc);
    CHECK(waited <= FAULT_TIMEOUT_MS / 1000.0 + 1.0,
          "rank %d returned after %.2f s (timeout %d ms + 1 s allowed)", cs[i].rank, waited,
          FAULT_TIMEOUT_MS);
    printf("  fault: rank %d reported after %.2f s: %s\n", cs[i].rank, waited, loom_last_error());
    const loom_result_t again = forward(&cs[i], &c, cs[i].y);
    CHECK(again == LOOM_INVALID_USAGE,
          "rank %d: after a timeout, forward returns %s, want invalid usage", cs[i].rank,
          loom_result_string(again));
  }
  if (nlocal == R)
    CHECK(timeouts >= 1, "no rank reported its own timeout on silent rank %d [%s]", silent, desc);
  destroy_layers(cs, nlocal);
  return 0;
}

/* ---- in-kernel trace ------------------------------------------------------------------------ */

static int cmp_event_start(const void *x, const void *y) {
  const loom_moe_trace_event_t *a = (const loom_moe_trace_event_t *)x,
                               *b = (const loom_moe_trace_event_t *)y;
  if (a->sm != b->sm) return a->sm < b->sm ? -1 : 1;
  return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

static int ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

/* A layer switch from the environment as loom_moe_plan_create reads it
 * (moe.cu moe_env_int): unset or empty is the default. */
static int moe_env(const char *name, int dflt) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

/* One rank's trace of a forward with room for everything: the info block,
 * every event inside the kernel's window on a real SM with a known kind,
 * waits at least LOOM_MOE_TRACE_MIN_WAIT_NS, work slices of one SM never
 * overlapping (but for dispatch pieces), and the exact number of work
 * slices of each kind, from the host's routing: gate one per 32-token tile (and pass of 16 experts at
 * small T), combine one per 32-token tile and column slice, place one per
 * block, dispatch one per piece of up to 8 rows of a (destination, local
 * expert) sent (pieces may overlap: excluded from the overlap check),
 * GEMM0 / GEMM1 (tiles received) x (column blocks), each with indices in
 * range. ev is sorted here. */
static int check_trace(const rank_ctx *rc, const moe_case *c, const host_data *d,
                       const loom_moe_trace_info_t *info, loom_moe_trace_event_t *ev,
                       const char *desc) {
  const int r = rc->rank, R = c->nranks, E = c->E, El = E / R, T = c->tokens[r];
  int sms = 0, bad = 0;
  CUDA_T(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rc->device));
  /* blocks: one per SM, or a loopback rank's share (events still name
   * physical SMs) */
  const int blocks = g_mode == RANKS_LOOPBACK ? sms / R : sms;
  CHECK(info->recorded > 0 && info->dropped == 0 && info->recorded <= TRACE_CAPACITY,
        "rank %d: trace recorded %lld, dropped %lld (capacity %d) [%s]", r,
        (long long)info->recorded, (long long)info->dropped, TRACE_CAPACITY, desc);
  CHECK(info->rank == r && info->blocks == blocks && info->start_ns < info->end_ns,
        "rank %d: trace info rank %d, blocks %d (want %d), start %llu end %llu [%s]", r,
        info->rank, info->blocks, blocks, (unsigned long long)info->start_ns, (unsigned long long)info->end_ns,
        desc);
  if (info->recorded <= 0 || info->recorded > TRACE_CAPACITY) return -1;
  const size_t n = (size_t)info->recorded;
  /* the expected work, from the routing the kernel used */
  /* output columns of a GEMM task: the Hopper engine (K-major OUT_IN
   * weights, not exact fp32, not forced off by LOOM_MOE_ENGINE=mma) makes
   * 128 x 256 tiles, 128 h columns for SwiGLU; the mma.sync engine 128 x 128,
   * 64 h columns for SwiGLU (src/device/ops/moe.cu) */
  const char *engine = getenv("LOOM_MOE_ENGINE");
  const int hop = case_layout(c) == LOOM_WEIGHTS_OUT_IN &&
                  !(c->dtype == LOOM_FP32 && c->math == LOOM_MATH_FP32) &&
                  !(engine != NULL && strcmp(engine, "mma") == 0);
  const int wide = hop ? 256 : 128;
  const int hc = c->act == LOOM_ACT_SWIGLU ? wide / 2 : wide;
  int nF = ceil_div(c->F, hc), nH = ceil_div(c->H, wide);
  /* row tiles are expert-major (moe.h): 128 rows of one local expert from
   * every source, so an expert's tiles are ceil(its rows from all sources
   * / 128) and a tile index stays below R * max_tokens / 128 + 1 */
  const int TPE = R * ceil_div(case_max_tokens(c), 128) + 1;
  int64_t want[LOOM_MOE_TRACE_FIRST_WAIT] = {0}, got[LOOM_MOE_TRACE_NUM_KINDS] = {0};
  int64_t tiles_in = 0;
  for (int le = 0; le < El; le++) {
    int64_t rows = 0;
    for (int s = 0; s < R; s++) rows += d->kept[(size_t)s * E + r * El + le];
    tiles_in += ceil_div(rows, 128);
  }
  /* the Hopper variant's half-width tasks (moe.cu moe_task_cols): a GEMM
   * whose tasks fill at most half the blocks takes twice as many, half as
   * wide (not with LOOM_MOE_NARROW=0) */
  if (hop && moe_env("LOOM_MOE_NARROW", 1) != 0) {
    if (2 * tiles_in * nF <= blocks) nF = ceil_div(c->F, hc / 2);
    if (2 * tiles_in * nH <= blocks) nH = ceil_div(c->H, wide / 2);
  }
  /* dispatch: pieces of up to 8 rows of one (dest, expert) (moe.cu MOE_DSUB) */
  for (int e = 0; e < E; e++) want[LOOM_MOE_TRACE_DISPATCH] += ceil_div(d->kept[(size_t)r * E + e], 8);
  /* gate: one slice per (tile, pass of 16 experts) when the layer's gate
   * routes, there are several passes and the split at least halves the
   * busiest block's passes, else one per tile (or the gate jobs' below);
   * combine: a
   * tile's rows in ns column slices when the tiles alone leave blocks idle,
   * each at least 8 16-byte vectors wide (moe.cu phase_gate, phase_combine) */
  const int ntiles = ceil_div(T, 32), npass = ceil_div(E, 16);
  const int vpr = c->H * dtype_bytes(c->dtype) / 16;
  int ns = ntiles == 0 || ntiles >= blocks ? 1 : blocks / ntiles;
  if (ns > vpr / 8) ns = vpr / 8;
  if (ns < 1) ns = 1;
  /* gate jobs (fewer units than half the blocks, and no more than the
   * layer holds: min(tiles of max_tokens x passes, 128), moe.h
   * LOOM_MOE_GATE_PART_UNITS; not with LOOM_MOE_GATE_JOBS=0): a slice per
   * block that ran jobs (a job a warp: 12 warps on the Hopper variant, 8
   * otherwise) and one per non-empty share of a tile's finish (S =
   * min(LOOM_MOE_GATE_FIN_PARTS or 4, blocks / tiles) shares of its
   * tokens: min(S, its tokens)) */
  const int64_t units = (int64_t)ntiles * npass, unit_cap = ceil_div(case_max_tokens(c), 32) * npass;
  const int jobs = is_gate_route(c->route[r]) && ntiles > 0 && 2 * units <= blocks &&
                   units <= (unit_cap < 128 ? unit_cap : 128) && moe_env("LOOM_MOE_GATE_JOBS", 1) != 0;
  const int64_t njobs = units * (hop ? 12 : 8);
  const int split = !jobs && is_gate_route(c->route[r]) && npass > 1 &&
                    2 * ceil_div((int64_t)ntiles * npass, blocks) <= ceil_div(ntiles, blocks) * npass;
  int64_t fin_shares = 0;
  if (jobs) {
    int S = moe_env("LOOM_MOE_GATE_FIN_PARTS", 4); /* moe.cu's default; <= 0 is 1 */
    if (blocks / ntiles < S) S = blocks / ntiles;
    if (S < 1) S = 1;
    for (int t = 0; t < ntiles; t++) {
      const int tn = T - 32 * t < 32 ? T - 32 * t : 32;
      fin_shares += tn < S ? tn : S;
    }
  }
  want[LOOM_MOE_TRACE_GATE] = jobs ? (njobs < blocks ? njobs : blocks) + fin_shares : (int64_t)ntiles * (split ? npass : 1);
  want[LOOM_MOE_TRACE_COMBINE] = (int64_t)ntiles * ns;
  want[LOOM_MOE_TRACE_PLACE] = info->blocks;
  want[LOOM_MOE_TRACE_GEMM0] = tiles_in * nF;
  want[LOOM_MOE_TRACE_GEMM1] = tiles_in * nH;
  for (size_t i = 0; i < n; i++) {
    const loom_moe_trace_event_t *e = &ev[i];
    const int wait = e->kind >= LOOM_MOE_TRACE_FIRST_WAIT;
    const int gemm = e->kind == LOOM_MOE_TRACE_GEMM0 || e->kind == LOOM_MOE_TRACE_GEMM1;
    int ok = e->start_ns <= e->end_ns && e->start_ns >= info->start_ns &&
             e->end_ns <= info->end_ns && e->sm < sms && e->kind < LOOM_MOE_TRACE_NUM_KINDS &&
             (e->peer < R || e->peer == LOOM_MOE_TRACE_NO_PEER) &&
             (!wait || e->end_ns - e->start_ns >= LOOM_MOE_TRACE_MIN_WAIT_NS);
    if (ok && gemm)
      ok = e->peer < R && e->a >= 0 && e->a < El && e->b >= 0 && e->b < TPE && e->c >= 0 &&
           e->c < (e->kind == LOOM_MOE_TRACE_GEMM0 ? nF : nH);
    if (ok && (e->kind == LOOM_MOE_TRACE_GATE || e->kind == LOOM_MOE_TRACE_COMBINE))
      ok = e->a >= 0 && e->a < ceil_div(T, 32) && e->b == e->a * 32 && e->c >= 1 && e->c <= 32;
    if (ok && e->kind == LOOM_MOE_TRACE_DISPATCH)
      ok = e->peer < R && e->a >= 0 && e->a < El && e->b >= 0 && e->b % 8 == 0 && e->c >= 1 && e->c <= 8;
    if (!ok && bad++ < 5)
      CHECK(0, "rank %d: trace event %zu bad: kind %d sm %d peer %d a %d b %d c %d, %llu..%llu "
               "(kernel %llu..%llu) [%s]",
            r, i, e->kind, e->sm, e->peer, e->a, e->b, e->c, (unsigned long long)e->start_ns,
            (unsigned long long)e->end_ns, (unsigned long long)info->start_ns,
            (unsigned long long)info->end_ns, desc);
    if (e->kind < LOOM_MOE_TRACE_NUM_KINDS) got[e->kind]++;
  }
  for (int k = 0; k < LOOM_MOE_TRACE_FIRST_WAIT; k++)
    CHECK(got[k] == want[k], "rank %d: %lld %s slices, want %lld [%s]", r, (long long)got[k],
          k == LOOM_MOE_TRACE_GATE       ? "gate"
          : k == LOOM_MOE_TRACE_PLACE    ? "place"
          : k == LOOM_MOE_TRACE_DISPATCH ? "dispatch"
          : k == LOOM_MOE_TRACE_GEMM0    ? "GEMM0"
          : k == LOOM_MOE_TRACE_GEMM1    ? "GEMM1"
                                         : "combine",
          (long long)want[k], desc);
  /* one block per SM does one thing at a time, but for dispatch pieces:
   * every warp takes its own, and on the Hopper variant two warps copy
   * them beside the GEMMs (moe.cu phase_dispatch) */
  qsort(ev, n, sizeof *ev, cmp_event_start);
  int overlaps = 0;
  for (size_t i = 0, last = (size_t)-1; i < n; i++) {
    if (ev[i].kind >= LOOM_MOE_TRACE_FIRST_WAIT || ev[i].kind == LOOM_MOE_TRACE_DISPATCH) continue;
    if (last != (size_t)-1 && ev[last].sm == ev[i].sm && ev[i].start_ns < ev[last].end_ns)
      overlaps++;
    last = i;
  }
  CHECK(overlaps == 0, "rank %d: %d work slices overlap the previous one on their SM [%s]", r,
        overlaps, desc);
  return bad == 0 && overlaps == 0 ? 0 : -1;
}

/* The trace case: a forward without tracing (y), then with a large trace
 * buffer (y2, bitwise equal to y; check_trace on every rank), then with
 * TRACE_TINY events of room (dropped counted, nothing written past the
 * capacity: TRACE_GUARD poisoned events after it stay poisoned; y2 still
 * equal), then with tracing turned off again (the info block untouched).
 * Returns -1 when the communicators may be unusable. */
static int run_trace(rank_ctx *cs, int nlocal, const moe_case *c, host_data *d) {
  char desc[1024];
  int ranks[MAX_RANKS];
  describe(c, desc, sizeof desc);
  watchdog(CASE_DEADLINE_S, "%s", desc);
  local_ranks(cs, nlocal, ranks);
  if (gen_case(c, d, desc) != 0) return -1;
  for (int i = 0; i < nlocal; i++)
    if (upload_weights(&cs[i], c, d) != 0 || upload_inputs(&cs[i], c, d) != 0) return -1;
  if (sync_devices(cs, nlocal) != 0 || setup_layers(cs, nlocal, c, desc) != 0) return -1;
  loom_moe_trace_event_t *ev[MAX_RANKS] = {0};
  loom_moe_trace_info_t *info[MAX_RANKS] = {0};
  loom_moe_trace_event_t *host = malloc(TRACE_CAPACITY * sizeof *host);
  int fatal = host == NULL, ref_ok = 0;
  for (int i = 0; i < nlocal && !fatal; i++)
    fatal = cudaSetDevice(cs[i].device) != cudaSuccess ||
            cudaMalloc((void **)&ev[i], TRACE_CAPACITY * sizeof(loom_moe_trace_event_t)) !=
                cudaSuccess ||
            cudaMalloc((void **)&info[i], sizeof(loom_moe_trace_info_t)) != cudaSuccess;
  CHECK(!fatal, "trace buffers [%s]", desc);
  /* untraced into y, traced into y2 */
  if (!fatal) fatal = launch_all(cs, nlocal, c, 0, -1, desc) != 0;
  for (int i = 0; i < nlocal && !fatal; i++) {
    const loom_result_t r = loom_moe_set_trace(cs[i].moe, ev[i], TRACE_CAPACITY, info[i]);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_moe_set_trace: %s [%s]", cs[i].rank, loom_last_error(),
          desc);
    fatal = r != LOOM_SUCCESS;
  }
  if (!fatal) fatal = launch_all(cs, nlocal, c, 1, -1, desc) != 0;
  if (!fatal) {
    ref_ok = compute_refs(c, d, ranks, nlocal) == 0;
    CHECK(ref_ok, "reference failed [%s]", desc);
    fatal = sync_all(cs, nlocal) != 0 || check_async(cs, nlocal, desc) != 0;
  }
  int64_t full[MAX_RANKS] = {0}; /* work slices of the large trace */
  for (int i = 0; i < nlocal && !fatal && ref_ok; i++) {
    verify_rank(&cs[i], c, d, desc, NULL);
    verify_same(&cs[i], c, d, "a forward without and one with the trace", desc);
    loom_moe_trace_info_t inf;
    memset(&inf, 0, sizeof inf);
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemcpy(&inf, info[i], sizeof inf, cudaMemcpyDeviceToHost));
    const size_t n = inf.recorded > 0 && inf.recorded <= TRACE_CAPACITY ? (size_t)inf.recorded : 0;
    CUDA_T(cudaMemcpy(host, ev[i], n * sizeof *host, cudaMemcpyDeviceToHost));
    check_trace(&cs[i], c, d, &inf, host, desc);
    for (size_t e = 0; e < n; e++) full[i] += host[e].kind < LOOM_MOE_TRACE_FIRST_WAIT;
  }
  /* TRACE_TINY events of room; the buffer poisoned past them */
  const size_t poisoned = (TRACE_TINY + TRACE_GUARD) * sizeof(loom_moe_trace_event_t);
  for (int i = 0; i < nlocal && !fatal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemset(ev[i], 0xFF, poisoned));
    LOOM_T(loom_moe_set_trace(cs[i].moe, ev[i], TRACE_TINY, info[i]));
  }
  if (!fatal) fatal = sync_devices(cs, nlocal) != 0 || launch_all(cs, nlocal, c, 1, -1, desc) != 0;
  if (!fatal) fatal = sync_all(cs, nlocal) != 0 || check_async(cs, nlocal, desc) != 0;
  for (int i = 0; i < nlocal && !fatal && ref_ok; i++) {
    verify_same(&cs[i], c, d, "a forward without and one with a tiny trace buffer", desc);
    loom_moe_trace_info_t inf;
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemcpy(&inf, info[i], sizeof inf, cudaMemcpyDeviceToHost));
    CUDA_T(cudaMemcpy(host, ev[i], poisoned, cudaMemcpyDeviceToHost));
    CHECK(inf.recorded == TRACE_TINY && inf.dropped >= full[i] - TRACE_TINY && inf.dropped > 0,
          "rank %d: capacity %d: recorded %lld, dropped %lld (the large trace had %lld work "
          "slices) [%s]",
          cs[i].rank, TRACE_TINY, (long long)inf.recorded, (long long)inf.dropped,
          (long long)full[i], desc);
    const unsigned char *past = (const unsigned char *)(host + TRACE_TINY);
    size_t touched = 0;
    for (size_t b = 0; b < TRACE_GUARD * sizeof *host; b++) touched += past[b] != 0xFF;
    CHECK(touched == 0, "rank %d: %zu bytes written past the trace capacity [%s]", cs[i].rank,
          touched, desc);
    int in_window = 1;
    for (int e = 0; e < TRACE_TINY; e++)
      in_window &= host[e].start_ns >= inf.start_ns && host[e].end_ns <= inf.end_ns &&
                   host[e].start_ns <= host[e].end_ns;
    CHECK(in_window, "rank %d: the %d recorded events lie in the kernel [%s]", cs[i].rank,
          TRACE_TINY, desc);
  }
  /* off again: the info block is left alone */
  for (int i = 0; i < nlocal && !fatal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemset(info[i], 0xFF, sizeof(loom_moe_trace_info_t)));
    LOOM_T(loom_moe_set_trace(cs[i].moe, NULL, 0, NULL));
  }
  if (!fatal) fatal = sync_devices(cs, nlocal) != 0 || launch_all(cs, nlocal, c, 1, -1, desc) != 0;
  if (!fatal) fatal = sync_all(cs, nlocal) != 0 || check_async(cs, nlocal, desc) != 0;
  for (int i = 0; i < nlocal && !fatal && ref_ok; i++) {
    unsigned char raw[sizeof(loom_moe_trace_info_t)];
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaMemcpy(raw, info[i], sizeof raw, cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (size_t b = 0; b < sizeof raw; b++) touched += raw[b] != 0xFF;
    CHECK(touched == 0, "rank %d: an untraced forward wrote %zu bytes of the info block [%s]",
          cs[i].rank, touched, desc);
    verify_same(&cs[i], c, d, "a forward before and after tracing", desc);
  }
  if (cs[0].rank == 0 && !fatal)
    printf("  n=%d: trace case (large, tiny and no buffer; y bitwise equal)\n", c->nranks);
  for (int i = 0; i < nlocal; i++) {
    cudaSetDevice(cs[i].device);
    if (ev[i]) cudaFree(ev[i]);
    if (info[i]) cudaFree(info[i]);
  }
  free(host);
  destroy_layers(cs, nlocal);
  return fatal ? -1 : 0;
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

/* Workspace and signal slots for the largest case of the plan. */
static int comm_config(const plan_t *pl, int fault, loom_comm_config_t *cfg) {
  size_t bytes = 0;
  int slots = 3; /* the least a communicator takes (two are the runtime's) */
  for (int i = 0; i < pl->n; i++)
    if (add_workspace(&pl->c[i], &bytes, &slots)) return -1;
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  c.workspace_bytes = (int64_t)(bytes > 0 ? bytes : 1);
  c.signal_slots = slots;
  c.timeout_ms = fault ? FAULT_TIMEOUT_MS : LOOM_UNSET;
  *cfg = c;
  return 0;
}

/* One process per GPU: the barrier every rank process meets before each
 * case (shared memory mapped before the fork; NULL in one process). Each
 * process computes the CPU reference of its own ranks after launching, so
 * without it a rank with few tokens reaches the next case's forward long
 * before one with many, and waits past the communicator's timeout (seen on
 * 2x H200: a 10 s reference against the 5 s default). */
static ranks_barrier_t *g_case_barrier;
#define CASE_BARRIER_DEADLINE_S 120.0

/* Everything one world size runs on the local ranks: the plan's cases in
 * order (fault: the fault case alone). */
static int run_world(rank_ctx *cs, int nlocal, int R, int fault, const plan_t *pl,
                     host_data *d) {
  if (fault) return run_fault(cs, nlocal, R, d);
  const int lead = cs[0].rank == 0; /* prints */
  int run = 0, refused = 0, nreal = 0, rc = 0;
  double t = now_s(), t_real = 0.0;
  for (int i = 0; i < pl->n && rc == 0; i++) {
    const moe_case *c = &pl->c[i];
    if (g_case_barrier &&
        ranks_barrier_wait(g_case_barrier, R, cs[0].rank, "start of a case", CASE_BARRIER_DEADLINE_S) != 0)
      return -1;
    if (c->id < NUM_CONFIGS) {
      if (c->k > c->E)
        refused++;
      else
        run++;
      rc = run_case(cs, nlocal, c, d, 1, NULL);
      const int last = i + 1 == pl->n || pl->c[i + 1].id >= NUM_CONFIGS;
      if (last && lead)
        printf("  n=%d: %d configs run, %d refused as expected, in %.1f s\n", R, run, refused,
               now_s() - t);
    } else if (is_real(c)) {
      if (nreal++ == 0) t_real = now_s();
      case_report rep;
      memset(&rep, 0, sizeof rep);
      const double t0 = now_s();
      rc = run_case(cs, nlocal, c, d, 1, &rep);
      if (lead) {
        char desc[1024];
        describe(c, desc, sizeof desc);
        printf("  %s\n    %.1f s; reference %.0f GFLOP (this process) in %.1f s = %.1f GFLOP/s on "
               "%d threads; worst row error %.3g (bound %.0e)\n",
               desc, now_s() - t0, rep.gflop, rep.ref_s,
               rep.ref_s > 0 ? rep.gflop / rep.ref_s : 0.0, g_threads, rep.worst,
               case_tolerance(c));
      }
      const int last = i + 1 == pl->n || !is_real(&pl->c[i + 1]);
      if (last && lead)
        printf("  n=%d: %d real-size cases in %.1f s\n", R, nreal, now_s() - t_real);
    } else if (c->id == ID_DETERMINISM) {
      rc = run_case(cs, nlocal, c, d, 2, NULL);
    } else if (c->id == ID_GRAPH) {
      rc = run_graph(cs, nlocal, R, d);
    } else if (c->id == ID_TRACE) {
      rc = run_trace(cs, nlocal, c, d);
    } else if (is_decode(c)) {
      rc = run_case(cs, nlocal, c, d, 2, NULL);
      if (lead && c->id == ID_DECODE + NUM_DECODE_CASES - 1)
        printf("  n=%d: %d decode cases (1-200 tokens a rank at hidden 1024-2048, each run twice)\n", R,
               NUM_DECODE_CASES);
    } else if (is_fast(c)) {
      rc = run_case(cs, nlocal, c, d, 2, NULL);
      if (lead && c->id == ID_FAST + NUM_FAST_CASES - 1)
        printf("  n=%d: %d fast-gate cases: %d of %d tokens routed otherwise than the exact gate (each inside "
               "its band), %d tokens within their band of a tie\n",
               R, NUM_FAST_CASES, g_fast.moved, g_fast.tokens, g_fast.near);
    } else if (is_layouts(c)) {
      moe_case both = *c; /* run_layouts sets the layout of each pass */
      rc = run_layouts(cs, nlocal, &both, d);
      if (lead && both.id == ID_LAYOUTS + NUM_LAYOUT_CASES - 1)
        printf("  n=%d: %d layouts cases (IN_OUT vs OUT_IN: bitwise on exact fp32, else both against the reference)\n", R, NUM_LAYOUT_CASES);
    }
    fflush(stdout);
  }
  return rc;
}

/* ---- one process, all GPUs ------------------------------------------------------------------ */

static plan_t g_plan; /* large; one world size at a time */

static int single_process(int R, int fault, int every) {
  rank_ctx cs[MAX_RANKS];
  loom_comm_t comms[MAX_RANKS] = {0};
  host_data d;
  loom_comm_config_t cfg;
  memset(cs, 0, sizeof cs);
  memset(&d, 0, sizeof d);
  make_plan(R, fault, every, &g_plan);
  const buf_sizes z = plan_sizes(&g_plan);
  if (comm_config(&g_plan, fault, &cfg) != 0) return -1;
  watchdog(CASE_DEADLINE_S, "loom_comm_create_%s(%d)",
           g_mode == RANKS_LOOPBACK ? "loopback" : "all", R);
  if (ranks_world_create(g_mode, R, &cfg, comms) != 0) return -1;
  int rc = host_alloc(&d, R, &z);
  for (int i = 0; i < R && rc == 0; i++) {
    cs[i].comm = comms[i];
    cs[i].rank = i;
    cs[i].device = ranks_device(g_mode, i);
    rc = ctx_setup(&cs[i], &z);
  }
  if (rc == 0) rc = run_world(cs, R, R, fault, &g_plan, &d);
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
  ranks_barrier_t *barrier; /* shared by the rank processes */
} multi_arg;

static int child_rank(const ranks_child *rc, void *arg) {
  const int rank = rc->rank, R = rc->n;
  const int fault = ((const multi_arg *)arg)->fault, every = ((const multi_arg *)arg)->every;
  g_case_barrier = ((const multi_arg *)arg)->barrier;
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
  make_plan(R, fault, every, &g_plan);
  const buf_sizes z = plan_sizes(&g_plan);
  if (comm_config(&g_plan, fault, &cfg) == 0) {
    loom_result_t r = loom_comm_create(nccl, &cfg, &c.comm);
    CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_create: %s", rank, loom_last_error());
    if (r == LOOM_SUCCESS && host_alloc(&d, R, &z) == 0 && ctx_setup(&c, &z) == 0)
      run_world(&c, 1, R, fault, &g_plan, &d);
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
  ranks_barrier_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) {
    CHECK(0, "mmap of the rank barrier failed");
    return -1;
  }
  atomic_init(&b->arrived, 0);
  atomic_init(&b->generation, 0);
  multi_arg a = {fault, every, b};
  char what[32];
  snprintf(what, sizeof what, "n=%d%s", R, fault ? " fault" : "");
  const int rc = ranks_run(R, child_rank, &a, what);
  munmap(b, sizeof *b);
  return rc;
}

#define PROG "test_moe"
#define USAGE_OPTIONS                                                          \
  " [--every N] [--seed S] [--configs] [--real] [--special]\n"                 \
  "  --configs, --real, --special: run only those families (--special: the\n"  \
  "  determinism, graph, layouts, trace and fault cases); default: everything"

static int usage(void) { return ranks_usage(PROG, USAGE_OPTIONS); }

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (ranks_mode_parse(argc, argv, PROG, USAGE_OPTIONS, &g_mode) != 0) return RANKS_USAGE_EXIT;
  const int multi = g_mode == RANKS_MULTI;
  int every = multi ? MULTI_EVERY : 1, select = 0;
  for (int a = 2; a < argc; a++) {
    char *end = NULL;
    if (strcmp(argv[a], "--configs") == 0 || strcmp(argv[a], "--real") == 0 ||
        strcmp(argv[a], "--special") == 0) {
      select |= argv[a][2] == 'c' ? SEL_CONFIGS : argv[a][2] == 'r' ? SEL_REAL : SEL_SPECIAL;
      continue;
    }
    if (a + 1 >= argc) return usage();
    if (strcmp(argv[a], "--every") == 0)
      every = (int)strtol(argv[++a], &end, 10);
    else if (strcmp(argv[a], "--seed") == 0)
      g_seed = strtoull(argv[++a], &end, 0);
    else
      return usage();
    if (end == NULL || *end != '\0' || every < 1) return usage();
  }
  if (select != 0) g_select = select;
  char name[64];
  snprintf(name, sizeof name, "%s %s", PROG, RANKS_MODE_NAMES[g_mode]);
  watchdog_start(PROG);
  watchdog(CASE_DEADLINE_S, "counting GPUs");
  const int ngpu = ranks_mode_gpu_count(g_mode);
  if (ngpu == 0) {
    CHECK_SKIP("no GPU visible");
    return check_summary(name);
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  printf("%s: %d GPUs visible, seed 0x%" PRIx64
         ", every %d case(s), %ld CPU threads, running%s%s%s\n",
         name, ngpu, g_seed, every, ncpu, g_select & SEL_CONFIGS ? " configs" : "",
         g_select & SEL_REAL ? " real-sizes" : "",
         g_select & SEL_SPECIAL ? " determinism/graph/fault" : "");
  fflush(stdout);
  const int sizes[] = {1, 2, 4, 8};
  const double start = now_s();
  for (int s = g_mode == RANKS_LOOPBACK ? 1 : 0; s < 4; s++) {
    const int R = sizes[s];
    if (!ranks_world_fits(g_mode, R, ngpu)) {
      CHECK_SKIP("%d GPUs needed, %d visible", R, ngpu);
      continue;
    }
    long th = multi ? ncpu / R : ncpu;
    g_threads = (int)(th < 1 ? 1 : th > MAX_THREADS ? MAX_THREADS : th);
    for (int fault = 0; fault <= (R > 1 && (g_select & SEL_SPECIAL)); fault++) {
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
