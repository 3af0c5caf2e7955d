/*
 * GEMM + reduce-scatter and GEMM + all-reduce as one persistent kernel per
 * GPU (docs/collective_gemm.md): rank r gets act(sum_s A_s B_s^T), its own
 * rows (reduce-scatter, Mo = M / R each) or all of them (all-reduce).
 *
 * The kernel is the tile engine (hop_gemm_run) with R host groups (one
 * in the one-tile mode, RS_ONE_TILE_ROWS), one per
 * owner o of output rows, in the order o = r+1, r+2, ..., r (own last),
 * interleaved by column chunks (hop_params.n_chunk): chunk 0 of every owner,
 * then chunk 1, ... So every owner's chunk j is complete on all ranks at
 * about the same time, and its reduction runs under the GEMM of chunk j+1
 * (without chunks, every owner's last partial would come at the very end).
 * The epilogue stores a partial tile straight into o's window (part r of
 * o's staging: peer addresses in the group's output pointer), then one
 * consumer thread signals it (SIDE::done: the call tag, then the epoch into
 * o's flag for that tile). Before a group's first tile the engine's
 * readiness wait holds the producer until o has finished the previous call
 * (o's completion credit, target epoch - 1), so no store reaches a window
 * that is still being read.
 *
 * The side role (the producer warpgroup's warps 1-3, 96 threads per block)
 * walks the same chunks: block b takes work items b, b + grid, ... in chunk
 * order, and once its consumer warpgroups are out of the engine they take
 * the block's next items too (hop_side_after: 256 more threads, at their
 * register budget; the last column chunk waits for them). A reduction
 * item: wait for the R sources' flags of one of this rank's tiles, sum
 * their partials in source order in fp32 (bitwise deterministic), apply
 * the activation, round, store the rows of C. The all-reduce also pushes
 * the result into every peer's window (the part for owner r there,
 * loom_ar_fin_part) and then signals each peer; its gather
 * items (the peers' tiles of the same chunk) wait for the owner's signal and
 * copy the owner's finished rows from this rank's own window into C (local
 * reads: nothing crosses NVLink twice, and no rank reads another's window).
 * Every rank's C is then the same bits.
 *
 * The all-reduce's one-shot mode (loom_ar_one_shot: small partials, where
 * the second hop's fixed costs are the tail): one group over all m rows;
 * the epilogue stores the partial into part r of this rank's window and,
 * through the engine's replicas (hop_params.n_rep), of every peer's, and
 * done() signals every rank. Every rank's side role then reduces every
 * tile of all m rows from the R parts in source order into C, as an owner
 * of all rows: no publish, no gather. Each task waits for every rank's
 * credit (the one-tile mode's readiness).
 *
 * The kernel and its launcher are here; the two entry points are compiled
 * apart, gemm_rs.cu (the reduce-scatter's kernels, AR = false) and
 * gemm_ar.cu (the all-reduce's, AR = true), so the build compiles the two
 * halves of the instantiations in parallel (in one file it was the
 * longest compile of `make test`).
 */
#ifndef LOOM_OPS_GEMM_RS_CUH
#define LOOM_OPS_GEMM_RS_CUH

#include <cuda_runtime.h>

#include "collective.cuh"

/* The two teams that take the side role's work items: the producer
 * warpgroup's warps 1-3 from the start, the consumer warpgroups once their
 * GEMM tasks are done (hop_side_after). Each has its named barrier. */
#define RS_BAR_SIDE HOP_BAR_SIDE_FIRST
#define RS_BAR_CONS (HOP_BAR_SIDE_FIRST + 1)
#define RS_SIDE_THREADS 96
#define RS_CONS_THREADS 256

/* The one-tile mode (sessions 22, 24; coll_one_group): when all m rows fit
 * one task's 128 rows (decode: a few to 128 tokens), or up to
 * RS_ONE_TILE_ROWS rows where B is larger than half the L2 and no owner's
 * rows straddle a 128-row block, the R owner groups are one group. With a
 * group per owner, each owner's tasks streamed the whole of B for its m / R
 * rows: R times B's bytes from HBM, where B is what the GEMM costs at this
 * size (2x H100, Llama m = 128: GEMM phase 169 us against 100 for the same
 * per-GPU GEMM at one rank).
 * One group reads B once; its epilogue stores each row to its owner's
 * window through a row table (hop_group.row_ptr, an offset into this kernel
 * parameter: RS_ONE_TILE_ROWS entries), and each task signals every owner
 * of a row in its m-block (an owner's rows lie in one: its tile's flag
 * has one writer per source). LOOM_RS_ONE_TILE=0 turns it off, =1 on (tests,
 * diagnostics). */
#define RS_ONE_TILE_ROWS (2 * COLL_ONE_GROUP_ROWS)

struct rs_kparams {
  hop_params hp;                           /* group_maps, groups: offsets to maps, groups */
  union {
    CUtensorMap maps[2 * LOOM_AG_MAX_RANKS]; /* (A rows of owner g, B) per group */
    struct {                                 /* one-tile mode: one group */
      CUtensorMap maps[2];                   /* (all m rows of A, B) */
      char *row_dst[RS_ONE_TILE_ROWS];       /* row i of A -> its owner's window part for this rank */
    } one;
  };
  hop_group groups[LOOM_AG_MAX_RANKS];
  loom_dev_comm c;
  char *fin_peer[LOOM_AG_MAX_RANKS]; /* all-reduce: [d] peer (r + d) % R's window part for
                                        this rank's reduced rows (d = 1 .. R - 1) */
  char *out;        /* C: this rank's rows [mo x n] (reduce-scatter), all [m x n] (all-reduce) */
  size_t stride;    /* loom_rs_stride of the largest owner's rows */
  int m, n;         /* all rows (owner o: loom_ar_row0 / loom_ar_rows), columns */
  int bm, bn, raster_m, n_tiles; /* the engine's tile, raster band, n-blocks */
  int slot_tiles;   /* all-reduce: first signal slot of the owners' finished tiles */
  int slices;       /* side-role work items per tile (rs_slices) */
  int one_tile;     /* the one-tile mode (RS_ONE_TILE_ROWS): one group over all m rows */
  int ll;           /* the partials as tagged stores (coll_rs_ll_rule; the one-tile and one-shot
                       modes): in the tagged-store region, [source][ll_stride], no flags */
  size_t ll_stride; /* loom_rs_ll_stride of the part's rows */
  uint32_t *counters; /* all-reduce: [nranks][slots], row rank: slices reduced per own tile */
  uint64_t *stamps;   /* [blocks][LOOM_COLL_STAMPS] */
  const char *bias;   /* the BIAS kernels: [n], added to the sum before the activation (the
                         engine's partials carry none) */
  int64_t rep_delta[LOOM_AG_MAX_RANKS]; /* one-shot: hop_params.rep_delta, [i] = peer (r + i) % R's
                                           window part r minus this rank's */
};
static_assert(sizeof(rs_kparams) <= 4096, "kernel parameter: 4 KB");
static_assert(hop_pp<HOP_BF16>::BM == LOOM_RS_MIN_TILE && hop_pp<HOP_BF16>::BN == LOOM_RS_MIN_TILE &&
                  hop_large_w1<HOP_BF16>::BM >= LOOM_RS_MIN_TILE && hop_large_w1<HOP_BF16>::BN >= LOOM_RS_MIN_TILE,
              "loom_rs_slots counts the smallest tile's flags");
