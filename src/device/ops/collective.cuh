/*
 * What the collective GEMM kernels (ag_gemm.cu, gemm_rs.cuh) share: the
 * tile choice, the engine parameters of R host groups carried in the
 * kernel parameter, and the cooperative launch. docs/collective_gemm.md.
 */
#ifndef LOOM_OPS_COLLECTIVE_CUH
#define LOOM_OPS_COLLECTIVE_CUH

#include <stdlib.h>
#include <string.h>

#include "../runtime/transport.cuh"
#include "../tile/hopper_host.cuh"
#include "coll_rules.h"
#include "ops.h"

/* The tiles, every dtype: 128 x 256 with both consumer warpgroups on one
 * tile and one wgmma batch in flight (hop_large_w1), unless that leaves
 * more than half the grid's blocks without a tile; then the ping-pong
 * 128 x 128 tile (twice the tiles). On 1x H200 (docs/collective_gemm.md
 * "Measured") the wide tile beat ping-pong by 12-15% (bf16, K = 8192 and
 * 16384) and 6% (TF32); at M = K = 4096, N = 256 (32 wide tiles on 132
 * SMs) it lost 29%. Between half a wave and one wave (session 25) it
 * depends on the operator (coll_wide_ok): the engine alone (1x H100,
 * bench/gemm --shape mid) ran 112 wide tiles of 512 x 7168 x 8192 in
 * 99.2 us against ping-pong's 111.7 and 128 of 512 x 8192 x 7168 in 85.7
 * against 104.3 (at 56 and 64, ping-pong won: 61 against 88, 105 against
 * 146), and on 4 GPUs the wide tile took the reduce-scatter / all-reduce
 * at 512 tokens (k = 7168) from 136.3 / 170.3 to 126.0 / 163.3 us; but
 * at mKernel M = 8192 (k = 2048, 128 wide tiles) the reduce-scatter went
 * from 66.9 to 72.6, and the all-gather there (n = 512: its pushes, not
 * its GEMM, are the work; the ping-pong form pushes with bulk copies) from
 * 383.3 to 431.8. 
 * Both 128 rows per task: one readiness flag per LOOM_AG_BLOCK_ROWS rows. */
template <int DT> struct coll_wide { typedef hop_large_w1<DT> cfg; };
template <int DT> struct coll_narrow { typedef hop_pp<DT> cfg; };
static_assert(hop_large_w1<HOP_BF16>::BN == hop_large_w1<HOP_TF32>::BN &&
                  hop_large_w1<HOP_BF16>::BN == hop_large_w1<HOP_FP16>::BN,
              "one wide-tile width for every dtype (the all-gather's lockstep test counts them)");
/* Decode (session 23): every group of at most COLL_DECODE_ROWS rows, the
 * 64 x 128 cooperative tile (hop_small_w1). The weights are the traffic;
 * the ping-pong tile streamed them slower the fewer rows a task had (1x
 * H100, bench/gemm --shape decode, 1 x m x 8192 x 14336, 64 tasks on 132
 * SMs: pp 134.5 / 127.5 / 111.3 / 101.8 us at m = 1 / 16 / 64 / 128, the
 * 64 x 128 tile 96-99 us at m <= 64, cuBLAS 93). Operators whose flags
 * count 128-row blocks take it only where a group is one m-block of 64.
 * Groups of at most COLL_SWAP_ROWS rows (session 34) take the swapped tile
 * (hop_dec2: 128 weight rows as wgmma's M, the group's <= 16 rows as its N;
 * its C tile is the 64 x 128 tile's first 16 rows, so the flags and window
 * slots are the same): 1x H200, bench/gemm --shape decode, 1-16 rows x 7168
 * x 8192 / 8192 x 14336, 0.88-0.94x cuBLAS where the 64 x 128 tile is
 * 0.67-0.82x (bench/RESULTS.md session 33 (f)). */
