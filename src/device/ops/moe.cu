/*
 * The distributed MoE layer forward as ONE persistent kernel per GPU.
 *
 * Every block runs the same five phases; the data dependencies between
 * ranks are flags in the symmetric window (moe.h documents every region
 * and slot), the ones inside a rank are two grid barriers and per-tile
 * counters. Every wait is bounded (transport.cuh).
 *
 *   1 gate      token tiles: logits (fp64 tensor cores), softmax, top-k;
 *               or caller routing. Per-tile expert counts. Then block
 *               G - 1 - d waits for rank d's credit (moe_credits). | barrier 1
 *   2 place     every block derives kept counts and its send offsets;
 *               each token tile places its assignments in token-major
 *               order (capacity drops the late ones); block G - 1 - d
 *               sends rank d its header: the kept counts of EVERY expert.
 *                                                               | barrier 2
 *   3 counts    every block waits for every source's header (all at
 *               once, a lane each) and derives
 *               the expert-major layout: where its rows go at each dest,
 *               where each source's rows sit here, the row tiles.
 *     dispatch  pieces of MOE_DSUB rows of one (local expert, dest),
 *               local-expert-major (the order every dest consumes them),
 *               from a ticket counter: a warp gathers the token rows, puts
 *               them into the destination's expert-major region and adds
 *               them to its tiles' ready counters. No waits. The Hopper
 *               variant does only the first pieces here (one a warp) and
 *               the rest on two warps of the producer warpgroup beside
 *               the GEMMs (phase_experts_hop).
 *   4 experts   tasks from a ticket counter: all GEMM0s, then all GEMM1s,
 *               each in row-tile order (a tile: 128 rows of one local
 *               expert, from every source; only an expert's last tile is
 *               partial): GEMM0 (rows x W1, activation) per output column
 *               block, after the tile's ready counter is full; GEMM1 (h x
 *               W2) after all GEMM0 tasks of the tile; GEMM1 rows go
 *               straight back into their source's window; the tile's last
 *               GEMM1 adds each source's rows to its back counter.
 *   5 combine   token tiles: wait until every (dest, expert) a choice went
 *               to has returned all its rows, then y = sum_j w_j * out_j in
 *               fp32, ascending j (deterministic).
 *
 * Two variants (moe_kernel's HOP): 384-thread blocks whose phase 4 runs on
 * the Hopper wgmma + TMA engine (phase_experts_hop; K-major weights on
 * bf16/fp16/TF32), and 256-thread blocks on the mma.sync engine
 * (phase_experts: IN_OUT weights, exact fp32). Phases 1-3 and 5 are the
 * same code for both.
 *
 * Trace (loom_moe_set_trace): with call.tr_events set, thread 0 of each
 * block records a slice per unit of work and per bounded wait that waited
 * (tr_open / tr_close below; docs/moe.md "Trace"); off, every site is one
 * branch on that NULL parameter.
 *
 * Deadlock freedom: phase 3 waits only for headers, sent before barrier 2
 * of each rank by blocks that never wait for anything but credits; a
 * dispatch piece, once a warp took its ticket, is copied without waiting
 * (by a resident block: cooperative launch); a GEMM0 waits only on the
 * pieces of some ranks; a GEMM1 only on GEMM0 tasks with smaller tickets, already
 * held by resident blocks (cooperative launch); phase 5 only on GEMM1s.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "../runtime/transport.cuh"
#include "../tile/gemm_tile.cuh"
#include "../tile/hopper_host.cuh" /* hopper.cuh and its tensor maps */
#include "moe.h"
#include "topk.cuh"

/* A probe build (-DMOE_HEAD_PROBE, not the default): the head's steps as
 * "wait stage task N" slices of the trace, every one recorded. */
#ifdef MOE_HEAD_PROBE
#undef LOOM_MOE_TRACE_MIN_WAIT_NS
#define LOOM_MOE_TRACE_MIN_WAIT_NS 0
#define HEAD_PROBE_OPEN(id) tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_STAGE, TR_NO_PEER, id, 0, 0)
#define HEAD_PROBE_CLOSE() tr_close(p, call, sh, TR_WAIT)
#else
#define HEAD_PROBE_OPEN(id) ((void)0)
#define HEAD_PROBE_CLOSE() ((void)0)
#endif

struct moe_cfg {
  static constexpr int threads = tile_cfg::threads;
  static constexpr int warps = threads / 32;
  static constexpr int blocks_per_sm = 1; /* the tile engine wants the SM's smem */
};
static_assert(LOOM_MOE_BM == tile_cfg::BM && LOOM_MOE_BN == tile_cfg::BN,
              "moe.h tile sizes are the tile engine's");
/* Rows a local expert may have for its call to run on a swapped decode
 * tile (moe_hop_consumer, moe_swap): its token rows are wgmma's N, 16 or
 * 32, one tile a kernel (moe_kernel's SW; loom_launch_moe picks the kernel) */
#define MOE_SWAP_ROWS 32
#define MOE_SWAP_BOX 16 /* rows of the row boxes a0s, a1s (make_maps); the 32-row tile loads two a stage */
#define MOE_SPLIT_MAX 4 /* K shares of a swapped GEMM1 task at most */
/* loom_launch_moe: the 32-row tile's kernel from this many rows an expert
 * on average (session 41: E = 64 k = 8 T = 128 at one rank, 16 rows, -3.8%) */
#define MOE_SWAP32_FROM 8

/* A block's trace state (loom.h "In-kernel trace"); only thread 0 touches
 * it. open[TR_WORK] is the open work slice, open[TR_WAIT] the open wait
 * (end_ns unset): tr_open fills everything the event names, so nothing
 * the event needs stays live in registers across the work it times. */
enum { TR_WORK = 0, TR_WAIT = 1 };
struct moe_trace_sh {
  __align__(16) loom_moe_trace_event_t ev[LOOM_MOE_TRACE_BATCH]; /* not yet reserved */
  loom_moe_trace_event_t open[2];
  int n; /* events in ev */
};
static_assert(sizeof(loom_moe_trace_event_t) == 32, "loom.h: a trace event is 32 bytes");

/* Shared state that lives across phases (static part; E <= 1024). */
struct moe_shared {
  int kept[LOOM_MOE_MAX_EXPERTS];   /* this source's kept rows per expert */
  int offs[LOOM_MOE_MAX_EXPERTS];   /* first row of expert e among the rows sent to its dest
                                       (source-major: the return region's order) */
  int work[LOOM_MOE_MAX_EXPERTS];   /* place: scratch per expert; from moe_counts on: eoff,
                                       expert e's first row in its dest's dispatch region */
  int rc[LOOM_MOE_MAX_EXPERTS];     /* [R][El] rows received from s for le, from headers */
  int roff[LOOM_MOE_MAX_EXPERTS];   /* [R][El] dispatch-region row of (s, le)'s first row */
  int soff[LOOM_MOE_MAX_EXPERTS];   /* [R][El] (s, le)'s first row among the rows s sent here */
  int tp[LOOM_MOE_MAX_EXPERTS + 1]; /* [El + 1] cumulative row tiles per local expert */
  char *ret_base[LOOM_MOE_MAX_RANKS]; /* [R] this rank's rows in source s's return region (ret_row) */
  int scan[32];                     /* block_scan's warp totals */
  int swap;                         /* moe_counts: this call's experts run on the swapped decode tile of
                                       this many rows (16, 32); 0: the 128 x 256 tile */
  moe_trace_sh tr;                  /* trace batch (tracing on only) */
  int value;                        /* broadcast slot */
};

/* A copy of v that the compiler cannot tie to v (an empty asm that "writes"
 * it), so nothing computed from it is hoisted out of a loop. Why: ptxas
 * compiles the Hopper consumers' region of moe_kernel within ~168
 * registers (R0-R165 in the SASS) although setmaxnreg gives it 232 (the
 * engine's own kernels use up to R205 there; found after this was
 * measured: the __trap() of the ring waits, since replaced by brkpt,
 * hop_mbar_wait; docs/moe.md sessions 11-12). With 128
 * accumulators live, values that LLVM hoisted out of the task loop (the
 * epilogue's per-lane column offsets, the "thread 0 traces" predicate)
 * were spilled and reloaded from local memory at every task, and those
 * reloads miss L1 beside the 200 KB ring
 * (ncu + trace: ~2 us between two GEMM tasks of an SM). Taking threadIdx.x
 * fresh where it is used (tr_open, tr_close) keeps them inside the loop:
 * 114 -> 59 local loads/stores in the consumers' SASS, the MoE forward
 * -1..-2% (1x H100, A/B in one lease). The copy still needs threadIdx.x
 * live across the loop (itself spilled: moe_hop_store's epilogue began with
 * its reload, session 44); ptx_tid_x reads the register where it is used. */
static __device__ __forceinline__ int moe_fresh(int v) {
  asm volatile("" : "+r"(v));
  return v;
}

/* ---- in-kernel trace -------------------------------------------------------------- */

/* Store event e at events[i] as two 16-byte stores. */
static __device__ __forceinline__ void trace_put(loom_moe_trace_event_t *events, unsigned long long i,
                                                 const loom_moe_trace_event_t &e) {
  const int4 *src = (const int4 *)&e;
  int4 *dst = (int4 *)&events[i];
  dst[0] = src[0];
  dst[1] = src[1];
}

/* Reserve room for the gathered events with one atomicAdd and store them;
 * those at or past the capacity are only counted (dropped). Thread 0.
 * Inline, as trace_close: an out-of-line call inside the tile engine's
 * consumer region caps that region's registers at the kernel's entry budget
 * (168), and the epilogue spilled. */
static __device__ __forceinline__ void trace_flush(moe_trace_sh *ts, loom_moe_trace_event_t *events,
                                                   long long capacity, unsigned long long *next) {
  const int n = ts->n;
  if (n == 0) return;
  const unsigned long long base = atomicAdd(next, (unsigned long long)n);
  for (int i = 0; i < n; i++)
    if (base + i < (unsigned long long)capacity) trace_put(events, base + i, ts->ev[i]);
  ts->n = 0;
}

/* Close the open slice `slot` now: gather it (a wait shorter than
 * LOOM_MOE_TRACE_MIN_WAIT_NS is forgotten), flush a full batch. Thread 0. */
static __device__ __forceinline__ void trace_close(moe_trace_sh *ts, int slot,
                                                   loom_moe_trace_event_t *events,
                                                   long long capacity, unsigned long long *next) {
  const uint64_t end = ptx_globaltimer_ns();
  const loom_moe_trace_event_t &o = ts->open[slot];
  if (o.kind >= LOOM_MOE_TRACE_FIRST_WAIT && end - o.start_ns < LOOM_MOE_TRACE_MIN_WAIT_NS) return;
  loom_moe_trace_event_t &e = ts->ev[ts->n];
  e = o;
  e.end_ns = end;
  e.sm = (uint16_t)ptx_smid();
  if (++ts->n == LOOM_MOE_TRACE_BATCH) trace_flush(ts, events, capacity, next);
}

/* Record sites. Off (tr_events NULL) each is one uniform branch on a
 * kernel parameter; every thread of the block may call them. */
static __device__ __forceinline__ void tr_open(const loom_moe_call &call, moe_shared &sh, int slot,
                                               int kind, int peer, int a, int b, int c) {
  if (call.tr_events != NULL && moe_fresh((int)threadIdx.x) == 0) {
    loom_moe_trace_event_t &o = sh.tr.open[slot];
    o.start_ns = ptx_globaltimer_ns();
    o.kind = (uint8_t)kind;
    o.peer = (uint8_t)peer;
    o.a = a;
    o.b = b;
    o.c = c;
  }
}

static __device__ __forceinline__ void tr_close(const loom_moe_params &p, const loom_moe_call &call,
                                                moe_shared &sh, int slot) {
  if (call.tr_events != NULL && moe_fresh((int)threadIdx.x) == 0)
    trace_close(&sh.tr, slot, call.tr_events, call.tr_capacity, &p.tr_state->next);
}

#define TR_NO_PEER LOOM_MOE_TRACE_NO_PEER

/* ---- element conversion ------------------------------------------------------ */

template <int DT> struct elem;
template <> struct elem<LOOM_FP32> {
  typedef float T;
  static __device__ __forceinline__ float load(const void *p, size_t i) { return ((const float *)p)[i]; }
  static __device__ __forceinline__ void load4(const void *p, size_t i, float o[4]) {
    const float4 v = *(const float4 *)((const float *)p + i);
    o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
  }
  static __device__ __forceinline__ T from(float f) { return f; }
};
template <> struct elem<LOOM_BF16> {
  typedef __nv_bfloat16 T;
  static __device__ __forceinline__ float load(const void *p, size_t i) {
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  }
  static __device__ __forceinline__ void load4(const void *p, size_t i, float o[4]) {
    const uint2 v = *(const uint2 *)((const __nv_bfloat16 *)p + i);
    const __nv_bfloat162 a = *(const __nv_bfloat162 *)&v.x, b = *(const __nv_bfloat162 *)&v.y;
    o[0] = __low2float(a); o[1] = __high2float(a); o[2] = __low2float(b); o[3] = __high2float(b);
  }
  static __device__ __forceinline__ T from(float f) { return __float2bfloat16_rn(f); }
};
template <> struct elem<LOOM_FP16> {
  typedef __half T;
  static __device__ __forceinline__ float load(const void *p, size_t i) {
    return __half2float(((const __half *)p)[i]);
  }
  static __device__ __forceinline__ void load4(const void *p, size_t i, float o[4]) {
    const uint2 v = *(const uint2 *)((const __half *)p + i);
    const __half2 a = *(const __half2 *)&v.x, b = *(const __half2 *)&v.y;
    o[0] = __low2float(a); o[1] = __high2float(a); o[2] = __low2float(b); o[3] = __high2float(b);
  }
  static __device__ __forceinline__ T from(float f) { return __float2half_rn(f); }
};

template <int MATH> struct math_dtype;
template <> struct math_dtype<TILE_BF16> { static constexpr int dt = LOOM_BF16; };
template <> struct math_dtype<TILE_FP16> { static constexpr int dt = LOOM_FP16; };
template <> struct math_dtype<TILE_TF32> { static constexpr int dt = LOOM_FP32; };
template <> struct math_dtype<TILE_FP32> { static constexpr int dt = LOOM_FP32; };

static __device__ __forceinline__ float act_apply(int act, float v) {
  switch (act) {
  case LOOM_ACT_RELU: return v > 0.f ? v : 0.f;
  case LOOM_ACT_GELU: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  /* SiLU (and SwiGLU's gate): v / (1 + 2^(-v log2 e)) with the flush-to-
   * zero SFU ops, five instructions an element. The GEMM0 epilogue runs
   * while the tensor cores wait, and SiLU there cost ~2.6 us a task
   * (session 19: GEMM0 slices 27.4 us against 24.9 with ReLU); __expf and
   * __fdividef each wrapped their SFU op in range fix-ups. Flushing only
   * moves results that are already at their limits: v > ~87 gives v, and a
   * denominator past 2^126 gives (-)0. (A plain '/' would carry an IEEE
   * slow-path subroutine call: inside the tile engine's consumer region
   * that caps its registers at the kernel's entry budget.) */
  default: return v * ptx_rcp_ftz(1.f + ptx_ex2_ftz(v * -1.44269504088896341f));
  }
}

/* ---- phase 1: gate ------------------------------------------------------------- */

/* Top-k and softmax weights of a warp's tokens of a tile: tokens a = warp
 * + i nwarps (i < GATE_TPW, a < n) of the tile starting at token t0, logits
 * lg[a * E + e] (floats in shared memory). Ranked in the gate's order
 * (topk.cuh: NaN lowest, ties to the lower index), so the k ids are always
 * distinct: each choice is a warp max over the lanes' best keys
 * (topk_key, lane l holds experts l + 32q) and a warp min over the tied
 * indices, the tokens' chains interleaved (one token at a time left the
 * warp waiting on shuffle and fp64 latency: ~5 us a 32-token tile at
 * E = 32, k = 2 and ~17 us at E = 128, k = 8 on an H100, session 18).
 * Then softmax weights with max = the first choice, in fp64, the chosen
 * ones added as one fixed-order warp sum. A token with a non-finite logit
 * gets NaN weights (loom.h). Writes ids / weights of token t0 + a, and the
 * ids to pick[a * K + j] (shared). */
#define GATE_TPW 4 /* tokens a warp at most: 32-token tiles, >= 8 warps */
static __device__ void gate_tokens(const loom_moe_params &p, const float *lg, int t0, int n, int warp,
                                   int nwarps, int lane, int *pick) {
  const int E = p.E, K = p.K;
  uint32_t taken[GATE_TPW]; /* bit q: expert lane + 32q chosen (E <= 1024) */
  int my_id[GATE_TPW];
  float my_val[GATE_TPW];
#pragma unroll
  for (int i = 0; i < GATE_TPW; i++) {
    taken[i] = 0;
    my_id[i] = 0;
    my_val[i] = 0.f;
  }
  /* The loops over a lane's experts stay rolled (unroll 1) here and below:
   * unrolled, with GATE_TPW tokens each, the function was ~3050
   * instructions (~48 KB) an inlined copy, and the gate's chunk loop
   * refetched its own code after it every tile (session 49). */
  for (int j = 0; j < K; j++) {
#pragma unroll
    for (int i = 0; i < GATE_TPW; i++) {
      const int a = warp + i * nwarps;
      if (a >= n) continue; /* warp-uniform, as below */
      unsigned best = 0u; /* no candidate */
      int besti = E;
#pragma unroll 1
      for (int e = lane, q = 0; e < E; e += 32, q++) {
        const unsigned k = topk_key(lg[a * E + e]);
        if (!(taken[i] >> q & 1u) && k > best) { best = k; besti = e; } /* ties: the lower q */
      }
      const unsigned top = __reduce_max_sync(0xffffffffu, best); /* >= 1: K <= E leaves one untaken */
      const int id = (int)__reduce_min_sync(0xffffffffu, best == top ? (unsigned)besti : 0xffffffffu);
      if ((id & 31) == lane) taken[i] |= 1u << (id >> 5);
      if (lane == j) {
        my_id[i] = id;
        my_val[i] = lg[a * E + id];
      }
    }
  }
  /* softmax weights, one token at a time (rolled: each fp64 exp and the
   * division once in the code, not GATE_TPW times); the scan over all of a
   * token's logits also finds a non-finite one (exp of it is harmless:
   * that token's weights are NaN) */
#pragma unroll 1
  for (int i = 0; i < GATE_TPW; i++) {
    const int a = warp + i * nwarps;
    if (a >= n) break; /* warp-uniform */
    uint32_t tk = taken[0];
    int id = my_id[0];
    float val = my_val[0];
#pragma unroll
    for (int r = 1; r < GATE_TPW; r++) /* selects: the arrays stay in registers */
      if (i == r) {
        tk = taken[r];
        id = my_id[r];
        val = my_val[r];
      }
    const double m = (double)__shfl_sync(0xffffffffu, val, 0);
    double rest = 0.0;
    int b = 0;
#pragma unroll 1
    for (int e = lane, q = 0; e < E; e += 32, q++) {
      const float v = lg[a * E + e];
      b |= !isfinite(v);
      if (!(tk >> q & 1u)) rest += exp((double)v - m);
    }
    const int bad = __any_sync(0xffffffffu, b);
    const double pj = lane < K ? exp((double)val - m) : 0.0;
    double sel = pj;
    for (int o = 16; o > 0; o >>= 1) {
      rest += __shfl_xor_sync(0xffffffffu, rest, o);
      sel += __shfl_xor_sync(0xffffffffu, sel, o);
    }
    if (lane < K) {
      const size_t t = (size_t)t0 + a;
      const double w = p.normalize ? pj / sel : pj / (rest + sel);
      p.ids[t * K + lane] = id;
      pick[a * K + lane] = id;
      p.wts[t * K + lane] = bad ? __int_as_float(0x7fc00000) : (float)w;
    }
  }
}

/* Eight consecutive elements of one row of x or wg, kept as loaded (16
 * bytes for 16-bit types, 32 for fp32: fewer registers than eight floats);
 * get(j) converts element j. */
template <int DT> struct vec8 {
  static constexpr int n = DT == LOOM_FP32 ? 2 : 1;
  uint4 v[n];
  __device__ __forceinline__ void load(const void *p, size_t i) {
    const uint4 *q = (const uint4 *)((const char *)p + i * (DT == LOOM_FP32 ? 4 : 2));
#pragma unroll
    for (int k = 0; k < n; k++) v[k] = q[k];
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int k = 0; k < n; k++) v[k] = make_uint4(0u, 0u, 0u, 0u);
  }
  __device__ __forceinline__ double get(int j) const {
    const uint32_t *w = (const uint32_t *)v;
    if (DT == LOOM_FP32) return (double)__uint_as_float(w[j]);
    const uint32_t bits = (w[j >> 1] >> (16 * (j & 1))) & 0xffffu;
    if (DT == LOOM_BF16) return (double)__uint_as_float(bits << 16);
    return (double)__half2float(__ushort_as_half((unsigned short)bits));
  }
  __device__ __forceinline__ void set(int j, uint32_t bits) { /* raw element bits */
    uint32_t *w = (uint32_t *)v;
    if (DT == LOOM_FP32) w[j] = bits;
    else w[j >> 1] = (w[j >> 1] & ~(0xffffu << (16 * (j & 1)))) | (bits << (16 * (j & 1)));
  }
};