/* the decode tiles (C tiles of 64 or 16 x 128) only where every owner's
 * rows are one m-block (COLL_DECODE_ROWS, COLL_SWAP_ROWS): their flags are
 * then the n-blocks, as the 128 x 128 tile's */
static_assert(hop_small_w1<HOP_BF16>::CN == LOOM_RS_MIN_TILE && hop_dec2<HOP_BF16>::CN == LOOM_RS_MIN_TILE,
              "the decode tiles' flags");
static_assert(hop_pp<HOP_BF16>::CL == 1 && hop_large_w1<HOP_BF16>::CL == 1 && hop_small_w1<HOP_BF16>::CL == 1 &&
                  hop_dec2<HOP_BF16>::CL == 1,
              "n_chunk needs CL = 1");

/* A team's current work item, written by its thread 0 (claim). */
struct rs_team {
  int go;              /* 1: work on the item; 0: the block's items are done, or a poll gave up */
  int failed;          /* a flag poll of this team gave up (fail holds why) */
  int o, mb, nb, slice; /* owner, tile (rs_item), slice of the tile */
  loom_wait_fail fail;
};

struct rs_state {
  int next;          /* the block's items taken so far: item blockIdx.x + next * gridDim.x is next */
  int stop;          /* a poll gave up: no team takes another item */
  int cons_in;       /* the consumers are out of the engine and take items */
  rs_team team[2];   /* 0: side warps, 1: consumers */
};