#define COLL_DECODE_ROWS 64
#define COLL_SWAP_ROWS 16
template <int DT> struct coll_decode { typedef hop_small_w1<DT> cfg; };
template <int DT> struct coll_swap { typedef hop_dec2<DT> cfg; };
static_assert(hop_dec2<HOP_BF16>::CM == COLL_SWAP_ROWS && hop_dec2<HOP_BF16>::CN == hop_small_w1<HOP_BF16>::CN &&
                  hop_small_w1<HOP_BF16>::CM == COLL_DECODE_ROWS,
              "the decode tiles' C tiles: 16 or 64 rows, as wide");
static_assert(hop_large_w1<HOP_BF16>::TM == LOOM_AG_BLOCK_ROWS && hop_pp<HOP_BF16>::TM == LOOM_AG_BLOCK_ROWS,
              "one flag per task row block");

/* Whether a launch of `tasks_wide` wide tiles on `sms` blocks takes the
 * narrow tile: where at most half the blocks would get a wide tile, and
 * below one wave unless the operator finds the wide tile worth it there
 * (wide_ok, coll_wide_ok). LOOM_AG_TILE=wide|narrow forces one (tests
 * cover both; diagnostics). Every rank of a call must decide the same: the
 * inputs are the same shapes and SM counts on every rank. */
static inline int coll_narrow_tile(int64_t tasks_wide, int sms, int wide_ok) {
  int narrow = coll_narrow_rule(tasks_wide, sms, wide_ok);
  const char *force = getenv("LOOM_AG_TILE");
  if (force && !strcmp(force, "wide")) narrow = 0;
  if (force && !strcmp(force, "narrow")) narrow = 1;
  return narrow;
}

/* Bytes of one element of a call's operands (fp32 or a 16-bit type). */
static inline size_t coll_esize(const loom_coll_args *a) { return a->dtype == LOOM_FP32 ? 4 : 2; }

/* Whether B [n x k] of a call is larger than half the L2: then a group per
 * owner or source that streams it reads it from HBM once per group, where
 * a smaller B would be read again from L2. */
static inline int coll_b_past_l2(const loom_coll_args *a) {
  return (size_t)a->n * a->k * coll_esize(a) > a->l2_bytes / 2;
}

/* Whether a call of R ranks runs its R groups (the parts of all_rows rows:
 * a source's rows in the all-gather, an owner's in the reduce-scatter and
 * all-reduce, part o = [loom_ar_row0, + loom_ar_rows) of all_rows) as one
 * group, so that B is read once, not once per group (the reduce-scatter's
 * one-tile mode, the all-gather's one-group mode):
 *   - when all rows fit one task's COLL_ONE_GROUP_ROWS (decode, session 23);
 *   - up to max_rows, when B is larger than half the L2 (b_past_l2) and no
 *     part straddles a COLL_ONE_GROUP_ROWS-row block: each task's rows are
 *     then whole parts, and each part's rows lie in one task row, so a
 *     readiness flag or a signal stays one per part and row block. 4x H100,
 *     Llama-70B-class, 256 tokens (bench/RESULTS.md session 24):
 *     reduce-scatter 113.8 -> 87.0 us, all-reduce 136.9 -> 110.3,
 *     all-gather 186.9 -> 126.7. Where B is small, its re-reads hit L2 and
 *     one group only made the tasks fewer and larger: the 256-row floor
 *     (hidden 128) 23.7 -> 27.8 us reduce-scatter, 29.8 -> 34.3 all-reduce.
 * The same on every rank (same shapes). The environment variable `off`=0
 * turns it off, =1 takes the second form whatever B's size (tests,
 * diagnostics). */