/* Logits of the tile's tokens [t0, t1) (at most 32) for all experts, into
 * lg[(t - t0) * E + e], in fp64 on the tensor cores (mma m16n8k16 f64) and
 * rounded to float once. The products of two inputs are exact in fp64, so a
 * logit differs from the reference's fp64 sum (reference.h) only by the
 * rounding of partial sums, which the two orders may do differently: nothing
 * at all when every partial sum is exact (16-bit inputs of moderate range),
 * otherwise a few fp64 ulps, which move the fp32 logit only when it sits
 * within ~2^-29 of a rounding boundary (loom.h "Gate").
 *
 * Layout: the tile is 2 m16 blocks of tokens; experts go in passes of
 * GATE_EP (GATE_NB n8 blocks); every warp w of the block takes the
 * GATE_CHUNK-wide chunks of hidden h0 = 32w, 32w + 32 nw, ... (nw = warps of
 * the block). Inside a chunk lane l (g = l / 4, t = l % 4) loads eight
 * consecutive hidden values h0 + 8t + j (j < 8) of token rows g, g + 8,
 * g + 16, g + 24 and of experts e0 + 8n + g. A chunk is two k16 steps s; the
 * MMA's k index t + 4v of step s stands for hidden h0 + 8t + 4s + v (the
 * order of k inside a sum is free, both operands only need the same one),
 * which is exactly element 4s + v of what the lane loaded. Each warp's
 * 32 x GATE_EP partial goes to shared memory and the nw partials are summed
 * in warp order, so the result is a fixed function of the inputs and the
 * block size. Experts past E and tokens past t1 contribute zeros and are not
 * written.
 *
 * The stream: a block's gate work is a sequence of units (gate_seq), a
 * unit being one pass over one tile, and each warp streams the chunks of
 * all its units through its ring in that order, p.gate_depth ahead: the
 * next pass's and the next tile's first chunks load while this pass's last
 * ones are multiplied, its partials summed and the tile's top-k runs
 * (until session 18 every pass started with an empty ring).
 *
 * Speed: a DMMA m16n8k16 takes 16 clocks of an SM (8.3 us per 32 x 32 x
 * 2048, session 5), but a 16-expert pass of a 32-token tile takes ~8 us
 * against 4.1 us of DMMAs. Not the fp64 pipe: the same tiles on the
 * mma.sync variant's 8 warps a block take ~30% longer than on these 12
 * (session 42), so each warp's chain of loads, 48 conversions (F2F) and 8
 * DMMAs a chunk sets the pace, and every instruction a chunk counts (the
 * three integer divisions a chunk, gone in session 42, were ~30% of the
 * loop's instructions; the gate phase -7%; its per-chunk parameter
 * loads feeding the wait and the layout test, ~10% of its stall samples,
 * gone in session 48: -2 us). Not the F2Fs: x made by integer operations
 * instead (exact, bench/results/2026-12-03-s48/probe_x64.diff) ran the
 * gate 4% slower (session 48). Loading the
 * next chunk into registers before this chunk's MMAs spilled and was
 * slower (session 9). GATE_NB = 2 (16 experts a pass, half the
 * accumulators of 32) keeps the loop out of local memory under the
 * 384-thread kernel's 168-register cap; 32-expert passes that read their
 * operands from the ring just before the MMAs (no spill, a third fewer
 * conversions) were slower, 17.8 against 16.6 us a tile (session 18). */
#define GATE_CHUNK 32 /* hidden values per warp step: 4 lanes x 8 */
#define GATE_NB 2      /* n8 blocks of experts per pass (register budget) */
#define GATE_EP (8 * GATE_NB) /* experts per pass */
#define GATE_MAX_WARPS LOOM_MOE_GATE_PART_WARPS /* gate jobs' parts a unit: the largest block's warps */
#define GATE_FIN_PARTS 4 /* default blocks that finish a tile of gate jobs (loom_moe_params.gate_fin_parts) */
static_assert(LOOM_MOE_TT == 32 && LOOM_MOE_DIM_ALIGN % GATE_CHUNK == 0 && GATE_EP <= 32,
              "gate: 2 m16 blocks of tokens; hidden is whole chunks; a pass's partials fit");
/* The gate's dynamic shared memory (sized by plan_parts): the tile's
 * logits, the warps' partials of a pass (after the logits: a tile's
 * picks), then the warps' rings. */
static __host__ __device__ constexpr size_t gate_lg_bytes(int E) {
  return (((size_t)LOOM_MOE_TT * E + 3) & ~(size_t)3) * sizeof(float); /* 16-byte multiple */
}
static __host__ __device__ constexpr size_t gate_part_bytes(int warps) {
  return (size_t)warps * 32 * GATE_EP * sizeof(double);
}
/* The gate ring: each warp streams its chunks through its own ring of
 * p.gate_depth slots with cp.async, so gate_depth chunks are in flight per
 * warp and none of them sits in registers. A slot holds the 16-byte pieces
 * of one chunk in [piece][lane] order: x rows g, g + 8, g + 16, g + 24 of
 * the tile, then (OUT_IN weights) the pass's expert rows e0 + 8n + g; fp32
 * takes two pieces per vec8. A warp reads a piece as 512 contiguous bytes
 * (no bank conflict) and each lane reads only the pieces it copied itself,
 * so cp.async.wait_group is the only ordering needed. */
static __host__ __device__ constexpr int gate_slot_bytes(int es) {
  return (4 + GATE_NB) * (es == 4 ? 2 : 1) * 32 * 16;
}
static __host__ __device__ constexpr size_t gate_ring_bytes(int depth, int es) { /* one warp's */
  return (size_t)depth * gate_slot_bytes(es);
}
#define GATE_MAX_DEPTH 4
/* cp.async.wait_group takes an immediate: until at most n groups are pending */
static __device__ __forceinline__ void gate_wait_pending(int n) {
  /* tests on a register, the usual depth first (a switch became a jump
   * table read from constant memory every chunk) */
  if (n >= GATE_MAX_DEPTH - 1) cp_async_wait<GATE_MAX_DEPTH - 1>();
  else if (n == 2) cp_async_wait<2>();
  else if (n == 1) cp_async_wait<1>();
  else cp_async_wait<0>();
}
static_assert(GATE_MAX_DEPTH - 1 == 3, "gate_wait_pending covers 0 .. GATE_MAX_DEPTH - 1");

/* A block's gate units in order: tiles tile0 + k tstride (k < ntl, every
 * one < the call's tiles), each in passes pass0 .. pass0 + np - 1; unit
 * q = k np + (pass - pass0). A warp's chunk j of the stream is chunk
 * j % nc of unit j / nc (nc: the warp's chunks a unit). */
struct gate_seq {
  int tile0, tstride, ntl, pass0, np;
};

/* Where a chunk of a warp's stream sits: the k-th tile of the seq, its
 * pass (0 .. np - 1 after pass0) and the chunk of hidden in that unit
 * (0 .. nc - 1). The stream's issue cursor moves through these one chunk
 * at a time (gate_pos_next), so the loop below needs no division: the
 * positions and ring slots were j / nc, q / np and j % D until session 42,
 * three integer divisions a chunk, ~30% of the loop's instructions (ncu,
 * T = 16384). */
struct gate_pos {
  int k, pass, i;
};
static __device__ __forceinline__ void gate_pos_next(gate_pos &u, const gate_seq &s, int nc) {
  if (++u.i == nc) {
    u.i = 0;
    if (++u.pass == s.np) {
      u.pass = 0;
      u.k++;
    }
  }
}

/* The chunk at u of this warp's stream into ring slot `sl` (this lane's
 * 16-byte column of it) as one commit group; past the stream's end (or
 * for a warp without chunks, nc = 0) an empty group, so exactly D groups
 * are pending before each read. `vw` is the warp whose chunks of hidden
 * these are (this one, or in a gate job another warp's, phase_gate). */
template <int DT>
static __device__ __forceinline__ void gate_issue(const loom_moe_params &p, const void *x, int T,
                                                  const gate_seq &s, int vw, int nc, char *sl, const gate_pos &u) {
  constexpr int NV = vec8<DT>::n; /* 16-byte pieces per vec8 */
  if (nc > 0 && u.k < s.ntl) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int E = p.E, H = p.H;
    constexpr int es = DT == LOOM_FP32 ? 4 : 2;
    const int t0 = (s.tile0 + u.k * s.tstride) * LOOM_MOE_TT, t1 = min(T, t0 + LOOM_MOE_TT);
    const int e0 = (s.pass0 + u.pass) * GATE_EP;
    const int hl = vw * GATE_CHUNK + u.i * (int)(blockDim.x >> 5) * GATE_CHUNK + 8 * tq;
#pragma unroll
    for (int m = 0; m < 4; m++) {
      const int t = t0 + 8 * m + g; /* rows past t1: zeros, never read */
      const char *src = (const char *)x + ((size_t)(t < t1 ? t : t0) * H + hl) * es;
#pragma unroll
      for (int v = 0; v < NV; v++) cp_async16(sl + (m * NV + v) * 512, src + 16 * v, t < t1);
    }
    if (p.wlayout == LOOM_WEIGHTS_OUT_IN) { /* wg [E x H]: the eight are contiguous; experts past E: zeros */
#pragma unroll
      for (int n = 0; n < GATE_NB; n++) {
        const int e = e0 + 8 * n + g;
        const char *src = (const char *)p.wg + ((size_t)(e < E ? e : 0) * H + hl) * es;
#pragma unroll
        for (int v = 0; v < NV; v++) cp_async16(sl + ((4 + n) * NV + v) * 512, src + 16 * v, e < E);
      }
    }
  }
  cp_async_commit();
}

/* The first D chunks of this warp's stream (chunk j into slot j); and,
 * after its last unit, the wait for the (empty) groups still pending. */
template <int DT>
static __device__ __forceinline__ void gate_stream_begin(const loom_moe_params &p, const void *x, int T,
                                                         const gate_seq &s, int vw, int nc, char *ring) {
  constexpr int es = DT == LOOM_FP32 ? 4 : 2;
  gate_pos u = {0, 0, 0};
  for (int j = 0; j < p.gate_depth; j++) {
    gate_issue<DT>(p, x, T, s, vw, nc, ring + (size_t)j * gate_slot_bytes(es), u);
    if (nc > 0) gate_pos_next(u, s, nc);
  }
}
static __device__ __forceinline__ void gate_stream_end(void) { cp_async_wait<0>(); }

/* Warp vw's share of unit q of the stream s (its chunks of hidden h0 =
 * 32 vw + 32 nw i, i < nc, nw = the block's warps) as this warp's
 * accumulators acc[m16 block][n8 block][d fragment]: the partial of token
 * 16 mb + g + 8 (v / 2), expert e0 + 8 n + 2 t + v % 2 (g = lane / 4, t =
 * lane % 4). The chunks are in the ring or on their way
 * (gate_stream_begin, then this loop issues D chunks ahead, into the next
 * units). The same function of (unit, vw) whichever warp of whichever
 * block runs it: so the logits do not depend on who computed the parts. */
template <int DT, int GF>
static __device__ __forceinline__ void gate_warp_part(const loom_moe_params &p, const void *x, int T,
                                                      const gate_seq &s, int q, int vw, int nc, char *ring,
                                                      double (&acc)[2][GATE_NB][4]) {
  const int E = p.E;
  const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  /* the loop's tests on registers, not on parameters re-read every chunk
   * (ptx_keep_i32; for T that did not hold: gate_issue's bound is still a
   * parameter load, ptxas folded the move) */
  const int out_in = ptx_keep_i32(p.wlayout == LOOM_WEIGHTS_OUT_IN);
  constexpr int es = DT == LOOM_FP32 ? 4 : 2;
  constexpr int NV = vec8<DT>::n;
  const int D = ptx_keep_i32(p.gate_depth);
  T = ptx_keep_i32(T);
  const int k = q / s.np;
  const int t0 = (s.tile0 + k * s.tstride) * LOOM_MOE_TT, t1 = min(T, t0 + LOOM_MOE_TT);
  const int e0 = (s.pass0 + q - k * s.np) * GATE_EP;
  /* m16 blocks of tokens with a live row: a tile of <= 16 tokens (decode)
   * skips the second block's conversions and MMAs (its rows are zeros, and
   * the same sums result for the live rows) */
  const int mbs = t1 - t0 > 16 ? 2 : 1;
  /* IN_OUT weights (wg [H x E]): the eight are a column, gathered here */
  auto load_w_kn = [&](int hl, vec8<DT> *wv) {
#pragma unroll
    for (int n = 0; n < GATE_NB; n++) {
      const int e = e0 + 8 * n + g;
      wv[n].zero();
      if (e < E) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
          const size_t i = (size_t)(hl + j) * E + e;
          wv[n].set(j, DT == LOOM_FP32 ? ((const uint32_t *)p.wg)[i] : ((const uint16_t *)p.wg)[i]);
        }
      }
    }
  };
#pragma unroll
  for (int mb = 0; mb < 2; mb++)
#pragma unroll
    for (int n = 0; n < GATE_NB; n++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[mb][n][v] = 0.0;
  /* LOOM_GATE_FAST (GF, 16-bit inputs only): fp32 accumulators on the
   * 16-bit tensor cores, turned to fp64 after the loop */
  static_assert(!GF || DT != LOOM_FP32, "the fast gate is for bf16 / fp16 inputs");
  float accf[2][GATE_NB][4];
  if constexpr (GF) {
#pragma unroll
    for (int mb = 0; mb < 2; mb++)
#pragma unroll
      for (int n = 0; n < GATE_NB; n++)
#pragma unroll
        for (int v = 0; v < 4; v++) accf[mb][n][v] = 0.f;
  }
  /* chunk j = q nc + i is in slot j % D; the chunk issued after reading it,
   * j + D, goes to the same slot; u is that chunk's position */
  const int slot_bytes = gate_slot_bytes(es);
  char *const ring_end = ring + (size_t)D * slot_bytes;
  char *sl = ring + (size_t)((q * nc) % max(D, 1)) * slot_bytes;
  gate_pos u = {k, q - k * s.np, 0};
  if (nc > 0)
    for (int d = 0; d < D; d++) gate_pos_next(u, s, nc);
  for (int i = 0; i < nc; i++) {
    gate_wait_pending(D - 1); /* chunk q nc + i has landed */
    vec8<DT> xa[4], wb[GATE_NB];
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
      for (int v = 0; v < NV; v++) xa[m].v[v] = *(const uint4 *)(sl + (m * NV + v) * 512);
    if (out_in) {
#pragma unroll
      for (int n = 0; n < GATE_NB; n++)
#pragma unroll
        for (int v = 0; v < NV; v++) wb[n].v[v] = *(const uint4 *)(sl + ((4 + n) * NV + v) * 512);
    } else {
      load_w_kn(vw * GATE_CHUNK + i * nw * GATE_CHUNK + 8 * tq, wb);
    }
    if constexpr (GF) {
      /* m16n8k16: the words as loaded are the fragments. A lane holds
       * hidden 8t .. 8t + 7 of the chunk (t = lane % 4) of its rows of x
       * and of its experts' weights; step st gives the MMA values 4st,
       * 4st + 1 as its k = 2t, 2t + 1 and 4st + 2, 4st + 3 as k = 8 + 2t,
       * 9 + 2t: one permutation of hidden for both operands, so each MMA
       * sums 16 of the chunk's exact products (no conversions) */
#pragma unroll
      for (int st = 0; st < 2; st++)
#pragma unroll
        for (int mb = 0; mb < 2; mb++) {
          if (mb >= mbs) break;
          const uint32_t *r0 = (const uint32_t *)xa[2 * mb].v, *r1 = (const uint32_t *)xa[2 * mb + 1].v;
          const uint32_t a[4] = {r0[2 * st], r1[2 * st], r0[2 * st + 1], r1[2 * st + 1]};
#pragma unroll
          for (int n = 0; n < GATE_NB; n++) {
            const uint32_t *bw = (const uint32_t *)wb[n].v;
            mma_16816<DT == LOOM_BF16 ? TILE_BF16 : TILE_FP16>(accf[mb][n], a, bw[2 * st], bw[2 * st + 1]);
          }
        }
    } else
#pragma unroll
    for (int st = 0; st < 2; st++) {
      double b[GATE_NB][4];
#pragma unroll
      for (int n = 0; n < GATE_NB; n++)
#pragma unroll
        for (int v = 0; v < 4; v++) b[n][v] = wb[n].get(4 * st + v);
#pragma unroll
      for (int mb = 0; mb < 2; mb++) {
        if (mb >= mbs) break;
        double a[8]; /* a[v]: row g + 8 (v % 2) of block mb, k t + 4 (v / 2) */
#pragma unroll
        for (int v = 0; v < 8; v++) a[v] = xa[2 * mb + (v & 1)].get(4 * st + (v >> 1));
#pragma unroll
        for (int n = 0; n < GATE_NB; n++) ptx_dmma_m16n8k16(acc[mb][n], a, b[n]);
      }
    }
    /* the slot's pieces are in registers (the MMAs above consumed them):
     * refill it, D chunks ahead (the next unit's once this one's are out) */
    gate_issue<DT>(p, x, T, s, vw, nc, sl, u);
    gate_pos_next(u, s, nc);
    sl += slot_bytes;
    if (sl == ring_end) sl = ring;
  }
  if constexpr (GF)
#pragma unroll
    for (int mb = 0; mb < 2; mb++)
#pragma unroll
      for (int n = 0; n < GATE_NB; n++)
#pragma unroll
        for (int v = 0; v < 4; v++) acc[mb][n][v] = (double)accf[mb][n][v];
}

/* Chunks of hidden of warp vw's share of a unit (h0 = 32 vw + 32 nw i,
 * nw = the block's warps): gate_warp_part's nc. */
static __device__ __forceinline__ int gate_warp_chunks(int H, int vw, int nw) {
  return vw * GATE_CHUNK < H ? (H - vw * GATE_CHUNK + nw * GATE_CHUNK - 1) / (nw * GATE_CHUNK) : 0;
}

/* Where a warp's partial entry (m16 block mb, n8 block n, fragment v) sits
 * in a 32 x GATE_EP partial: [token][expert of the pass]. */
static __device__ __forceinline__ int gate_part_idx(int lane, int mb, int n, int v) {
  return (16 * mb + (lane >> 2) + 8 * (v >> 1)) * GATE_EP + 8 * n + 2 * (lane & 3) + (v & 1);
}

/* Unit q of the stream s: the logits of its tile's tokens [t0, t1) for
 * experts [e0, min(E, e0 + GATE_EP)), into lg[(t - t0) * E + e]: every warp
 * its part (gate_warp_part), then the parts summed in warp order. All
 * threads call it; red holds the warps' partials (gate_part_bytes). */
template <int DT, int GF>
static __device__ void gate_logits_unit(const loom_moe_params &p, const void *x, int T, const gate_seq &s,
                                        int q, int nc, char *ring, float *lg, double *red) {
  const int E = p.E;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int k = q / s.np;
  const int t0 = (s.tile0 + k * s.tstride) * LOOM_MOE_TT, t1 = min(T, t0 + LOOM_MOE_TT);
  const int e0 = (s.pass0 + q - k * s.np) * GATE_EP, e_hi = min(E, e0 + GATE_EP);
  double acc[2][GATE_NB][4];
  gate_warp_part<DT, GF>(p, x, T, s, q, warp, nc, ring, acc);
  /* this warp's partial (the previous unit's reads of red, and the tile's
   * picks, ended at their barriers) */
  double *mine = red + warp * 32 * GATE_EP;
#pragma unroll
  for (int mb = 0; mb < 2; mb++)
#pragma unroll
    for (int n = 0; n < GATE_NB; n++)
#pragma unroll
      for (int v = 0; v < 4; v++) mine[gate_part_idx(lane, mb, n, v)] = acc[mb][n][v];
  __syncthreads();
  for (int qq = threadIdx.x; qq < 32 * GATE_EP; qq += blockDim.x) {
    const int tk = qq / GATE_EP, e = e0 + qq % GATE_EP;
    if (t0 + tk < t1 && e < e_hi) {
      double v = red[qq];
      for (int w = 1; w < nw; w++) v += red[w * 32 * GATE_EP + qq];
      lg[tk * E + e] = (float)v;
    }
  }
  __syncthreads(); /* red is reused by the next unit, lg read by the tile's top-k */
}

static_assert(LOOM_MOE_TT <= GATE_TPW * moe_cfg::warps, "gate_tokens covers a tile's tokens");
static_assert(LOOM_MOE_TT * LOOM_MOE_MAX_TOPK * sizeof(int) <= gate_part_bytes(moe_cfg::warps),
              "a tile's picks fit in the gate's partials space");
/* Add one to the count of an (epoch << 32) | count word whose epoch is
 * `tag` (a word of an older epoch counts as 0); returns the count before.
 * Two atomics, no loop: the max lifts a stale word to tag | 0 (and leaves
 * this epoch's count alone), the add then counts from it. Same word, same
 * thread: the add is ordered after the max. (It was a CAS loop, under
 * which blocks that reach the word together retry one after another: at
 * T = 2048, E = 32, 128 blocks take a split-mode ticket at once.) */
static __device__ __forceinline__ uint32_t gate_count_add(unsigned long long *w, unsigned long long tag) {
  atomicMax(w, tag);
  return (uint32_t)(atomicAdd(w, 1ull) - tag);
}

/* The routing of tokens [t0, t1) of a tile: top-k and weights from their
 * logits in lg (shared memory, row 0 = token t0; NULL: the caller's
 * routing is in pick already), their per-expert counts into the tile's
 * (stored, or with `add` added to counts a gate job zeroed: a tile
 * finished in parts, gate_jobs), the caller's copy. All threads; ends at
 * a barrier. */