/* 16 bytes of T as floats, and back. */
template <class T> struct rs_vec;
template <> struct rs_vec<float> {
  static constexpr int n = 4;
  static __device__ __forceinline__ void add(float *acc, int4 q) {
    acc[0] += __int_as_float(q.x);
    acc[1] += __int_as_float(q.y);
    acc[2] += __int_as_float(q.z);
    acc[3] += __int_as_float(q.w);
  }
  static __device__ __forceinline__ int4 pack(const float *v) {
    return make_int4(__float_as_int(v[0]), __float_as_int(v[1]), __float_as_int(v[2]), __float_as_int(v[3]));
  }
};
/* 16-bit T, 8 per vector (f2: one word, two elements, as floats) */
template <class T> struct rs_vec16 {
  static constexpr int n = 8;
  static __device__ __forceinline__ float2 f2(uint32_t w);
  static __device__ __forceinline__ void add(float *acc, int4 q) {
    const uint32_t w[4] = {(uint32_t)q.x, (uint32_t)q.y, (uint32_t)q.z, (uint32_t)q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 f = f2(w[i]);
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  }
  static __device__ __forceinline__ int4 pack(const float *v) {
    int4 q;
    uint32_t *w = (uint32_t *)&q;
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = hop_pack2((T *)0, v[2 * i], v[2 * i + 1]);
    return q;
  }
};
template <> __device__ __forceinline__ float2 rs_vec16<__nv_bfloat16>::f2(uint32_t w) {
  return __bfloat1622float2(*(const __nv_bfloat162 *)&w);
}
template <> __device__ __forceinline__ float2 rs_vec16<__half>::f2(uint32_t w) {
  return __half22float2(*(const __half2 *)&w);
}
template <> struct rs_vec<__nv_bfloat16> : rs_vec16<__nv_bfloat16> {};
template <> struct rs_vec<__half> : rs_vec16<__half> {};

/* Owner o's rows (reduce-scatter: m % R == 0, so the same for every o). */
template <bool SHOT = false> static __device__ __forceinline__ int rs_rows(const rs_kparams &p, int o) {
  if (SHOT) return o == p.c.rank ? p.m : 0; /* one-shot: every rank owns all rows */
  return (int)loom_ar_rows(p.m, p.c.nranks, o);
}

/* Whether owner o has a row in the bm rows from r0 (the one-tile mode). */
static __device__ __forceinline__ int rs_owns(const rs_kparams &p, int o, int r0) {
  const int b = (int)loom_ar_row0(p.m, p.c.nranks, o), e = b + rs_rows(p, o);
  return e > b && b < r0 + p.bm && e > r0;
}

/* Work item `item` of the side role: chunk-major as the engine's task order
 * (hop_sched_next with n_chunk), owners o = r, r+1, ... inside a chunk (only
 * r for the reduce-scatter), the engine's raster inside an owner's chunk.
 * Returns the owner; *mb, *nb the tile. */
template <bool AR, bool SHOT>
static __device__ __forceinline__ int rs_item(const rs_kparams &p, int item, int mt_all, int *mb, int *nb) {
  const int R = p.c.nranks, r = p.c.rank, nc = p.hp.n_chunk;
  const int j = item / (mt_all * nc), rem = item - j * mt_all * nc;
  const int span = min(nc, p.n_tiles - j * nc), mp = rem / span;
  int i = 0, base = 0, mt = (rs_rows<SHOT>(p, r) + p.bm - 1) / p.bm;
  if (AR && !SHOT)
    while (i + 1 < R && mp >= base + mt) {
      base += mt;
      i++;
      mt = (rs_rows(p, (r + i) % R) + p.bm - 1) / p.bm;
    }
  const int local = rem - base * span, band = p.raster_m * span;
  const int m0 = local / band * p.raster_m, in = local % band, band_m = min(p.raster_m, mt - m0);
  *mb = m0 + in % band_m;
  *nb = j * nc + in / band_m;
  return (r + i) % R;
}

/* Vector v of a slice of `vpr` 16-byte vectors per row: its byte offset. */
static __device__ __forceinline__ size_t rs_vec_off(int v, int vpr, size_t pitch) {
  const int i = v / vpr;
  return (size_t)i * pitch + (size_t)(v - i * vpr) * 16;
}

/* The end of a reduced vector (rs_reduce_rows, rs_reduce_rows_ll): BIAS
 * adds the bias's 16 bytes for vector vcol of the row, then the
 * activation; the rounded vector goes to out + off and (all-reduce) to
 * every peer's window at fin[1 .. R - 1] + fin_off + off. */
template <int ACT, class T, bool AR, bool BIAS>
static __device__ __forceinline__ void rs_finish_vec(float *acc, char *out, size_t off, int R, char *const *fin,
                                                     size_t fin_off, const char *bias, int vcol) {
  typedef rs_vec<T> V;
  if constexpr (BIAS) V::add(acc, __ldg((const int4 *)(bias + (size_t)vcol * 16)));
#pragma unroll
  for (int e = 0; e < V::n; e++) acc[e] = hop_act<ACT>(acc[e]);
  const int4 q = V::pack(acc);
  *(int4 *)(out + off) = q;
  if (AR)
    for (int d = 1; d < R; d++) *(int4 *)(fin[d] + fin_off + off) = q;
}

/* A team of NT threads: nv vectors of a slice, out = act(sum over the R
 * sources' partials at src + s * stride, in source order, fp32; BIAS: then
 * + the bias at `bias`, the slice's first column), also into
 * fin[1 .. R - 1] + the slice's offset (all-reduce: every peer's window,
 * over NVLink; stores, so nothing waits for them here). The loads of SB
 * sources are issued before their adds (one load in flight per thread made
 * the reductions latency-bound: ~200 GB/s per GPU for the side warps), and
 * the adds stay in source order (bitwise deterministic). */
template <int ACT, class T, bool AR, int NT, int SB, bool BIAS>
static __device__ __forceinline__ void rs_reduce_rows(char *out, const char *src, size_t stride, int R,
                                                      char *const *fin, size_t fin_off, const char *bias,
                                                      int nv, int vpr, size_t pitch, unsigned tid) {
  typedef rs_vec<T> V;
  for (int v = (int)tid; v < nv; v += NT) {
    const size_t off = rs_vec_off(v, vpr, pitch);
    float acc[V::n];
#pragma unroll
    for (int e = 0; e < V::n; e++) acc[e] = 0.f;
    for (int s0 = 0; s0 < R; s0 += SB) {
      int4 q[SB];
#pragma unroll
      for (int i = 0; i < SB; i++)
        if (s0 + i < R) q[i] = ptx_ld_cg_v4((const int4 *)(src + (size_t)(s0 + i) * stride + off));
#pragma unroll
      for (int i = 0; i < SB; i++)
        if (s0 + i < R) V::add(acc, q[i]);
    }
    rs_finish_vec<ACT, T, AR, BIAS>(acc, out, off, R, fin, fin_off, bias, v % vpr);
  }
}

/* Whether four tagged words all carry `tag`. */
static __device__ __forceinline__ int rs_ll_ready(const uint64_t (&w)[4], uint32_t tag) {
  return (uint32_t)(w[0] >> 32) == tag && (uint32_t)(w[1] >> 32) == tag && (uint32_t)(w[2] >> 32) == tag &&
         (uint32_t)(w[3] >> 32) == tag;
}

/* Poll source src's 32 tagged bytes at `at` (w: the first look) until all
 * four words carry `tag`; bounded. 0 where it gave up: another team or
 * thread did (st->stop), or a word carries another call's tag (a peer out
 * of step: LOOM_INVALID_USAGE), or the timeout or an abort came first;
 * then the team's fault is kept for the settle after the engine (the first
 * thread to give up writes it) and st->stop is raised. Inline, as every
 * poll in a kernel with setmaxnreg budgets (transport.cuh). */
static __device__ __forceinline__ int rs_ll_wait(const char *at, uint64_t (&w)[4], uint32_t tag,
                                                 const loom_dev_comm &c, int src, int slot, rs_state *st,
                                                 rs_team *tm) {
  const uint64_t start = ptx_globaltimer_ns();
  loom_wait_fail f;
  for (uint32_t polls = 1;; ++polls) {
    uint32_t other = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const uint32_t seen = (uint32_t)(w[j] >> 32);
      if (seen != 0 && seen != tag) other = seen;
    }
    if (other) {
      f = loom_wait_fail{LOOM_INVALID_USAGE, src, LOOM_WAIT_CALL_MISMATCH, slot, tag, other, 0};
      break;
    }
    ptx_ld_relaxed_sys_v2_u64(at, &w[0], &w[1]);
    ptx_ld_relaxed_sys_v2_u64(at + 16, &w[2], &w[3]);
    if (rs_ll_ready(w, tag)) return 1;
    if (polls % LOOM_WAIT_CHECK_EVERY == 0 && *(volatile int *)&st->stop) return 0;
    if (loom_poll_give_up(c, polls, start, c.timeout_ns, src, LOOM_WAIT_SIGNAL, slot, tag, w[0] >> 32, &f)) break;
  }
  if (atomicExch(&tm->failed, 1) == 0) tm->fail = f;
  *(volatile int *)&st->stop = 1;
  return 0;
}

/* rs_reduce_rows from tagged partials (rs_kparams.ll): source s's vector
 * at byte offset `off` of its part is 32 bytes at ll + s * ll_stride +
 * 2 off, four words {data, tag}. A thread loads SB sources' words at once,
 * then per source in order waits until all four carry this call's tag
 * (rs_ll_wait), zeroes them (the region is zero between calls, so a word
 * with this call's tag can only be this call's: the owner's credit orders
 * the zeroes before any source's next store) and adds them. 0 where a wait
 * gave up (the thread's remaining vectors are left). */