#define COLL_ONE_GROUP_ROWS 128
static_assert(COLL_ONE_GROUP_ROWS == LOOM_AG_BLOCK_ROWS, "a part in one task row block: one flag");
static inline int coll_one_group(int64_t all_rows, int R, int64_t max_rows, int b_past_l2, const char *off) {
  const char *force = getenv(off);
  if (force && !strcmp(force, "0")) return 0;
  if (R < 2 || all_rows > max_rows) return 0;
  if (all_rows <= COLL_ONE_GROUP_ROWS) return 1;
  if (!b_past_l2 && !(force && !strcmp(force, "1"))) return 0;
  for (int o = 0; o < R; o++) {
    const int64_t b = loom_ar_row0(all_rows, R, o), e = b + loom_ar_rows(all_rows, R, o);
    if (e > b && b / COLL_ONE_GROUP_ROWS != (e - 1) / COLL_ONE_GROUP_ROWS) return 0;
  }
  return 1;
}

/* The largest power of two <= x and <= cap (1 at least): what a forced
 * count (LOOM_RS_SLICES, LOOM_AG_PIECE_ROWS) is rounded down to. */
static inline int coll_pow2_floor(int x, int cap) {
  int p = 1;
  while (p * 2 <= x && p * 2 <= cap) p *= 2;
  return p;
}

/* Which decode tile groups of `rows` rows take (an operator that offers
 * them): 2 the swapped one (<= COLL_SWAP_ROWS), 1 the 64 x 128 one (<=
 * COLL_DECODE_ROWS), 0 neither. LOOM_AG_TILE=wide|narrow forces those
 * instead, =dec64 the 64 x 128 tile for the swapped one's groups too
 * (tests cover every tile; diagnostics). The same on every rank (same
 * shapes). */
static inline int coll_decode_tile(int rows) {
  const char *force = getenv("LOOM_AG_TILE");
  if (force && (!strcmp(force, "wide") || !strcmp(force, "narrow"))) return 0;
  if (rows <= COLL_SWAP_ROWS && !(force && !strcmp(force, "dec64"))) return 2;
  return rows <= COLL_DECODE_ROWS;
}

/* The engine parameters of R host groups of `rows` rows each, whose group
 * table and maps sit in the same kernel parameter struct at byte offsets
 * groups_off / maps_off from its hop_params (hop_params.maps_const). */
template <class CFG>
static cudaError_t coll_params(hop_params *hp, int act, int R, int rows, int n, int k, int ldc, int sms,
                               uint32_t *error, uint64_t timeout_ns, size_t groups_off, size_t maps_off,
                               int store16) {
  hop_problem pr;
  memset(&pr, 0, sizeof pr);
  hop_group_desc unused; /* validation only asks that a group table exists */
  pr.groups = &unused;
  pr.dtype = CFG::dtype;
  pr.act = act;
  pr.n = n;
  pr.k = k;
  pr.ldc = ldc;
  pr.num_groups = R;
  pr.error = error;
  pr.timeout_ns = timeout_ns;
  pr.num_sms = sms;
  cudaError_t e = hop_validate_common<CFG>(&pr);
  if (e != cudaSuccess) return e;
  hop_params_common<CFG>(hp, &pr);
  const int tiles = (rows + CFG::TM - 1) / CFG::TM * hp->n_tiles; /* per group */
  hp->total_tiles = tiles * R;
  hp->total_tasks = tiles * R;
  hp->split_k = 1;
  hp->kb_per_split = hp->nkb;
  hp->store16 = store16;
  hp->maps_const = 1; /* offsets from the hop_params, which the kernel reads in place */
  hp->group_maps = (const CUtensorMap *)(uintptr_t)maps_off;
  hp->groups = (const hop_group *)(uintptr_t)groups_off;
  /* one task per TPC first (hop_block_slot); LOOM_COLL_SPREAD=0: the
   * blocks in index order (diagnostics) */
  const char *spread = getenv("LOOM_COLL_SPREAD");
  hp->spread = !(spread && !strcmp(spread, "0"));
  return cudaSuccess;
}