static __device__ void gate_finish_tokens(const loom_moe_params &p, const loom_moe_call &call, moe_shared &sh,
                                          int tile, int t0, int t1, const float *lg, int *pick, int add) {
  const int E = p.E, K = p.K;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  HEAD_PROBE_OPEN(103);
  if (lg != NULL) {
    gate_tokens(p, lg, t0, t1 - t0, warp, nwarps, lane, pick);
    __syncwarp();
  }
  __syncthreads();
  HEAD_PROBE_CLOSE();
  HEAD_PROBE_OPEN(104);
  /* per-tile expert counts (sh.work entries are read back by this block only) */
  for (int e = threadIdx.x; e < E; e += blockDim.x) sh.work[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < (t1 - t0) * K; i += blockDim.x)
    if (pick[i] >= 0) atomicAdd(&sh.work[pick[i]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (!add) p.tile_counts[(size_t)tile * E + e] = sh.work[e];
    else if (sh.work[e] != 0) atomicAdd(&p.tile_counts[(size_t)tile * E + e], sh.work[e]);
  if (call.ids_out != NULL)
    for (int i = t0 * K + threadIdx.x; i < t1 * K; i += blockDim.x) {
      call.ids_out[i] = pick[i - t0 * K];
      call.wts_out[i] = __ldcg(&p.wts[i]);
    }
  __syncthreads();
  HEAD_PROBE_CLOSE();
}

/* A tile's routing: top-k and weights from its logits in lg (shared
 * memory; NULL: the caller's routing is in pick already), the tile's
 * per-expert counts, the caller's copy. All threads; ends at a barrier. */
static __device__ void gate_finish_tile(const loom_moe_params &p, const loom_moe_call &call, moe_shared &sh,
                                        int tile, const float *lg, int *pick) {
  const int t0 = tile * LOOM_MOE_TT;
  gate_finish_tokens(p, call, sh, tile, t0, min(call.T, t0 + LOOM_MOE_TT), lg, pick, 0);
}

/* Blocks that finish each of a call's ntiles tiles of gate jobs (S): at
 * most p.gate_fin_parts, and G / ntiles >= 2 as ntiles <= G / 2 (phase_gate).
 * Finisher f = G - 1 - blockIdx.x < ntiles S takes tile f / S, its tokens'
 * part f % S (gate_jobs); the other blocks are idle at barrier 1 once their
 * jobs are done (moe_kernel). */
static __device__ __forceinline__ int gate_fin_shares(const loom_moe_params &p, int ntiles) {
  return max(1, min(p.gate_fin_parts, (int)gridDim.x / ntiles));
}

/* Gate jobs (few tiles: decode, small T; phase_gate says when). A job is
 * one warp's part of one unit (tile, pass of GATE_EP experts): job J =
 * unit * nw + vw computes what warp vw of a block running the unit would
 * (gate_warp_part), so nw times more pieces than units spread the fp64
 * work over the SMs (block b's warp r takes job b + G r). Each job stores
 * its partial in p.gate_part[J] (32 x GATE_EP doubles) and then its flag
 * p.gate_flag[J] = the call's epoch (release); the tile's job (pass 0,
 * warp 0) also zeroes the tile's counts before its flag. S = min(
 * p.gate_fin_parts, G / ntiles) blocks finish tile t (4 unless
 * LOOM_MOE_GATE_FIN_PARTS says otherwise), block G - 1 - (S t + s) a share
 * s of its tokens (8 of 32 at S = 4: one a warp), once their own jobs are done:
 * each waits (bounded) for the tile's npass x nw flags, sums its tokens'
 * parts in warp order, exactly as gate_logits_unit does in shared memory
 * (so the logits, and the routing, are the same whichever mode ran), then
 * top-k and weights, and adds its counts to the tile's
 * (gate_finish_tokens). Flags, not an arrival counter: the ~50 jobs of a
 * tile end at about the same time, and the split mode's counter, a CAS
 * loop then (gate_count_add is two atomics since session 53), took them one
 * round trip after another. In the trace a block's
 * jobs are one gate slice and each share of a tile's finish another (a
 * = the tile, b = its first token, c = the share's tokens). One block a
 * tile (session 35) took 14.7 us to finish it at T = 128 on an H200, four
 * shares 5.9 (session 36). A share of one token still takes ~5.4 us (T =
 * 1): the finish's code runs at the speed its instruction lines arrive
 * (ncu: most of the head's warp samples stall on "no instruction"), so
 * fewer tokens a block shortens it, a faster top-k did not (a warp sort,
 * session 36: level). Before session 35
 * the passes of a tile were units of whole blocks: at T = 128, E = 64
 * sixteen blocks ran the gate, its end 34.4 us into the kernel on an H200
 * (22.6 with the jobs). A failed wait raises the fault (barrier 1 then
 * fails). */
template <int DT, int GF>
static __device__ void gate_jobs(const loom_dev_comm &c, const loom_moe_params &p, const loom_moe_call &call,
                                moe_shared &sh, uint64_t epoch, int npass, int ntiles, float *lg_all,
                                int *pick, char *ring) {
  const int E = p.E, T = call.T, nunits = ntiles * npass;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int G = (int)gridDim.x;
  const int job = (int)blockIdx.x + G * warp;
  /* the block's jobs as one gate slice (its first job's tile) */
  const int busy = (int)blockIdx.x < nunits * nw; /* warp 0 has the block's first job */
  if (busy) {
    const int t0 = (int)blockIdx.x / nw / npass * LOOM_MOE_TT;
    tr_open(call, sh, TR_WORK, LOOM_MOE_TRACE_GATE, TR_NO_PEER, t0 / LOOM_MOE_TT, t0, min(T, t0 + LOOM_MOE_TT) - t0);
  }
  HEAD_PROBE_OPEN(100);
  if (job < nunits * nw) {
    const int u = job / nw, vw = job % nw, tile = u / npass, pass = u % npass;
    const int nc = gate_warp_chunks(p.H, vw, nw);
    const gate_seq one = {tile, 1, 1, pass, 1};
    gate_stream_begin<DT>(p, call.x, T, one, vw, nc, ring);
    double acc[2][GATE_NB][4];
    gate_warp_part<DT, GF>(p, call.x, T, one, 0, vw, nc, ring, acc);
    gate_stream_end();
    if (pass == 0 && vw == 0) /* the tile's counts, which its finishers add to after the flags */
      for (int e = lane; e < E; e += 32) p.tile_counts[(size_t)tile * E + e] = 0;
    double *dst = p.gate_part + (size_t)job * 32 * GATE_EP;
#pragma unroll
    for (int mb = 0; mb < 2; mb++)
#pragma unroll
      for (int n = 0; n < GATE_NB; n++)
#pragma unroll
        for (int v = 0; v < 4; v++) __stcg(&dst[gate_part_idx(lane, mb, n, v)], acc[mb][n][v]);
    __syncwarp();
    if (lane == 0) { /* the warp's part (ordered by __syncwarp, made cumulative by the fence) */
      __threadfence();
      ptx_st_release_gpu_u32(&p.gate_flag[job], (uint32_t)epoch);
    }
  }
  HEAD_PROBE_CLOSE();
  if (busy && call.tr_events != NULL) { /* block-uniform */
    __syncthreads(); /* every warp's job done */
    tr_close(p, call, sh, TR_WORK);
  }
  /* finisher f = G - 1 - blockIdx.x: tile f / S, its tokens' part f % S
   * (one token a warp at 8 a part, S = 4: gate_fin_shares) */
  const int S = gate_fin_shares(p, ntiles), fin = G - 1 - (int)blockIdx.x;
  if (fin >= ntiles * S) return; /* block-uniform */
  const int tile = fin / S, part = fin % S;
  const int tt0 = tile * LOOM_MOE_TT, tn = min(T, tt0 + LOOM_MOE_TT) - tt0;
  const int a0 = tn * part / S, a1 = tn * (part + 1) / S; /* tokens [tt0 + a0, tt0 + a1) */
  if (a1 == a0) return; /* (fewer tokens than parts) */
  HEAD_PROBE_OPEN(101);
  int ok = 1;
  if (warp == 0) { /* every part of the tile: its flags, a lane each (epochs only grow) */
    loom_wait_fail f;
    const uint32_t *flags = p.gate_flag + (size_t)tile * npass * nw;
    for (int i = lane; i < npass * nw && ok; i += 32)
      if (!loom_poll_local_geq(c, &flags[i], (uint32_t)epoch, LOOM_WAIT_TILE_DEP, tile, &f)) {
        loom_wait_settle(c, f);
        ok = 0;
      }
  }
  if (!__syncthreads_and(ok)) return;
  HEAD_PROBE_CLOSE();
  {
    const int n = a1 - a0;
    tr_open(call, sh, TR_WORK, LOOM_MOE_TRACE_GATE, TR_NO_PEER, tile, tt0, n);
    HEAD_PROBE_OPEN(102);
    /* logits: the parts of (tile, pass) summed in warp order, two experts a
     * thread (16-byte loads, all nw in flight) */
    const double *base = p.gate_part + (size_t)tile * npass * nw * 32 * GATE_EP;
    const int np2 = E / 2 + (E & 1), items = n * np2;
    for (int i0 = threadIdx.x; i0 < items; i0 += 2 * blockDim.x) { /* two items' loads in flight */
      double2 v[2][GATE_MAX_WARPS];
#pragma unroll
      for (int u = 0; u < 2; u++) {
        const int i = i0 + u * (int)blockDim.x, tk = a0 + i / np2, e = 2 * (i % np2);
        const double2 *pp = (const double2 *)(base + (size_t)(e / GATE_EP) * nw * 32 * GATE_EP + tk * GATE_EP +
                                              e % GATE_EP);
#pragma unroll
        for (int vw = 0; vw < GATE_MAX_WARPS; vw++)
          if (i < items && vw < nw) v[u][vw] = __ldcg(pp + (size_t)vw * 16 * GATE_EP);
      }
#pragma unroll
      for (int u = 0; u < 2; u++) {
        const int i = i0 + u * (int)blockDim.x, tk = a0 + i / np2, e = 2 * (i % np2);
        if (i >= items) break;
        double s0 = v[u][0].x, s1 = v[u][0].y;
#pragma unroll
        for (int vw = 1; vw < GATE_MAX_WARPS; vw++)
          if (vw < nw) {
            s0 += v[u][vw].x;
            s1 += v[u][vw].y;
          }
        lg_all[(tk - a0) * E + e] = (float)s0; /* row 0: token tt0 + a0 */
        if (e + 1 < E) lg_all[(tk - a0) * E + e + 1] = (float)s1;
      }
    }
    __syncthreads();
    HEAD_PROBE_CLOSE();
    gate_finish_tokens(p, call, sh, tile, tt0 + a0, tt0 + a1, lg_all, pick, 1);
    tr_close(p, call, sh, TR_WORK);
  }
}

template <int DT, int GF>
static __device__ int phase_gate(const loom_dev_comm &c, const loom_moe_params &p,
                                 const loom_moe_call &call, moe_shared &sh, uint64_t epoch,
                                 float *lg_all) {
  const int E = p.E, K = p.K, T = call.T;
  const int ntiles = (T + LOOM_MOE_TT - 1) / LOOM_MOE_TT;
  const int nwarps = blockDim.x >> 5, warp = threadIdx.x >> 5;
  /* dynamic shared memory: the tile's logits, the warps' partials (once
   * the logits are done, the tile's picks), the warps' rings */
  double *red = (double *)((char *)lg_all + gate_lg_bytes(E));
  int *pick = (int *)red; /* [(t - t0) * K + j] */
  constexpr int es = DT == LOOM_FP32 ? 4 : 2;
  char *ring = (char *)red + gate_part_bytes(nwarps) + (size_t)warp * gate_ring_bytes(p.gate_depth, es) + (threadIdx.x & 31) * 16;
  /* this warp's chunks of hidden a unit: h0 = 32 warp + 32 nwarps i */
  const int nc = gate_warp_chunks(p.H, warp, nwarps);
  /* Units of work. With at least a tile per block (or one pass, or caller
   * routing) a unit is a token tile, taken round-robin, its logits in
   * shared memory. Where that leaves blocks idle (decode, small T; `split`
   * below says when) the passes of GATE_EP experts of a tile are units of
   * their own (unit = tile * npass + pass), after the first taken from a
   * ticket counter: each writes its logits to gate_lg, and the block whose
   * pass arrives last on the tile's counter reads them back and finishes
   * the tile (top-k, counts); the ticket lets a block that finished a tile
   * take fewer passes (static round-robin left the finishers behind,
   * measured). With fewer units than half the blocks, each warp's part of
   * a unit is a job of its own (gate_jobs). Every way a logit is the same
   * function of its inputs (each warp's part by gate_warp_part, the parts
   * summed in warp order), so routing does not depend on T or the split.
   * Counter words are (epoch << 32) | count (gate_count_add): a count
   * left by a call that stopped halfway (abort) is stale by its epoch, not
   * added to. gate_cnt[0] is the ticket, gate_cnt[1 + tile] the arrivals.
   * The jobs' flags hold the epoch of their last call, so they too are
   * stale after an abort, never wrong. */
  const int npass = (E + GATE_EP - 1) / GATE_EP, G = (int)gridDim.x;
  const unsigned long long tag = (unsigned long long)(uint32_t)epoch << 32;
  const int jobs = call.ids_in == NULL && ntiles > 0 && 2 * ntiles * npass <= G &&
                   ntiles * npass <= p.gate_part_units;
  /* split where it at least halves the passes the busiest block runs
   * (T = 4096, E = 32: 2 passes a block either way, and the split's extra
   * finishing step made it slower, measured) */
  const int split = !jobs && call.ids_in == NULL && npass > 1 &&
                    2 * ((ntiles * npass + G - 1) / G) <= (ntiles + G - 1) / G * npass;
  const int nunits = jobs ? 0 : split ? ntiles * npass : ntiles;
  /* (a failed wait in the jobs raised the abort: barrier 1 fails everywhere) */
  if (jobs) gate_jobs<DT, GF>(c, p, call, sh, epoch, npass, ntiles, lg_all, pick, ring);
  /* idle at barrier 1 for a while: a block of gate jobs that finishes no
   * tile (gate_jobs' finishers are the last to arrive) */
  const int idle = p.warm_counts && jobs && G - 1 - (int)blockIdx.x >= ntiles * gate_fin_shares(p, ntiles);
  /* split: first unit blockIdx.x, then G + tickets (a ticket for every
   * block at once made 132 CAS loops fight over one word at the start,
   * ~20 us, measured when gate_count_add was a CAS loop) */
  /* without the split: one stream over the block's tiles and all their
   * passes (gate_seq), begun here */
  const gate_seq all = {(int)blockIdx.x, G, (int)blockIdx.x < ntiles ? (ntiles - 1 - (int)blockIdx.x) / G + 1 : 0,
                        0, npass};
  const int stream = call.ids_in == NULL && !split && !jobs;
  if (stream) gate_stream_begin<DT>(p, call.x, T, all, warp, nc, ring);
  for (int u = blockIdx.x, first = 1, k = 0; u < nunits; first = 0) {
    if (split && !first) { /* (the barriers: every thread read sh.value's last use;
                            * gate_logits_unit's barriers come before its next write) */
      __syncthreads();
      if (nunits <= G) break; /* every ticket would be past the last unit */
      if (threadIdx.x == 0) sh.value = G + (int)gate_count_add(&p.gate_cnt[0], tag);
      __syncthreads();
      u = sh.value;
      if (u >= nunits) break;
    }
    const int tile = split ? u / npass : u, pass = split ? u % npass : 0;
    const int t0 = tile * LOOM_MOE_TT, t1 = min(T, t0 + LOOM_MOE_TT);
    if (!split) u += G;
    tr_open(call, sh, TR_WORK, LOOM_MOE_TRACE_GATE, TR_NO_PEER, tile, t0, t1 - t0);
    if (call.ids_in == NULL) {
      if (!split) {
        for (int q = k * npass; q < (k + 1) * npass; q++)
          gate_logits_unit<DT, GF>(p, call.x, T, all, q, nc, ring, lg_all, red);
        k++;
      } else { /* a stream of this one unit */
        float *lgt = p.gate_lg + (size_t)tile * LOOM_MOE_TT * E;
        const gate_seq one = {tile, 1, 1, pass, 1};
        gate_stream_begin<DT>(p, call.x, T, one, warp, nc, ring);
        gate_logits_unit<DT, GF>(p, call.x, T, one, 0, nc, ring, lgt, red);
        gate_stream_end();
        /* (gate_logits_unit ends with a barrier: every logit of the pass is written) */
        if (threadIdx.x == 0) {
          __threadfence(); /* release: this pass's logits before the arrival */
          const int arrived = (int)gate_count_add(&p.gate_cnt[1 + tile], tag) + 1;
          __threadfence(); /* acquire: the other passes' logits after their arrivals */
          sh.value = arrived == npass;
        }
        __syncthreads();
        if (!sh.value) { /* another pass of the tile is still running: it finishes the tile */
          tr_close(p, call, sh, TR_WORK);
          continue;
        }
        /* the tile's logits back, 16 bytes a load, several in flight
         * (lgt is 16-byte aligned: 32 E floats a tile) */
        const int n = (t1 - t0) * E, n4 = n / 4;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) ((float4 *)lg_all)[i] = __ldcg((const float4 *)lgt + i);
        for (int i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) lg_all[i] = __ldcg(&lgt[i]);
        __syncthreads();
      }
      gate_finish_tile(p, call, sh, tile, lg_all, pick);
    } else {
      for (int i = t0 * K + threadIdx.x; i < t1 * K; i += blockDim.x) {
        int id = call.ids_in[i];
        int what = id < 0 || id >= E ? LOOM_WAIT_BAD_ROUTING : 0;
        for (int j = (i / K) * K; j < i && !what; j++)
          if (call.ids_in[j] == id) what = LOOM_WAIT_DUP_ROUTING;
        if (what) {
          LOOM_RAISE(c, LOOM_INVALID_ARGUMENT, c.rank, what, i, (uint64_t)(i / K),
                     (uint64_t)(int64_t)id, 0);
          id = -1; /* dropped below; the call reports the error */
        }
        p.ids[i] = id;
        p.wts[i] = call.wts_in[i];
        pick[i - t0 * K] = id;
      }
      gate_finish_tile(p, call, sh, tile, NULL, pick);
    }
    tr_close(p, call, sh, TR_WORK);
  }
  if (stream) gate_stream_end(); /* (its last groups are empty) */
  /* counters of phase 4 and the window's row counters, cleared before
   * barrier 1: no peer adds to ours before it has our header of this call,
   * sent after barrier 1 (moe.h) */
  const size_t gt = (size_t)blockIdx.x * blockDim.x + threadIdx.x, gn = (size_t)gridDim.x * blockDim.x;
  for (size_t i = gt; i < (size_t)p.NT; i += gn) {
    p.done0[i] = 0;
    p.done1[i] = 0;
  }
  for (size_t i = gt; i < (size_t)LOOM_MOE_SPLIT_PAIRS; i += gn) p.split_cnt[i] = 0;
  uint32_t *ready = (uint32_t *)loom_local_ptr(c, p.ready_off);
  uint32_t *back = (uint32_t *)loom_local_ptr(c, p.back_off);
  for (size_t i = gt; i < (size_t)p.NT; i += gn) ready[i] = 0;
  for (size_t i = gt; i < (size_t)p.R * p.El; i += gn) back[i] = 0;
  if (blockIdx.x == 0 && threadIdx.x < 2) p.ticket[threadIdx.x] = 0;
  return idle;
}

/* ---- phase 2: place ----------------------------------------------------------- */

static __device__ void seg_scan(int *a, int nseg, int len, int *scan);

/* The first destination whose header this block sends (phase_place) and
 * whose credit it waits for (moe_credits); then every G-th after it. */
static __device__ __forceinline__ int moe_hdr_dest0(void) { return (int)gridDim.x - 1 - (int)blockIdx.x; }

/* Before grid barrier 1: the credits of the previous call. This call's
 * first store into rank d's window is its header (phase_place), sent by
 * block G - 1 - d (and every G-th below it where G < R): that block first
 * waits until d has finished reading the previous call, whatever operator
 * it was (loom_block_wait_peer_ready). The last blocks have the fewest gate
 * tiles (round-robin), so the wait mostly hides behind the others' gate
 * work instead of lengthening place (until session 19 it ran in place,
 * between the tile positions and the header). Dispatch stores and GEMM1
 * returns come after grid barrier 2, so they are ordered after these waits
 * too. 0 after an abort (raised: barrier 1 then fails everywhere). */
static __device__ int moe_credits(const loom_dev_comm &c, const loom_moe_params &p,
                                  const loom_moe_call &call, moe_shared &sh, uint64_t epoch) {
  for (int d = moe_hdr_dest0(); d < p.R; d += (int)gridDim.x) {
    tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_CREDIT, d, 0, 0, 0);
    if (!loom_block_wait_peer_ready(c, d, epoch)) return 0;
    tr_close(p, call, sh, TR_WAIT);
  }
  return 1;
}

/* Rows an expert keeps of a source of T tokens: ceil(cf T K / E), or no
 * limit. The source has T K assignments, so a capacity of T K or more keeps
 * them all; clamping there keeps the conversion inside int (cf <= 1e6, T <=
 * 2^24: cf T K / E can reach ~2^48). */
static __device__ int capacity_of(const loom_moe_params &p, int T) {
  if (p.capacity_factor <= 0.0) return 0x7fffffff;
  const double c = ceil(p.capacity_factor * (double)T * p.K / p.E);
  return c >= (double)T * p.K ? 0x7fffffff : (int)c;
}

#define MOE_PLACE_BASE_BYTES 65536 /* <= every kernel's dynamic shared memory (plan_parts) */
/* place's dynamic shared memory: tile bases [group][E] in [0, PART_OFF),
 * then the slice sums [ns][E] (ns * E <= max(threads, E) <= MAX_EXPERTS) */
#define MOE_PLACE_PART_OFF (MOE_PLACE_BASE_BYTES - 4 * LOOM_MOE_MAX_EXPERTS)

/* First item of slice s when n items are cut into ns slices, in 32 bits:
 * s * n < 2^32 at every use (place: n tiles <= 2^19 since
 * max_tokens_per_rank <= 2^24, ns <= the block's threads; combine: n
 * 16-byte vectors of a row <= 2^14 since hidden <= 2^16, ns <= the grid).
 * A 64-bit division is an out-of-line subroutine of ~1.2 KB of code that
 * place's per-tile loop called cold every call. */
static __device__ __forceinline__ int slice_lo(int s, int ns, int n) {
  return (int)((unsigned)s * (unsigned)n / (unsigned)ns);
}