template <int ACT, class T, bool AR, int NT, int SB, bool BIAS>
static __device__ __forceinline__ int rs_reduce_rows_ll(char *out, char *ll, size_t ll_stride, int R,
                                                        char *const *fin, size_t fin_off, const char *bias,
                                                        int nv, int vpr, size_t pitch, unsigned tid, uint32_t tag,
                                                        const loom_dev_comm &c, int slot, rs_state *st,
                                                        rs_team *tm) {
  typedef rs_vec<T> V;
  for (int v = (int)tid; v < nv; v += NT) {
    const size_t off = rs_vec_off(v, vpr, pitch);
    char *const at0 = ll + 2 * off;
    float acc[V::n];
#pragma unroll
    for (int e = 0; e < V::n; e++) acc[e] = 0.f;
    for (int s0 = 0; s0 < R; s0 += SB) {
      uint64_t w[SB][4];
#pragma unroll
      for (int i = 0; i < SB; i++)
        if (s0 + i < R) {
          const char *at = at0 + (size_t)(s0 + i) * ll_stride;
          ptx_ld_relaxed_sys_v2_u64(at, &w[i][0], &w[i][1]);
          ptx_ld_relaxed_sys_v2_u64(at + 16, &w[i][2], &w[i][3]);
        }
#pragma unroll
      for (int i = 0; i < SB; i++)
        if (s0 + i < R) {
          char *const at = at0 + (size_t)(s0 + i) * ll_stride;
          if (!rs_ll_ready(w[i], tag) && !rs_ll_wait(at, w[i], tag, c, s0 + i, slot, st, tm)) return 0;
          *(int4 *)at = make_int4(0, 0, 0, 0);
          *(int4 *)(at + 16) = make_int4(0, 0, 0, 0);
          V::add(acc, make_int4((int)w[i][0], (int)w[i][1], (int)w[i][2], (int)w[i][3]));
        }
    }
    rs_finish_vec<ACT, T, AR, BIAS>(acc, out, off, R, fin, fin_off, bias, v % vpr);
  }
  return 1;
}

/* A team of NT threads: nv vectors of a slice from src (an owner's finished
 * rows, pushed into this rank's window) into out, U loads in flight per
 * thread. */
template <int NT, int U>
static __device__ __forceinline__ void rs_copy_rows(char *out, const char *src, int nv, int vpr, size_t pitch,
                                                    unsigned tid) {
  for (int v0 = (int)tid; v0 < nv; v0 += U * NT) {
    int4 q[U];
    size_t off[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int v = v0 + u * NT;
      off[u] = rs_vec_off(v, vpr, pitch);
      if (v < nv) q[u] = ptx_ld_cg_v4((const int4 *)(src + off[u]));
    }
#pragma unroll
    for (int u = 0; u < U; u++)
      if (v0 + u * NT < nv) *(int4 *)(out + off[u]) = q[u];
  }
}

/* Whether a launch tile may send tagged partials (coll_rs_ll_rule): the
 * decode tiles' (rows <= COLL_DECODE_ROWS), where the rule's small
 * partials live. */
template <class CFG> struct rs_ll_cfg {
  static constexpr bool value = CFG::CM <= COLL_DECODE_ROWS;
};

/* BIAS: the reductions add rs_kparams.bias to the sum (rs_reduce_rows); the
 * engine's epilogue adds none to the partials (no `bias` member here:
 * hop_side_bias is false). SHOT (AR only): the one-shot mode, its own
 * kernels, so that the two-shot ones carry none of its code. */
template <int ACT, class T, bool AR, bool BIAS, bool SHOT = false, bool LLOK = false>
struct rs_side {
  static constexpr bool active = true;
  static constexpr bool has_done = true;
  static constexpr bool chunked = true; /* hop_params.n_chunk's task order */
  static constexpr bool defer_done = !AR; /* hop_side_defer (reduce-scatter only: RESULTS session 16 (g)) */
  static constexpr bool after_engine = true; /* hop_side_after: the consumers join the work items */
  static constexpr bool dynamic = true; /* hop_dyn: tasks from a counter (the blocks stay together in the raster) */
  static constexpr bool replicas = SHOT; /* hop_side_rep: the one-shot mode's stores into every window */
  /* hop_side_ll: tagged stores where P->ll; compiled into the decode
   * tile's kernels only (LLOK, rs_ll_cfg): in the larger tiles' the tag,
   * hoisted out of the task loop, cost a register and the 128 x 256
   * reduce-scatter kernels a spill reload inside the k-block loop */
  static constexpr bool ll = LLOK && sizeof(T) == 2;
  static_assert(AR || !SHOT, "one-shot: the all-reduce's");
  const rs_kparams *P;
  uint64_t epoch;
  rs_state *st; /* shared memory */

  /* A consumer thread, after every store of task t's tile (hop_task_done:
   * the consumers' barrier orders them before this thread): this rank's
   * call tag, then the tile's flag, into the owner's window. One fence:
   * the flag's release store covers the tile (barrier, then release:
   * cumulative) and the tag (same thread, before it). Session 22: a fence
   * before the tag and a release for each store were three system fences
   * in a row on every tile's signal. */
  __device__ __forceinline__ void done(const hop_task &t) const {
    const loom_dev_comm &c = P->c;
    if (ll && P->ll) return; /* tagged stores: each word is its own signal */
    if (SHOT || P->one_tile) {
      /* every rank that got rows of the task (one-shot: all of them; the
       * one-tile mode: the owners of its rows): the tags, one fence, the
       * flags (one-shot: the task's tile; one-tile: its tile 0, t.n_blk) */
      const int r0 = t.m_blk * P->bm;
      for (int o = 0; o < c.nranks; o++)
        if (SHOT || rs_owns(*P, o, r0))
          ptx_st_relaxed_sys_u64(loom_flag_ptr(c, o, c.rank, loom_tag_slot(c)), loom_call_tag(epoch, c.op));
      __threadfence_system();
      for (int o = 0; o < c.nranks; o++)
        if (SHOT || rs_owns(*P, o, r0))
          loom_signal_fenced(c, o, SHOT ? t.m_blk * P->n_tiles + t.n_blk : t.n_blk, epoch);
      return;
    }
    const int o = (c.rank + 1 + t.group) % c.nranks;
    ptx_st_relaxed_sys_u64(loom_flag_ptr(c, o, c.rank, loom_tag_slot(c)), loom_call_tag(epoch, c.op));
    loom_signal(c, o, t.m_blk * P->n_tiles + t.n_blk, epoch);
  }

  /* The launch's tag for the epilogue's tagged stores (hop_ll_tag), 0 for
   * plain stores. */
  __device__ __forceinline__ uint32_t ll_tag() const { return P->ll ? loom_ll_tag(epoch, P->c.op) : 0u; }