/* hop_params.b_ahead for a launch of `tasks` tasks whose readiness waits
 * gate all of them at once (the all-gather's one group, the reduce-scatter's
 * and all-reduce's one tile): B's first STAGES k-blocks into the ring and,
 * for every task of the first wave together, up to a quarter of the L2 more
 * into L2, while the rows (or the owners' credits) are still on their way;
 * `on` the operator's default. 4x H100, Llama-70B-class (bench/RESULTS.md
 * session 26): the all-gather at 128 / 256 / 512 tokens 77.0 / 83.8 / 127.8
 * -> 75.8 / 83.0 / 125.8 us, but at 16 tokens 68.7 -> 72.0 (its pushes, done
 * at 9 us, then end at 13-14), the reduce-scatter and all-reduce at 16 and
 * 128 tokens +1..2 us. LOOM_COLL_B_AHEAD=0|1 forces it off / on (tests,
 * diagnostics). */
template <class CFG> static int coll_b_ahead(int on, int64_t tasks, int sms, size_t l2_bytes, int nkb) {
  const char *force = getenv("LOOM_COLL_B_AHEAD");
  if (force && !strcmp(force, "0")) return 0;
  if (!on && !(force && !strcmp(force, "1"))) return 0;
  const int64_t wave = tasks < sms ? tasks : sms;
  constexpr int w_stage = CFG::swap ? CFG::a_stage_bytes : CFG::b_stage_bytes; /* B's bytes a stage */
  int64_t kb = wave > 0 ? (int64_t)(l2_bytes / 4) / (wave * w_stage) : 0;
  if (kb > nkb) kb = nkb;
  return kb > 1 ? (int)kb : 1;
}

/* One cooperative launch of `kernel` on every SM of the communicator (a
 * loopback rank's share), CFG's threads and shared memory. */
template <class CFG, class KP>
static cudaError_t coll_launch(void (*kernel)(KP), const KP &kp, const loom_dev_comm *c, cudaStream_t stream) {
  const int smem = CFG::smem_bytes;
  /* per device: a process may drive several (every call, it is cheap) */
  cudaError_t e = cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)kernel, CFG::threads, smem)) !=
      cudaSuccess)
    return e;
  if (per_sm < 1) return cudaErrorCooperativeLaunchTooLarge;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.gridDim = dim3(c->sms);
  cfg.blockDim = dim3(CFG::threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, kp);
}

/* One thread, after its block's part of a unit of work (a piece of a row
 * block, a slice of a tile; the part's stores ordered before by the
 * caller's barrier): fence them at system scope and count the part on
 * this GPU's counter. Returns 1 for the part that completes the unit
 * (`need` parts), which has reset the counter to zero for the next call
 * and may then release the unit to a peer (system scope: it covers the
 * parts it counted). A unit of one part returns 1 at once, without fence
 * or count: the caller's release store covers its own part (one system
 * fence on the way to the peer instead of two). */
static __device__ __forceinline__ int coll_last_part(uint32_t *ctr, uint32_t need) {
  if (need == 1) return 1; /* the caller's release covers its own part: no fence, no count */
  __threadfence_system();
  if (ptx_atom_add_acq_rel_gpu_u32(ctr, 1u) + 1u != need) return 0;
  ptx_st_relaxed_gpu_u32(ctr, 0u);
  return 1;
}

/* Stamp i (LOOM_COLL_STAMP_*) of this block: one thread, one store. */
static __device__ __forceinline__ void coll_stamp(uint64_t *stamps, int i) {
  stamps[(size_t)blockIdx.x * LOOM_COLL_STAMPS + i] = ptx_globaltimer_ns();
}

/* Block 0's last check of a call (thread 0, after the engine): every
 * peer's call tag must be this call's. A peer stores its tag before any of
 * its flags, so a flag of that peer must have been acquired first: with
 * WAIT this polls slot wait_slot of each peer (bounded) before reading its
 * tag; without, the caller has acquired one already. Returns 1 with *f
 * filled (a mismatch is LOOM_INVALID_USAGE, a poll that gave up its
 * fault), or 0. */