/* Expert e's token count over tiles [tl0, tl1), eight L2 loads in flight. */
static __device__ __forceinline__ int place_sum(const loom_moe_params &p, int e, int tl0, int tl1) {
  int sum = 0;
  for (int t = tl0; t < tl1; t += 8) {
    int v[8];
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] = t + u < tl1 ? __ldcg(&p.tile_counts[(size_t)(t + u) * p.E + e]) : 0;
#pragma unroll
    for (int u = 0; u < 8; u++) sum += v[u];
  }
  return sum;
}
static_assert(LOOM_MOE_TT * LOOM_MOE_MAX_TOPK <= LOOM_MOE_MAX_EXPERTS, "a tile's ids fit in sh.work");
static_assert(LOOM_MOE_TT <= 32, "phase_place: a tile's tokens are the bits of one word");
static __device__ void phase_place(const loom_dev_comm &c, const loom_moe_params &p,
                                   const loom_moe_call &call, moe_shared &sh, uint64_t epoch,
                                   int *base) {
  const int E = p.E, K = p.K, El = p.El, T = call.T;
  const int ntiles = (T + LOOM_MOE_TT - 1) / LOOM_MOE_TT;
  const int cap = capacity_of(p, T);
  const int bx = (int)blockIdx.x, gx = (int)gridDim.x;
  const int hd0 = moe_hdr_dest0();
  tr_open(call, sh, TR_WORK, LOOM_MOE_TRACE_PLACE, TR_NO_PEER,
          bx < ntiles ? (ntiles - 1 - bx) / gx + 1 : 0, hd0 < p.R ? (p.R - 1 - hd0) / gx + 1 : 0, 0);
  /* Per-expert counts of every token tile, summed in slices: thread (s, e)
   * adds expert e's counts of tiles [lo(s), lo(s+1)) with eight loads in
   * flight, all threads at once (a per-expert walk over all tiles was a
   * chain of ~ntiles / 8 L2 round trips per thread, ~45 us at 512 tiles).
   * Integer sums: the result does not depend on the split. */
  int *part = base + MOE_PLACE_PART_OFF / 4; /* [ns][E] */
  const int ns = max(1, min((int)blockDim.x / E, ntiles));
  HEAD_PROBE_OPEN(201);
  for (int idx = threadIdx.x; idx < ns * E; idx += blockDim.x) {
    const int sl = idx / E, e = idx % E;
    part[idx] = place_sum(p, e, slice_lo(sl, ns, ntiles), slice_lo(sl + 1, ns, ntiles));
  }
  __syncthreads();
  HEAD_PROBE_CLOSE();
  HEAD_PROBE_OPEN(202);
  /* totals per expert -> kept -> region offsets (every block, same result) */
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int tot = 0;
    for (int sl = 0; sl < ns; sl++) tot += part[sl * E + e];
    sh.kept[e] = min(tot, cap);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) sh.offs[e] = sh.kept[e];
  seg_scan(sh.offs, p.R, El, sh.scan); /* offs[d * El + le]: kept rows of (d, le' < le) */
  if (blockIdx.x == 0)
    for (int e = threadIdx.x; e < E; e += blockDim.x) p.kept[e] = sh.kept[e];
  HEAD_PROBE_CLOSE();
  HEAD_PROBE_OPEN(203);

  /* place this block's token tiles (tl = bx, bx + gx, ...) in token-major
   * order. Expert e's first position in tile tl is the sum of its counts in
   * the tiles before: the whole slices before tl's (part) plus tl's own
   * slice up to tl, one thread per (tile, expert), into `base` (dynamic
   * shared memory, MOE_PLACE_PART_OFF bytes: the gate's space, free now). */
  const int mine = bx < ntiles ? (ntiles - 1 - bx) / gx + 1 : 0;
  const int group = max(1, (int)(MOE_PLACE_PART_OFF / 4) / E); /* 32-bit (slice_lo) */
  for (int j0 = 0; j0 < mine; j0 += group) {
    const int j1 = min(mine, j0 + group);
    for (int idx = threadIdx.x; idx < (j1 - j0) * E; idx += blockDim.x) {
      const int e = idx % E, tl = bx + (j0 + idx / E) * gx;
      int sl = 0, run = 0;
      while (slice_lo(sl + 1, ns, ntiles) <= tl) run += part[sl++ * E + e];
      base[idx] = run + place_sum(p, e, slice_lo(sl, ns, ntiles), tl);
    }
    __syncthreads();
    for (int j = j0; j < j1; j++) {
      const int tile = bx + j * gx;
      const int t0 = tile * LOOM_MOE_TT, t1 = min(T, t0 + LOOM_MOE_TT);
      /* the tile's ids into shared memory by all threads at once: thread 0's
       * walk below is then a chain of shared, not L2, loads */
      const int n = (t1 - t0) * K;
      uint32_t *chose = (uint32_t *)sh.rc; /* [E] the tile's tokens that chose e (free until moe_counts) */
      for (int e = threadIdx.x; e < E; e += blockDim.x) chose[e] = 0u;
      for (int i = threadIdx.x; i < n; i += blockDim.x) sh.work[i] = __ldcg(&p.ids[(size_t)t0 * K + i]);
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (sh.work[i] >= 0) atomicOr(&chose[sh.work[i]], 1u << (i / K));
      __syncthreads();
      /* assignment i's position among expert e's: the tile's base for e
       * plus the assignments before i in the tile that chose e (token-major
       * order). A token's ids are distinct (the gate's; the caller's
       * repeats were dropped in phase_gate), so those are the tile's
       * tokens before i's that chose e: one popcount (until session 35 a
       * walk over the i assignments before, up to 255 shared loads at k =
       * 8). LOOM_MOE_TT = 32 tokens: one bit each. */
      const int *first = base + (j - j0) * E;
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int e = sh.work[i];
        int row = -1;
        if (e >= 0) {
          const int pos = first[e] + __popc(chose[e] & ((1u << (i / K)) - 1u));
          if (pos < cap) {
            row = sh.offs[e] + pos;
            p.row_token[(size_t)(e / El) * p.Cs + row] = t0 + i / K;
          }
        }
        p.dest_row[(size_t)t0 * K + i] = row;
      }
      __syncthreads(); /* sh.work is refilled for the next tile */
    }
  }
  HEAD_PROBE_CLOSE();

  /* header for destination d: kept rows of every expert, config hash,
   * call number (padded). The header is this call's first store into d's
   * window; this block waited for d's credit before grid barrier 1
   * (moe_credits). */
  for (int d = hd0; d < p.R; d += gx) {
    int32_t *hdr = (int32_t *)loom_peer_ptr(c, d, p.hdr_off + (size_t)(epoch & 1) * p.hdr_parity_bytes +
                                                      (size_t)c.rank * p.hdr_stride);
    for (int i = threadIdx.x; i < (int)(p.hdr_stride / 4); i += blockDim.x)
      hdr[i] = i < E ? sh.kept[i]
               : i == E ? (int32_t)p.cfg_hash
               : i == E + 1 ? (int32_t)(uint32_t)epoch : 0;
    __syncthreads();
    if (threadIdx.x == 0) loom_signal(c, d, 0, epoch);
  }
  tr_close(p, call, sh, TR_WORK);
}

/* ---- phase 3a: counts ------------------------------------------------------------ */

/* Inclusive prefix sum of x over the warp's lanes (all 32 call it). */
static __device__ __forceinline__ int warp_incl_sum(int x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  return x;
}

/* Exclusive prefix sums of nseg segments of len ints each (a[seg * len +
 * i]), in place. Short segments: a warp each, two elements a lane, one
 * shuffle scan (a thread walking a segment was a chain of shared-memory
 * round trips: ~1.5 us at len = 64, three of them per call in moe_counts,
 * session 19); long ones (then few): one block-wide scan per segment
 * (chunk per thread, warp shuffles). All threads; blockDim.x a multiple of
 * 32. */
static __device__ void seg_scan(int *a, int nseg, int len, int *scan) {
  if (len <= 64) {
    __syncthreads();
    const int lane = threadIdx.x & 31, i0 = 2 * lane;
    for (int g = (int)threadIdx.x >> 5; g < nseg; g += (int)blockDim.x >> 5) {
      int *v = a + g * len;
      const int x0 = i0 < len ? v[i0] : 0, x1 = i0 + 1 < len ? v[i0 + 1] : 0;
      const int x = warp_incl_sum(x0 + x1); /* inclusive over the lanes' pairs */
      const int before = x - x0 - x1;
      if (i0 < len) v[i0] = before;
      if (i0 + 1 < len) v[i0 + 1] = before + x0;
    }
    __syncthreads();
    return;
  }
  const int nt = blockDim.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (len + nt - 1) / nt;
  for (int g = 0; g < nseg; g++) {
    int *v = a + g * len;
    __syncthreads();
    const int lo = min(len, (int)threadIdx.x * per), hi = min(len, lo + per);
    int sum = 0;
    for (int i = lo; i < hi; i++) sum += v[i];
    const int x = warp_incl_sum(sum);
    if (lane == 31) scan[warp] = x;
    __syncthreads();
    if (warp == 0) {
      scan[lane] = warp_incl_sum(lane < nt / 32 ? scan[lane] : 0); /* inclusive over warps */
    }
    __syncthreads();
    int run = x - sum + (warp > 0 ? scan[warp - 1] : 0);
    for (int i = lo; i < hi; i++) {
      const int t = v[i];
      v[i] = run;
      run += t;
    }
  }
  __syncthreads();
}

/* After grid barrier 2 (every header of this call sent), in every block:
 * every source's header (checked against this layer's config and call
 * number), then from the count matrix
 *   sh.work[e]   eoff: this rank's first row of expert e in its dest's
 *                dispatch region = base_d(le) + rows of sources < me
 *   sh.rc, sh.roff, sh.soff  per (source, local expert) of this rank
 *   sh.tp[le]    first row tile of local expert le in task order; tp[El] all
 * and the stats. 0 after a raised error. Dispatch stores come after this,
 * so after every source's header, and after the credit waits before grid
 * barrier 1 (moe_credits). GEMM1 rows go back into source s's window
 * later: the reuse rule for s was met there too. */
/* Word i of source s's header of this call in our window (moe.h: the kept
 * rows of expert i < E, then the config hash and the call number). Written
 * by s during this call, read after its signal: volatile, not cached. */
static __device__ __forceinline__ int32_t moe_hdr(const loom_dev_comm &c, const loom_moe_params &p,
                                                  uint64_t epoch, int s, int i) {
  const size_t off = p.hdr_off + (size_t)(epoch & 1) * p.hdr_parity_bytes + (size_t)s * p.hdr_stride;
  return ((volatile const int32_t *)loom_local_ptr(c, off))[i];
}

static __device__ int moe_counts(const loom_dev_comm &c, const loom_moe_params &p,
                                 const loom_moe_call &call, moe_shared &sh, uint64_t epoch, int sw,
                                 int dry) {
  /* dry (moe_kernel, before barrier 1): no waits, checks, trace or stats;
   * the headers read may hold anything (an earlier call's, another
   * operator's bytes, a peer's half-written one), which is harmless: every
   * loop bound here is a parameter and every index an expert, local
   * expert or rank, and the results are dropped */
  const int El = p.El, R = p.R, E = p.E, me = c.rank;
  /* Every source's header at once: lane l of warp 0 waits for sources l,
   * l + 32, ... (signal and call tag), then checks each header's config
   * hash and call number. One source after another was ~3 dependent round
   * trips each (the signal, the tag, the two words): ~11 us at R = 4
   * (session 19 trace). The wait slice names the source that came last. */
  if (!dry) tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_HEADER, TR_NO_PEER, 0, 0, 0);
  const int traced = call.tr_events != NULL && !dry;
  const uint64_t w0 = traced ? ptx_globaltimer_ns() : 0;
  int bad = 0;
  uint32_t done = 0; /* traced: 1 + ns from w0 until this lane's latest source was checked */
  int last = 0;      /* ... and that source */
  if (threadIdx.x < 32 && !dry)
    for (int s = (int)threadIdx.x; s < R && !bad; s += 32) {
      if (!loom_wait_signal(c, s, 0, epoch)) {
        bad = 1;
        continue; /* (ends the loop) */
      }
      const uint32_t theirs = (uint32_t)moe_hdr(c, p, epoch, s, E);
      const uint32_t call_no = (uint32_t)moe_hdr(c, p, epoch, s, E + 1);
      if (theirs != p.cfg_hash) {
        bad = 1;
        LOOM_RAISE(c, LOOM_INVALID_ARGUMENT, s, LOOM_WAIT_CONFIG_MISMATCH, 0, p.cfg_hash, theirs, 0);
      } else if (call_no != (uint32_t)epoch) {
        bad = 1;
        LOOM_RAISE(c, LOOM_INVALID_USAGE, s, LOOM_WAIT_CALL_MISMATCH, 0,
                   loom_call_tag((uint32_t)epoch, c.op), loom_call_tag(call_no, c.op), 0);
      }
      if (traced) {
        done = (uint32_t)min(ptx_globaltimer_ns() - w0, (uint64_t)0xfffffffeu) + 1u;
        last = s;
      }
    }
  if (traced && threadIdx.x < 32) { /* the last source to arrive, for the trace */
    const uint32_t most = __reduce_max_sync(0xffffffffu, done);
    const uint32_t who = __reduce_min_sync(0xffffffffu, done == most ? (uint32_t)last : 0xffffffffu);
    if (threadIdx.x == 0) sh.tr.open[TR_WAIT].peer = (uint8_t)who;
  }
  if (__syncthreads_or(bad)) return 0;
  if (!dry) tr_close(p, call, sh, TR_WAIT);
  /* sender side: per expert e, all sources' rows (roundup to the tile:
   * experts start on 128-row boundaries) into roff (scratch here), rows of
   * sources before this one into work */
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int tot = 0, pre = 0;
    for (int s = 0; s < R; s++) {
      const int v = moe_hdr(c, p, epoch, s, e);
      tot += v;
      pre += s < me ? v : 0;
    }
    sh.roff[e] = (tot + LOOM_MOE_BM - 1) / LOOM_MOE_BM * LOOM_MOE_BM;
    sh.work[e] = pre;
  }
  seg_scan(sh.roff, R, El, sh.scan); /* roff[d * El + le] = base_d(le) */
  for (int e = threadIdx.x; e < E; e += blockDim.x) sh.work[e] += sh.roff[e];
  __syncthreads();
  /* receiver side: rows from (s, le), their first row in the region and
   * among the rows s sent here; tiles per local expert */
  for (int i = threadIdx.x; i < R * El; i += blockDim.x) {
    const int s = i / El, le = i % El;
    const int v = moe_hdr(c, p, epoch, s, me * El + le);
    sh.rc[i] = v;
    sh.soff[i] = v;
  }
  for (int s = threadIdx.x; s < R; s += blockDim.x)
    sh.ret_base[s] = loom_peer_ptr(c, s, p.ret_off + (size_t)me * p.Cs * p.row_bytes);
  __syncthreads();
  /* base_me(le) is roff[me * El + le] of the sender-side scan: keep it in tp */
  for (int le = threadIdx.x; le < El; le += blockDim.x) sh.tp[le] = sh.roff[me * El + le];
  __syncthreads();
  int most = 0; /* the most rows a local expert of this thread has */
  for (int le = threadIdx.x; le < El; le += blockDim.x) {
    int run = sh.tp[le];
    for (int s = 0; s < R; s++) {
      sh.roff[s * El + le] = run;
      run += sh.rc[s * El + le];
    }
    most = max(most, run - sh.tp[le]);
    sh.tp[le] = (run - sh.tp[le] + LOOM_MOE_BM - 1) / LOOM_MOE_BM; /* tiles of le */
  }
  /* the kernel's swapped tile (sw rows: moe_kernel's SW) where every local
   * expert has at most sw rows and p.swap */
  const int swap = __syncthreads_or(most > sw) == 0 && p.swap ? sw : 0;
  if (threadIdx.x == 0) sh.swap = swap;
  seg_scan(sh.soff, R, El, sh.scan);
  /* tp[El], all tiles: the scan's last prefix plus the last expert's own
   * (one thread adding El counts was a chain of El shared loads) */
  const int last_tiles = sh.tp[El - 1];
  seg_scan(sh.tp, 1, El, sh.scan);
  if (threadIdx.x == 0) sh.tp[El] = sh.tp[El - 1] + last_tiles;
  if (blockIdx.x == 0 && call.stats != NULL && !dry) {
    /* rows and bytes, from what this rank sent and received */
    for (int r = threadIdx.x; r < LOOM_MOE_MAX_RANKS; r += blockDim.x) {
      int64_t sent = 0, recv = 0;
      if (r < R)
        for (int le = 0; le < El; le++) {
          sent += sh.kept[r * El + le];
          recv += sh.rc[r * El + le];
        }
      call.stats->rows_sent[r] = sent;
      call.stats->rows_received[r] = recv;
    }
    if (threadIdx.x == 0) {
      int64_t all = 0, remote = 0, kept = 0;
      for (int r = 0; r < R; r++)
        for (int le = 0; le < El; le++) {
          const int64_t rows = sh.kept[r * El + le] + sh.rc[r * El + le];
          kept += sh.kept[r * El + le];
          all += rows * (int64_t)p.row_bytes + (le == 0 ? (int64_t)p.hdr_stride : 0);
          if (r != me) remote += rows * (int64_t)p.row_bytes + (le == 0 ? (int64_t)p.hdr_stride : 0);
        }
      call.stats->rows_dropped = (int64_t)call.T * p.K - kept;
      call.stats->bytes_sent = all;
      call.stats->bytes_remote = remote;
    }
  }
  __syncthreads();
  return 1;
}

/* ---- phase 3: dispatch --------------------------------------------------------- */

/* The rows this rank sends are cut into pieces of at most MOE_DSUB rows of
 * one (local expert le, destination d), numbered le-major: le = 0 to every
 * destination (peers from rank + 1 on, this rank last), then le = 1, ...
 * Every destination lays its rows out expert-major and takes its GEMM0
 * tasks in that order, so the pieces go out in the order they are
 * consumed, and each source's first pieces fill every destination's first
 * tiles. A warp copies a piece at a time (moe_dispatch_warp: a static
 * share, then a ticket counter, p.ticket[1]), so the first tiles are ready
 * after a few pieces, not after a block's whole share. */
#define MOE_DSUB 8 /* rows a piece: one row token per lane of lanes 0..7 */

/* A dispatch slice written straight to the trace buffer (the pieces run on
 * several warps of a block at once, beside its thread 0's slices). Lane 0. */
static __device__ __forceinline__ void tr_piece(const loom_moe_params &p, const loom_moe_call &call,
                                                uint64_t start, int d, int le, int r0, int rows) {
  const unsigned long long i = atomicAdd(&p.tr_state->next, 1ull);
  if (i >= (unsigned long long)call.tr_capacity) return; /* counted as dropped */
  loom_moe_trace_event_t e;
  e.start_ns = start;
  e.end_ns = ptx_globaltimer_ns();
  e.sm = (uint16_t)ptx_smid();
  e.kind = LOOM_MOE_TRACE_DISPATCH;
  e.peer = (uint8_t)d;
  e.a = le;
  e.b = r0;
  e.c = rows;
  trace_put(call.tr_events, i, e);
}

/* The i-th destination of a local expert's dispatch pieces (pieces are
 * numbered le-major, then in this order). p.local_first (moe_decode):
 * this rank first, then rank - 1, rank - 2, ... (mod R), so a destination
 * d receives from d + 1 first, then d + 2, ...: the order in which its
 * expert tasks take the sources' rows after its own. Otherwise rank + 1,
 * rank + 2, ..., this rank last (until session 18). */
static __device__ __forceinline__ int moe_dest(const loom_dev_comm &c, const loom_moe_params &p, int i) {
  /* i < R: one wrap at most, no division (the dispatch's piece walk calls
   * this once per (le, i) it passes: a division each was most of the walk) */
  if (p.local_first) {
    const int d = c.rank - i;
    return d < 0 ? d + p.R : d;
  }
  const int d = c.rank + 1 + i;
  return d >= p.R ? d - p.R : d;
}

/* One warp copies pieces. Static (dyn 0): pieces gw, gw + nw, ... below
 * `first_dyn` (gw = warp * gridDim.x + block, nw: the grid's warps);
 * dynamic (dyn 1): tickets first_dyn + p.ticket[1]++ until the pieces run
 * out. U: 16-byte vectors in flight per lane (the producer warpgroup's
 * warps run at MOE_PRODUCER_REGS registers: U = MOE_BG_U there). The
 * warp's cursor only moves forward: its pieces grow. */
template <int U>
static __device__ void moe_dispatch_warp(const loom_dev_comm &c, const loom_moe_params &p,
                                         const loom_moe_call &call, const moe_shared &sh, int first_dyn,
                                         int dyn) {
  const int lane = threadIdx.x & 31, R = p.R, El = p.El;
  const int vpr = (int)(p.row_bytes / 16);
  const int nw = (int)(gridDim.x * (blockDim.x >> 5));
  /* the cursor: entry idx = le R + i of the (local expert le, i-th
   * destination) order, whose pieces are [first, first + n) */
  int idx = 0, first = 0;
  for (int k = 0;; k++) {
    int tk;
    if (dyn) {
      tk = 0;
      if (lane == 0) tk = first_dyn + (int)atomicAdd(&p.ticket[1], 1u);
      tk = __shfl_sync(0xffffffffu, tk, 0);
    } else {
      tk = (int)((threadIdx.x >> 5) * gridDim.x + blockIdx.x) + k * nw; /* neighbours on other SMs */
      if (tk >= first_dyn) return;
    }
    /* the entry holding piece tk, 32 entries a step: lane l counts entry
     * idx + l's pieces, a warp scan finds the first whose pieces reach past
     * tk (one entry at a time was a chain of ~100 clocks an entry: at
     * decode, where most experts send nothing, the eighth piece of E = 64
     * started ~4 us after the first) */
    for (;;) {
      if (idx >= El * R) return; /* past the last piece */
      const int my = idx + lane;
      int n = 0;
      if (my < El * R) {
        const int mle = my / R;
        n = (sh.kept[moe_dest(c, p, my - mle * R) * El + mle] + MOE_DSUB - 1) / MOE_DSUB;
      }
      const int incl = warp_incl_sum(n);
      const unsigned hit = __ballot_sync(0xffffffffu, first + incl > tk);
      if (hit != 0u) {
        const int L = __ffs(hit) - 1;
        first += __shfl_sync(0xffffffffu, incl - n, L);
        idx += L;
        break;
      }
      first += __shfl_sync(0xffffffffu, incl, 31);
      idx += 32;
    }
    const int le = idx / R, d = moe_dest(c, p, idx - le * R), e = d * El + le;
    const uint64_t start = call.tr_events != NULL ? ptx_globaltimer_ns() : 0;
    const int r0 = (tk - first) * MOE_DSUB, rows = min(sh.kept[e] - r0, MOE_DSUB);
    const int tok = lane < rows ? __ldcg(&p.row_token[(size_t)d * p.Cs + sh.offs[e] + r0 + lane]) : 0;
    /* rows [r0, r0 + rows) of (d, le) go to d's expert-major region at eoff */
    char *dst0 = loom_peer_ptr(c, d, p.disp_off + (size_t)(sh.work[e] + r0) * p.row_bytes);
    for (int r = 0; r < rows; r++) { /* uniform: every lane takes part in the shuffle */
      const int t = __shfl_sync(0xffffffffu, tok, r);
      const int4 *src = (const int4 *)((const char *)call.x + (size_t)t * p.row_bytes);
      int4 *dst = (int4 *)(dst0 + (size_t)r * p.row_bytes);
      /* U loads per lane before their stores: a load-store pair per vector
       * was one round trip per 512 bytes of a warp */
      for (int v0 = lane; v0 < vpr; v0 += 32 * U) {
        int4 buf[U];
#pragma unroll
        for (int u = 0; u < U; u++)
          if (v0 + 32 * u < vpr) buf[u] = __ldg(src + v0 + 32 * u);
#pragma unroll
        for (int u = 0; u < U; u++)
          if (v0 + 32 * u < vpr) dst[v0 + 32 * u] = buf[u];
      }
    }
    /* the warp's stores before lane 0's release (cumulative): the rows
     * land in one or two of d's 128-row tiles, count them there */
    __syncwarp();
    if (lane == 0) {
      uint32_t *ready = (uint32_t *)loom_peer_ptr(c, d, p.ready_off);
      const int a = sh.work[e] + r0, b = a + rows;
      const int split = min(b, (a / LOOM_MOE_BM + 1) * LOOM_MOE_BM);
      loom_count_add(&ready[a / LOOM_MOE_BM], (uint32_t)(split - a));
      if (split < b) loom_count_add(&ready[split / LOOM_MOE_BM], (uint32_t)(b - split));
      if (call.tr_events != NULL) tr_piece(p, call, start, d, le, r0, rows);
    }
  }
}

/* Every warp of the block copies pieces: all of them (fg < 0: the
 * mma.sync variant, from the ticket counter), or the first fg, statically
 * over the grid's warps (the Hopper variant, whose producer warpgroup
 * takes the rest from the counter beside the GEMMs). */
static __device__ void phase_dispatch(const loom_dev_comm &c, const loom_moe_params &p,
                                      const loom_moe_call &call, const moe_shared &sh, int fg) {
  if (fg < 0) moe_dispatch_warp<8>(c, p, call, sh, 0, 1);
  else moe_dispatch_warp<8>(c, p, call, sh, fg, 0);
  __syncthreads();
}