  /* Thread 0 of a team: the block's next work item (st->next, shared by
   * both teams) of `total`, its tile into tm (rs_item), then the flags it
   * waits for: the R sources' partials of an own tile, or the owner's
   * signal of its finished tile. A poll that gives up sets tm->failed and
   * st->stop (settled after the engine): the other team leaves its poll
   * (loom_poll_flag_stop) and takes no more items. tm->go = 0 ends the team's loop. */
  template <bool LL>
  __device__ __forceinline__ void claim(rs_team *tm, int total, int reserved, int mt_all) const {
    const rs_kparams &p = *P;
    const loom_dev_comm &c = p.c;
    if (reserved < total) { /* the side warps: the last column chunk's items wait for the consumers */
      const int item = blockIdx.x + *(volatile int *)&st->next * (int)gridDim.x;
      if (item >= reserved && item < total) {
        const uint64_t t0 = ptx_globaltimer_ns(); /* bounded: past the timeout, take it anyway */
        while (!*(volatile int *)&st->cons_in && ptx_globaltimer_ns() - t0 < c.timeout_ns) __nanosleep(512);
      }
    }
    const int k = atomicAdd(&st->next, 1);
    const int item = blockIdx.x + k * (int)gridDim.x;
    if (item >= total || *(volatile int *)&st->stop) {
      tm->go = 0;
      return;
    }
    const int S = p.slices, tile = item / S;
    int mb, nb;
    const int o = rs_item<AR, SHOT>(p, tile, mt_all, &mb, &nb);
    const int slot = mb * p.n_tiles + nb;
    int ok = 1, stopped = 0;
    /* loom_poll_flag_stop: a team's wait ends when the other team has given
     * up. Without that, a team waiting for an owner (two periods, below)
     * kept the block, and so the settling of the other team's fault, a
     * period late: the owner's own timeout, which names the missing source,
     * then reached the others after their waits had expired
     * (test_collective loopback, 8 ranks, a silent rank). */
    if (LL && o == c.rank && p.ll) {
      /* tagged partials: every thread of the team polls its own words
       * (rs_reduce_rows_ll); first this thread waits for the first 32
       * bytes of the slice from every source, so that the team does not
       * spin on L2 while the partials are still being computed */
      const int row0 = mb * p.bm + (item - tile * S) * (p.bm / S);
      if (row0 < rs_rows<SHOT>(p, o)) {
        const uint32_t tag = loom_ll_tag(epoch, c.op);
        const char *at = loom_local_ptr(c, c.ll_offset) + 2 * ((size_t)row0 * p.n + (size_t)nb * p.bn) * sizeof(T);
        for (int s = 0; s < c.nranks && ok; s++) {
          uint64_t w[4];
          const char *a = at + (size_t)s * p.ll_stride;
          ptx_ld_relaxed_sys_v2_u64(a, &w[0], &w[1]);
          ptx_ld_relaxed_sys_v2_u64(a + 16, &w[2], &w[3]);
          if (!rs_ll_ready(w, tag)) ok = rs_ll_wait(a, w, tag, c, s, slot, st, tm);
        }
        stopped = !ok; /* rs_ll_wait kept the fault, or another thread's */
      }
    } else if (o == c.rank)
      for (int s = 0; s < c.nranks && ok; s++)
        ok = loom_poll_flag_stop(c, s, slot, epoch, LOOM_WAIT_SIGNAL, 1, &st->stop, &stopped, &tm->fail);
    else /* the owner waits for the same sources this rank's reductions do: when a
          * source is missing, give the owner's own timeout (which names it) one
          * more period to arrive here as an abort, rather than name the owner */
      ok = loom_poll_flag_stop(c, o, p.slot_tiles + slot, epoch, LOOM_WAIT_SIGNAL, 2, &st->stop, &stopped,
                               &tm->fail);
    tm->o = o;
    tm->mb = mb;
    tm->nb = nb;
    tm->slice = item - tile * S;
    tm->go = ok;
    if (!ok && !stopped) {
      tm->failed = 1;
      *(volatile int *)&st->stop = 1;
    }
  }

  /* Thread 0, all-reduce: own tile `slot` is in every peer's window (the 96
   * threads' stores of each slice ordered before by their barrier, the
   * slices of other blocks by coll_last_part): tell every peer, one fence
   * for all of them (session 16: a release store per peer, and before it
   * one per call tag, each waited for the previous one's round trip, ~2R
   * in a row per tile). No call tag here: this rank's partials of the
   * peer's rows carried it (done), and a peer of no rows checks none. */
  __device__ __forceinline__ void publish(int slot) const {
    const loom_dev_comm &c = P->c;
    __threadfence_system();
    for (int d = 1; d < c.nranks; d++) loom_signal_fenced(c, (c.rank + d) % c.nranks, P->slot_tiles + slot, epoch);
  }

  /* A team of NT threads (named barrier BAR; tid 0 .. NT - 1): work items
   * until the block's are done. The reductions of this rank's tiles and
   * (all-reduce) the copies of the peers' (polls only; a fault is settled
   * afterwards). A work item is one slice of a tile (P->slices slices of
   * bm / slices rows, so that small shapes spread their reductions over
   * every block instead of one block per tile); items are dealt round-robin
   * over the blocks in the engine's chunk order, and inside a block to
   * whichever team is free. Per item, the team's thread 0 decodes and polls
   * into shared memory, so the vector loops carry little state. SB: sources
   * loaded at once in a reduction, U: loads in flight in a copy. */
  template <int NT, int BAR, int SB, int U, bool SIDE_WARPS>
  __device__ __forceinline__ void work(rs_team *tm, unsigned tid) const {
    const rs_kparams &p = *P;
    const int R = p.c.nranks, r = p.c.rank, sr = p.bm / p.slices;
    int mt_all = 0; /* m-blocks of the items of one chunk column */
    for (int i = 0; i < (AR && !SHOT ? R : 1); i++) mt_all += (rs_rows<SHOT>(p, (r + i) % R) + p.bm - 1) / p.bm;
    const int total = mt_all * p.n_tiles * p.slices;
    /* the last column chunk's first item: its partials are complete only
     * as the engine ends, when the consumers are free to reduce them */
    const int reserved =
        SIDE_WARPS ? (p.n_tiles - 1) / p.hp.n_chunk * p.hp.n_chunk * mt_all * p.slices : total;
    const size_t pitch = (size_t)p.n * sizeof(T);
    for (;;) {
      if (tid == 0) claim<ll && !SIDE_WARPS>(tm, total, reserved, mt_all);
      ptx_named_bar_sync(BAR, NT);
      if (!tm->go) break;
      const int o = tm->o, mb = tm->mb, nb = tm->nb;
      const int row0 = mb * p.bm + tm->slice * sr; /* the slice's first row in o's rows */
      const int rows = max(0, min(sr, rs_rows<SHOT>(p, o) - row0));
      const int vpr = min(p.bn, p.n - nb * p.bn) / rs_vec<T>::n; /* 16-byte vectors per row (n % 8 == 0) */
      /* the slice inside an owner's rows, and where it goes in C */
      const size_t off = (size_t)row0 * pitch + (size_t)nb * p.bn * sizeof(T);
      char *const out = p.out + (AR && !SHOT ? (size_t)loom_ar_row0(p.m, R, o) * pitch : 0) + off;
      char *const win = loom_local_ptr(p.c, p.c.data_offset);
      if (ll && !SIDE_WARPS && o == r && p.ll) {
        rs_reduce_rows_ll<ACT, T, AR && !SHOT, NT, SB, BIAS>(
            out, loom_local_ptr(p.c, p.c.ll_offset) + 2 * off, p.ll_stride, R, p.fin_peer, off,
            BIAS ? p.bias + (size_t)nb * p.bn * sizeof(T) : NULL, rows * vpr, vpr, pitch, tid,
            loom_ll_tag(epoch, p.c.op), p.c, mb * p.n_tiles + nb, st, tm);
      } else if (o == r) {
        rs_reduce_rows<ACT, T, AR && !SHOT, NT, SB, BIAS>(out, win + off, p.stride, R, p.fin_peer, off,
                                                 BIAS ? p.bias + (size_t)nb * p.bn * sizeof(T) : NULL, rows * vpr,
                                                 vpr, pitch, tid);
      }
      if (o == r) {
        if (AR && !SHOT) { /* the tile's last slice tells every peer */
          ptx_named_bar_sync(BAR, NT);
          if (tid == 0 && !*(volatile int *)&st->stop) { /* a tagged wait that gave up: no publish */
            const int slot = mb * p.n_tiles + nb;
            if (p.slices == 1 || coll_last_part(p.counters + (size_t)r * p.c.slots + slot, (uint32_t)p.slices))
              publish(slot);
          }
        }
      } else if (AR) { /* a peer's finished tile, pushed here: the slice's rows into C */
        rs_copy_rows<NT, U>(out, win + (size_t)loom_ar_fin_part(o, r, R) * p.stride + off, rows * vpr, vpr,
                            pitch, tid);
      }
      ptx_named_bar_sync(BAR, NT); /* tm read by all before the next claim */
    }
    if (tid == 0) coll_stamp(p.stamps, LOOM_COLL_STAMP_SIDE);
  }