template <bool WAIT>
static __device__ __forceinline__ int coll_check_tags(const loom_dev_comm &c, uint64_t epoch, int wait_slot,
                                                      loom_wait_fail *f) {
  const uint64_t want = loom_call_tag(epoch, c.op);
  for (int s = 0; s < c.nranks; s++) {
    if (s == c.rank) continue;
    if (WAIT && !loom_poll_flag(c, s, wait_slot, epoch, LOOM_WAIT_SIGNAL, f)) return 1;
    const uint64_t tag = ptx_ld_acquire_sys_u64(loom_flag_ptr(c, c.rank, s, loom_tag_slot(c)));
    if (tag != want) {
      *f = loom_wait_fail{LOOM_INVALID_USAGE, s, LOOM_WAIT_CALL_MISMATCH, 0, want, tag, 0};
      return 1;
    }
  }
  return 0;
}

/* One launch of an operator, chosen by dtype, tile and epilogue:
 * L<CFG, ACT, OUT>::run(c, a, stream) is the operator's launcher. The wide
 * tile's task count is groups x ceil(rows / 128) x ceil(n / 256). */
template <template <class, int, int> class L, class A, class CFG, int OUT>
static cudaError_t coll_by_act(const loom_dev_comm *c, const A *a, int act, cudaStream_t s) {
  switch (act) { /* loom_activation_t, or -1: none */
  case LOOM_ACT_RELU: return L<CFG, HOP_ACT_RELU, OUT>::run(c, a, s);
  case LOOM_ACT_GELU: return L<CFG, HOP_ACT_GELU_ERF, OUT>::run(c, a, s);
  case LOOM_ACT_SILU: return L<CFG, HOP_ACT_SILU, OUT>::run(c, a, s);
  case -1: return L<CFG, HOP_ACT_NONE, OUT>::run(c, a, s);
  default: return cudaErrorInvalidValue;
  }
}

/* Whether a call takes the wide tile between half a wave and one
 * (coll_wide_ok_rule, coll_rules.h). */
static inline int coll_wide_ok(const loom_coll_args *a, int all_gather) {
  return coll_wide_ok_rule(a->k, a->n, all_gather);
}

template <template <class, int, int> class L, class A, int DT, int OUT, bool DECODE>
static cudaError_t coll_by_tile(const loom_dev_comm *c, const A *a, int act, int groups, int rows, int n,
                                int wide_ok, cudaStream_t s) {
  typedef typename coll_wide<DT>::cfg W;
  typedef typename coll_narrow<DT>::cfg N;
  const int dec = DECODE ? coll_decode_tile(rows) : 0;
  if (dec == 2) return coll_by_act<L, A, typename coll_swap<DT>::cfg, OUT>(c, a, act, s);
  if (dec == 1) return coll_by_act<L, A, typename coll_decode<DT>::cfg, OUT>(c, a, act, s);
  const int64_t wide = (int64_t)groups * ((rows + W::BM - 1) / W::BM) * ((n + W::BN - 1) / W::BN);
  if (coll_narrow_tile(wide, c->sms, wide_ok)) return coll_by_act<L, A, N, OUT>(c, a, act, s);
  return coll_by_act<L, A, W, OUT>(c, a, act, s);
}

/* DECODE: the operator offers the decode tile (coll_decode_tile). */
template <template <class, int, int> class L, bool DECODE, class A>
static cudaError_t coll_dispatch(const loom_dev_comm *c, const A *a, int dtype, int act, int groups, int rows,
                                 int n, int wide_ok, cudaStream_t s) {
  switch (dtype) {
  case LOOM_BF16: return coll_by_tile<L, A, HOP_BF16, HOP_OUT_BF16, DECODE>(c, a, act, groups, rows, n, wide_ok, s);
  case LOOM_FP16: return coll_by_tile<L, A, HOP_FP16, HOP_OUT_FP16, DECODE>(c, a, act, groups, rows, n, wide_ok, s);
  case LOOM_FP32: return coll_by_tile<L, A, HOP_TF32, HOP_OUT_FP32, DECODE>(c, a, act, groups, rows, n, wide_ok, s);
  default: return cudaErrorInvalidValue;
  }
}

#endif /* LOOM_OPS_COLLECTIVE_CUH */