/* ---- phase 4: experts ------------------------------------------------------------ */

/* The staged output tile: BM rows x 2*BN columns of T, pitch STAGE_LD. */
#define STAGE_LD (2 * LOOM_MOE_BN + 8)

/* Copy the first `rows` rows x `cols` columns of the staged tile to dst
 * (row pitch in bytes) with 16-byte vectors. */
template <typename T>
static __device__ __forceinline__ void store_tile(char *dst, size_t pitch, const T *st, int rows,
                                                  int cols) {
  const int vpr = cols * (int)sizeof(T) / 16; /* vectors per row */
  for (int i = threadIdx.x; i < rows * vpr; i += blockDim.x) {
    const int r = i / vpr, v = i - r * vpr;
    *((int4 *)(dst + (size_t)r * pitch) + v) = *((const int4 *)(st + r * STAGE_LD) + v);
  }
}

/* One expert-phase task from its ticket, for both engines (and both roles
 * of the Hopper one). The GEMM0 tasks come first, local expert by local
 * expert (nF tasks a row tile, an expert's tiles in moe_raster's order; n0
 * in all), then the GEMM1 tasks the same way (nH a tile). A GEMM1 waits
 * for its tile's nF GEMM0s (done0), taken at least the grid's tasks before
 * it; GEMM1s interleaved per row tile (before session 12) left about half
 * the blocks waiting. Starting an expert's GEMM1s a few waves after its
 * GEMM0s instead (a lag, session 17) was slower at every lag measured:
 * those GEMM1s' NVLink stores competed with the dispatch. A row tile is
 * 128 rows of one local expert's rows, from every source (moe.h).
 *
 * Local first (p.local_first, session 18; LOOM_MOE_LOCAL_FIRST): an
 * expert's tiles are taken from the first tile of this rank's own rows,
 * which a local copy brings, up through the rows of sources rank + 1,
 * rank + 2, ... and around to the tile where this rank's rows begin, which
 * it shares with source rank - 1; the dispatch sends each local expert's
 * pieces in the matching order (moe_dest), so the rows a GEMM0 needs next
 * are the ones that land next. 2 (the default): that, with the foreground
 * share of session 17 (every destination's rows of local expert 0). 1:
 * only this rank's own rows of expert 0 in the foreground
 * (moe_hop_fg_pieces), the rest beside the GEMMs: 3-4% faster than 0 at
 * T = 16384 on 4 GPUs but 2% slower at T <= 4096 and at decode T = 512
 * (the background copy brings the other sources' rows more slowly),
 * where 2 is as fast as 0 and 3% faster at T = 16384 (bench/RESULTS.md
 * session 18). 0: sources in order, this rank's pieces last. */
struct moe_task {
  int gemm;    /* 0 or 1 */
  int s;       /* source of the tile's first row (trace; ret_row scans from it) */
  int le, tl, rows, nb;
  int dep;     /* the tile's index in the dispatch region (row0 / 128) */
  int ks;      /* GEMM1's K share (swapped tile split over K, moe_task_cols: ks shares) */
  size_t row0; /* first row in the dispatch region / h of the tile */
};

/* Task o of one local expert's GEMM0 (ncol = nF) or GEMM1 (ncol = nH)
 * tasks, over its nt row tiles, in bands of p.raster row tiles: a band's
 * tiles take each column block in turn, so a column block of the weights
 * is read from HBM once a band, not once a row tile. Row tile by row tile
 * (raster 1, the order until session 17) streamed an expert's whole weight
 * matrix per row tile wherever it does not stay in L2 (Mixtral's w1 is
 * 235 MB an expert; the L2 is 50 MB). */
static __host__ __device__ __forceinline__ void moe_raster(int o, int nt, int ncol, int raster, int *tl, int *nb) {
  const int band = o / (raster * ncol), r = o - band * raster * ncol;
  const int rows = min(raster, nt - band * raster);
  *nb = r / rows;
  *tl = band * raster + r % rows;
}

/* ks > 1: each GEMM1 task is ks tasks, one a K share, adjacent tickets */
static __host__ __device__ __forceinline__ moe_task moe_decode(const loom_dev_comm &c, const loom_moe_params &p,
                                                               const moe_shared &sh, int ticket, int nF, int nH,
                                                               int ks = 1) {
  moe_task t;
  const int El = p.El, R = p.R, n0 = sh.tp[El] * nF;
  t.gemm = ticket >= n0;
  const int nc = t.gemm ? nH : nF;
  int g = t.gemm ? ticket - n0 : ticket; /* task number within its GEMM */
  t.ks = 0;
  if (t.gemm && ks > 1) {
    t.ks = g % ks;
    g /= ks;
  }
  const int tile_g = g / nc;                   /* an expert's tasks are contiguous: its first tile's */
  int lo = 0, h = El - 1;                      /* last le with tp[le] <= tile_g */
  while (lo < h) {
    const int mid = (lo + h + 1) / 2;
    if (sh.tp[mid] <= tile_g) lo = mid; else h = mid - 1;
  }
  const int nt = sh.tp[lo + 1] - sh.tp[lo];
  moe_raster(g - sh.tp[lo] * nc, nt, nc, p.raster, &t.tl, &t.nb);
  if (p.local_first && R > 1) { /* local first (above): from the first tile of this rank's own rows */
    const int lead = (sh.roff[c.rank * El + lo] - sh.roff[lo] + LOOM_MOE_BM - 1) / LOOM_MOE_BM;
    if (lead < nt) t.tl = (t.tl + lead) % nt;
  }
  t.le = lo;
  const int base = sh.roff[lo]; /* source 0's first row = the expert's base */
  const int end = sh.roff[(R - 1) * El + lo] + sh.rc[(R - 1) * El + lo];
  const int r0 = base + t.tl * LOOM_MOE_BM;
  t.rows = min(LOOM_MOE_BM, end - r0);
  t.row0 = (size_t)r0;
  t.dep = r0 / LOOM_MOE_BM;
  int s = 0;
  while (s + 1 < R && sh.roff[(s + 1) * El + lo] <= r0) s++;
  t.s = s;
  return t;
}

/* Where dispatch-region row `row` (of local expert le) goes back: the same
 * row among the rows its source s sent here, in s's return region (s's
 * window; rows [roff, roff + rc) of (s, le) came from s). s0: a source at or
 * before the row's (the tile's first source, moe_task.s), where the scan of
 * the sources' ranges starts. The sources' bases come from shared memory
 * (moe_counts): in the 128 x 256 consumers' epilogue the window handle was
 * a value spilled across the mainloop and its fields a global load behind
 * that reload, two dependent L2 round trips a row half. */
static __device__ __forceinline__ char *ret_row(const loom_moe_params &p, const moe_shared &sh, int le, int row,
                                                int s0) {
  const int El = p.El;
  int s = s0;
  while (s + 1 < p.R && sh.roff[(s + 1) * El + le] <= row) s++;
  const int i = sh.soff[s * El + le] + (row - sh.roff[s * El + le]);
  return sh.ret_base[s] + (size_t)i * p.row_bytes;
}

/* One thread, after the stores of every thread that wrote task t's output
 * (ordered before by a barrier): count the task on its tile; the tile's
 * last GEMM1 tells every source with rows in the tile how many of its rows
 * are back (its back counter for (this rank, le)). */
static __device__ __forceinline__ void task_done(const loom_dev_comm &c, const loom_moe_params &p,
                                                 const moe_shared &sh, const moe_task &t, int nH,
                                                 uint64_t epoch) {
  if (t.gemm == 0) {
    __threadfence();
    atomicAdd(&p.done0[t.dep], 1u);
    return;
  }
  __threadfence_system();
  if (atomicAdd(&p.done1[t.dep], 1u) + 1 == (unsigned)nH) {
    __threadfence_system();
    const int El = p.El, a = (int)t.row0, b = a + t.rows;
    for (int s = t.s; s < p.R; s++) {
      const int lo = max(a, sh.roff[s * El + t.le]), hi = min(b, sh.roff[s * El + t.le] + sh.rc[s * El + t.le]);
      if (lo >= b) break;
      if (hi > lo) {
        uint32_t *back = (uint32_t *)loom_peer_ptr(c, s, p.back_off) + (size_t)c.rank * El + t.le;
        loom_count_add(back, (uint32_t)(hi - lo));
      }
    }
  }
}

/* The tile's rows in this rank's dispatch region: its ready counter reaches
 * t.rows (every source's rows of it stored). One thread. */
static __device__ __forceinline__ const uint32_t *moe_ready(const loom_dev_comm &c, const loom_moe_params &p,
                                                            const moe_task &t, uint64_t epoch) {
  (void)epoch;
  return (const uint32_t *)loom_local_ptr(c, p.ready_off) + t.dep;
}
static __device__ __forceinline__ int moe_wait_rows(const loom_dev_comm &c, const loom_moe_params &p,
                                                    const moe_task &t, uint64_t epoch) {
  return loom_wait_count(c, moe_ready(c, p, t, epoch), (uint32_t)t.rows, t.s, LOOM_WAIT_ROWS, t.dep);
}

template <int MATH, int PARTS>
static __device__ int phase_experts(const loom_dev_comm &c, const loom_moe_params &p,
                                    const loom_moe_call &call, moe_shared &sh, uint64_t epoch,
                                    void *smem) {
  constexpr int DT = math_dtype<MATH>::dt;
  typedef typename elem<DT>::T T;
  const int El = p.El;
  /* Every task computes 128 x 128 through the two parts of the tile engine:
   * SwiGLU GEMM0 = 64 gate + the matching 64 up columns -> 64 h columns;
   * otherwise two adjacent 64-column blocks -> 128 output columns (the
   * second only where it exists: F or H may be an odd multiple of 64). */
  constexpr int W = 2 * LOOM_MOE_BN;
  const int h_cols = p.gated ? LOOM_MOE_BN : W;
  const int nF = (p.F + h_cols - 1) / h_cols, nH = (p.H + W - 1) / W, per_tile = nF + nH;
  /* weights: IN_OUT is B [K x N] (TILE_B_KN), OUT_IN B [N x K] (TILE_B_NK);
   * an expert's matrix has the same size, so the same offset, in both */
  const int kn = p.wlayout == LOOM_WEIGHTS_IN_OUT;
  const int bl = kn ? TILE_B_KN : TILE_B_NK;
  const size_t f1 = (size_t)p.F * (p.gated ? 2 : 1);

  const int total = sh.tp[El] * per_tile;
  T *stage = (T *)smem;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) sh.value = (int)atomicAdd(p.ticket, 1u);
    __syncthreads();
    const int ticket = sh.value;
    if (ticket >= total) return 1;
    const moe_task t = moe_decode(c, p, sh, ticket, nF, nH);
    tr_open(call, sh, TR_WORK, t.gemm ? LOOM_MOE_TRACE_GEMM1 : LOOM_MOE_TRACE_GEMM0, t.s, t.le, t.tl, t.nb);
    tile_acc<PARTS> acc;
    if (t.gemm == 0) {
      /* GEMM0 + activation -> h */
      tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_DISPATCH, t.s, t.le, t.tl, 0);
      int waited = 1;
      if (threadIdx.x == 0) waited = moe_wait_rows(c, p, t, epoch);
      if (!__syncthreads_and(waited)) return 0;
      tr_close(p, call, sh, TR_WAIT);
      const int c0 = t.nb * h_cols;
      const int cols = min(h_cols, p.F - c0);
      const int c1 = p.gated ? p.F + c0 : (cols > LOOM_MOE_BN ? c0 + LOOM_MOE_BN : c0);
      const T *A = (const T *)loom_local_ptr(c, p.disp_off + t.row0 * p.row_bytes);
      const T *B = (const T *)p.w1 + (size_t)t.le * p.H * f1; /* [H x F1] or [F1 x H] */
      if (kn)
        tile_gemm<MATH, PARTS, TILE_B_KN>(smem, A, p.H, t.rows, B, f1, c0, c1, p.H, acc);
      else
        tile_gemm<MATH, PARTS, TILE_B_NK>(smem, A, p.H, t.rows, B, p.H, c0, c1, p.H, acc);
      const int act = p.act, gated = p.gated;
      float gate_v = 0.f;
      tile_for_each<MATH, PARTS>(acc, bl, [&](int r, int col, int part, float v) {
        if (gated) {
          if (part == 0) { gate_v = v; return; }
          v = act_apply(LOOM_ACT_SILU, gate_v) * v;
          part = 0;
        } else {
          v = act_apply(act, v);
        }
        stage[r * STAGE_LD + part * LOOM_MOE_BN + col] = elem<DT>::from(v);
      });
      __syncthreads();
      char *hrow = (char *)p.h + (t.row0 * p.F + (size_t)c0) * sizeof(T);
      store_tile<T>(hrow, (size_t)p.F * sizeof(T), stage, t.rows, cols);
      __syncthreads();
      if (threadIdx.x == 0) task_done(c, p, sh, t, nH, epoch);
      tr_close(p, call, sh, TR_WORK);
    } else {
      /* GEMM1 -> straight into the source's window */
      const int c0 = t.nb * W;
      const int cols = min(W, p.H - c0);
      const int c1 = cols > LOOM_MOE_BN ? c0 + LOOM_MOE_BN : c0;
      int failed = 0;
      tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_GEMM0, t.s, t.le, t.tl, nF);
      if (threadIdx.x == 0)
        failed = !loom_wait_local_geq(c, &p.done0[t.dep], (uint32_t)nF, LOOM_WAIT_TILE_DEP, t.dep);
      if (__syncthreads_or(failed)) return 0;
      tr_close(p, call, sh, TR_WAIT);
      const T *A = (const T *)p.h + t.row0 * p.F;
      const T *B = (const T *)p.w2 + (size_t)t.le * p.F * p.H; /* [F x H] or [H x F] */
      if (kn)
        tile_gemm<MATH, PARTS, TILE_B_KN>(smem, A, p.F, t.rows, B, p.H, c0, c1, p.F, acc);
      else
        tile_gemm<MATH, PARTS, TILE_B_NK>(smem, A, p.F, t.rows, B, p.F, c0, c1, p.F, acc);
      tile_for_each<MATH, PARTS>(acc, bl, [&](int r, int col, int part, float v) {
        stage[r * STAGE_LD + part * LOOM_MOE_BN + col] = elem<DT>::from(v);
      });
      __syncthreads();
      {
        /* row r goes back to its source's return region (ret_row) */
        const int vpr = cols * (int)sizeof(T) / 16;
        for (int i = threadIdx.x; i < t.rows * vpr; i += blockDim.x) {
          const int r = i / vpr, v = i - r * vpr;
          char *dst = ret_row(p, sh, t.le, (int)t.row0 + r, t.s) + (size_t)c0 * sizeof(T);
          *((int4 *)dst + v) = *((const int4 *)(stage + r * STAGE_LD) + v);
        }
      }
      __syncthreads();
      if (threadIdx.x == 0) task_done(c, p, sh, t, nH, epoch);
      tr_close(p, call, sh, TR_WORK);
    }
  }
}

/* ---- phase 4 on the Hopper engine (tile/hopper.cuh) --------------------------------- */

/* The expert GEMMs of bf16/fp16/TF32 layers with K-major weights (the
 * default OUT_IN layout) run on the wgmma engine: 384-thread blocks, two
 * consumer warpgroups on one 128 x 256 tile (64 rows each, one wgmma batch
 * in flight), a producer warpgroup whose elected thread takes tasks from the
 * ticket counter, waits for the task's inputs (bounded) and feeds a 4-stage
 * TMA ring. Task order and dependencies are those of phase_experts:
 *   GEMM0 (row tile, 256 B rows of W1): SwiGLU loads 128 gate rows and the
 *         matching 128 up rows (two boxes) -> 128 h columns; otherwise 256
 *         rows -> 256 h columns with the activation; waits for the tile's
 *         dispatch flag
 *   GEMM1 (row tile, 256 rows of W2) -> 256 output columns, stored straight
 *         into the source's return region; waits for the tile's GEMM0s
 * The producer tells the consumers the ticket through a word per stage
 * (written before the stage's full barrier is armed, like the engine's
 * skip flag); -1 ends the phase. A failed wait (abort, timeout) ends this
 * block's phase after raising the error: the call fails, as in
 * phase_experts. */
template <int MATH> struct moe_hop;
template <> struct moe_hop<TILE_BF16> { typedef hop_cfg<HOP_BF16, 128, 256, 4, HOP_ML_COOP> cfg; };
template <> struct moe_hop<TILE_FP16> { typedef hop_cfg<HOP_FP16, 128, 256, 4, HOP_ML_COOP> cfg; };
template <> struct moe_hop<TILE_TF32> { typedef hop_cfg<HOP_TF32, 128, 256, 4, HOP_ML_COOP> cfg; };
/* The swapped decode tiles (docs/tile.md "v9"): 128 weight rows are
 * wgmma's M (each consumer WG 64), the tile's N = 16 or 32 token rows its
 * N, so a stage is 16 KB of weights + 2 or 4 KB of rows and 10 or 8 of
 * them fit where the 128 x 256 tile keeps 4 of 48 KB: 160 or 128 KB of
 * weights in flight an SM instead of 64 KB (half-width tasks) or 128 KB. */
#define MOE_SWAP_STAGES 10  /* N = 16 */
#define MOE_SWAP32_STAGES 8 /* N = 32 (9 would end past the 128 x 256 ring: phase_experts_hop) */
template <int MATH, int N> struct moe_swap {
  typedef hop_cfg<moe_hop<MATH>::cfg::dtype, 128, N, N == 16 ? MOE_SWAP_STAGES : MOE_SWAP32_STAGES,
                  HOP_ML_COOP, 1, 1, HOP_EPI_DIRECT, 1>
      cfg;
};
/* the swapped tile's outputs, [MOE_SWAP_ROWS][MOE_SWAP_PITCH] fp32 in its
 * configuration's staging place (both WGs' 128 columns a row; + 4 floats:
 * a warp's 32 writes of one register hit 32 banks) */
#define MOE_SWAP_PITCH 132
#define MOE_HOP_BAR_SWAP HOP_BAR_SWAP /* named barrier: both consumer WGs around the transpose */
/* task words and records for the deeper of the two rings (phase_experts_hop) */
#define MOE_TASK_SLOTS MOE_SWAP_STAGES
static_assert(MOE_SWAP_ROWS * 128 / 8 <= 2 * 256, "two 8-column chunks a consumer thread at most (moe_swap_store)");
#define MOE_HOP_THREADS 384
static_assert(LOOM_MOE_TT <= GATE_TPW * (MOE_HOP_THREADS / 32), "gate_tokens covers a tile's tokens");
static_assert(MOE_HOP_THREADS / 32 <= GATE_MAX_WARPS && moe_cfg::warps <= GATE_MAX_WARPS &&
                  GATE_EP == 16, "gate jobs: a unit's parts fit in gate_part (moe.h)");
static_assert(MOE_HOP_THREADS <= LOOM_MOE_MAX_EXPERTS && moe_cfg::threads <= LOOM_MOE_MAX_EXPERTS,
              "place's slice sums [ns][E] (ns * E <= max(threads, E)) fit in 4 * MAX_EXPERTS bytes");
#define MOE_HOP_BAR_PRODUCER 5 /* named barrier: the producer WG's four warps */
/* The expert phase's register split (setmaxnreg, from the 168 a thread
 * has at entry): the producer warpgroup's warps 2 and 3 copy the
 * background dispatch pieces with MOE_BG_U 16-byte loads in flight per
 * lane, so their registers set the background copy's rate (U = 4 at the
 * engine's 40: ~1 GB/s a warp, session 12). The consumers' region of this
 * kernel fits 224 without new spills (R206 the highest, 32 LDL/STL as at
 * 232: bench/sass_region.sh), so the producer warpgroup gets 56 and
 * U = 6 (U = 8 spilled around the loads at 56). Session 17, 4 GPUs:
 * 56 / 224 / U = 6 beat 40 / 232 / U = 4 by 1.1-2.1% on the bf16 grid
 * (fp32 at T = 16384: 0.6% slower) and 72 / 216 / U = 8 by 0-2%. */
#ifndef MOE_PRODUCER_REGS
#define MOE_PRODUCER_REGS 56
#define MOE_CONSUMER_REGS 224
#define MOE_BG_U 6
#endif
static_assert(MOE_PRODUCER_REGS * 128 + MOE_CONSUMER_REGS * 256 <= 168 * MOE_HOP_THREADS &&
                  MOE_PRODUCER_REGS % 8 == 0 && MOE_CONSUMER_REGS % 8 == 0,
              "the register split fits the block's 168 a thread (setmaxnreg granularity 8)");

/* Task completion off the consumers' path. A finished task's counters
 * (task_done: a GPU- or system-scope fence, then atomics) are updated by a
 * "signaler" thread (lane 0 of the producer WG's warp 1, otherwise idle),
 * not by consumer thread 0: its fence waited for the warp's stores to land
 * (~1 us, longer at system scope) while warpgroup 0 could not issue the
 * next task's wgmmas. Hand-off through a ring of MOE_SIG slots in shared
 * memory, each with two mbarriers:
 *   full[i]  MOE_SIG_ARRIVALS arrivals: lane 0 of each consumer warp after
 *            __syncwarp (the warp's stores are ordered before its release
 *            arrive); thread 0 wrote the slot's ticket first (-1: the
 *            consumers are done, the signaler returns)
 *   free[i]  1 arrival: the signaler handled the slot; a consumer warp
 *            waits for it before arriving on full[i] again (otherwise the
 *            signaler could miss a phase), MOE_SIG tasks later
 * The signaler acquires full[i], then task_done fences at GPU / system
 * scope and counts: the same chain as the old barrier + thread 0 fence. */
#define MOE_SIG 4
#define MOE_SIG_ARRIVALS 8 /* consumer warps */
struct moe_sig {
  uint64_t *full, *free;
  volatile int32_t *ticket;
};
/* bytes after the engine's task words (hop_cfg::dg_offset + 4 * STAGES,
 * 8-aligned): full[MOE_SIG], free[MOE_SIG], ticket[MOE_SIG] */
#define MOE_SIG_BYTES (MOE_SIG * (8 + 8 + 4))
/* Task records: the producer decodes each task once (moe_decode) and
 * leaves its fields in slot m % (STAGES + 1) of a ring after the signal
 * ring (m: the task's place in this block's sequence, the same count on
 * both sides); the consumers read them there, before the mainloop what it
 * needs and after it what the epilogue needs, so no decoded field lives in
 * registers across the mainloop (where 128 accumulators leave few) and the
 * consumers run no decode. STAGES + 1 slots suffice: the producer starts
 * task m + STAGES + 1 only when stages of task m + 1 have been released,
 * i.e. after the consumers' epilogue of task m. */