  /* Warps 1-3 of the producer warpgroup, 40 registers: from the start,
   * up to the last column chunk, whose items they share with the consumers
   * once those arrive (one load in flight per thread: more spilled at 40
   * registers, and the spills cost more than they won). */
  __device__ __forceinline__ void operator()(int w) const {
    /* tagged partials: the consumers' items alone (a launch that takes
     * them is at most about one wave of tasks, so the consumers are free
     * as the partials land, and this 40-register code keeps no tagged
     * path) */
    if (ll && P->ll) return;
    work<RS_SIDE_THREADS, RS_BAR_SIDE, 1, 2, true>(&st->team[0], (unsigned)(w * 32) + (threadIdx.x & 31u));
  }

  /* The consumer warpgroups (232 registers) once their tasks are done: the
   * block's items left, the last column chunk's first (those reductions
   * ran on the 96 side threads alone for ~50 us after the engine at M =
   * 16384, N = 1024 on 4 GPUs: RESULTS session 16 (f)). */
  __device__ __forceinline__ void after() const {
    if (threadIdx.x == 0) {
      coll_stamp(P->stamps, LOOM_COLL_STAMP_GEMM);
      *(volatile int *)&st->cons_in = 1;
    }
    work<RS_CONS_THREADS, RS_BAR_CONS, LOOM_AG_MAX_RANKS, 4, false>(&st->team[1], threadIdx.x);
  }
};

/* After the engine (thread 0, the smaller register budget's code; one
 * settle call site): a flag poll that gave up; a timed-out readiness wait
 * (a peer that has not finished the previous call: named by the first
 * credit still behind); then, block 0 (which acquired every source's flag
 * of its first tile), every peer's call tag. */
template <bool SHOT>
static __device__ __forceinline__ int rs_diagnose(const rs_kparams &p, const rs_state *st, uint64_t epoch,
                                                  loom_wait_fail *f) {
  const loom_dev_comm &c = p.c;
  for (int i = 0; i < 2; i++)
    if (st->team[i].failed) {
      *f = st->team[i].fail;
      return 1;
    }
  if (*(volatile uint32_t *)p.hp.error & HOP_ERR_TIMEOUT) {
    *f = loom_wait_fail{0, c.rank, LOOM_WAIT_CREDIT, loom_credit_slot(c), epoch - 1, 0, c.timeout_ns};
    if (loom_abort_seen(c)) return 1;
    f->status = LOOM_TIMEOUT;
    for (int o = 0; o < c.nranks; o++) {
      const uint64_t seen = ptx_ld_acquire_sys_u64(loom_flag_ptr(c, c.rank, o, loom_credit_slot(c)));
      if (seen < epoch - 1) {
        f->peer = o;
        f->observed = seen;
        return 1;
      }
    }
    return 1;
  }
  /* an all-reduce owner of no rows (m < R) received no partial: no check;
   * tagged partials carry their call's tag in every word (rs_ll_wait) */
  if (blockIdx.x != 0 || rs_rows<SHOT>(p, c.rank) == 0 || p.ll) return 0;
  return coll_check_tags<false>(c, epoch, 0, f); /* its first tile acquired every source's flag */
}

template <class CFG, int ACT, int OUT, bool AR, bool BIAS, bool SHOT>
__global__ void __launch_bounds__(CFG::threads, 1) rs_gemm_kernel(const __grid_constant__ rs_kparams P) {
  typedef typename hop_out_type<OUT>::T T;
  static_assert(CFG::consumer_wgs * 128 == RS_CONS_THREADS, "rs_side::after: every consumer thread");
  extern __shared__ uint8_t rs_smem_raw[];
  __shared__ rs_state st;
  const uint64_t epoch = loom_kernel_begin(P.c);
  if (loom_block_aborted(P.c)) { /* a peer failed since our last call */
    loom_kernel_end(P.c, epoch);
    return;
  }
  if (threadIdx.x == 0) {
    coll_stamp(P.stamps, LOOM_COLL_STAMP_BEGIN);
    st.next = 0;
    st.stop = 0;
    st.cons_in = 0;
    st.team[0].failed = st.team[1].failed = 0;
  }
  __syncthreads();
  /* partials leave the epilogue as they are: the activation comes after the
   * sum. Every task's readiness wait is its owners' completion credits (a
   * group per owner: that owner's; the one-tile mode: all of them), so a
   * task whose wait gave up stores nothing into any window. */
  typedef rs_side<ACT, T, AR, BIAS, SHOT, rs_ll_cfg<CFG>::value> side_t;
  hop_gemm_run<CFG, HOP_ACT_NONE, OUT, side_t>(P.hp, rs_smem_raw, (uint32_t)epoch, side_t{&P, epoch, &st});
  /* consumers at 232 registers, the producer warpgroup at 40: light code
   * only (the GEMM stamp is rs_side::after's) */
  __syncthreads();
  if (threadIdx.x == 0) {
    loom_wait_fail f;
    if (rs_diagnose<SHOT>(P, &st, epoch, &f)) loom_wait_settle(P.c, f);
    coll_stamp(P.stamps, LOOM_COLL_STAMP_END);
  }
  loom_kernel_end(P.c, epoch); /* its last block also zeroes the dynamic order's counter */
}

/* ---- host ------------------------------------------------------------------ */

/* Work items per tile (slices): coll_rs_slices (coll_rules.h, with the
 * measurements behind it). LOOM_RS_SLICES=n forces n (rounded down to a
 * power of two within its bounds; tests, diagnostics). */
static int rs_slices(int64_t tiles, int sms, int rows, int row_bytes, int R) {
  const int most = rows / COLL_RS_MIN_SLICE_ROWS;
  int s = coll_rs_slices(tiles, sms, rows, row_bytes, R);
  const char *force = getenv("LOOM_RS_SLICES");
  if (force && atoi(force) >= 1) s = coll_pow2_floor(atoi(force), most);
  return s;
}

/* Column chunks of the task order: coll_rs_chunks (coll_rules.h, with the
 * measurements behind it); returns n-blocks per chunk. LOOM_RS_CHUNKS=n
 * forces n chunks (tests cover 1 and several; diagnostics). */
static int rs_n_chunk(int n_tiles, int mt_all, int groups, int b_past_l2, int sms) {
  int chunks = coll_rs_chunks(n_tiles, mt_all, groups, b_past_l2, sms);
  const char *force = getenv("LOOM_RS_CHUNKS");
  if (force && atoi(force) >= 1) chunks = atoi(force) < n_tiles ? atoi(force) : n_tiles;
  return (n_tiles + chunks - 1) / chunks;
}

/* The engine groups of a call of m rows on R ranks (the launch's tile is
 * chosen on them): one of all m rows in the one-tile mode (coll_one_group,
 * LOOM_RS_ONE_TILE=0 turns it off), else one per owner of up to
 * ceil(m / R) rows (the reduce-scatter's m / R); *rows the rows of each.
 * ar: an all-reduce, whose one-shot mode (rs_one_shot) is one group too. */
static int rs_one_shot(const loom_coll_args *a, int R) {
  return loom_ar_one_shot(a->m, a->n, coll_esize(a), R);
}
static int rs_groups(const loom_coll_args *a, int R, int ar, int *rows) {
  const int64_t m = a->m;
  if (ar && rs_one_shot(a, R)) { /* the all-reduce's one-shot mode: one group of all m rows */
    *rows = (int)m;
    return 1;
  }
  const int one = coll_one_group(m, R, RS_ONE_TILE_ROWS, coll_b_past_l2(a), "LOOM_RS_ONE_TILE");
  *rows = (int)(one ? m : (m + R - 1) / R);
  return one ? 1 : R;
}

/* Whether a launch in the one-tile or one-shot mode sends tagged partials
 * (coll_rs_ll_rule; parts of part_rows rows). LOOM_LL=0 turns them off
 * (diagnostics, measurements; every rank must see the same setting). */
static int rs_ll(const loom_coll_args *a, int R, int part_rows, size_t ll_bytes) {
  const char *force = getenv("LOOM_LL");
  if (force && !strcmp(force, "0")) return 0;
  return coll_rs_ll_rule(part_rows, a->n, coll_esize(a), R, ll_bytes);
}