enum { /* a record's words (C0, NC: the epilogue's first output column and columns, moe_hop_producer) */
  MOE_REC_GEMM, MOE_REC_S, MOE_REC_LE, MOE_REC_TL, MOE_REC_ROWS, MOE_REC_NB, MOE_REC_DEP, MOE_REC_ROW0,
  MOE_REC_KS, MOE_REC_C0, MOE_REC_NC, MOE_REC_WORDS
};
static __device__ __forceinline__ void moe_rec_put(volatile int32_t *r, const moe_task &t) {
  r[MOE_REC_GEMM] = t.gemm;
  r[MOE_REC_S] = t.s;
  r[MOE_REC_LE] = t.le;
  r[MOE_REC_TL] = t.tl;
  r[MOE_REC_ROWS] = t.rows;
  r[MOE_REC_NB] = t.nb;
  r[MOE_REC_DEP] = t.dep;
  r[MOE_REC_ROW0] = (int32_t)t.row0; /* < DR rows (int) */
  r[MOE_REC_KS] = t.ks;
}
static __device__ __forceinline__ moe_task moe_rec_get(const volatile int32_t *r) {
  moe_task t;
  t.gemm = r[MOE_REC_GEMM];
  t.s = r[MOE_REC_S];
  t.le = r[MOE_REC_LE];
  t.tl = r[MOE_REC_TL];
  t.rows = r[MOE_REC_ROWS];
  t.nb = r[MOE_REC_NB];
  t.dep = r[MOE_REC_DEP];
  t.row0 = (size_t)r[MOE_REC_ROW0];
  t.ks = r[MOE_REC_KS];
  return t;
}

/* Tensor maps of the phase (kernel parameter, __grid_constant__): A of
 * GEMM0 over the dispatch region [DR x H], B of GEMM0 over w1 [El * F1 x H],
 * A of GEMM1 over h [DR x F], B of GEMM1 over w2 [El * H x F]; boxes of
 * 128 bytes of K x 128 rows, 128-byte swizzle. */
struct moe_maps {
  CUtensorMap a0, b0, a1, b1;
  CUtensorMap b0h, b1h; /* half-width tasks' boxes (moe_task_cols): 128 weight rows, SwiGLU's GEMM0 64 + 64 */
  CUtensorMap a0s, a1s; /* the swapped tiles' row boxes: MOE_SWAP_BOX rows of a0's, a1's tensors */
};

/* A call's expert tasks: hc h columns a GEMM0 task (nF of them a row
 * tile), cw output columns a GEMM1 task (nH a row tile). A task is a
 * column block of CFG::BN = 256 weight rows (SwiGLU's GEMM0: 128 gate +
 * 128 up rows), so at decode few tasks stream a GEMM's weights: 8 local
 * experts of one row tile each are 64 GEMM0 tasks on the 132 SMs. Where a
 * GEMM's tasks (row tiles x column blocks) fill at most half the grid,
 * and p.narrow, its tasks take half a column block (128 weight rows, 64 +
 * 64 for SwiGLU: the B maps' half boxes b0h / b1h), twice as many tasks
 * on twice the SMs. The consumers still run the whole 128 x 256 MMA (the
 * stage's other B rows are stale: their columns are not stored; an output
 * column reads only its own B row); the epilogue stores hc / cw columns.
 * Every block computes the same from sh.tp (moe_counts). Measured at one
 * H200 (session 36): E = 64 T = 1 -4.1%, Mixtral-like T = 4 -2.5%
 * (GEMM1's 16 column blocks an expert), level elsewhere. At T = 1 every
 * task of either width ends at the same instant, the GEMM's weights
 * streaming at ~2.5 TB/s with 8 MB in flight GPU-wide either way (the
 * standalone engine streams ~2.7 TB/s at 8 MB, ~2.9 at 17: bench/RESULTS.md
 * session 36 (f)). */
struct moe_cols {
  int hc, cw, nF, nH;
  int half0, half1; /* GEMM0's, GEMM1's tasks are half-width */
  int ks;           /* GEMM1's K shares (swapped tile only; 1: none) */
};
template <class CFG>
static __device__ __forceinline__ moe_cols moe_task_cols(const loom_moe_params &p, int ntl, int swap) {
  /* swap: the swapped tile's rows (16, 32), 0 the 128 x 256 tile */
  moe_cols r;
  const int hc = p.gated ? CFG::BN / 2 : CFG::BN, G = (int)gridDim.x;
  /* the swapped tile's tasks are 128 weight rows: half-width always */
  r.half0 = swap || (p.narrow && 2 * ntl * ((p.F + hc - 1) / hc) <= G);
  r.half1 = swap || (p.narrow && 2 * ntl * ((p.H + CFG::BN - 1) / CFG::BN) <= G);
  r.hc = r.half0 ? hc / 2 : hc;
  r.cw = r.half1 ? CFG::BN / 2 : CFG::BN;
  r.nF = (p.F + r.hc - 1) / r.hc;
  r.nH = (p.H + r.cw - 1) / r.cw;
  /* The swapped tile's GEMM1 over K shares where its tasks fill at most
   * half the grid (few experts with long ffn: Mixtral-like decode has 64
   * GEMM1 tasks of K = 14336, one expert on 8 GPUs 32): as many shares as
   * the grid holds, up to MOE_SPLIT_MAX, >= 8 k-blocks a share, and only as
   * many as the tile's free rows of h keep the partials of (moe_swap_store) */
  r.ks = 1;
  const int t1 = ntl * r.nH;
  if (swap && p.split && t1 > 0 && 2 * t1 <= G) {
    const int room = (LOOM_MOE_BM - swap) * p.F * p.es / (swap * 128 * 4 * r.nH); /* slots of swap x 128 fp32 */
    r.ks = min(min(MOE_SPLIT_MAX, G / t1), min(room, p.F / (8 * CFG::BK)));
    if (r.ks < 2) r.ks = 1;
  }
  return r;
}

/* Producer: one thread, at the producer's register budget: its waits only
 * poll (no out-of-line call, transport.cuh). Returns 1 when a wait failed,
 * with *fail to settle once the registers are back. */
template <class CFG>
static __device__ int moe_hop_producer(const loom_dev_comm &c, const loom_moe_params &p,
                                       const moe_shared &sh, const hop_smem &sm,
                                       volatile int32_t *task_of, volatile int32_t *rec, const moe_maps &maps,
                                       uint64_t epoch, int total, const moe_cols &cols, loom_wait_fail *fail) {
  uint32_t stage = 0, phase = 0;
  int m = 0; /* tasks started (the record ring's sequence) */
  const int nF = cols.nF, nH = cols.nH, hc = cols.hc; /* hc: h columns of a GEMM0 task */
  const int f1 = p.gated ? 2 * p.F : p.F;
  for (;;) {
    const int ticket = (int)atomicAdd(p.ticket, 1u);
    int ok = 1;
    moe_task t;
    if (ticket < total) {
      t = moe_decode(c, p, sh, ticket, nF, nH, CFG::swap ? cols.ks : 1);
      ok = t.gemm == 0 ? loom_poll_count(c, moe_ready(c, p, t, epoch), (uint32_t)t.rows, t.s, LOOM_WAIT_ROWS,
                                         t.dep, fail)
                       : loom_poll_local_geq(c, &p.done0[t.dep], (uint32_t)nF, LOOM_WAIT_TILE_DEP, t.dep, fail);
      if (ok) ptx_fence_proxy_async_global(); /* TMA reads after the acquire */
    }
    hop_mbar_wait(&sm.empty[stage], phase ^ 1);
    if (ticket >= total || !ok) {
      task_of[stage] = -1;
      ptx_mbar_arrive(&sm.full[stage]);
      return !ok;
    }
    task_of[stage] = ticket;
    volatile int32_t *const rt = rec + (m++ % (CFG::STAGES + 1)) * MOE_REC_WORDS;
    moe_rec_put(rt, t);
    /* the epilogue's columns: h columns of a GEMM0 task, output columns of
     * a GEMM1 one (in the record, so the consumers hold no cols value
     * across their mainloop: such values were spilled and reloaded) */
    const int cw = t.gemm ? cols.cw : hc, c0 = t.nb * cw;
    rt[MOE_REC_C0] = c0;
    rt[MOE_REC_NC] = min(cw, (t.gemm ? p.H : p.F) - c0);
    sm.flag[stage] = 0u;
    const int half = t.gemm ? cols.half1 : cols.half0; /* always, swapped (moe_task_cols) */
    const CUtensorMap *ma = t.gemm ? (CFG::swap ? &maps.a1s : &maps.a1) : (CFG::swap ? &maps.a0s : &maps.a0);
    const CUtensorMap *mb = t.gemm ? (half ? &maps.b1h : &maps.b1) : (half ? &maps.b0h : &maps.b0);
    const int nkb = (t.gemm ? p.F : p.H) / CFG::BK;
    int kb0 = 0, kb1 = nkb; /* the task's k-blocks: a K share's (swapped GEMM1, moe_task_cols) */
    if (CFG::swap && t.gemm && cols.ks > 1) {
      kb0 = t.ks * nkb / cols.ks;
      kb1 = (t.ks + 1) * nkb / cols.ks;
    }
    /* B rows of the two boxes of SwiGLU's GEMM0 (gate, up: 128 rows each,
     * 64 in a half-width task; up at the stage's row 128 either way, so
     * the epilogue pairs column j with j + 128; the swapped tile's at its
     * weight row 64, WG 1's), or b0 of the one box (256 rows, 128
     * half-width; make_maps: one TMA instruction less a stage). A stage's
     * weight bytes: 128 per weight row. The swapped tile's rows go to the
     * ring's B slot and its weights to the A slot (wgmma's M). */
    const int two_boxes = t.gemm == 0 && p.gated;
    const int b0 = t.gemm ? t.le * p.H + t.nb * cols.cw : t.le * f1 + t.nb * hc, b1 = b0 + p.F;
    constexpr int rows_bytes = CFG::swap ? CFG::b_stage_bytes : CFG::a_stage_bytes, up_row = CFG::swap ? 64 : CFG::BN / 2;
    const uint32_t stage_tx = rows_bytes + 128u * (uint32_t)(t.gemm ? cols.cw : p.gated ? 2 * hc : hc);
    for (int kb = kb0; kb < kb1; kb++) {
      if (kb > kb0) hop_mbar_wait(&sm.empty[stage], phase ^ 1);
      ptx_mbar_arrive_expect_tx(&sm.full[stage], stage_tx);
      const int kc = kb * CFG::BK;
      uint8_t *const as = CFG::swap ? sm.b + stage * CFG::b_stage_bytes : sm.a + stage * CFG::a_stage_bytes;
      uint8_t *const bs = CFG::swap ? sm.a + stage * CFG::a_stage_bytes : sm.b + stage * CFG::b_stage_bytes;
      ptx_tma_load_2d(as, ma, &sm.full[stage], kc, (int)t.row0);
      /* the 32-row tile: its second 16 rows, 2 KB on (two swizzle atoms) */
      if (CFG::swap && CFG::BN == 2 * MOE_SWAP_BOX)
        ptx_tma_load_2d(as + MOE_SWAP_BOX * 128, ma, &sm.full[stage], kc, (int)t.row0 + MOE_SWAP_BOX);
      ptx_tma_load_2d(bs, mb, &sm.full[stage], kc, b0); /* the task's rows, or its gate rows */
      if (two_boxes) ptx_tma_load_2d(bs + up_row * 128, mb, &sm.full[stage], kc, b1); /* up rows */
      if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

/* Store a consumer WG's 64 x 256 accumulators (hopper_epilogue.cuh has the
 * fragment layout) to dst (row 0, column 0 of the task's output block, row
 * pitch in bytes): rows < rows, output columns < ncols. ACT (compile time:
 * a runtime switch per element made the epilogue of the activated GEMM0
 * twice as slow as the whole GEMM1 task, measured): MOE_HOP_AS_IS as is,
 * LOOM_ACT_RELU / _GELU / _SILU applied per element, LOOM_ACT_SWIGLU gate in
 * columns [0, 128), up in [128, 256) (chunk i pairs with chunk i + 16, in
 * the same thread) -> 128 columns. 16-bit outputs go out 16 bytes per lane
 * after a quad transpose (rows here are 16-byte aligned: pitches are
 * multiples of 64 elements, bases of 16 bytes); fp32 as column pairs. */
#define MOE_HOP_AS_IS (-1)
template <int ACT>
static __device__ __forceinline__ float moe_hop_val(const float *acc, int chunk, int h, int e) {
  const float v = acc[4 * chunk + 2 * h + e];
  if (ACT == LOOM_ACT_SWIGLU) return act_apply(LOOM_ACT_SILU, v) * acc[4 * (chunk + 16) + 2 * h + e];
  return ACT == MOE_HOP_AS_IS ? v : act_apply(ACT, v);
}
/* Row destinations: dst + row * pitch, or (moe_ret set) each row back to
 * its source (ret_row; c0b = the task's first column in bytes). */
struct moe_ret {
  const loom_moe_params *p;
  const moe_shared *sh;
  int le, row0, s0; /* s0: the tile's first source (ret_row) */
  size_t c0b;
};
template <int DT, int ACT>
static __device__ __forceinline__ void moe_hop_store(const float *acc, char *dst, size_t pitch, int rows,
                                                     int ncols, const moe_ret *ret = NULL) {
  typedef typename elem<DT>::T T;
  constexpr int NOUT = ACT == LOOM_ACT_SWIGLU ? 16 : 32; /* 8-column output chunks */
  /* the thread index read here (and the WG from it), not a value from
   * before the task loop: such values live across the mainloop beside the
   * accumulators, were spilled, and their reloads (L2 round trips) stood
   * at the head of every epilogue (ncu, session 44) */
  const int tid = ptx_tid_x();
  const int lane = tid & 31, warp = (tid >> 5) & 3, wg = tid >> 7;
  const int rb = wg * 64 + warp * 16 + (lane >> 2), q = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    /* rows rb + 8h of the warp's 8 (lane >> 2) all past the tile's end: the
     * warp skips the half, shuffles and all (warp-uniform). At decode a
     * tile has a few rows and only warp 0's first half stores; the halves
     * skipped were ~70 128-byte lines of code an epilogue, fetched cold
     * each call: E = 64 decode T = 1 107.5 -> 100.6 us on an H200 (session 37) */
    if (wg * 64 + warp * 16 + 8 * h >= rows) continue;
    const int row = rb + 8 * h;
    const bool live = row < rows;
    T *d = ret != NULL ? (T *)(ret_row(*ret->p, *ret->sh, ret->le, ret->row0 + min(row, rows - 1), ret->s0) + ret->c0b)
                       : (T *)(dst + (size_t)row * pitch);
    if constexpr (DT != LOOM_FP32) {
#pragma unroll
      for (int a = 0; a < NOUT / 4; a++) { /* every lane: the transpose shuffles */
        float x[8];
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = moe_hop_val<ACT>(acc, 4 * a + k / 2, h, k % 2);
        const int col = 32 * a + 8 * q;
        hop_quad_store(d, col, live && col < ncols, x);
      }
    } else {
      if (!live) continue;
#pragma unroll
      for (int i = 0; i < NOUT; i++) {
        const int col = 8 * i + 2 * q;
        if (col < ncols) hop_store2(d + col, moe_hop_val<ACT>(acc, i, h, 0), moe_hop_val<ACT>(acc, i, h, 1));
      }
    }
  }
}

/* GEMM0's epilogue with the layer's activation as a template argument. */
template <int DT>
static __device__ __forceinline__ void moe_hop_store_h(int act, const float *acc, char *dst, size_t pitch,
                                                       int rows, int ncols) {
  switch (act) {
  case LOOM_ACT_RELU: moe_hop_store<DT, LOOM_ACT_RELU>(acc, dst, pitch, rows, ncols); break;
  case LOOM_ACT_GELU: moe_hop_store<DT, LOOM_ACT_GELU>(acc, dst, pitch, rows, ncols); break;
  case LOOM_ACT_SWIGLU: moe_hop_store<DT, LOOM_ACT_SWIGLU>(acc, dst, pitch, rows, ncols); break;
  default: moe_hop_store<DT, LOOM_ACT_SILU>(acc, dst, pitch, rows, ncols); break;
  }
}

/* The swapped tile's epilogue, both consumer WGs (256 threads): the
 * accumulators (thread (WG wg, warp w, lane l) acc[4 j + 2 h + e] = weight
 * row 64 wg + 16 w + l / 4 + 8 h of the task, token row 8 j + 2 (l % 4) + e)
 * go to S as [token row][weight row] (MOE_SWAP_PITCH), then each thread
 * stores one 8-column chunk of one row: GEMM0's h with the activation
 * (SwiGLU: gate rows 0-63, up rows 64-127 of the task), GEMM1's back to the
 * row's source (ret_row). A loop of a few lines, not the 128 x 256 tile's
 * unrolled fragment walk: at decode the code a call runs is fetched cold
 * (docs/moe_v2.md "Session 37"). The barrier before the writes keeps them
 * behind the previous task's reads. */
template <typename T> static __device__ __forceinline__ void moe_store8(T *d, const float (&x)[8]) {
  if constexpr (sizeof(T) == 4) {
    ((float4 *)d)[0] = make_float4(x[0], x[1], x[2], x[3]);
    ((float4 *)d)[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) hop_store2((T *)&w[j], x[2 * j], x[2 * j + 1]);
    *(uint4 *)d = make_uint4(w[0], w[1], w[2], w[3]);
  }
}
/* The swapped tile's shared memory besides its ring: the transpose S
 * ([N][MOE_SWAP_PITCH] fp32) and a word that tells the block's consumers
 * their K share arrived last */
struct moe_swap_sm {
  float *s;
  volatile int *last;
};
/* The swapped tile's epilogue (N = 16 or 32 token rows): both WGs'
 * accumulators through S, then 8-column chunks of a row, N / 16 a thread
 * (a 16-row tile's one, a 32-row tile's two: chunk tid and tid + 256). */
template <int DT, int N>
static __device__ __forceinline__ void moe_swap_store(const loom_dev_comm &c, const loom_moe_params &p,
                                                      const moe_shared &sh, const float *acc, const moe_swap_sm &ss,
                                                      const moe_task &t, const moe_cols &cols) {
  typedef typename elem<DT>::T T;
  constexpr int NI = N / 16, PART = N * 128; /* chunks a thread; floats of a K share's partial */
  float *const S = ss.s;
  const int tid = moe_fresh((int)threadIdx.x), lane = tid & 31, warp = tid >> 5, q = lane & 3;
  ptx_named_bar_sync(MOE_HOP_BAR_SWAP, 256);
#pragma unroll
  for (int i = 0; i < N / 2; i++)
    S[(8 * (i >> 2) + 2 * q + (i & 1)) * MOE_SWAP_PITCH + 16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1)] = acc[i];
  ptx_named_bar_sync(MOE_HOP_BAR_SWAP, 256);
  const int pair = t.gemm == 0 && p.gated; /* SwiGLU: 64 outputs a row, 8 chunks */
  const int lg = pair ? 3 : 4;
  const int c0 = t.nb * (t.gemm ? cols.cw : cols.hc);
  const int ncols = t.gemm ? min(cols.cw, p.H - c0) : min(cols.hc, p.F - c0);
  int r[NI], g[NI], live[NI];
#pragma unroll
  for (int j = 0; j < NI; j++) {
    const int it = tid + 256 * j;
    r[j] = it >> lg;
    g[j] = it & ((1 << lg) - 1);
    live[j] = r[j] < t.rows && 8 * g[j] < ncols;
  }
  float x[NI][8];
  if (t.gemm && cols.ks > 1) {
    /* A K share: its partial goes to slot t.ks of the column block's
     * slots, kept in the tile's rows of h past row N (free in a swapped
     * call: a tile has <= N rows and owns 128 rows of h; moe_task_cols
     * sized ks to fit). The share that arrives last (a counter per column
     * block, p.split_cnt, back to 0 after it) adds the slots in share
     * order 0, 1, ..: the sum does not depend on which share finished
     * last. */
    float *const slots = (float *)((char *)p.h + (t.row0 + N) * p.F * sizeof(T)) + (size_t)t.nb * cols.ks * PART;
    int any = 0;
#pragma unroll
    for (int j = 0; j < NI; j++)
      if (live[j]) {
        const float *src = S + r[j] * MOE_SWAP_PITCH + 8 * g[j];
        float4 *d = (float4 *)(slots + t.ks * PART + r[j] * 128 + 8 * g[j]);
        d[0] = *(const float4 *)src;
        d[1] = *(const float4 *)(src + 4);
        any = 1;
      }
    if (any) __threadfence();
    ptx_named_bar_sync(MOE_HOP_BAR_SWAP, 256);
    if (tid == 0) {
      uint32_t *cnt = &p.split_cnt[(sh.tp[t.le] + t.tl) * cols.nH + t.nb];
      const int last = (int)ptx_atom_add_acq_rel_gpu_u32(cnt, 1u) + 1 == cols.ks;
      if (last) ptx_st_relaxed_gpu_u32(cnt, 0u); /* every share arrived: nobody else touches it */
      *ss.last = last;
    }
    ptx_named_bar_sync(MOE_HOP_BAR_SWAP, 256);
    /* *ss.last is next written after the first barrier of this block's
     * next split task, which every consumer thread reaches after this read */
    if (!*ss.last || !live[0]) return; /* chunk tid + 256 is live only where chunk tid is */
    ptx_fence_acq_rel_gpu();
#pragma unroll
    for (int j = 0; j < NI; j++) {
      if (!live[j]) continue;
      const float *at = slots + r[j] * 128 + 8 * g[j]; /* this chunk's 8 floats in slot 0 */
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float4 v = ptx_ld_cg_f4((const float4 *)(at + 4 * h));
        for (int k = 1; k < cols.ks; k++) {
          const float4 w = ptx_ld_cg_f4((const float4 *)(at + k * PART + 4 * h));
          v.x += w.x;
          v.y += w.y;
          v.z += w.z;
          v.w += w.w;
        }
        x[j][4 * h] = v.x;
        x[j][4 * h + 1] = v.y;
        x[j][4 * h + 2] = v.z;
        x[j][4 * h + 3] = v.w;
      }
    }
  } else {
    if (!live[0]) return;
#pragma unroll
    for (int j = 0; j < NI; j++) {
      if (!live[j]) continue;
      const float *src = S + r[j] * MOE_SWAP_PITCH + 8 * g[j];
#pragma unroll
      for (int k = 0; k < 8; k++) {
        const float v = src[k];
        x[j][k] = t.gemm ? v : pair ? act_apply(LOOM_ACT_SILU, v) * src[64 + k] : act_apply(p.act, v);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NI; j++) {
    if (!live[j]) continue;
    T *d = t.gemm ? (T *)(ret_row(p, sh, t.le, (int)t.row0 + r[j], t.s) + (size_t)c0 * sizeof(T))
                  : (T *)p.h + (t.row0 + r[j]) * p.F + c0;
    moe_store8(d + 8 * g[j], x[j]);
  }
}

/* A consumer warp posts its n-th finished task (ticket, or -1 at the end)
 * to the signaler. Every lane of the warp calls it after its stores. */
static __device__ __forceinline__ void moe_sig_post(const moe_sig &sg, int n, int ticket) {
  const int slot = n % MOE_SIG;
  const uint32_t par = (uint32_t)(n / MOE_SIG) & 1u;
  const int lane = threadIdx.x & 31;
  /* the signaler handled this slot's previous use (a fresh barrier passes
   * parity 1, as the engine's empty barriers) */
  if (lane == 0) hop_mbar_wait(&sg.free[slot], par ^ 1u);
  if (threadIdx.x == 0) sg.ticket[slot] = ticket;
  __syncwarp();
  if (lane == 0) ptx_mbar_arrive(&sg.full[slot]);
}

/* The signaler: one thread, at the producer's register budget. */
static __device__ void moe_hop_signaler(const loom_dev_comm &c, const loom_moe_params &p, const moe_shared &sh,
                                        const moe_sig &sg, uint64_t epoch, const moe_cols &cols) {
  const int nF = cols.nF, nH = cols.nH;
  for (int n = 0;; n++) {
    const int slot = n % MOE_SIG;
    hop_mbar_wait(&sg.full[slot], (uint32_t)(n / MOE_SIG) & 1u);
    const int ticket = sg.ticket[slot];
    if (ticket < 0) return;
    /* a GEMM1 tile is done when every K share of its column blocks is */
    task_done(c, p, sh, moe_decode(c, p, sh, ticket, nF, nH, cols.ks), nH * cols.ks, epoch);
    ptx_mbar_arrive(&sg.free[slot]);
  }
}

template <class CFG, int DT>
static __device__ void moe_hop_consumer(const loom_dev_comm &c, const loom_moe_params &p,
                                        const loom_moe_call &call, moe_shared &sh, const hop_smem &sm,
                                        volatile int32_t *task_of, const volatile int32_t *rec,
                                        const moe_sig &sg, uint64_t epoch, int wg, const moe_cols &cols,
                                        const moe_swap_sm &ss) {
  typedef typename elem<DT>::T T;
  const uint64_t da0 = hop_desc(sm.a + wg * 64 * 128), db0 = hop_desc(sm.b);
  float acc[CFG::acc_regs];
  uint32_t stage = 0, phase = 0;
  for (int n = 0;; n++) {
    tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_STAGE, TR_NO_PEER, n, 0, 0);
    hop_mbar_wait(&sm.full[stage], phase);
    tr_close(p, call, sh, TR_WAIT);
    const int ticket = task_of[stage];
    if (ticket < 0) {
      moe_sig_post(sg, n, -1);
      return;
    }
    const volatile int32_t *r = rec + (n % (CFG::STAGES + 1)) * MOE_REC_WORDS;
    {
      const moe_task t0 = moe_rec_get(r);
      tr_open(call, sh, TR_WORK, t0.gemm ? LOOM_MOE_TRACE_GEMM1 : LOOM_MOE_TRACE_GEMM0, t0.s, t0.le, t0.tl, t0.nb);
    }
    hop_task ht;
    ht.kb0 = 0;
    ht.kb1 = (r[MOE_REC_GEMM] ? p.F : p.H) / CFG::BK;
    if (CFG::swap && r[MOE_REC_GEMM] && cols.ks > 1) { /* a K share (moe_hop_producer) */
      const int nkb = ht.kb1, ks = r[MOE_REC_KS];
      ht.kb0 = ks * nkb / cols.ks;
      ht.kb1 = (ks + 1) * nkb / cols.ks;
    }
    /* a tile of <= 64 rows (an expert's last, and every tile at decode):
     * WG 1 has no live row, WG 0 runs it alone (half the tensor-core work);
     * the swapped tile's WGs take half the weight rows each */
    const int idle = !CFG::swap && wg == 1 && r[MOE_REC_ROWS] <= 64;
    hop_mainloop_w1<CFG>(acc, sm, da0, db0, ht, stage, phase, HOP_BAR_ORDER, 0, idle);
    const moe_task t = moe_rec_get(r); /* the epilogue's fields, read after the mainloop */
    if constexpr (CFG::swap) {
      moe_swap_store<DT, CFG::BN>(c, p, sh, acc, ss, t, cols);
    } else if (idle) {
      /* nothing to store: every row of this WG is past the tile's end */
    } else if (t.gemm == 0) {
      const int c0 = r[MOE_REC_C0];
      char *dst = (char *)p.h + (t.row0 * p.F + (size_t)c0) * sizeof(T);
      moe_hop_store_h<DT>(p.act, acc, dst, (size_t)p.F * sizeof(T), t.rows, r[MOE_REC_NC]);
    } else {
      const moe_ret ret = {&p, &sh, t.le, (int)t.row0, t.s, (size_t)r[MOE_REC_C0] * sizeof(T)};
      moe_hop_store<DT, MOE_HOP_AS_IS>(acc, NULL, 0, t.rows, r[MOE_REC_NC], &ret);
    }
    tr_close(p, call, sh, TR_WORK);
    moe_sig_post(sg, n, ticket); /* the signaler counts it (task_done) */
  }
}

/* Dispatch pieces the whole grid copies before the expert phase, at most
 * one a warp:
 *   - p.local_first == 1 (moe_decode): this rank's own rows of its
 *     local expert 0 (the first pieces in moe_dest's order), which its
 *     first GEMM0 tasks take;
 *   - else those of the first p.fg_experts local experts (to every
 *     destination; pieces are numbered le-major); p.fg_experts = 0: one a
 *     warp (12 672 rows over 132 SMs of 12 warps, ~50 MB at H = 2048 bf16,
 *     the share until session 17: it covered local experts 0-2 at once,
 *     so the first GEMM0 task waited until all three had landed).
 * The rest go out beside the GEMMs, on the producer warpgroup's warps 2
 * and 3 (MOE_BG_U). Session 12 found fewer up front (792 pieces) starved
 * the GEMMs; session 17 measured the first expert alone (~4 pieces an SM
 * at T = 16384 on 4 GPUs) 2.5-11% faster on the E = 32 grid, the Qwen3
 * shape and fp32, and decode as fast or faster (bench/RESULTS.md session
 * 17). Every thread of every block computes the same number (sh.kept). */
static __device__ int moe_hop_fg_pieces(const loom_dev_comm &c, const loom_moe_params &p, const moe_shared &sh) {
  const int warps = (int)(gridDim.x * (MOE_HOP_THREADS / 32));
  if (p.fg_experts <= 0) return warps;
  if (p.local_first == 1) return min((sh.kept[c.rank * p.El] + MOE_DSUB - 1) / MOE_DSUB, warps);
  int n = 0;
  for (int le = 0; le < min(p.fg_experts, p.El); le++)
    for (int d = 0; d < p.R; d++) n += (sh.kept[d * p.El + le] + MOE_DSUB - 1) / MOE_DSUB;
  return min(n, warps);
}

/* The phase's roles on ring RCFG: the 128 x 256 tile (RCFG = LCFG) or the
 * kernel's swapped decode tile (moe_swap, 16 or 32 rows: moe_kernel's SW).
 * The task words, signal ring and records sit after LCFG's ring for either
 * (phase_experts_hop); the task columns are LCFG's (moe_task_cols). Two
 * instantiations a kernel, one chosen per call, so the common path's code
 * and registers are what they were without the swapped one (a branch
 * inside the roles made the prefill's experts ~1% slower; a third ring
 * inlined doubled the spills, out of line it slowed every phase: bench/
 * RESULTS.md sessions 39 and 41). */
template <class RCFG, class LCFG, int DT>
static __device__ int moe_hop_roles(const loom_dev_comm &c, const loom_moe_params &p, const loom_moe_call &call,
                                    moe_shared &sh, uint64_t epoch, uint8_t *base, const moe_maps &maps, int fg) {
  static_assert(RCFG::threads == MOE_HOP_THREADS, "block = 2 consumer WGs + the producer WG");
  const hop_smem sm = hop_smem_ring<RCFG>(base);
  volatile int32_t *task_of = (volatile int32_t *)(base + LCFG::dg_offset);
  static_assert((LCFG::dg_offset + 4 * MOE_TASK_SLOTS) % 8 == 0, "signal barriers are 8-aligned");
  moe_sig sg;
  sg.full = (uint64_t *)(base + LCFG::dg_offset + 4 * MOE_TASK_SLOTS);
  sg.free = sg.full + MOE_SIG;
  sg.ticket = (volatile int32_t *)(sg.free + MOE_SIG);
  volatile int32_t *rec = sg.ticket + MOE_SIG;
  if (threadIdx.x == 0) {
    hop_ring_init<RCFG>(sm);
    for (int i = 0; i < MOE_SIG; i++) {
      ptx_mbar_init(&sg.full[i], MOE_SIG_ARRIVALS);
      ptx_mbar_init(&sg.free[i], 1);
    }
  }
  /* the earlier phases wrote this memory through the generic proxy; TMA
   * writes it through the async proxy from now on */
  ptx_fence_proxy_async();
  __syncthreads();
  const int ntl = sh.tp[p.El];
  const moe_cols cols = moe_task_cols<LCFG>(p, ntl, RCFG::swap ? RCFG::BN : 0);
  const int total = ntl * (cols.nF + cols.nH * cols.ks); /* every task: GEMM1 K shares too */
  const int wg = threadIdx.x / 128;
  int failed = 0;
  if (wg == 2) {
    loom_wait_fail fail;
    ptx_setmaxnreg_dec<MOE_PRODUCER_REGS>();
    if ((threadIdx.x & 127) == 0)
      failed = moe_hop_producer<RCFG>(c, p, sh, sm, task_of, rec, maps, epoch, total, cols, &fail);
    else if ((threadIdx.x & 127) == 32)
      moe_hop_signaler(c, p, sh, sg, epoch, cols);
    else if ((threadIdx.x & 127) >= 64)
      moe_dispatch_warp<MOE_BG_U>(c, p, call, sh, fg, 1); /* warps 2, 3: the pieces
                                                                               phase_dispatch left */
    ptx_named_bar_sync(MOE_HOP_BAR_PRODUCER, 128); /* the whole WG back together */
    ptx_setmaxnreg_inc<RCFG::entry_regs>();
    if (failed) loom_wait_settle(c, fail); /* out of line: only at the full budget */
  } else {
    ptx_setmaxnreg_inc<MOE_CONSUMER_REGS>();
    moe_swap_sm ss = {NULL, NULL};
    if (RCFG::swap) {
      ss.s = (float *)(base + RCFG::stg_offset);
      ss.last = (volatile int *)(base + RCFG::sk_offset);
    }
    moe_hop_consumer<RCFG, DT>(c, p, call, sh, sm, task_of, rec, sg, epoch, wg, cols, ss);
    ptx_setmaxnreg_dec<RCFG::entry_regs>();
  }
  /* every stage this block filled has been consumed: the memory is free */
  return !__syncthreads_or(failed);
}

/* The phase. All MOE_HOP_THREADS threads call it; the dynamic shared memory
 * (whatever the earlier phases left there) becomes the engine's ring.
 * sh.swap (moe_counts, read past its last barrier) picks the ring: the
 * 128 x 256 one, or the kernel's swapped one of SW rows. */
template <int MATH, int SW>
static __device__ int phase_experts_hop(const loom_dev_comm &c, const loom_moe_params &p,
                                        const loom_moe_call &call, moe_shared &sh, uint64_t epoch,
                                        uint8_t *smem, const moe_maps &maps, int fg) {
  typedef typename moe_hop<MATH>::cfg CFG;
  typedef typename moe_swap<MATH, SW>::cfg SCFG;
  constexpr int DT = math_dtype<MATH>::dt;
  static_assert(CFG::STAGES <= MOE_TASK_SLOTS && SCFG::STAGES <= MOE_TASK_SLOTS, "task words of either ring");
  static_assert(SCFG::dg_offset <= CFG::dg_offset, "the swapped ring ends where the 128 x 256 one does");
  static_assert(SCFG::stg_bytes >= SW * MOE_SWAP_PITCH * 4 && SCFG::CN == 128 && SCFG::CM == SW &&
                    SW <= MOE_SWAP_ROWS,
                "the transpose fits the swapped configuration's staging");
  static_assert(SCFG::b_stage_bytes == SW / MOE_SWAP_BOX * MOE_SWAP_BOX * 128 && SW % MOE_SWAP_BOX == 0 &&
                    SW / MOE_SWAP_BOX <= 2,
                "the row boxes a stage (moe_hop_producer)");
  uint8_t *base = hop_smem_base(smem);
  if (sh.swap) return moe_hop_roles<SCFG, CFG, DT>(c, p, call, sh, epoch, base, maps, fg);
  return moe_hop_roles<CFG, CFG, DT>(c, p, call, sh, epoch, base, maps, fg);
}

/* ---- phase 5: combine ---------------------------------------------------------------- */

/* Combine: vectors per thread at once, routing slots loaded per batch. */
#define COMBINE_U 4
#define COMBINE_JB 2
#define COMBINE_SMALL_JB 8 /* routing slots' loads in flight where a thread has one vector */
#define COMBINE_MIN_VEC 8 /* 16-byte vectors of a row per unit at least */
static_assert(LOOM_MOE_TT * LOOM_MOE_MAX_TOPK * (sizeof(void *) + sizeof(float)) + LOOM_MOE_MAX_EXPERTS / 8 <=
                  MOE_PLACE_BASE_BYTES,
              "combine's per-tile table and expert mask fit in every kernel's dynamic shared memory");

/* A combine unit's output vectors i0, i0 + blockDim.x, ... (U of them,
 * those < nvec; vector i: token i / vw of the tile at t0, 16-byte vector va
 * + i % vw of its row): the k routing slots' rows (src_of, NULL: dropped)
 * times their weights, loading JB slots' vectors before adding them, so U *
 * JB loads are in flight; slots are added in index order whatever U and JB
 * (bitwise deterministic, the same sums as one slot at a time). */
template <int DT, int U, int JB>
static __device__ __forceinline__ void combine_vectors(const loom_moe_params &p, const loom_moe_call &call,
                                                       const int4 *const *src_of, const float *w_of, int t0,
                                                       int i0, int nvec, int vw, int va) {
  typedef typename elem<DT>::T T;
  constexpr int per_vec = 16 / sizeof(T);
  const int K = p.K;
  float acc[U][per_vec];
  int tok[U], v[U];
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int i = min(i0 + u * (int)blockDim.x, nvec - 1); /* past the end: a repeat, not stored */
    tok[u] = i / vw;
    v[u] = va + i % vw;
#pragma unroll
    for (int q = 0; q < per_vec; q++) acc[u][q] = 0.f;
  }
  for (int j0 = 0; j0 < K; j0 += JB) {
    int4 raw[JB][U];
#pragma unroll
    for (int jj = 0; jj < JB; jj++)
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int4 *src = j0 + jj < K ? src_of[tok[u] * K + j0 + jj] : NULL;
        raw[jj][u] = src ? ptx_ld_cg_v4(src + v[u]) : make_int4(0, 0, 0, 0);
      }
#pragma unroll
    for (int jj = 0; jj < JB; jj++)
#pragma unroll
      for (int u = 0; u < U; u++) {
        if (j0 + jj >= K || src_of[tok[u] * K + j0 + jj] == NULL) continue;
        const float w = w_of[tok[u] * K + j0 + jj];
        const T *vals = (const T *)&raw[jj][u];
#pragma unroll
        for (int q = 0; q < per_vec; q++) acc[u][q] += w * elem<DT>::load(vals, q);
      }
  }
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (i0 + u * (int)blockDim.x >= nvec) continue;
    int4 out;
    T *o = (T *)&out;
#pragma unroll
    for (int q = 0; q < per_vec; q++) o[q] = elem<DT>::from(acc[u][q]);
    *((int4 *)((char *)call.y + (size_t)(t0 + tok[u]) * p.row_bytes) + v[u]) = out;
  }
}

template <int DT>
static __device__ int phase_combine(const loom_dev_comm &c, const loom_moe_params &p,
                                    const loom_moe_call &call, moe_shared &sh, uint64_t epoch,
                                    void *smem) {
  typedef typename elem<DT>::T T;
  const int4 **src_of = (const int4 **)smem;                         /* [TT * K] */
  float *w_of = (float *)(src_of + LOOM_MOE_TT * LOOM_MOE_MAX_TOPK); /* [TT * K] */
  uint32_t *need = (uint32_t *)(w_of + LOOM_MOE_TT * LOOM_MOE_MAX_TOPK); /* [E / 32]: experts the tile waits for */
  const int K = p.K, El = p.El, T_ = call.T;
  const int ntiles = (T_ + LOOM_MOE_TT - 1) / LOOM_MOE_TT;
  constexpr int per_vec = 16 / sizeof(T);
  const int vec_per_row = p.H / per_vec;
  /* Units: a token tile's rows split into ns column slices when the tiles
   * alone would leave blocks idle (decode: 4 tiles at T = 128, one block
   * each took ~52 us at k = 8, its loads in flight far too few), at least
   * COMBINE_MIN_VEC 16-byte vectors (a 128-byte line) per row and slice.
   * Every output element is the same sum in the same slot order whatever
   * the split. */
  const int ns = ntiles == 0 || ntiles >= (int)gridDim.x ? 1 : max(1, min((int)gridDim.x / ntiles, vec_per_row / COMBINE_MIN_VEC));
  for (int unit = blockIdx.x; unit < ntiles * ns; unit += gridDim.x) {
    const int tile = unit / ns, sl = unit % ns;
    const int va = slice_lo(sl, ns, vec_per_row), vw = slice_lo(sl + 1, ns, vec_per_row) - va;
    const int t0 = tile * LOOM_MOE_TT, t1 = min(T_, t0 + LOOM_MOE_TT);
    tr_open(call, sh, TR_WORK, LOOM_MOE_TRACE_COMBINE, TR_NO_PEER, tile, t0, t1 - t0);
    tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_RETURN, TR_NO_PEER, tile, t0, t1 - t0);
    for (int i = threadIdx.x; i < (p.E + 31) / 32; i += blockDim.x) need[i] = 0u;
    __syncthreads();
    /* the tile's k source rows and weights, once, into shared memory (NULL:
     * a dropped slot), and the set of experts they went to, before the
     * wait (none of it depends on the returns); the loads below then
     * depend on nothing but v */
    for (int i = threadIdx.x; i < (t1 - t0) * K; i += blockDim.x) {
      const size_t slot = (size_t)t0 * K + i;
      const int row = __ldcg(&p.dest_row[slot]);
      const int e = row < 0 ? 0 : __ldcg(&p.ids[slot]);
      src_of[i] = row < 0 ? NULL
                          : (const int4 *)loom_local_ptr(c, p.ret_off + ((size_t)(e / El) * p.Cs + row) * p.row_bytes);
      w_of[i] = row < 0 ? 0.f : __ldcg(&p.wts[slot]);
      if (row >= 0) atomicOr(&need[e >> 5], 1u << (e & 31));
    }
    __syncthreads();
    /* warp 0 waits until every expert the tile's choices went to has
     * returned all the rows this rank sent it: lane l for experts l, l +
     * 32, ..., one counter load each once the returns are in. Until session
     * 32 each lane went through the tile's routing slots one after another,
     * three dependent loads a slot (its row, its expert, the counter): at
     * k = 8, 24 round trips after the last return; and the table above
     * came after the wait. (A lane polling all its counters together, or
     * relaxed loads with one fence, moved ptxas's registers in the expert
     * phase's consumers: a spill reload inside the k-block loop.) */
    const uint32_t *back = (const uint32_t *)loom_local_ptr(c, p.back_off);
    int failed = 0;
    if (threadIdx.x < 32)
      for (int e = threadIdx.x; e < p.E && !failed; e += 32)
        if ((need[e >> 5] >> (e & 31)) & 1u)
          failed = !loom_wait_count(c, &back[e], (uint32_t)sh.kept[e], e / El, LOOM_WAIT_ROWS, e);
    if (__syncthreads_or(failed)) return 0;
    tr_close(p, call, sh, TR_WAIT);
    /* each thread sums COMBINE_U vectors with COMBINE_JB slots' loads in
     * flight (combine_vectors); where a thread has at most one vector (a
     * decode tile's column slice) it loads COMBINE_SMALL_JB slots at once
     * instead (k = 8: one round trip, against four); the same sums */
    const int nvec = (t1 - t0) * vw;
    if (nvec <= (int)blockDim.x) {
      if ((int)threadIdx.x < nvec)
        combine_vectors<DT, 1, COMBINE_SMALL_JB>(p, call, src_of, w_of, t0, threadIdx.x, nvec, vw, va);
    } else {
      for (int i0 = threadIdx.x; i0 < nvec; i0 += COMBINE_U * blockDim.x)
        combine_vectors<DT, COMBINE_U, COMBINE_JB>(p, call, src_of, w_of, t0, i0, nvec, vw, va);
    }
    __syncthreads();
    tr_close(p, call, sh, TR_WORK);
  }
  return 1;
}

/* ---- the kernel ------------------------------------------------------------------------ */

/* End of phase i for this block, ns after its start (0: not reached). The
 * last block folds them into stats->phase_end_ns (max over blocks). */
static __device__ __forceinline__ void phase_mark(const loom_moe_params &p, int i, uint64_t t0) {
  if (threadIdx.x == 0) p.trace[(size_t)blockIdx.x * 5 + i] = ptx_globaltimer_ns() - t0;
}

/* The last block, warp 0, after every other block has flushed its events:
 * the kernel's start (earliest block start) and end, the event counts; the
 * counter goes back to 0 for the next forward. */
static __device__ __noinline__ void trace_finish(loom_moe_trace_state *st,
                                                 loom_moe_trace_info_t *info, long long capacity,
                                                 int rank) {
  unsigned long long start = ~0ull;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += 32)
    start = min(start, __ldcg(&st->block_start[b]));
  for (int o = 16; o > 0; o >>= 1) start = min(start, __shfl_xor_sync(0xffffffffu, start, o));
  if (threadIdx.x == 0) {
    const unsigned long long n = atomicExch(&st->next, 0ull);
    const unsigned long long cap = (unsigned long long)capacity;
    info->recorded = (int64_t)(n < cap ? n : cap);
    info->dropped = (int64_t)(n < cap ? 0 : n - cap);
    info->start_ns = start;
    info->end_ns = ptx_globaltimer_ns();
    info->blocks = (int32_t)gridDim.x;
    info->rank = rank;
  }
}