template <class CFG, int ACT, int OUT, bool AR>
static cudaError_t rs_launch(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t stream) {
  const int R = c->nranks, r = c->rank;
  if (R > LOOM_AG_MAX_RANKS || (!AR && a->m % R)) return cudaErrorInvalidValue;
  rs_kparams kp;
  memset(&kp, 0, sizeof kp);
  const size_t es = CFG::esize;
  const int shot = AR && rs_one_shot(a, R); /* the all-reduce's one-shot mode */
  const int mo_max = shot ? a->m : (a->m + R - 1) / R; /* rows this rank owns (the largest owner's) */
  const size_t stride = loom_rs_stride(mo_max, a->n, es);
  int g_rows = 0;
  const int groups = rs_groups(a, R, AR, &g_rows), one = groups == 1 && !shot; /* the one-tile mode */
  const int ll = (one || shot) && rs_ll_cfg<CFG>::value && rs_ll(a, R, mo_max, c->ll_bytes); /* tagged partials */
  const size_t ll_stride = ll ? loom_rs_ll_stride(mo_max, a->n, es) : 0;
  /* one-shot: the part's rows are the epilogue's C rows (ldc), tagged: twice the elements */
  cudaError_t e = coll_params<CFG>(&kp.hp, HOP_ACT_NONE, groups, g_rows, a->n, a->k, ll && shot ? 2 * a->n : a->n,
                                   c->sms, a->error,
                                   c->timeout_ns, offsetof(rs_kparams, groups) - offsetof(rs_kparams, hp),
                                   offsetof(rs_kparams, maps) - offsetof(rs_kparams, hp),
                                   a->n % 8 == 0 /* window parts: 256-aligned, rows of 16-byte multiples */);
  if (e != cudaSuccess) return e;
  const int n_tiles = kp.hp.n_tiles;
  int tile_begin = 0, owner_tiles = 0; /* tasks; the owners' tiles (side-role items / slices) */
  for (int o = 0; o < R; o++) owner_tiles += (int)(loom_ar_rows(a->m, R, o) + CFG::CM - 1) / CFG::CM * n_tiles;
  if (groups == 1) { /* one group over all m rows of A (the one-tile mode, one-shot) */
    if ((e = hop_make_map(&kp.one.maps[0], CFG::dtype, a->a, a->m, a->k, a->k, CFG::BK, CFG::a_box_rows)) != cudaSuccess ||
        (e = hop_make_map(&kp.one.maps[1], CFG::dtype, a->b, a->n, a->k, a->k, CFG::BK, CFG::b_box_rows)) !=
            cudaSuccess)
      return e;
    hop_group *hg = &kp.groups[0];
    hg->rows = a->m;
    hg->tile_begin = 0;
    tile_begin = (a->m + CFG::TM - 1) / CFG::TM * n_tiles;
    /* every task stores into every rank's window: its readiness is every
     * rank's completion credit of the previous call (target epoch - 1, as
     * a group per owner has it; the kernel's thread 0 polled them all
     * before the engine until session 26) */
    hg->ready = (const uint32_t *)(a->flags_local + (c->slots - 1));
    hg->ready_target = 0xFFFFFFFFu;
    hg->ready_stride = 0;
    hg->ready_n = R;
    hg->ready_n_stride = 2 * c->slots; /* 8-byte flags, slots an owner */
    kp.hp.b_ahead = coll_b_ahead<CFG>(0, tile_begin, c->sms, a->l2_bytes, kp.hp.nkb); /* off: it lost here */
    if (shot) { /* the partial into part r of this rank's window (rows of n: ldc = n), and of every peer's */
      hg->c = ll ? a->data_local - c->data_offset + c->ll_offset + (size_t)r * ll_stride
                 : a->data_local + (size_t)r * stride;
      for (int d = 1; d < R; d++) /* peer (r + d) % R's part r, from this rank's part r (either region) */
        kp.rep_delta[d] = (int64_t)((uintptr_t)a->peer_base[(r + d) % R] + c->data_offset) -
                          (int64_t)(uintptr_t)a->data_local;
      kp.hp.rep_delta = (const int64_t *)(uintptr_t)(offsetof(rs_kparams, rep_delta) - offsetof(rs_kparams, hp));
      kp.hp.n_rep = R;
    } else { /* the one-tile mode: each row's partial to its owner's window (row table) */
      for (int o = 0; o < R; o++) {
        const int64_t row0 = loom_ar_row0(a->m, R, o), rows = loom_ar_rows(a->m, R, o);
        for (int64_t i = 0; i < rows; i++)
          kp.one.row_dst[row0 + i] =
              ll ? (char *)a->peer_base[o] + c->ll_offset + (size_t)r * ll_stride + (size_t)i * 2 * a->n * es
                 : (char *)a->peer_base[o] + c->data_offset + (size_t)r * stride + (size_t)i * a->n * es;
      }
      hg->row_ptr = (void *const *)(uintptr_t)(offsetof(rs_kparams, one.row_dst) - offsetof(rs_kparams, hp));
    }
  }
  for (int g = 0; g < R && groups > 1; g++) {
    const int o = (r + 1 + g) % R;
    const int rows = (int)loom_ar_rows(a->m, R, o);
    const char *src = (const char *)a->a + (size_t)loom_ar_row0(a->m, R, o) * a->k * es;
    /* an owner of no rows (all-reduce, m < R): any valid map, no task reads it */
    if ((e = hop_make_map(&kp.maps[2 * g], CFG::dtype, src, rows > 0 ? rows : 1, a->k, a->k, CFG::BK,
                          CFG::a_box_rows)) != cudaSuccess)
      return e;
    if (g == 0) { /* every group's B is the same map: encode it once */
      if ((e = hop_make_map(&kp.maps[1], CFG::dtype, a->b, a->n, a->k, a->k, CFG::BK, CFG::b_box_rows)) !=
          cudaSuccess)
        return e;
    } else {
      kp.maps[2 * g + 1] = kp.maps[1];
    }
    hop_group *hg = &kp.groups[g];
    hg->rows = rows;
    hg->tile_begin = tile_begin;
    tile_begin += (rows + CFG::TM - 1) / CFG::TM * n_tiles;
    hg->c = (char *)a->peer_base[o] + c->data_offset + (size_t)r * stride; /* o's window, part r */
    /* o's completion credit of the previous call (in this rank's window):
     * target epoch - 1 = 0xFFFFFFFF + the epoch bias */
    hg->ready = (const uint32_t *)(a->flags_local + (size_t)o * c->slots + (c->slots - 1));
    hg->ready_target = 0xFFFFFFFFu;
    hg->ready_stride = 0;
  }
  for (int d = 1; AR && !shot && d < R; d++) /* owner r's reduced rows in peer (r + d) % R's window */
    kp.fin_peer[d] = (char *)a->peer_base[(r + d) % R] + c->data_offset +
                     (size_t)loom_ar_fin_part(r, (r + d) % R, R) * stride;
  kp.hp.total_tiles = kp.hp.total_tasks = tile_begin;
  kp.hp.n_chunk = rs_n_chunk(n_tiles, tile_begin / n_tiles, groups, coll_b_past_l2(a), c->sms);
  kp.one_tile = one;
  kp.ll = ll;
  kp.ll_stride = ll_stride;
  kp.c = *c;
  kp.out = (char *)a->c;
  kp.stride = stride;
  kp.m = a->m;
  kp.n = a->n;
  kp.bm = CFG::CM;
  kp.bn = CFG::CN;
  kp.raster_m = kp.hp.raster_m;
  kp.n_tiles = n_tiles;
  kp.slot_tiles = (int)(loom_rs_slots(mo_max, a->n) - 2);
  /* the side role's tiles: this rank's (reduce-scatter), every owner's (all-reduce) */
  kp.slices = rs_slices(AR && !shot ? owner_tiles : (int64_t)(mo_max + CFG::CM - 1) / CFG::CM * n_tiles, c->sms,
                        mo_max < CFG::CM ? mo_max : CFG::CM, (int)((a->n < CFG::CN ? a->n : CFG::CN) * es), R);
  kp.counters = a->counters;
  kp.stamps = a->stamps;
  kp.hp.tile_counter = &c->ctrl->tiles;
  kp.bias = (const char *)a->bias;
  if constexpr (AR) {
    if (shot) {
      if (a->bias) return coll_launch<CFG>(rs_gemm_kernel<CFG, ACT, OUT, AR, true, true>, kp, c, stream);
      return coll_launch<CFG>(rs_gemm_kernel<CFG, ACT, OUT, AR, false, true>, kp, c, stream);
    }
  }
  if (a->bias) return coll_launch<CFG>(rs_gemm_kernel<CFG, ACT, OUT, AR, true, false>, kp, c, stream);
  return coll_launch<CFG>(rs_gemm_kernel<CFG, ACT, OUT, AR, false, false>, kp, c, stream);
}

template <class CFG, int ACT, int OUT> struct rs_launcher {
  static cudaError_t run(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t s) {
    return rs_launch<CFG, ACT, OUT, false>(c, a, s);
  }
};
template <class CFG, int ACT, int OUT> struct ar_launcher {
  static cudaError_t run(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t s) {
    return rs_launch<CFG, ACT, OUT, true>(c, a, s);
  }
};

#endif /* LOOM_OPS_GEMM_RS_CUH */