/* HOP = 0: 256-thread blocks, experts on the mma.sync engine (gemm_tile.cuh);
 * HOP = 1: 384-thread blocks, experts on the Hopper engine (maps used), with
 * the swapped decode tile of SW = 16 or 32 rows (loom_launch_moe picks the
 * kernel a call; SW = 16 where HOP = 0, unused). GF = 1: the gate's sums
 * in fp32 on the 16-bit tensor cores (LOOM_GATE_FAST), else in fp64. */
template <int MATH, int PARTS, int HOP, int SW, int GF>
__global__ void __launch_bounds__(HOP ? MOE_HOP_THREADS : moe_cfg::threads, moe_cfg::blocks_per_sm)
    moe_kernel(loom_dev_comm c, loom_moe_params p, loom_moe_call call, const __grid_constant__ moe_maps maps) {
  constexpr int DT = math_dtype<MATH>::dt;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ moe_shared sh;
  const uint64_t epoch = loom_kernel_begin(c);
  const uint64_t t0 = ptx_globaltimer_ns();
  if (threadIdx.x < 5) p.trace[(size_t)blockIdx.x * 5 + threadIdx.x] = 0;
  if (call.tr_events != NULL && threadIdx.x == 0) {
    p.tr_state->block_start[blockIdx.x] = t0;
    sh.tr.n = 0;
  }
  /* a peer that failed since our last call stops this one at once */
  const int go = !loom_block_aborted(c);
  int idle = 0;
  if (go) idle = phase_gate<DT, GF>(c, p, call, sh, epoch, (float *)smem);
  phase_mark(p, 0, t0); /* the gate's end: the credit waits below count in place's time, as before session 19 */
  if (go) moe_credits(c, p, call, sh, epoch); /* a failure raised the abort: barrier 1 fails */
  tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_BARRIER, TR_NO_PEER, 1, 0, 0);
  /* Barrier 1 in two halves. A block that would sit there idle (decode:
   * its gate jobs done, the tiles' finishers still at work) first runs
   * moe_counts dry (no waits, no checks, no stores outside the block's
   * shared memory, whose arrays are all rewritten before use), so the
   * real one after barrier 2 runs with its code in the SM's instruction
   * cache: from the header to the first dispatch piece was ~8 us at T = 1,
   * straight-line code fetched at L2 speed (session 42). One copy of
   * moe_counts for both runs (the loop below, `dry` opaque). */
  if (go) loom_grid_arrive(c);
  int counted = 0;
#pragma unroll 1
  for (int it = go && idle ? 0 : 1; it < 2 && go; it++) {
    const int dry = moe_fresh(it == 0 ? 1 : 0);
    if (!dry) {
      if (!loom_grid_arrived_wait(c, 1)) break;
      tr_close(p, call, sh, TR_WAIT);
      phase_place(c, p, call, sh, epoch, (int *)smem);
      phase_mark(p, 1, t0);
      /* a block whose credit wait failed raised the abort flag: barrier 1
       * returned 0 everywhere, so nobody sends that peer anything */
      tr_open(call, sh, TR_WAIT, LOOM_MOE_TRACE_WAIT_BARRIER, TR_NO_PEER, 2, 0, 0);
      if (!loom_grid_barrier(c, 2)) break;
      tr_close(p, call, sh, TR_WAIT);
    }
    counted = moe_counts(c, p, call, sh, epoch, SW, dry) && !dry;
  }
  if (counted) {
    int limit = -1; /* every piece here (the mma.sync variant) */
    if constexpr (HOP) limit = moe_hop_fg_pieces(c, p, sh);
    phase_dispatch(c, p, call, sh, limit);
    phase_mark(p, 2, t0);
    int ok;
    if constexpr (HOP) ok = phase_experts_hop<MATH, SW>(c, p, call, sh, epoch, smem, maps, limit);
    else ok = phase_experts<MATH, PARTS>(c, p, call, sh, epoch, smem);
    if (ok) {
      phase_mark(p, 3, t0);
      phase_combine<DT>(c, p, call, sh, epoch, smem);
      phase_mark(p, 4, t0);
    }
  }
  /* this block's last events go out before its arrival in loom_kernel_end */
  if (call.tr_events != NULL && threadIdx.x == 0)
    trace_flush(&sh.tr, call.tr_events, call.tr_capacity, &p.tr_state->next);
  const int last = loom_kernel_end(c, epoch);
  /* the phase ends, max over blocks: warp i folds phase i, its lanes
   * reading the blocks' marks at once. (Until session 32 one thread a
   * phase read all gridDim.x marks, four loads in flight: ~33 dependent
   * L2 round trips at the very end of every call that asked for stats.) */
  static_assert(moe_cfg::threads >= 32 * 5 && MOE_HOP_THREADS >= 32 * 5, "a warp per phase");
  if (last && call.stats != NULL && threadIdx.x < 32 * 5) {
    const int ph = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint64_t m = 0;
    for (unsigned b = lane; b < gridDim.x; b += 32) m = max(m, __ldcg(&p.trace[(size_t)b * 5 + ph]));
    for (int o = 16; o > 0; o >>= 1) m = max(m, (uint64_t)__shfl_xor_sync(0xffffffffu, (unsigned long long)m, o));
    if (lane == 0) call.stats->phase_end_ns[ph] = (int64_t)m;
  }
  if (last && call.tr_events != NULL && threadIdx.x < 32)
    trace_finish(p.tr_state, call.tr_info, call.tr_capacity, c.rank);
}

/* The maps of phase_experts_hop (moe_maps) for this layer and rank. */
static cudaError_t make_maps(const loom_moe_params *p, int hdt, moe_maps *m) {
  const uint64_t es = (uint64_t)p->es, rows = (uint64_t)p->DR;
  const uint64_t f1 = (uint64_t)p->F * (p->gated ? 2 : 1);
  const uint32_t bk = 128 / (uint32_t)es;
  cudaError_t e;
  if ((e = hop_make_map(&m->a0, hdt, p->win_base + p->disp_off, rows, p->H, p->row_bytes / es, bk, 128)) != cudaSuccess)
    return e;
  /* B boxes: a task's 256 weight rows in one box where they are contiguous
   * (GEMM1; GEMM0 without SwiGLU), two 128-row boxes (gate, up) otherwise */
  if ((e = hop_make_map(&m->b0, hdt, p->w1, (uint64_t)p->El * f1, p->H, p->H, bk, p->gated ? 128 : 256)) !=
      cudaSuccess)
    return e;
  if ((e = hop_make_map(&m->a1, hdt, p->h, rows, p->F, p->F, bk, 128)) != cudaSuccess) return e;
  if ((e = hop_make_map(&m->b1, hdt, p->w2, (uint64_t)p->El * p->H, p->F, p->F, bk, 256)) != cudaSuccess) return e;
  /* half-width tasks (moe_task_cols): half the rows a box */
  if ((e = hop_make_map(&m->b0h, hdt, p->w1, (uint64_t)p->El * f1, p->H, p->H, bk, p->gated ? 64 : 128)) !=
      cudaSuccess)
    return e;
  if ((e = hop_make_map(&m->b1h, hdt, p->w2, (uint64_t)p->El * p->H, p->F, p->F, bk, 128)) != cudaSuccess) return e;
  /* the swapped tiles' rows (moe_swap), MOE_SWAP_BOX a box */
  if ((e = hop_make_map(&m->a0s, hdt, p->win_base + p->disp_off, rows, p->H, p->row_bytes / es, bk,
                        MOE_SWAP_BOX)) != cudaSuccess)
    return e;
  return hop_make_map(&m->a1s, hdt, p->h, rows, p->F, p->F, bk, MOE_SWAP_BOX);
}

struct loom_moe_plan {
  moe_maps maps; /* zero for the mma.sync engine */
  const void *kernel;   /* SW = 16 (loom_launch_moe) */
  const void *kernel32; /* SW = 32, or NULL */
  int threads, grid;
  size_t smem;
};

template <int MATH, int PARTS, int HOP, int GF>
static cudaError_t plan_parts(const loom_dev_comm *c, loom_moe_params *p, loom_moe_plan *pl) {
  typedef typename tile_types<MATH>::T T;
  const void *kernel = (const void *)moe_kernel<MATH, PARTS, HOP, 16, GF>;
  /* the 32-row swapped tile's kernel (Hopper engine; LOOM_MOE_SWAP=16 or 0: none) */
  const void *kernel32 = NULL;
  if constexpr (HOP)
    if (p->swap == MOE_SWAP_ROWS) kernel32 = (const void *)moe_kernel<MATH, PARTS, HOP, 32, GF>;
  const int threads = HOP ? MOE_HOP_THREADS : moe_cfg::threads;
  size_t smem = tile_smem<MATH, PARTS>::bytes;
  memset(&pl->maps, 0, sizeof pl->maps);
  cudaError_t e;
  if constexpr (HOP) {
    typedef typename moe_hop<MATH>::cfg CFG;
    /* alignment slack, ring, task words, signal ring, task records */
    smem = 1024 + CFG::dg_offset + 4 * MOE_TASK_SLOTS + MOE_SIG_BYTES + 4 * MOE_REC_WORDS * (MOE_TASK_SLOTS + 1);
    if ((e = make_maps(p, CFG::dtype, &pl->maps)) != cudaSuccess) return e;
  }
  /* gate: logits of a tile, the warps' partials, then every warp's ring:
   * the deepest ring, up to GATE_MAX_DEPTH chunks, that fits beside the
   * block's static shared memory */
  const size_t gate_fixed = gate_lg_bytes(p->E) + gate_part_bytes(threads / 32);
  int dev, optin;
  cudaFuncAttributes fa;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess) return e;
  /* the kernel and, where there is one, the 32-row tile's: every setting
   * below holds for both */
  const void *const kernels[2] = {kernel, kernel32};
  const int nk = kernel32 != NULL ? 2 : 1;
  size_t static_smem = 0;
  for (int i = 0; i < nk; i++) {
    if ((e = cudaFuncGetAttributes(&fa, kernels[i])) != cudaSuccess) return e;
    if (fa.sharedSizeBytes > static_smem) static_smem = fa.sharedSizeBytes;
  }
  const size_t room = (size_t)optin > static_smem ? (size_t)optin - static_smem : 0;
  p->gate_depth = 1;
  for (int d = GATE_MAX_DEPTH; d > 1; d--)
    if (gate_fixed + (size_t)(threads / 32) * gate_ring_bytes(d, p->es) <= room) {
      p->gate_depth = d;
      break;
    }
  const size_t gate = gate_fixed + (size_t)(threads / 32) * gate_ring_bytes(p->gate_depth, p->es);
  const size_t stage = (size_t)LOOM_MOE_BM * STAGE_LD * sizeof(T);
  if (gate > smem) smem = gate;
  if (stage > smem) smem = stage;
  if ((size_t)MOE_PLACE_BASE_BYTES > smem) smem = MOE_PLACE_BASE_BYTES; /* place's bases */
  /* The gate's logits tile (32 tokens x E fp32) grows with E: past ~900
   * experts the gate alone passes what a block may have (E = 1024: 212 KB
   * beside ~29 KB of moe_shared). Say so, and how many experts fit, rather
   * than let cudaFuncSetAttribute answer "invalid argument". */
  p->smem_need = smem + static_smem;
  p->smem_have = (size_t)optin;
  p->experts_fit = 0;
  if (p->smem_need > p->smem_have) {
    const size_t other = gate_part_bytes(threads / 32) + (size_t)(threads / 32) * gate_ring_bytes(1, p->es);
    if (room > other) p->experts_fit = (int)((room - other) / (LOOM_MOE_TT * sizeof(float)));
    return cudaErrorInvalidConfiguration;
  }
  const int sms = c->sms; /* the device's, or a loopback rank's share */
  if (sms * moe_cfg::blocks_per_sm > LOOM_MOE_MAX_BLOCKS) return cudaErrorCooperativeLaunchTooLarge;
  for (int i = 0; i < nk; i++) {
    if ((e = cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) !=
        cudaSuccess)
      return e;
    int per_sm;
    if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels[i], threads, smem)) != cudaSuccess)
      return e;
    if (per_sm < moe_cfg::blocks_per_sm) return cudaErrorCooperativeLaunchTooLarge;
  }
  pl->kernel = kernel;
  pl->kernel32 = kernel32;
  pl->threads = threads;
  pl->grid = sms * moe_cfg::blocks_per_sm;
  pl->smem = smem;
  return cudaSuccess;
}

/* Which engine runs the expert GEMMs: the Hopper engine for K-major weights
 * (OUT_IN) on bf16/fp16/TF32, the mma.sync engine otherwise (IN_OUT
 * weights, exact fp32). LOOM_MOE_ENGINE=mma forces the latter (diagnostic:
 * docs/moe.md). */
static int moe_engine_forced(void) {
  const char *v = getenv("LOOM_MOE_ENGINE");
  return v != NULL && strcmp(v, "mma") == 0;
}
static int use_hopper(const loom_moe_params *p) {
  static const int forced = moe_engine_forced(); /* once; thread-safe (layers of several GPUs may
                                                    be planned from several threads) */
  return !forced && p->wlayout == LOOM_WEIGHTS_OUT_IN && !(p->dtype == LOOM_FP32 && p->math == LOOM_MATH_FP32);
}

/* The expert phase's foreground dispatch share and task order
 * (moe_hop_fg_pieces, moe_raster, moe_decode). LOOM_MOE_FG /
 * LOOM_MOE_RASTER / LOOM_MOE_LOCAL_FIRST in the environment override them
 * (diagnostic, for A/B runs in one binary: docs/moe.md); LOOM_MOE_FG=0 is
 * one piece a warp, LOOM_MOE_RASTER=1 row tile by row tile,
 * LOOM_MOE_LOCAL_FIRST=0 the sources in order. */
#define MOE_FG_EXPERTS 1
#define MOE_RASTER 8 /* row tiles a band (moe_raster) */
#define MOE_LOCAL_FIRST 2 /* moe_decode's local first: 0 off, 1 own rows alone up front, 2 own rows first */
static int moe_env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

extern "C" cudaError_t loom_moe_plan_create(const loom_dev_comm *c, loom_moe_params *p, loom_moe_plan **out) {
  *out = NULL;
  const int fg = moe_env_int("LOOM_MOE_FG", MOE_FG_EXPERTS);
  p->fg_experts = fg > 0 ? fg : 0;
  const int raster = moe_env_int("LOOM_MOE_RASTER", MOE_RASTER);
  p->raster = raster > 0 ? raster : 1;
  p->local_first = moe_env_int("LOOM_MOE_LOCAL_FIRST", MOE_LOCAL_FIRST);
  p->warm_counts = moe_env_int("LOOM_MOE_WARM", 1) != 0; /* moe_counts run dry at barrier 1 (moe_kernel) */
  if (moe_env_int("LOOM_MOE_GATE_JOBS", 1) == 0) p->gate_part_units = 0; /* no gate jobs (phase_gate) */
  p->gate_fin_parts = moe_env_int("LOOM_MOE_GATE_FIN_PARTS", GATE_FIN_PARTS); /* gate_jobs' finishers a tile */
  p->narrow = moe_env_int("LOOM_MOE_NARROW", 1) != 0; /* half-width expert tasks where few (moe_task_cols) */
  /* decode experts on the swapped tiles (moe_counts, loom_launch_moe): 0
   * off, 16 the 16-row tile only, else (1, the default) the 16- or 32-row
   * tile's kernel as the call's tokens suggest */
  const int sw = moe_env_int("LOOM_MOE_SWAP", 1);
  p->swap = sw == 0 ? 0 : sw == 16 ? 16 : MOE_SWAP_ROWS;
  p->split = moe_env_int("LOOM_MOE_SPLIT", 1) != 0; /* its GEMM1 over K shares where few (moe_task_cols) */
  loom_moe_plan *pl = new (std::nothrow) loom_moe_plan; /* aligned new: the maps are 64-aligned */
  if (pl == NULL) return cudaErrorMemoryAllocation;
  const int hop = use_hopper(p);
  cudaError_t e;
  /* the fast gate (host/moe.c allows it for bf16 / fp16 only) */
  const int gf = p->gate_math == LOOM_GATE_FAST;
  switch (p->dtype) {
  case LOOM_BF16:
    if (gf) e = hop ? plan_parts<TILE_BF16, 2, 1, 1>(c, p, pl) : plan_parts<TILE_BF16, 2, 0, 1>(c, p, pl);
    else e = hop ? plan_parts<TILE_BF16, 2, 1, 0>(c, p, pl) : plan_parts<TILE_BF16, 2, 0, 0>(c, p, pl);
    break;
  case LOOM_FP16:
    if (gf) e = hop ? plan_parts<TILE_FP16, 2, 1, 1>(c, p, pl) : plan_parts<TILE_FP16, 2, 0, 1>(c, p, pl);
    else e = hop ? plan_parts<TILE_FP16, 2, 1, 0>(c, p, pl) : plan_parts<TILE_FP16, 2, 0, 0>(c, p, pl);
    break;
  default:
    if (gf) e = cudaErrorInvalidValue; /* (checked on the host before) */
    else if (p->math == LOOM_MATH_FP32) e = plan_parts<TILE_FP32, 2, 0, 0>(c, p, pl);
    else e = hop ? plan_parts<TILE_TF32, 2, 1, 0>(c, p, pl) : plan_parts<TILE_TF32, 2, 0, 0>(c, p, pl);
  }
  if (e != cudaSuccess) {
    delete pl;
    return e;
  }
  *out = pl;
  return cudaSuccess;
}

extern "C" void loom_moe_plan_destroy(loom_moe_plan *plan) { delete plan; }

/* moe_decode on the host over every ticket of one rank's expert phase
 * (moe.h "test hook"). The layout is built from rc as moe_counts builds
 * it: local expert le's rows start on a 128-row tile after the experts
 * before it, source-major inside; tp counts its row tiles. */
extern "C" int loom_moe_decode_check(int R, int El, int rank, int raster, int local_first, int nF, int nH,
                                     const int *rc, char *msg, size_t len) {
  moe_shared *sh = (moe_shared *)calloc(1, sizeof(moe_shared));
  int *seen = NULL, rc_out = -1;
  loom_moe_params p;
  loom_dev_comm c;
  memset(&p, 0, sizeof p);
  memset(&c, 0, sizeof c);
  p.R = R;
  p.El = El;
  p.raster = raster;
  p.local_first = local_first;
  c.rank = rank;
  if (sh == NULL || R * El > LOOM_MOE_MAX_EXPERTS) {
    snprintf(msg, len, "R * El = %d past the shared arrays", R * El);
    free(sh);
    return -1;
  }
  int base = 0, tiles = 0;
  for (int le = 0; le < El; le++) {
    int run = base;
    for (int s = 0; s < R; s++) {
      sh->rc[s * El + le] = rc[s * El + le];
      sh->roff[s * El + le] = run;
      run += rc[s * El + le];
    }
    const int nt = (run - base + LOOM_MOE_BM - 1) / LOOM_MOE_BM;
    sh->tp[le] = tiles;
    tiles += nt;
    base += nt * LOOM_MOE_BM;
  }
  sh->tp[El] = tiles;
  const int n0 = tiles * nF, total = tiles * (nF + nH);
  seen = (int *)calloc((size_t)total > 0 ? (size_t)total : 1, sizeof(int));
  if (seen == NULL) {
    snprintf(msg, len, "out of memory");
    free(sh);
    return -1;
  }
  for (int ticket = 0; ticket < total; ticket++) {
    const moe_task t = moe_decode(c, p, *sh, ticket, nF, nH);
    const int le = t.le, ncol = t.gemm ? nH : nF;
    const int nt = le >= 0 && le < El ? sh->tp[le + 1] - sh->tp[le] : 0;
    const int b = le >= 0 && le < El ? sh->roff[le] : 0;
    const int end = le >= 0 && le < El ? sh->roff[(R - 1) * El + le] + sh->rc[(R - 1) * El + le] : 0;
    const char *bad = NULL;
    if (t.gemm != (ticket >= n0)) bad = "GEMM0 / GEMM1 split";
    else if (le < 0 || le >= El || t.tl < 0 || t.tl >= nt || t.nb < 0 || t.nb >= ncol) bad = "task out of range";
    else if (t.row0 != (size_t)(b + t.tl * LOOM_MOE_BM) || t.dep != (int)(t.row0 / LOOM_MOE_BM)) bad = "row0 / dep";
    else if (t.rows != min(LOOM_MOE_BM, end - (int)t.row0) || t.rows <= 0) bad = "rows";
    else if (t.s < 0 || t.s >= R || sh->roff[t.s * El + le] > (int)t.row0 ||
             (t.s + 1 < R && sh->roff[(t.s + 1) * El + le] <= (int)t.row0)) bad = "first source";
    else {
      const int id = (t.gemm ? n0 : 0) + (sh->tp[le] + t.tl) * ncol + t.nb;
      if (seen[id]++) bad = "task decoded twice";
    }
    /* local first: an expert's first task is the first tile of this
     * rank's own rows (when they start one) */
    if (bad == NULL && local_first && R > 1 && ticket == (t.gemm ? n0 : 0) + sh->tp[le] * ncol) {
      const int lead = (sh->roff[rank * El + le] - b + LOOM_MOE_BM - 1) / LOOM_MOE_BM;
      if (lead < nt && t.tl != lead) bad = "local first: first tile";
    }
    if (bad != NULL) {
      snprintf(msg, len, "ticket %d of %d (R %d El %d rank %d raster %d local_first %d nF %d nH %d): %s "
               "(gemm %d le %d tl %d nb %d rows %d s %d)", ticket, total, R, El, rank, raster, local_first,
               nF, nH, bad, t.gemm, t.le, t.tl, t.nb, t.rows, t.s);
      goto out;
    }
  }
  rc_out = 0; /* total tickets, each a distinct task: every task exactly once */
out:
  free(seen);
  free(sh);
  return rc_out;
}

extern "C" cudaError_t loom_launch_moe(const loom_moe_plan *pl, const loom_dev_comm *c, const loom_moe_params *p,
                                       const loom_moe_call *call, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.gridDim = dim3(pl->grid);
  cfg.blockDim = dim3(pl->threads);
  cfg.dynamicSmemBytes = pl->smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  void *args[] = {(void *)c, (void *)p, (void *)call, (void *)&pl->maps};
  /* The 32-row swapped tile's kernel where this rank's tokens would give a
   * local expert more than MOE_SWAP32_FROM rows on average if every rank
   * sent as many (T R K / E): the 16-row tile then rarely holds every
   * local expert (the device falls back to the 128 x 256 tile past the
   * kernel's rows either way). Only the tile differs between the two
   * kernels: ranks may launch different ones. */
  const void *k = pl->kernel;
  if (pl->kernel32 != NULL && (int64_t)call->T * p->R * p->K > (int64_t)MOE_SWAP32_FROM * p->E) k = pl->kernel32;
  return cudaLaunchKernelExC(&cfg, k, args);
}
