/*
 * Hopper tile engine (sm_90a): C = epilogue(A x B^T) for dense and grouped
 * (per-expert) GEMMs, persistent and warp-specialised.
 *
 *   A  activations, row-major [rows x K], K contiguous (pitch lda elements)
 *   B  weights, nn.Linear layout [N x K], K contiguous ("K-major", pitch ldb)
 *   C  row-major [rows x n_out] (pitch ldc), or one pointer per row
 *
 * Block of 384 threads = 3 warpgroups (docs/tile.md has the picture):
 *   WG 0, 1  consumers: wgmma.mma_async out of shared memory, fp32
 *            accumulators in registers, epilogue straight to global memory
 *   WG 2     producer: one elected thread waits for a stage to be free,
 *            (first k-block of a task only) waits on the task's readiness
 *            counter, and issues two TMA loads (A box, B box) per stage;
 *            warps 1-3 idle, or run an operator's side role (hop_gemm_run)
 * Stages form a ring in shared memory; stage s has two mbarriers:
 *   full[s]   1 arrival (producer's arrive.expect_tx) + the TMA bytes
 *   empty[s]  one arrival per consumer warp that reads s (8; ping-pong 4)
 *             after its wgmmas read s
 * Tasks (output tiles BM x BN of one group, times split_k K slices) are
 * numbered group by group; block b takes tasks b, b + gridDim.x, ... (static
 * persistent schedule), producer and consumers walk the same sequence
 * independently. Groups are described on the host (per-group tensor maps) or,
 * with device groups, by a row-count table in device memory that every block
 * reads after a bounded readiness wait and turns into its task list in shared
 * memory (hop_dg_build); the mainloops and epilogues are shared.
 *
 * Mainloop schedules (hop_cfg::ml, docs/tile.md "v2"):
 *   HOP_ML_V1        cooperative: both consumer WGs on one tile, wgmma.wait_group 0
 *                    each stage (v1, kept for comparison)
 *   HOP_ML_COOP      cooperative, one wgmma batch in flight (wait_group 1, the
 *                    previous stage released after the wait); optional split-K
 *   HOP_ML_PINGPONG  each consumer WG owns a whole tile (128 x BN, two m64 halves):
 *                    tasks alternate WG 0, 1, 0, ... so one WG's epilogue runs
 *                    while the other's mainloop keeps the tensor cores busy
 *
 * Shared-memory operand layout (what TMA writes, what wgmma reads): a stage
 * holds A as BM rows and B as BN rows of 128 bytes each (BK = 64 16-bit or
 * 32 fp32 elements of K), written by TMA with the 128-byte swizzle: the 16-byte
 * chunk c of row r lands at chunk c ^ (r % 8). Eight rows (1024 bytes) form
 * one swizzle atom; every stage base is 1024-byte aligned. This is the
 * canonical K-major SWIZZLE_128B layout, described to wgmma by
 *   start address >> 4, LBO = 0 (unused for swizzled K-major), SBO = 1024
 *   (bytes between 8-row atoms), layout type 1 (128B swizzle) in bits 62-63;
 * the k-th wgmma of a stage (K step 16 or 8 elements = 32 bytes) starts at
 * +32*k bytes: the hardware applies the swizzle to the full address.
 */
#ifndef LOOM_TILE_HOPPER_CUH
#define LOOM_TILE_HOPPER_CUH

#include <cuda.h> /* CUtensorMap (type only; no libcuda link) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "../runtime/ptx.cuh"

/* Input storage / math: bf16 and fp16 run wgmma k16; fp32 storage runs wgmma
 * tf32 k8 (the tensor cores read the top 19 bits of each fp32). */
enum hop_dtype { HOP_BF16 = 0, HOP_FP16 = 1, HOP_TF32 = 2 };
/* Output element type (rounding: round-to-nearest-even for bf16/fp16). */
enum hop_out { HOP_OUT_BF16 = 0, HOP_OUT_FP16 = 1, HOP_OUT_FP32 = 2 };
/* Epilogue activation applied to the fp32 accumulator before the row scale.
 *   GELU_TANH  0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))  (PyTorch approximate='tanh')
 *   GELU_ERF   0.5x(1 + erf(x / sqrt(2)))                   (PyTorch default)
 *   SWIGLU     silu(gate) * up, gate/up interleaved in B by HOP_SWIGLU_BLOCK
 *              rows: B rows [64j, 64j+32) are gate rows [32j, 32j+32),
 *              B rows [64j+32, 64j+64) the matching up rows; n_out = N / 2. */
enum hop_act {
  HOP_ACT_NONE = 0,
  HOP_ACT_RELU = 1,
  HOP_ACT_GELU_TANH = 2,
  HOP_ACT_GELU_ERF = 3,
  HOP_ACT_SILU = 4,
  HOP_ACT_SWIGLU = 5
};
#define HOP_SWIGLU_BLOCK 32
/* Floats a row of the swapped tile's transpose in shared memory
 * (hop_epilogue_swap): 64 + 4, so that the 32 lanes of a warp writing one
 * accumulator register (8 consecutive columns x 4 rows two apart) hit 32
 * different banks. */
#define HOP_SWAP_PITCH 68

/* Error bits OR-ed into *hop_params.error (device memory, host reads after the
 * kernel). A timed-out task is skipped: its output rows are not written. */
#define HOP_ERR_TIMEOUT 1u
/* Device groups: a table entry was out of range (rows < 0, row_offset < 0,
 * or row_offset + rows > the row buffer's capacity); that group is treated
 * as empty (no task, nothing written). */
#define HOP_ERR_TABLE 2u

/* Named barriers (0 is __syncthreads): split-K arrival handshake of the two
 * consumer WGs; ping-pong order barriers HOP_BAR_ORDER + wg. */
#define HOP_BAR_SPLITK 1
#define HOP_BAR_ORDER 2
/* 2 + wg for ping-pong WG 0, 1; HOP_BAR_DONE (+ wg with ping-pong): the
 * consumers that stored a task's tile meet before SIDE::done; a side role
 * (hop_gemm_run) may use HOP_BAR_SIDE_FIRST and above */
#define HOP_BAR_DONE 4
/* HOP_BAR_SWAP + wg: the swapped tile's transpose in WG wg (hop_epilogue_swap) */
#define HOP_BAR_SWAP 6
#define HOP_BAR_SIDE_FIRST 8

/* Consumer schedule of a configuration (see the file comment). */
enum hop_mainloop { HOP_ML_V1 = 0, HOP_ML_COOP = 1, HOP_ML_PINGPONG = 2 };

/* How the consumers' epilogue reaches global memory (docs/tile.md "v7"):
 *   DIRECT  16-byte (or pair) stores from registers, hop_epilogue
 *   TMA     16-bit outputs to C through a tensor map: each consumer warp
 *           rounds its 16 rows into 64-column swizzled blocks of its own
 *           4 KB of shared staging (stmatrix) and one lane issues a TMA
 *           store per block, so the global writes drain while the next
 *           task's mainloop runs (hop_epilogue_tma). Falls back to DIRECT
 *           where there is no C map (row_ptr, fp32 output, unaligned C) and
 *           for device-group warps whose 16 rows are not all live. */
enum hop_epi { HOP_EPI_DIRECT = 0, HOP_EPI_TMA = 1 };

/* ---- tile configuration ----------------------------------------------------
 * One struct per kernel instance; every resource number lives here.
 *   BM x BN   output tile. Cooperative (V1, COOP): BM = 128: each consumer
 *             WG owns 64 rows x BN columns; BM = 64 (small-M): both own the
 *             64 rows, WG w takes columns [w*BN/2, (w+1)*BN/2).
 *             PINGPONG: BM = 128, one WG owns all 128 rows x BN (two m64
 *             wgmmas per K step), the other WG the next task.
 *   BK        K per stage = one 128-byte swizzle row
 *   STAGES    ring depth
 *   ML        hop_mainloop
 *   CL        CTAs per cluster along M (1, or 2: docs/tile.md "v3"): the two
 *             CTAs of a cluster run m-blocks 2i and 2i+1 of the same group
 *             and n-block; each loads half of the B box (BN / 2 rows) and
 *             multicasts it to both; empty[s] counts both CTAs' consumers
 *   KSUB      k-blocks per stage (1, or more: docs/tile.md "v3"): a stage is
 *             KSUB consecutive BK-wide blocks, each its own swizzled
 *             [rows][128 B] block, so the producer asks for KSUB * 128
 *             contiguous bytes of every B row at once                          */
template <int DT, int BM_, int BN_, int STAGES_, int ML_ = HOP_ML_V1, int CL_ = 1, int KSUB_ = 1,
          int EPI_ = HOP_EPI_DIRECT, int SWAP_ = 0>
struct hop_cfg {
  static constexpr int dtype = DT;
  static constexpr int esize = DT == HOP_TF32 ? 4 : 2;
  static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_, ml = ML_, CL = CL_, KSUB = KSUB_;
  static constexpr bool epi_tma = EPI_ == HOP_EPI_TMA;
  /* swap: the operands change places (docs/tile.md "v9"): the ring's A slot
   * (wgmma's M, BM rows) holds BM rows of B (weights) and its B slot (wgmma's
   * N, BN rows) BN rows of A (a group's rows, the tokens), so a task covers BN
   * rows of the group and BM output columns, and the consumers hold the
   * transposed tile (hop_epilogue_swap) */
  static constexpr bool swap = SWAP_ != 0;
  static constexpr int TM = swap ? BN : BM * CL; /* group rows of one scheduled task (a cluster's
                                                     pair of tiles) */
  static constexpr int TN = swap ? BM : BN;      /* output columns (B rows) of one task */
  static constexpr int CM = swap ? BN : BM;      /* C rows of one CTA's tile (the epilogue's) */
  static constexpr int CN = swap ? BM : BN;      /* C columns (B rows) of one CTA's tile */
  static constexpr int a_box_rows = swap ? BN : BM; /* rows of the A map's box */
  static constexpr int BK = 128 / esize;   /* 64 (16-bit) or 32 (fp32) */
  static constexpr int BKS = BK * KSUB;    /* K of one stage */
  static constexpr int b_box_rows = swap ? BM : BN / CL; /* rows of the B box each CTA loads */
  static constexpr int KSTEP = 32 / esize; /* K of one wgmma: 16 or 8 */
  static constexpr int consumer_wgs = 2;
  static constexpr int threads = 128 * (consumer_wgs + 1);
  static constexpr bool pingpong = ML_ == HOP_ML_PINGPONG;
  static constexpr int WG_M = pingpong ? BM : 64;                   /* rows of each consumer WG */
  static constexpr int WG_N = pingpong || BM == 128 ? BN : BN / 2; /* wgmma N of each consumer WG */
  static constexpr int m_halves = WG_M / 64;                        /* m64 wgmmas per K step */
  static constexpr int acc_regs = m_halves * WG_N / 2;              /* fp32 accumulators per thread */
  /* registers: 65536 / 384 threads = 170 -> 168 at entry; the producer WG gives
   * (168 - 40) * 128 = 16384 back, the consumers take (232 - 168) * 256 = 16384 */
  static constexpr int entry_regs = (65536 / threads) & ~7;
  static constexpr int producer_regs = 40, consumer_regs = 232;
  /* one arrival per consumer warp that reads a stage: both WGs, or (ping-pong)
   * the 4 warps of the WG that owns the stage's task */
  static constexpr int empty_arrivals = (pingpong ? 4 : consumer_wgs * 4) * CL; /* x CL: peers' warps too */
  /* shared memory, offsets from a 1024-aligned base; a stage is KSUB blocks
   * of A (BM x 128 B each), then (b_offset) KSUB blocks of B (BN x 128 B);
   * with the TMA epilogue the consumer warps' staging (stg_warp_bytes each:
   * two 16-row x 128-byte swizzled blocks) follows the ring; the swapped
   * tile's transpose (hop_epilogue_swap: each consumer WG's BN x 64 fp32
   * outputs, rows of HOP_SWAP_PITCH floats) takes the same place */
  static constexpr int a_blk_bytes = BM * 128, b_blk_bytes = BN * 128;
  static constexpr int a_stage_bytes = KSUB * a_blk_bytes, b_stage_bytes = KSUB * b_blk_bytes;
  static constexpr int stage_bytes = a_stage_bytes + b_stage_bytes; /* = TMA bytes per stage */
  static constexpr int a_offset = 0;
  static constexpr int b_offset = STAGES * a_stage_bytes;
  static constexpr int stg_offset = STAGES * stage_bytes;
  static constexpr int stg_warp_bytes = 2 * 16 * 128;
  static constexpr int stg_bytes = epi_tma ? consumer_wgs * 4 * stg_warp_bytes
                                  : swap  ? consumer_wgs * BN * HOP_SWAP_PITCH * 4
                                          : 0;
  static constexpr int bar_offset = stg_offset + stg_bytes;   /* full[STAGES], empty[STAGES] */
  static constexpr int flag_offset = bar_offset + 16 * STAGES; /* u32 task status per stage */
  static constexpr int sk_offset = flag_offset + 4 * STAGES;   /* u32 split-K "this WG pair writes" */
  static constexpr int dg_offset = sk_offset + 16; /* device groups: hop_dg_table (size set at launch) */
  static constexpr int smem_bytes = 1024 /* alignment slack */ + dg_offset; /* host groups */

  static_assert(BM == 64 || BM == 128, "BM: 64 (small-M) or 128");
  static_assert(!pingpong || BM == 128, "ping-pong: one WG owns 128 rows (two m64 halves)");
  static_assert(acc_regs <= 128, "accumulators must leave room in 232 registers");
  static_assert(WG_N == 64 || WG_N == 128 || WG_N == 256 || (swap && (WG_N == 16 || WG_N == 32)),
                "wgmma N per warpgroup: 64, 128, 256 (16, 32: the swapped tiles)");
  static_assert(!swap || (BM == 128 && (BN == 16 || BN == 32) && ML_ == HOP_ML_COOP && CL_ == 1 && KSUB_ == 1 &&
                          EPI_ == HOP_EPI_DIRECT),
                "swapped tile: 128 weight rows x 16 or 32 group rows (the engine's own kernels: 16), "
                "cooperative, 1-CTA, direct stores");
  static_assert(BN <= 256 && BM <= 256, "TMA box dims <= 256");
  static_assert(BK * esize == 128, "128B swizzle: inner box = 128 bytes");
  static_assert(a_stage_bytes % 1024 == 0 && b_stage_bytes % 1024 == 0,
                "stage bases must stay 1024-aligned for the swizzle atom");
  static_assert(STAGES >= 2, "a stage must fill while another is consumed");
  static_assert(smem_bytes <= 232448, "227 KB dynamic shared memory per block on sm_90");
  static_assert(128 * producer_regs + 128 * consumer_wgs * consumer_regs <= 65536, "register file");
  static_assert((entry_regs - producer_regs) * 128 >= (consumer_regs - entry_regs) * 128 * consumer_wgs,
                "consumers may only take what the producer gives back");
  static_assert(producer_regs % 8 == 0 && consumer_regs % 8 == 0, "setmaxnreg granularity");
  static_assert(HOP_SWIGLU_BLOCK * 2 == 64 && (swap || WG_N % 64 == 0), "SwiGLU pairs inside one thread");
  static_assert(CL == 1 || CL == 2, "clusters of 1 or 2 CTAs along M");
  static_assert(CL == 1 || ML_ != HOP_ML_V1,
                "clusters need every task to take all its stages (v1 skips after one)");
  static_assert(b_box_rows % 8 == 0 && (b_box_rows * 128) % 1024 == 0,
                "each CTA's half of B must be whole 1024-byte swizzle atoms");
  static_assert(KSUB >= 1 && KSUB <= 8, "k-blocks per stage");
  static_assert(!epi_tma || (ML_ == HOP_ML_COOP && BM == 128 && CL == 1),
                "TMA epilogue: the cooperative 128-row tile (each warp 16 rows of one WG's 64)");
};

/* The two configurations the engine ships:
 *   large  128 x 256, 4 stages x 48 KB = 192 KB: dense and grouped GEMMs
 *   small   64 x 128, 8 stages x 24 KB = 192 KB: decode (<= 64 rows a group),
 *           many N tiles so every SM streams weights                        */
template <int DT> struct hop_large : hop_cfg<DT, 128, 256, 4> {};
template <int DT> struct hop_small : hop_cfg<DT, 64, 128, 8> {};
/* v2 (docs/tile.md): the same shapes with one wgmma batch in flight
 * (and split-K available), and the ping-pong tile:
 *   large_w1  128 x 256, 4 x 48 KB, cooperative, wait_group 1
 *   small_w1   64 x 128, 8 x 24 KB, cooperative, wait_group 1 (+ split-K)
 *   pp        128 x 128 per WG, 6 x 32 KB = 192 KB, ping-pong               */
template <int DT> struct hop_large_w1 : hop_cfg<DT, 128, 256, 4, HOP_ML_COOP> {};
template <int DT> struct hop_small_w1 : hop_cfg<DT, 64, 128, 8, HOP_ML_COOP> {};
template <int DT> struct hop_pp : hop_cfg<DT, 128, 128, 6, HOP_ML_PINGPONG> {};
/* v3 (docs/tile.md "v3"):
 *   pp2    pp in 2-CTA clusters along M, B multicast (each CTA loads 64 of
 *          the 128 B rows of a stage for both)
 *   w1c2   large_w1 (128 x 256 cooperative) in 2-CTA clusters, B multicast
 *   sm2    small-M 64 x 128, 2 stages of 4 k-blocks (96 KB each): 512
 *          contiguous bytes of every B row per request burst
 *   sm2h   small-M 64 x 128, 4 stages of 2 k-blocks (48 KB each)           */
template <int DT> struct hop_pp2 : hop_cfg<DT, 128, 128, 6, HOP_ML_PINGPONG, 2> {};
template <int DT> struct hop_w1c2 : hop_cfg<DT, 128, 256, 4, HOP_ML_COOP, 2> {};
template <int DT> struct hop_sm2 : hop_cfg<DT, 64, 128, 2, HOP_ML_COOP, 1, 4> {};
template <int DT> struct hop_sm2h : hop_cfg<DT, 64, 128, 4, HOP_ML_COOP, 1, 2> {};
/* v7 (docs/tile.md "v7"):
 *   ws     large_w1 with the TMA epilogue: 4 x 48 KB ring + 32 KB staging   */
template <int DT> struct hop_ws : hop_cfg<DT, 128, 256, 4, HOP_ML_COOP, 1, 1, HOP_EPI_TMA> {};
/* v9 (docs/tile.md "v9", "v10"), the swapped decode tile (no split-K):
 *   dec2   128 weight rows x 16 group rows (m64n16: WG w takes weight rows
 *          64w..64w+63), 11 stages of 16 + 2 KB = 198 KB (176 KB of weights in
 *          flight) and 8.5 KB for the transpose, N / 128 tasks a group; its
 *          C tile (16 x 128) is the 64 x 128 tile's first 16 rows, so the
 *          operators' row blocks and flags keep their meaning            */
template <int DT> struct hop_dec2 : hop_cfg<DT, 128, 16, 11, HOP_ML_COOP, 1, 1, HOP_EPI_DIRECT, 1> {};

/* ---- problem description (device memory / kernel parameter) -------------- */

/* Two ways to describe the groups (docs/tile.md "Groups and bounds", "Device
 * groups"):
 *   host groups    the row counts M_g are known on the host: one hop_group per
 *                  group (tile_begin built on the host) and a pair of tensor
 *                  maps per group (or, dense, one pair in the kernel parameter)
 *   device groups  the row counts are written on the device (a previous phase
 *                  or kernel): hop_params.dg_rows != NULL. One A map over the
 *                  whole row buffer [dg_capacity x K], one B map over all
 *                  groups' weights stacked [num_groups * N x K] (both in the
 *                  kernel parameter), ONE hop_group (groups[0]) holding C,
 *                  row_ptr, row_scale and the readiness counters, all indexed
 *                  by row of the buffer (row_offset_g + r). The block reads
 *                  the table after a bounded wait on dg_table_ready and
 *                  derives the task list in shared memory (hop_dg_table).
 * A task reaches its group's data only through hop_task.desc (which hop_group),
 * .row_base (added to every A / C row of the group) and .group (times
 * hop_params.b_group_rows: B row base), so the roles and the epilogue do not
 * know which mode they run in. */

/* One group (expert) in device memory, 64 bytes. Host groups: group g's A
 * rows and B are reached through tensor maps (hop_params.group_maps[2g],
 * [2g+1]) whose outer dimension is the group's row count: TMA zero-fills rows
 * past the end, so no row of another group is ever read. Device groups: the
 * one descriptor of the launch; rows / tile_begin unused. */
struct hop_group {
  int32_t rows;            /* M_g >= 0                                          */
  int32_t tile_begin;      /* first task index (prefix sum of tiles before g)   */
  void *c;                 /* output [rows x n_out], pitch ldc; unused if row_ptr */
  void *const *row_ptr;    /* or NULL: row r goes to row_ptr[r] (n_out elements) */
  const float *row_scale;  /* or NULL: output row r is multiplied by row_scale[r] */
  const uint32_t *ready;   /* or NULL: task (group g, m_blk) waits for           */
  uint32_t ready_target;   /*   ready[g * ready_group_stride + m_blk * ready_stride] */
  int32_t ready_stride;    /*   - target >= 0 (signed); 0: one counter per group */
  int32_t ready_group_stride; /* host groups: 0 (each group has its own pointer) */
  int32_t ready_n;         /* host groups: 0 or 1, that counter; n > 1: it and the n - 1
                              after it, ready_n_stride apart, each to the target (rows
                              from several sources in one task) */
  int32_t ready_n_stride;
  uint32_t pad_[1];
};
static_assert(sizeof(hop_group) == 64, "hop_group layout");

/* Kernel parameter (passed __grid_constant__). Dense problems (one group)
 * and device groups use the maps a, b here; host-grouped problems use
 * group_maps in global memory. */
struct hop_params {
  CUtensorMap a, b;              /* dense: A [rows x K], B [N x K];
                                    device groups: A [dg_capacity x K], B [num_groups * N x K] */
  const CUtensorMap *group_maps; /* host groups: [2 * num_groups] (A_g, B_g), or NULL */
  const hop_group *groups;       /* host groups: [num_groups]; device groups: [1] */
  int32_t num_groups;
  int32_t total_tiles;           /* output tiles over all groups (host groups) */
  int32_t total_tasks;           /* total_tiles * split_k (host groups)        */
  int32_t split_k;               /* K slices per tile (1 = none; COOP only)    */
  int32_t kb_per_split;          /* k-blocks of one slice (last one may be shorter) */
  int32_t nkb;                   /* stages of K: ceil(K / (BK * KSUB))        */
  float *workspace;              /* split-K: [total_tiles][split_k][BM*BN] fp32 partials,
                                    each slice in the consumers' fragment order (hop_splitk_finish) */
  uint32_t *counters;            /* split-K: [total_tiles] arrivals, 0 between launches */
  int32_t n_tiles;               /* ceil(N / BN)                               */
  int32_t raster_m;              /* m-blocks per raster band (L2 reuse)        */
  int32_t n, k;                  /* N = rows of B; K                           */
  int32_t n_out;                 /* output columns: N, or N / 2 for SwiGLU     */
  int32_t ldc;                   /* output pitch in elements                   */
  uint32_t *error;               /* HOP_ERR_* bits, or NULL                    */
  uint64_t timeout_ns;           /* per readiness wait                         */
  /* device groups (NULL dg_rows: host groups) */
  const int32_t *dg_row_offset;  /* [num_groups] first buffer row of group g   */
  const int32_t *dg_rows;        /* [num_groups] M_g                           */
  const uint32_t *dg_table_ready;/* or NULL: the table is written when       */
  uint32_t dg_table_target;      /*   (int32)(*dg_table_ready - target) >= 0   */
  int32_t dg_capacity;           /* rows of the buffer (A map's outer dim, C rows) */
  int32_t b_group_rows;          /* B rows per group in the B map: N (device groups), 0 (host) */
  int32_t store16;               /* 1: every output row starts 16-byte aligned (C and ldc, or the
                                    caller's promise for row_ptr): 16-bit outputs are written 16
                                    bytes per lane (hop_epilogue); 0: column pairs */
  int32_t n_chunk;               /* host groups, CL = 1: 0, or the task order interleaves the
                                    groups every n_chunk n-blocks (hop_sched_next): chunk j of
                                    group 0, 1, ..., then chunk j + 1 */
  int32_t maps_const;            /* 1: group_maps, groups and their row_ptr are byte offsets
                                    from this struct's own address, into the operator's
                                    __grid_constant__ kernel parameter that holds it
                                    (hop_group_table, hop_group_maps, hop_group_ptrs):
                                    never written, so no tensormap fence (that fence is only
                                    defined on global memory); 0: pointers to global memory
                                    the host wrote */
  int32_t l2_hints;              /* TMA load L2 policies (1-CTA configurations): 0 none;
                                    1 B (weights, reused by every m-block) evict_last;
                                    2 that and A evict_first (docs/tile.md "v7") */
  uint32_t *tile_counter;        /* the dynamic task order (hop_side_dynamic): a counter in global
                                    memory, zero at launch, that the blocks' producers take
                                    tasks from; the operator zeroes it again as the launch ends
                                    (the collective GEMMs: loom_ctrl.tiles, loom_kernel_end) */
  int32_t b_ahead;               /* 1-CTA: > 0 sends B ahead of a readiness wait that has not
                                    passed yet: the first STAGES k-blocks into the ring, this many
                                    more into L2 (hop_b_ahead); 0: none */
  int32_t spread;                /* 1-CTA configurations: 1 starts block b at task hop_block_slot(b)
                                    (the static order's first task; the dynamic order's first, the
                                    counter then handing out tasks from gridDim.x on), which puts
                                    the even blocks first; 0 starts it at b (the dynamic order:
                                    every task from the counter) */
  const CUtensorMap *c_maps;     /* HOP_EPI_TMA configurations: C maps in global memory (16-bit
                                    elements, box 64 columns x 16 rows, 128-byte swizzle), one per
                                    group over its [rows x n_out] (host groups) or one over the
                                    [dg_capacity x n_out] buffer (device groups); NULL: direct
                                    stores (row_ptr, fp32 output, C not 16-byte aligned) */
  const void *bias;              /* [n] in the output type, added to column (B row) j before the
                                    activation, where the SIDE asks for it (hop_side_bias; not
                                    with SwiGLU): the collective GEMMs' loom_gemm_args_t.bias */
  const int64_t *rep_delta;      /* n_rep > 1, where the SIDE asks for replicas (hop_side_rep):
                                    [n_rep] byte distances, [0] = 0; every output element is also
                                    stored at its address + rep_delta[i], i >= 1 (the all-reduce's
                                    one-shot mode: the same part of every peer's window); a byte
                                    offset from this struct with maps_const, as groups */
  int32_t n_rep;                 /* 0 or 1: no replicas */
  int32_t hg_table;              /* host groups: 1 = every block copies the groups' tile_begin and
                                    rows into shared memory at hop_cfg::dg_offset before the roles
                                    split (hop_hg_build; the launch reserved hop_dg_smem_bytes
                                    (num_groups) there), so decoding a task reads no global memory;
                                    0: tasks decoded from the group table itself. Not with n_chunk
                                    (docs/tile.md "v8") */
};

/* The launch's group table and group maps (see hop_params.maps_const): a
 * pointer, or an offset from &p. Branch-free: the base is &p masked by
 * maps_const. */
static __device__ __forceinline__ uintptr_t hop_param_base(const hop_params &p) {
  return (uintptr_t)&p & (uintptr_t)0 - (uintptr_t)(p.maps_const != 0);
}
static __device__ __forceinline__ const hop_group *hop_group_table(const hop_params &p) {
  return (const hop_group *)(hop_param_base(p) + (uintptr_t)p.groups);
}
static __device__ __forceinline__ const CUtensorMap *hop_group_maps(const hop_params &p) {
  return (const CUtensorMap *)(hop_param_base(p) + (uintptr_t)p.group_maps);
}

/* Device groups: the task table a block builds in shared memory at
 * hop_cfg::dg_offset before the roles start (hop_dg_build), int32 words:
 *   [0]                ok: 1 = table read; 0 = its readiness wait timed out
 *   [1, G + 2)         tile_begin[0 .. G]: prefix of ceil(M_g / BM) * n_tiles;
 *                      tile_begin[G] = the launch's task count
 *   [G + 2, 2G + 2)    rows[G] (0 for an invalid entry: HOP_ERR_TABLE)
 *   [2G + 2, 3G + 2)   row_offset[G]                                          */
static __host__ __device__ __forceinline__ int hop_dg_smem_bytes(int num_groups) {
  return ((3 * num_groups + 2) * 4 + 15) & ~15;
}

/* ---- layer 1: primitives the roles share ----------------------------------- */

/* Spin (one thread or all threads of a role) until the phase of `bar` with
 * parity `parity` has completed. Both sides of a ring live in this block (or
 * its cluster peer), so in a correct program this always completes; a TMA
 * that never lands (a bad tensor map) or a broken peer would otherwise hang
 * the GPU, so the wait is bounded all the same: past HOP_RING_TIMEOUT_NS it
 * stops the kernel, and the launch fails with an error instead of hanging.
 * The clock is read once every 1024 polls, only while actually waiting.
 * The stop is `brkpt`, not `__trap()`: with no debugger attached both end
 * the launch with cudaErrorLaunchFailure (measured on H100, driver of the
 * device image: 719 "unspecified launch failure", sticky, within 1 s), but
 * a __trap() in a wait that decides a branch of a loop held the MoE
 * consumers' setmaxnreg region to ~168 registers (R165 under a budget of
 * 232; brkpt: R214, local loads/stores 59 -> 27, docs/moe.md session 12). */
#define HOP_RING_TIMEOUT_NS 10000000000ull /* 10 s: far beyond any stage */
static __device__ __forceinline__ void hop_mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t polls = 0;
  uint64_t t0 = 0;
  while (!ptx_mbar_try_wait_parity(bar, parity)) {
    if ((++polls & 1023u) == 0) {
      const uint64_t now = ptx_globaltimer_ns();
      if (t0 == 0) t0 = now;
      else if (now - t0 > HOP_RING_TIMEOUT_NS) asm volatile("brkpt;");
    }
  }
}

/* Whether readiness counter ctr has reached target (wrap-safe; acquire,
 * system scope): hop_wait_ready's test, and hop_producer's look before
 * it sends B ahead. */
static __device__ __forceinline__ int hop_ready_now(const uint32_t *ctr, uint32_t target) {
  return (int32_t)(ptx_ld_acquire_sys_u32(ctr) - target) >= 0;
}

/* Bounded wait of one thread for a readiness counter: 1 when
 * (int32)(*ctr - target) >= 0, 0 after timeout_ns (sets HOP_ERR_TIMEOUT) or at
 * once when the error word already has HOP_ERR_TIMEOUT (another wait timed
 * out: do not wait again for a dead producer; other bits do not cut waits). */
static __device__ __forceinline__ int hop_wait_ready(const uint32_t *ctr, uint32_t target,
                                                     uint64_t timeout_ns, uint32_t *error) {
  if (hop_ready_now(ctr, target)) return 1;
  const uint64_t t0 = ptx_globaltimer_ns();
  for (;;) {
    if (hop_ready_now(ctr, target)) return 1;
    if (error && (*(volatile uint32_t *)error & HOP_ERR_TIMEOUT)) return 0;
    if (ptx_globaltimer_ns() - t0 > timeout_ns) {
      if (error) atomicOr(error, HOP_ERR_TIMEOUT);
      return 0;
    }
    __nanosleep(128);
  }
}

/* wgmma shared-memory descriptor of a K-major, 128B-swizzled operand at
 * `smem` (1024-aligned atom base, or +32*k inside it). */
static __device__ __forceinline__ uint64_t hop_desc(const void *smem) {
  const uint64_t addr = ptx_smem_addr(smem);
  return ((addr & 0x3FFFF) >> 4)        /* bits  0-13: start address >> 4  */
         | ((uint64_t)0 << 16)          /* bits 16-29: LBO >> 4 (unused)   */
         | ((uint64_t)(1024 >> 4) << 32) /* bits 32-45: SBO >> 4 = 64      */
         | ((uint64_t)1 << 62);         /* bits 62-63: 1 = 128B swizzle    */
}

/* One wgmma of the configuration's shape: D(64 x N) (+)= A(64 x KSTEP) B^T. */
template <int DT, int N>
static __device__ __forceinline__ void hop_wgmma(float *d, uint64_t da, uint64_t db, uint32_t acc) {
  if (DT == HOP_BF16) {
    if (N == 16) ptx_wgmma_m64n16k16_bf16(d, da, db, acc);
    if (N == 32) ptx_wgmma_m64n32k16_bf16(d, da, db, acc);
    if (N == 64) ptx_wgmma_m64n64k16_bf16(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k16_bf16(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k16_bf16(d, da, db, acc);
  } else if (DT == HOP_FP16) {
    if (N == 16) ptx_wgmma_m64n16k16_f16(d, da, db, acc);
    if (N == 32) ptx_wgmma_m64n32k16_f16(d, da, db, acc);
    if (N == 64) ptx_wgmma_m64n64k16_f16(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k16_f16(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k16_f16(d, da, db, acc);
  } else {
    if (N == 16) ptx_wgmma_m64n16k8_tf32(d, da, db, acc);
    if (N == 32) ptx_wgmma_m64n32k8_tf32(d, da, db, acc);
    if (N == 64) ptx_wgmma_m64n64k8_tf32(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k8_tf32(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k8_tf32(d, da, db, acc);
  }
}

/* ---- task schedule ------------------------------------------------------------ */

struct hop_task {
  int32_t group;    /* group index: tile_begin / tensor maps (host), B rows and ready counters */
  int32_t desc;     /* hop_params.groups entry with C, row_ptr, row_scale, ready: group (host), 0 (device) */
  int32_t row_base; /* buffer row of the group's row 0: 0 (host: per-group maps and
                       pointers), row_offset_g (device: one map and pointers over all rows) */
  int32_t m_blk;    /* BM-row block inside the group            */
  int32_t n_blk;    /* BN-column block                          */
  int32_t rows;     /* the group's M_g (rows >= M_g are skipped) */
  int32_t tile;     /* output tile index (split-K workspace and counter) */
  int32_t slice;    /* K slice of the tile (0 without split-K)  */
  int32_t kb0, kb1; /* stages [kb0, kb1) of this task (KSUB k-blocks each) */
  int32_t phantom;  /* clusters: this CTA's m-block is past the group's end (odd
                       m-tile count): no A load, no math, no store, but the CTA
                       still multicasts its half of B and releases every stage */
};

/* Per-role cursor over this block's tasks: blockIdx.x, + gridDim.x, ...
 * (clusters: cluster c = blockIdx.x / CL takes tasks c, c + gridDim.x / CL,
 * ...; both CTAs walk the same sequence, rank r takes m-block CL*i + r) */
struct hop_sched {
  int32_t next;       /* next task index        */
  int32_t stride;     /* tasks between two of this block's: gridDim.x / CL */
  int32_t rank;       /* CTA rank in the cluster (0 without clusters) */
  int32_t group;      /* group of the last task (tasks only increase) */
  int32_t total;      /* tasks of the launch    */
  const int32_t *tab; /* tile_begin[0] of the shared-memory table (device groups, or host groups
                         with hop_params.hg_table); NULL: the host group table */
};

/* Block b's first task with hop_params.spread: the even blocks take tasks
 * 0, 1, ... and the odd ones follow. A grid of one block per SM places
 * blocks 2t and 2t + 1 on the two SMs of one TPC (measured, not
 * documented: 1x H100, bench/RESULTS.md session 26), which share its
 * path to memory, so a launch of fewer tasks than SMs that gave them to
 * blocks 0, 1, ... ran them two to a TPC: 56 tasks streaming 117 MB of
 * weights took 59-64 us where one to a TPC (this order, or a grid of 56
 * blocks) took 45-47. A bijection on [0, gridDim.x) whatever the
 * placement, so only speed depends on it. */
static __device__ __forceinline__ int hop_block_slot(const hop_params &p) {
  const int b = (int)blockIdx.x;
  if (!p.spread) return b;
  return b & 1 ? ((int)gridDim.x + 1) / 2 + b / 2 : b / 2;
}

/* `dg_table`: the block's task table in shared memory (device groups:
 * hop_dg_build; host groups with hop_params.hg_table: hop_hg_build), or NULL. */
template <class CFG>
static __device__ __forceinline__ hop_sched hop_sched_init(const hop_params &p, const int32_t *dg_table) {
  hop_sched s;
  s.next = CFG::CL == 1 ? hop_block_slot(p) : blockIdx.x / CFG::CL;
  s.stride = gridDim.x / CFG::CL;
  s.rank = CFG::CL > 1 ? (int32_t)ptx_cluster_ctarank() : 0;
  s.group = 0;
  s.tab = dg_table ? dg_table + 1 : NULL;
  s.total = p.dg_rows ? dg_table[1 + p.num_groups] /* split_k is 1 */
                      : CFG::ml == HOP_ML_V1 ? p.total_tiles : p.total_tasks;
  return s;
}

/* Whether a SIDE (hop_gemm_run) asks for the column-chunk task order
 * (hop_params.n_chunk): its `static constexpr bool chunked`, false when it
 * has none. The other kernels do not carry that code. */
template <class S, class = void> struct hop_side_chunked {
  static constexpr bool value = false;
};
template <class S> struct hop_side_chunked<S, decltype((void)S::chunked, void())> {
  static constexpr bool value = S::chunked;
};

/* Whether a SIDE with has_done wants each task's done() one mainloop late
 * (cooperative consumers): its `static constexpr bool defer_done`, false
 * when it has none. done() fences at system scope after the tile's stores;
 * called right after them, the fence waits for every store of the tile to
 * reach its (remote) destination, with both consumer WGs held at the
 * barrier before it. After the next task's mainloop those stores have long
 * drained. The last task's done() comes after the loop. The price: every
 * signal arrives a mainloop later (docs/tile.md). */
template <class S, class = void> struct hop_side_defer {
  static constexpr bool value = false;
};
template <class S> struct hop_side_defer<S, decltype((void)S::defer_done, void())> {
  static constexpr bool value = S::defer_done;
};

/* Whether a SIDE's launches add hop_params.bias in the epilogue: its
 * `static constexpr bool bias`, false when it has none (the kernels
 * without one compile as before the bias existed). */
template <class S, class = void> struct hop_side_bias {
  static constexpr bool value = false;
};
template <class S> struct hop_side_bias<S, decltype((void)S::bias, void())> {
  static constexpr bool value = S::bias;
};

/* Whether a SIDE's launches may replicate the epilogue's stores
 * (hop_params.n_rep): its `static constexpr bool replicas`, false when it
 * has none (the others compile without the loop). */
template <class S, class = void> struct hop_side_rep {
  static constexpr bool value = false;
};
template <class S> struct hop_side_rep<S, decltype((void)S::replicas, void())> {
  static constexpr bool value = S::replicas;
};

/* Whether a SIDE's launches may send their 16-bit outputs as tagged
 * stores (hop_quad_store_ll): its `static constexpr bool ll`, false when it
 * has none; then side.ll_tag() is the launch's tag, 0 for plain stores. */
template <class S, class = void> struct hop_side_ll {
  static constexpr bool value = false;
};
template <class S> struct hop_side_ll<S, decltype((void)S::ll, void())> {
  static constexpr bool value = S::ll;
};
template <class S> static __device__ __forceinline__ uint32_t hop_ll_tag(const S &side) {
  if constexpr (hop_side_ll<S>::value) return side.ll_tag();
  else return 0u;
}

/* Whether a SIDE wants the consumer threads once their tasks are done: its
 * `static constexpr bool after_engine`, false when it has none. Then every
 * consumer thread calls side.after() as it leaves the engine (inside the
 * consumers' branch, so at their register budget): the operator hands them
 * the side role's remaining work (the reduce-scatter's last reductions). */
template <class S, class = void> struct hop_side_after {
  static constexpr bool value = false;
};
template <class S> struct hop_side_after<S, decltype((void)S::after_engine, void())> {
  static constexpr bool value = S::after_engine;
};

/* Next task of this block, or 0 when done. Inside a group, tiles go in bands
 * of raster_m m-blocks: down the band's m-blocks first, then to the next
 * n-block, so the ~#SMs tiles in flight share a few A row blocks and B column
 * blocks in L2. Host and device groups differ only in where tile_begin, rows
 * and the row base come from (global hop_group vs the shared-memory table). */
template <class CFG, bool CH = false>
static __device__ __forceinline__ void hop_sched_task(hop_sched *s, const hop_params &p, int task,
                                                      hop_task *t) {
  int tile = task, slice = 0;
  if (CFG::ml != HOP_ML_V1) {
    tile = task / p.split_k; /* the slices of a tile are consecutive tasks: */
    slice = task - tile * p.split_k; /* they run side by side on neighbouring blocks */
  }
  int tile_begin, rows, span = p.n_tiles, n_off = 0; /* n-blocks of the raster, first one */
  if (s->tab) {
    const int32_t *tb = s->tab; /* tile_begin[G + 1], rows[G], row_offset[G] */
    while (s->group + 1 < p.num_groups && tile >= tb[s->group + 1]) s->group++;
    tile_begin = tb[s->group];
    rows = tb[p.num_groups + 1 + s->group];
    t->row_base = tb[2 * p.num_groups + 1 + s->group];
    t->desc = p.dg_rows ? 0 : s->group; /* device groups: one descriptor; host: the group's */
  } else if (CH && p.n_chunk > 0) {
    /* host groups interleaved by column chunks (hop_params.n_chunk; compiled
     * in only for a SIDE with chunked = true, hop_side_chunked): chunk j
     * (n-blocks [j n_chunk, + span)) of every group, group after group, then
     * chunk j + 1. Inside a group's chunk the raster below, span wide. */
    const hop_group *groups = hop_group_table(p);
    const int mt_all = p.total_tiles / p.n_tiles; /* m-blocks of all groups */
    const int j = tile / (mt_all * p.n_chunk);
    const int rem = tile - j * mt_all * p.n_chunk;
    span = min(p.n_chunk, p.n_tiles - j * p.n_chunk);
    n_off = j * p.n_chunk;
    const int mp = rem / span; /* m-block position over the groups in turn */
    int g = 0;
    while (g + 1 < p.num_groups && mp >= groups[g + 1].tile_begin / p.n_tiles) g++;
    s->group = g;
    tile_begin = tile - rem + groups[g].tile_begin / p.n_tiles * span; /* the group's chunk starts here */
    rows = groups[g].rows;
    t->row_base = 0;
    t->desc = g;
  } else {
    const hop_group *groups = hop_group_table(p);
    while (s->group + 1 < p.num_groups && tile >= groups[s->group + 1].tile_begin) s->group++;
    const hop_group *g = &groups[s->group];
    tile_begin = g->tile_begin;
    rows = g->rows;
    t->row_base = 0;
    t->desc = s->group;
  }
  const int local = tile - tile_begin;
  /* clusters: task "m-blocks" are TM = CL * BM rows (a pair of tiles) */
  const int m_tiles = (rows + CFG::TM - 1) / CFG::TM;
  const int band = p.raster_m * span;
  const int m0 = (local / band) * p.raster_m;
  const int in = local % band;
  const int band_m = min(p.raster_m, m_tiles - m0);
  t->group = s->group;
  t->m_blk = (m0 + in % band_m) * CFG::CL + s->rank;
  t->n_blk = n_off + in / band_m;
  t->phantom = t->m_blk * (CFG::TM / CFG::CL) >= rows;
  t->rows = rows;
  t->tile = tile;
  t->slice = slice;
  if (CFG::ml == HOP_ML_V1) {
    t->kb0 = 0;
    t->kb1 = p.nkb;
  } else {
    t->kb0 = slice * p.kb_per_split;
    t->kb1 = min(p.nkb, t->kb0 + p.kb_per_split);
  }
}

/* The static task order: this block's tasks blockIdx.x, + gridDim.x, ...
 * (clusters: per cluster), decoded into *t; 0 when done. */
template <class CFG, bool CH = false>
static __device__ __forceinline__ int hop_sched_next(hop_sched *s, const hop_params &p,
                                                     hop_task *t) {
  const int task = s->next;
  if (task >= s->total) return 0;
  s->next += s->stride;
  hop_sched_task<CFG, CH>(s, p, task, t);
  return 1;
}

/* Whether a SIDE asks for the dynamic task order: its `static constexpr
 * bool dynamic`, false when it has none; honoured by the cooperative
 * 1-CTA mainloop only (hop_dyn). */
template <class S, class = void> struct hop_side_dynamic {
  static constexpr bool value = false;
};
template <class S> struct hop_side_dynamic<S, decltype((void)S::dynamic, void())> {
  static constexpr bool value = S::dynamic;
};
template <class CFG, class S> struct hop_dyn {
  static constexpr bool value = hop_side_dynamic<S>::value && CFG::ml == HOP_ML_COOP && CFG::CL == 1;
};

/* The dynamic task order (hop_dyn): the producer takes each next task from
 * hop_params.tile_counter (one atomic add; every block's producer in turn)
 * and writes its index into this word of the task's first stage before
 * arming it; the consumers read it there once the stage is full. After the
 * last task the producer fills one more stage with -1 and no bytes. The
 * tasks in flight over the whole GPU are then always consecutive ones, so
 * the tiles that share an A row block or a B column block in the raster
 * run at the same time, whatever delays single blocks (readiness waits,
 * the operator's own traffic): with the static order a block that falls
 * behind stays behind, and once blocks drift apart their tiles stop
 * sharing operands in L2 (docs/collective_gemm.md, session 21). */
template <class CFG> static __device__ __forceinline__ volatile int32_t *hop_dyn_tasks() {
  __shared__ int32_t tasks[CFG::STAGES];
  return tasks;
}

/* Device groups: build the block's task table in shared memory (layout at
 * hop_dg_smem_bytes). All CFG::threads threads call it, before the roles
 * split; the caller's next __syncthreads publishes the result.
 *   1. thread 0: bounded wait until the table is written (acquire, system
 *      scope); on timeout HOP_ERR_TIMEOUT is set and the launch has no tasks
 *   2. every thread: a strided share of the G entries, read with relaxed
 *      GPU-scope loads (ordered after the acquire by the barrier; they go to
 *      L2, never a stale L1 line), checked against the buffer capacity, and
 *      the group's tile count
 *   3. warp 0: inclusive scan of the tile counts into tile_begin
 * The producer's TMA reads of A are ordered after the acquire by its own
 * fence.proxy.async (hop_producer). */
template <class CFG>
static __device__ __forceinline__ void hop_dg_build(const hop_params &p, int32_t *table) {
  const int G = p.num_groups;
  int32_t *tb = table + 1, *rows = table + G + 2, *off = table + 2 * G + 2;
  if (threadIdx.x == 0)
    table[0] = p.dg_table_ready
                   ? hop_wait_ready(p.dg_table_ready, p.dg_table_target, p.timeout_ns, p.error)
                   : 1;
  if (CFG::CL > 1) {
    /* clusters: both CTAs must see the same task list (a CTA whose peer had
     * no tasks would wait forever for the peer's half of B), so the table
     * counts as read only if both waits succeeded. Both CTAs then read the
     * same (released, immutable) table. */
    ptx_cluster_sync(); /* both table[0] written */
    uint32_t peer_ok = 1;
    if (threadIdx.x == 0)
      peer_ok = ptx_ld_shared_cluster_u32(ptx_mapa_shared(ptx_smem_addr(table), ptx_cluster_ctarank() ^ 1u));
    ptx_cluster_sync(); /* both read before either overwrites */
    if (threadIdx.x == 0) table[0] = table[0] && peer_ok;
  }
  __syncthreads();
  const int ok = table[0];
  for (int g = threadIdx.x; g < G; g += CFG::threads) {
    int32_t r = 0, o = 0;
    if (ok) {
      r = ptx_ld_relaxed_gpu_s32(p.dg_rows + g);
      o = ptx_ld_relaxed_gpu_s32(p.dg_row_offset + g);
      if (r < 0 || o < 0 || r > p.dg_capacity - o) {
        if (p.error) atomicOr(p.error, HOP_ERR_TABLE);
        r = 0;
        o = 0;
      }
    }
    rows[g] = r;
    off[g] = o;
    tb[g + 1] = (r + CFG::TM - 1) / CFG::TM * p.n_tiles;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int32_t carry = 0;
    for (int base = 0; base < G; base += 32) {
      const int g = base + lane;
      int32_t v = g < G ? tb[g + 1] : 0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int32_t u = __shfl_up_sync(0xFFFFFFFFu, v, d);
        if (lane >= d) v += u;
      }
      if (g < G) tb[g + 1] = carry + v;
      carry += __shfl_sync(0xFFFFFFFFu, v, 31);
    }
    if (lane == 0) tb[0] = 0;
  }
}

/* Host groups with hop_params.hg_table: the same table as hop_dg_build's
 * (ok, tile_begin[0 .. G], rows, row_offset = 0), copied from the group table,
 * which the host wrote before the launch and nothing writes while it runs
 * (plain loads). Called by all CFG::threads threads before the roles split;
 * warps 1 and up take the entries, one each, so thread 0's ring setup runs
 * beside the loads' round trip; the caller's __syncthreads publishes it.
 * The same threads bring each entry's readiness fields (its second 32-byte
 * sector) into L1 and its maps into the descriptor cache, so the producer's
 * first task finds them there (docs/tile.md "v8"). */
template <class CFG>
static __device__ __forceinline__ void hop_hg_build(const hop_params &p, int32_t *table) {
  const int G = p.num_groups;
  const hop_group *groups = hop_group_table(p);
  for (int g = (int)threadIdx.x - 32; g <= G; g += CFG::threads - 32) {
    if (g < 0) break;
    if (g < G) {
      if (!p.maps_const) ptx_prefetch_l1(&groups[g].ready); /* (the parameter: already near) */
      if (p.group_maps) {
        ptx_prefetch_tensormap(hop_group_maps(p) + 2 * g);
        ptx_prefetch_tensormap(hop_group_maps(p) + 2 * g + 1);
      }
      const int32_t tb = groups[g].tile_begin, r = groups[g].rows;
      table[1 + g] = tb;
      table[G + 2 + g] = r;
      table[2 * G + 2 + g] = 0;
    } else {
      table[0] = 1;
      table[1 + G] = p.total_tiles;
    }
  }
}

#include "hopper_epilogue.cuh"

/* ---- roles ------------------------------------------------------------------------ */

/* Shared-memory carve-up of one block (see hop_cfg offsets). */
struct hop_smem {
  uint8_t *a;              /* STAGES x a_stage_bytes      */
  uint8_t *b;              /* STAGES x b_stage_bytes      */
  uint64_t *full, *empty;  /* STAGES mbarriers each       */
  volatile uint32_t *flag; /* STAGES: 1 = task skipped (timeout), written on its first stage */
  volatile uint32_t *sk;   /* split-K: 1 = this block's consumers reduce and write the tile */
  const int32_t *dg;       /* the task table (device groups: hop_dg_build; host groups with
                              hop_params.hg_table: hop_hg_build); NULL: the host group table */
  uint32_t peer_empty;     /* clusters: shared::cluster address of the peer CTA's empty[0] */
  uint8_t *stg;            /* HOP_EPI_TMA: 8 consumer warps x stg_warp_bytes of staging */
};

/* The engine's place in a block's dynamic shared memory: base = smem_raw
 * rounded up to 1024 bytes (the swizzle atoms' alignment), the stages,
 * their barriers and task flags at CFG's offsets from it. The split-K,
 * device-group and cluster fields are left unset (NULL, 0) for the caller
 * that uses them. */
static __device__ __forceinline__ uint8_t *hop_smem_base(uint8_t *smem_raw) {
  return (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
}
template <class CFG> static __device__ __forceinline__ hop_smem hop_smem_ring(uint8_t *base) {
  hop_smem sm;
  sm.a = base + CFG::a_offset;
  sm.b = base + CFG::b_offset;
  sm.full = (uint64_t *)(base + CFG::bar_offset);
  sm.empty = sm.full + CFG::STAGES;
  sm.flag = (volatile uint32_t *)(base + CFG::flag_offset);
  sm.sk = NULL;
  sm.dg = NULL;
  sm.peer_empty = 0;
  sm.stg = base + CFG::stg_offset;
  return sm;
}

/* One thread, before the roles start: every stage's barriers (full: the
 * producer's one arrival; empty: CFG::empty_arrivals), made visible to the
 * async proxy and the cluster. */
template <class CFG> static __device__ __forceinline__ void hop_ring_init(const hop_smem &sm) {
  for (int s = 0; s < CFG::STAGES; s++) {
    ptx_mbar_init(&sm.full[s], 1);
    ptx_mbar_init(&sm.empty[s], CFG::empty_arrivals);
  }
  ptx_fence_mbar_init();
}

/* A consumer warp hands stage `stage` back (lane 0 arrives where `pred`):
 * on this CTA's empty barrier and, in a cluster, on the peer's (its
 * producer multicasts into this CTA's copy of the stage). Predicated, no
 * branch (C7518). */
template <class CFG>
static __device__ __forceinline__ void hop_release(const hop_smem &sm, uint32_t stage, uint32_t pred) {
  ptx_mbar_arrive_pred(&sm.empty[stage], pred);
  if (CFG::CL > 1) ptx_mbar_arrive_cluster_pred(sm.peer_empty + 8u * stage, pred);
}

/* The first B row (n-block row) of task t in the B map: its group's rows
 * (device groups) and its n-block. */
template <class CFG> static __device__ __forceinline__ int32_t hop_b_row(const hop_params &p, const hop_task &t) {
  return t.group * p.b_group_rows + t.n_blk * CFG::TN;
}

/* B ahead of a readiness wait (hop_params.b_ahead > 0, 1-CTA): B does not
 * depend on the rows the task waits for, so while they are still on their
 * way (or the owners' windows are still being read) the producer sends
 * B's first k-blocks into the next stages' shared memory -- each stage's
 * full barrier expects those bytes (expect_tx, no arrival: the phase
 * cannot complete before the producer's arrival with A's bytes after the
 * wait) -- and the following b_ahead k-blocks into L2. Returns the stages
 * so filled (their empty waits done); stage / phase are not advanced (the
 * main loop walks the same stages). A failed wait then arrives on those
 * stages without A: their B bytes complete them, the consumers skip the
 * task. */
template <class CFG>
static __device__ __forceinline__ int hop_b_ahead(const hop_params &p, const hop_smem &sm, const hop_task &t,
                                                  const CUtensorMap *mb, uint32_t stage, uint32_t phase) {
  const int pre = min(CFG::STAGES, t.kb1 - t.kb0);
  const int32_t c1 = hop_b_row<CFG>(p, t);
  /* swap: B (the weights) lives in the ring's A slot */
  uint8_t *const ring = CFG::swap ? sm.a : sm.b;
  constexpr int stage_b = CFG::swap ? CFG::a_stage_bytes : CFG::b_stage_bytes;
  constexpr int blk_b = CFG::swap ? CFG::a_blk_bytes : CFG::b_blk_bytes;
  for (int i = 0; i < pre; i++) {
    hop_mbar_wait(&sm.empty[stage], phase ^ 1);
    ptx_mbar_expect_tx(&sm.full[stage], stage_b);
#pragma unroll
    for (int sub = 0; sub < CFG::KSUB; sub++)
      ptx_tma_load_2d(ring + stage * stage_b + sub * blk_b, mb, &sm.full[stage],
                      ((t.kb0 + i) * CFG::KSUB + sub) * CFG::BK, c1);
    if (++stage == CFG::STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
  const int end = min(t.kb1, t.kb0 + pre + p.b_ahead);
  for (int kb = t.kb0 + pre; kb < end; kb++)
#pragma unroll
    for (int sub = 0; sub < CFG::KSUB; sub++) ptx_tma_prefetch_2d(mb, (kb * CFG::KSUB + sub) * CFG::BK, c1);
  return pre;
}

/* Producer: one thread. Per task: bounded readiness wait, then for each
 * k-block of the task wait for a free stage, arm full[s] with the stage's
 * bytes and issue the A and B boxes. A skipped task still takes stages
 * (flag = 1 on its first, plain arrives) so consumers learn it in order:
 * one stage in v1, all of its k-blocks otherwise (every task then takes
 * exactly kb1 - kb0 stages, which the ping-pong WGs rely on to skip the
 * other WG's tasks in the ring). With b_ahead, the first `pre` stages of a
 * task that had to wait already hold B (hop_b_ahead): the loop then skips
 * their empty wait and B loads and arms them with A's bytes alone. */
template <class CFG, bool CH, bool DYN = false>
static __device__ __forceinline__ void hop_producer(const hop_params &p, const hop_smem &sm,
                                                    uint32_t ready_bias) {
  hop_sched sc = hop_sched_init<CFG>(p, sm.dg);
  hop_task t;
  uint32_t stage = 0, phase = 0;
  const uint32_t rank = (uint32_t)sc.rank;
  int fenced_group = -1;
  /* device groups: the rows were published before the table's readiness
   * counter (acquired by thread 0 in hop_dg_build, then __syncthreads):
   * order this thread's TMA (async proxy) reads after it */
  if (p.dg_rows) ptx_fence_proxy_async_global();
  /* spread: the first task is the block's slot, the counter's tickets
   * start past every block's own */
  const int first = DYN && p.spread ? (int)gridDim.x : 0;
  int task = 0, next = DYN ? (p.spread ? hop_block_slot(p) : (int)atomicAdd(p.tile_counter, 1u)) : 0;
  for (;;) {
    if (DYN) {
      if ((task = next) >= sc.total) break;
      hop_sched_task<CFG, CH>(&sc, p, task, &t);
    } else if (!hop_sched_next<CFG, CH>(&sc, p, &t)) {
      break;
    }
    const CUtensorMap *ma = &p.a, *mb = &p.b;
    if (p.group_maps) {
      ma = hop_group_maps(p) + 2 * t.group;
      mb = ma + 1;
      if (!p.maps_const && fenced_group != t.group) { /* written by the host: acquire them once */
        ptx_fence_tensormap_acquire(ma);
        ptx_fence_tensormap_acquire(mb);
        fenced_group = t.group;
      }
    }
    const hop_group *g = &hop_group_table(p)[t.desc];
    const uint32_t *ready = g->ready;
    /* a phantom m-block (clusters, odd m-tile count) has no counter and no
     * rows: skipped without an error; flag 2 tells the consumers */
    int ok = !t.phantom;
    int pre = 0; /* stages whose B went out ahead of the readiness wait */
    if (ready && ok) {
      const uint32_t *r0 = ready + (size_t)t.group * g->ready_group_stride + (size_t)t.m_blk * g->ready_stride;
      const int rn = max(1, g->ready_n);
      const uint32_t target = g->ready_target + ready_bias;
      if (CFG::CL == 1 && CFG::ml != HOP_ML_V1 && p.b_ahead > 0) { /* V1 leaves a skipped task after one stage */
        int now = 1;
        for (int i = 0; now && i < rn; i++) now = hop_ready_now(r0 + (size_t)i * g->ready_n_stride, target);
        if (!now) pre = hop_b_ahead<CFG>(p, sm, t, mb, stage, phase);
      }
      for (int i = 0; ok && i < rn; i++) /* each wait bounded */
        ok = hop_wait_ready(r0 + (size_t)i * g->ready_n_stride, target, p.timeout_ns, p.error);
      if (ok) ptx_fence_proxy_async_global(); /* TMA reads after the acquire */
    }
    for (int kb = t.kb0; kb < t.kb1; kb++) {
      /* dynamic order: the next task is taken STAGES stages before this
       * one's last (the add's latency hides behind them) */
      if (DYN && kb == max(t.kb0, t.kb1 - CFG::STAGES)) next = first + (int)atomicAdd(p.tile_counter, 1u);
      const int ahead = kb - t.kb0 < pre; /* B in flight, the empty wait done (hop_b_ahead) */
      if (!ahead) hop_mbar_wait(&sm.empty[stage], phase ^ 1); /* fresh barrier: parity 1 passes */
      if (kb == t.kb0) {
        sm.flag[stage] = ok ? 0u : t.phantom ? 2u : 1u;
        if (DYN) hop_dyn_tasks<CFG>()[stage] = task;
      }
      if (CFG::CL > 1) {
        /* cluster: B is weights, never gated, so both CTAs always multicast
         * their half of it (skipped and phantom tasks too): no CTA ever
         * waits for a peer's B that will not come, whatever each one's
         * readiness wait decided. Only this CTA's A depends on ok. The
         * empty wait above covered both CTAs' consumers (empty counts the
         * peer's warps), so the peer's copy of the stage is free as well. */
        /* a B part that starts at or past N (last n-block, N % BN != 0) is
         * not loaded by anyone (no fully out-of-bounds box): its columns
         * are never stored, and each output column reads only its own B row */
        const int nparts = min(CFG::CL, (p.n - t.n_blk * CFG::BN + CFG::b_box_rows - 1) / CFG::b_box_rows);
        ptx_mbar_arrive_expect_tx(&sm.full[stage], (ok ? CFG::a_stage_bytes : 0) +
                                                       CFG::KSUB * nparts * CFG::b_box_rows * 128);
#pragma unroll
        for (int sub = 0; sub < CFG::KSUB; sub++) {
          const int kc = (kb * CFG::KSUB + sub) * CFG::BK;
          if (ok)
            ptx_tma_load_2d(sm.a + stage * CFG::a_stage_bytes + sub * CFG::a_blk_bytes, ma, &sm.full[stage], kc,
                            t.row_base + t.m_blk * CFG::BM);
          if ((int)rank < nparts)
            ptx_tma_load_2d_multicast(
              sm.b + stage * CFG::b_stage_bytes + sub * CFG::b_blk_bytes + rank * CFG::b_box_rows * 128, mb,
              &sm.full[stage], kc, hop_b_row<CFG>(p, t) + rank * CFG::b_box_rows,
              (uint16_t)((1u << CFG::CL) - 1u));
        }
      } else if (ok) {
        /* swap: the A map's boxes (group rows) go to the B slot, B's (weights) to the A slot */
        uint8_t *const a_ring = CFG::swap ? sm.b : sm.a, *const b_ring = CFG::swap ? sm.a : sm.b;
        constexpr int a_ring_stage = CFG::swap ? CFG::b_stage_bytes : CFG::a_stage_bytes;
        constexpr int a_ring_blk = CFG::swap ? CFG::b_blk_bytes : CFG::a_blk_bytes;
        constexpr int b_ring_stage = CFG::swap ? CFG::a_stage_bytes : CFG::b_stage_bytes;
        constexpr int b_ring_blk = CFG::swap ? CFG::a_blk_bytes : CFG::b_blk_bytes;
        ptx_mbar_arrive_expect_tx(&sm.full[stage], ahead ? a_ring_stage : CFG::stage_bytes);
        /* device groups: A rows past the group's end belong to the next group
         * or to unused capacity (read, never stored); past the capacity TMA
         * zero-fills. B rows past N of group g are group g+1's (columns >= N:
         * never stored) or, for the last group, zero-filled. KSUB > 1: the
         * stage's k-blocks are issued back to back, so each B row is asked
         * for KSUB * 128 contiguous bytes at once. */
#pragma unroll
        for (int sub = 0; sub < CFG::KSUB; sub++) {
          uint8_t *dst = a_ring + stage * a_ring_stage + sub * a_ring_blk;
          const int32_t c0 = (kb * CFG::KSUB + sub) * CFG::BK, c1 = t.row_base + t.m_blk * CFG::TM;
          /* the policy is made where it is used: held across the loop, the
           * two 64-bit policies spilled the 40-register producer of some
           * collective-GEMM kernels */
          if (p.l2_hints >= 2) ptx_tma_load_2d_hint(dst, ma, &sm.full[stage], c0, c1, ptx_policy_evict_first());
          else ptx_tma_load_2d(dst, ma, &sm.full[stage], c0, c1);
        }
#pragma unroll
        for (int sub = 0; sub < CFG::KSUB && !ahead; sub++) {
          uint8_t *dst = b_ring + stage * b_ring_stage + sub * b_ring_blk;
          const int32_t c0 = (kb * CFG::KSUB + sub) * CFG::BK, c1 = hop_b_row<CFG>(p, t);
          if (p.l2_hints >= 1) ptx_tma_load_2d_hint(dst, mb, &sm.full[stage], c0, c1, ptx_policy_evict_last());
          else ptx_tma_load_2d(dst, mb, &sm.full[stage], c0, c1);
        }
      } else {
        ptx_mbar_arrive(&sm.full[stage]);
      }
      if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
      }
      if (!ok && CFG::ml == HOP_ML_V1) break;
    }
  }
  if (DYN) { /* one more stage: no task (-1), no bytes */
    hop_mbar_wait(&sm.empty[stage], phase ^ 1);
    hop_dyn_tasks<CFG>()[stage] = -1;
    ptx_mbar_arrive(&sm.full[stage]);
  }
}

/* Fence the compiler's view of every accumulator (no instruction). */
template <int N> static __device__ __forceinline__ void hop_acc_fence(float *acc) {
#pragma unroll
  for (int i = 0; i < N; i++) ptx_reg_fence(acc[i]);
}

/* Issue one stage's wgmmas of a consumer WG: K steps x m64 halves.
 * `first` = first k-block of the task (scale-d = 0 on its first K step). */
template <class CFG>
static __device__ __forceinline__ void hop_mma_stage(float *acc, uint64_t da0, uint64_t db0,
                                                     uint32_t stage, int first) {
#pragma unroll
  for (int k = 0; k < CFG::KSUB * (CFG::BK / CFG::KSTEP); k++) {
#pragma unroll
    for (int h = 0; h < CFG::m_halves; h++) {
      /* +32 bytes per K step, +64 rows of 128 bytes per m half, + one block
       * per BK of K (KSUB > 1); the descriptor address field counts 16 bytes */
      const int sub = k / (CFG::BK / CFG::KSTEP), kk = k % (CFG::BK / CFG::KSTEP);
      const uint64_t da =
          da0 + (uint64_t)((stage * CFG::a_stage_bytes + sub * CFG::a_blk_bytes + h * 64 * 128 + kk * 32) >> 4);
      const uint64_t db = db0 + (uint64_t)((stage * CFG::b_stage_bytes + sub * CFG::b_blk_bytes + kk * 32) >> 4);
      hop_wgmma<CFG::dtype, CFG::WG_N>(acc + h * (CFG::WG_N / 2), da, db, !(first && k == 0));
    }
  }
}

/* One task's mainloop of a consumer WG with one wgmma batch in flight:
 * batch kb is issued before the wait for batch kb-1, whose stage is then
 * released. On return every batch has completed and every stage of the task
 * is released. Returns 1 when the task was skipped (flag on its first stage;
 * its stages are released without math and acc is untouched). `idle`: this
 * WG has no live row in the task (cooperative tile, its 64 rows all past the
 * group's end): its stages are released the same way, without math, and 0
 * is returned (the caller knows it stores nothing; the other WG does the
 * task at full speed, the tensor cores not shared).
 * Ping-pong: once the task's last full barrier has been passed (last batch
 * issued, or skipped task drained), arrive on named barrier sig_bar when
 * `sig` (the other WG may then start waiting on the next task's stages). */
template <class CFG>
static __device__ __forceinline__ int hop_mainloop_w1(float *acc, const hop_smem &sm, uint64_t da0,
                                                      uint64_t db0, const hop_task &t, uint32_t &stage,
                                                      uint32_t &phase, uint32_t sig_bar, uint32_t sig,
                                                      int idle = 0) {
  const int lane = threadIdx.x & 31;
  /* the task's first stage says whether it was skipped: decide before any
   * wgmma is in flight, so the mma loop below has no data-dependent branch */
  hop_mbar_wait(&sm.full[stage], phase);
  const int skipped = sm.flag[stage] != 0;
  if (skipped || idle) {
    for (int kb = t.kb0; kb < t.kb1; kb++) {
      if (kb != t.kb0) hop_mbar_wait(&sm.full[stage], phase);
      hop_release<CFG>(sm, stage, lane == 0);
      if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    ptx_named_bar_arrive_pred(sig_bar, 128 * CFG::consumer_wgs, sig);
    return skipped;
  }
  uint32_t prev = stage;
  for (int kb = t.kb0; kb < t.kb1; kb++) {
    if (kb != t.kb0) hop_mbar_wait(&sm.full[stage], phase);
    hop_acc_fence<CFG::acc_regs>(acc);
    ptx_wgmma_fence();
    hop_mma_stage<CFG>(acc, da0, db0, stage, kb == t.kb0);
    ptx_wgmma_commit();
    hop_acc_fence<CFG::acc_regs>(acc);
    ptx_wgmma_wait<1>(); /* batch kb-1 done: its stage can be refilled */
    hop_acc_fence<CFG::acc_regs>(acc);
    hop_release<CFG>(sm, prev, kb != t.kb0 && lane == 0);
    prev = stage;
    if (++stage == CFG::STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
  ptx_named_bar_arrive_pred(sig_bar, 128 * CFG::consumer_wgs, sig);
  ptx_wgmma_wait<0>();
  hop_acc_fence<CFG::acc_regs>(acc); /* no read before the wait */
  hop_release<CFG>(sm, prev, lane == 0);
  return 0;
}

/* Split-K completion of one tile by the 256 consumer threads (cooperative
 * schedules). Every slice stores its fp32 partial to the workspace in
 * fragment order (float4 i of consumer thread c at [i][c]: each warp store
 * is 512 contiguous bytes), then one thread counts the arrival on the
 * tile's counter (acq_rel, GPU scope; +1, or +1 + 2^16 for a skipped slice).
 * The slice that arrives last (whatever its index) sums slices 0, 1, ...,
 * S-1 in that order from the workspace, so the result does not depend on
 * arrival order, resets the counter for the next launch and runs the
 * epilogue, unless a slice was skipped (then the tile stays unwritten, as
 * any skipped task). The sum is formed and written 64 columns at a time in
 * a separate array: writing it back into acc would make ptxas serialise
 * every wgmma of the kernel (C7515, non-wgmma definitions of accumulators). */
template <class CFG, int ACT, int OUT>
static __device__ __forceinline__ void hop_splitk_finish(const float *acc, const hop_params &p,
                                                         const hop_smem &sm, const hop_task &t,
                                                         int skipped, int row_off, int col_off) {
  constexpr int NV = CFG::acc_regs / 4, NT = 128 * CFG::consumer_wgs;
  const int c = threadIdx.x; /* consumer threads are 0 .. NT-1 */
  float4 *const ws = (float4 *)p.workspace + (size_t)t.tile * p.split_k * (NV * NT) + c;
  if (!skipped) {
    float4 *dst = ws + (size_t)t.slice * (NV * NT);
#pragma unroll
    for (int i = 0; i < NV; i++) dst[i * NT] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
    ptx_fence_acq_rel_gpu();
  }
  ptx_named_bar_sync(HOP_BAR_SPLITK, NT);
  if (c == 0) {
    const uint32_t add = skipped ? 1u + (1u << 16) : 1u;
    const uint32_t now = ptx_atom_add_acq_rel_gpu_u32(&p.counters[t.tile], add) + add;
    const int last = (int)(now & 0xFFFFu) == p.split_k;
    if (last) ptx_st_relaxed_gpu_u32(&p.counters[t.tile], 0u); /* all S arrived: nobody else touches it */
    *sm.sk = last && (now >> 16) == 0;
  }
  ptx_named_bar_sync(HOP_BAR_SPLITK, NT);
  /* *sm.sk is next written by thread 0 after the first barrier of this
   * block's next split task, which every consumer thread reaches after this read */
  if (!*sm.sk) return;
  ptx_fence_acq_rel_gpu();
  static_assert(NV % 8 == 0, "64-column blocks (8 float4 = 8 chunks of 8 columns)");
#pragma unroll
  for (int blk = 0; blk < NV / 8; blk++) {
    float sum[32]; /* chunks 8*blk .. 8*blk+7 of the fragment = 64 columns */
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 v = ptx_ld_cg_f4(ws + (8 * blk + i) * NT);
      for (int s = 1; s < p.split_k; s++) { /* slices in index order: deterministic */
        const float4 w = ptx_ld_cg_f4(ws + ((size_t)s * NV + 8 * blk + i) * NT);
        v.x += w.x;
        v.y += w.y;
        v.z += w.z;
        v.w += w.w;
      }
      sum[4 * i] = v.x;
      sum[4 * i + 1] = v.y;
      sum[4 * i + 2] = v.z;
      sum[4 * i + 3] = v.w;
    }
    hop_epilogue<CFG, ACT, OUT, 32>(sum, p, t, row_off, col_off + 64 * blk);
  }
}

/* Consumer warpgroup `wg` (0 or 1): mainloop of wgmma over the ring, then the
 * epilogue from registers. All 128 threads of the WG run this. */
/* After the epilogue of task t (not for a skipped task): with
 * SIDE::has_done, the consumer threads that stored the tile (both WGs, or
 * the one ping-pong WG `wg`) meet on a named barrier, then their first
 * thread calls side.done(t): every store of the tile is then issued by
 * its thread and ordered before the call (the operator fences and signals
 * there). */
template <class CFG, class SIDE>
static __device__ __forceinline__ void hop_task_done(const SIDE &side, const hop_task &t, int wg) {
  static_assert(!(CFG::epi_tma && SIDE::has_done),
                "TMA epilogue: a tile's stores are not complete when its consumers meet; done() would need "
                "a bulk wait and a proxy fence first");
  if (!SIDE::has_done) return;
  if (CFG::pingpong) {
    ptx_named_bar_sync(HOP_BAR_DONE + wg, 128);
    if ((threadIdx.x & 127) == 0) side.done(t);
  } else {
    ptx_named_bar_sync(HOP_BAR_DONE, 128 * CFG::consumer_wgs);
    if (threadIdx.x == 0) side.done(t);
  }
}

template <class CFG, int ACT, int OUT, class SIDE>
static __device__ __forceinline__ void hop_consumer(const hop_params &p, const hop_smem &sm,
                                                    int wg, const SIDE &side) {
  const int lane = threadIdx.x & 31;
  /* this WG's operand offsets inside a stage */
  const int a_off = CFG::BM == 128 && !CFG::pingpong ? wg * 64 * 128 : 0;
  const int b_off = CFG::BM == 128 || CFG::pingpong ? 0 : wg * CFG::WG_N * 128;
  /* this WG's part of the tile (cooperative): rows/cols offsets */
  const int row_off = CFG::BM == 128 && !CFG::pingpong ? wg * 64 : 0;
  const int col_off = CFG::BM == 128 || CFG::pingpong ? 0 : wg * CFG::WG_N;
  const uint64_t da0 = hop_desc(sm.a + a_off), db0 = hop_desc(sm.b + b_off);
  float acc[CFG::acc_regs];
  uint8_t *const stg = sm.stg + (threadIdx.x >> 5) * CFG::stg_warp_bytes; /* TMA epilogue: this warp's */
  int cmap_fenced = -1;
  hop_sched sc = hop_sched_init<CFG>(p, sm.dg);
  hop_task t;
  uint32_t stage = 0, phase = 0;
  if constexpr (CFG::ml == HOP_ML_V1) { /* ---- v1: wait_group 0 every stage ---- */
    while (hop_sched_next<CFG, hop_side_chunked<SIDE>::value>(&sc, p, &t)) {
      int skipped = 0;
      for (int kb = 0; kb < t.kb1; kb++) {
        hop_mbar_wait(&sm.full[stage], phase);
        if (kb == 0) skipped = sm.flag[stage] != 0;
        if (!skipped) {
          hop_acc_fence<CFG::acc_regs>(acc);
          ptx_wgmma_fence();
          hop_mma_stage<CFG>(acc, da0, db0, stage, kb == 0);
          ptx_wgmma_commit();
          hop_acc_fence<CFG::acc_regs>(acc);
          ptx_wgmma_wait<0>(); /* this stage's reads are done: hand it back */
          hop_acc_fence<CFG::acc_regs>(acc); /* no read before the wait */
        }
        if (lane == 0) ptx_mbar_arrive(&sm.empty[stage]);
        if (++stage == CFG::STAGES) {
          stage = 0;
          phase ^= 1;
        }
        if (skipped) break;
      }
      if (!skipped) {
        hop_epilogue<CFG, ACT, OUT, CFG::acc_regs, hop_side_bias<SIDE>::value, hop_side_rep<SIDE>::value,
                     hop_side_ll<SIDE>::value>(acc, p, t, row_off, col_off, hop_ll_tag(side));
        hop_task_done<CFG>(side, t, wg);
      }
    }
  } else if constexpr (CFG::ml == HOP_ML_COOP) { /* ---- both WGs on each task, one batch in flight ---- */
    constexpr bool defer = SIDE::has_done && hop_side_defer<SIDE>::value;
    hop_task pend;     /* defer: the task whose done() waits for the next mainloop */
    int pending = 0;
    for (;;) {
      if (hop_dyn<CFG, SIDE>::value) { /* the task the producer wrote into its first stage */
        hop_mbar_wait(&sm.full[stage], phase);
        const int task = hop_dyn_tasks<CFG>()[stage];
        if (task < 0) break;
        hop_sched_task<CFG, hop_side_chunked<SIDE>::value>(&sc, p, task, &t);
      } else if (!hop_sched_next<CFG, hop_side_chunked<SIDE>::value>(&sc, p, &t)) {
        break;
      }
      /* a group's last m-block with <= 64 live rows: WG 1 has none (not
       * with split-K, whose reduction takes both WGs' partials) */
      const int idle = CFG::BM == 128 && !CFG::swap && p.split_k == 1 && t.m_blk * CFG::BM + row_off >= t.rows;
      const hop_gptrs gp = hop_group_ptrs(p, t); /* in flight during the mainloop */
      const int skipped = hop_mainloop_w1<CFG>(acc, sm, da0, db0, t, stage, phase, HOP_BAR_ORDER, 0, idle);
      if (defer && pending) {
        hop_task_done<CFG>(side, pend, wg);
        pending = 0;
      }
      if (p.split_k > 1) { /* never with the swapped tiles (the plan refuses it) */
        if constexpr (!CFG::swap) hop_splitk_finish<CFG, ACT, OUT>(acc, p, sm, t, skipped, row_off, col_off);
      } else if (!skipped) {
        if constexpr (CFG::swap)
          hop_epilogue_swap<CFG, ACT, OUT, hop_side_bias<SIDE>::value, hop_side_rep<SIDE>::value,
                            hop_side_ll<SIDE>::value>(acc, p, t, gp, (float *)sm.stg, wg, hop_ll_tag(side));
        else if (!idle)
          hop_epilogue_store<CFG, ACT, OUT, CFG::acc_regs, hop_side_bias<SIDE>::value, hop_side_rep<SIDE>::value,
                             hop_side_ll<SIDE>::value>(acc, p, t, gp, stg, row_off, col_off, cmap_fenced,
                                                       hop_ll_tag(side));
        if (defer) {
          pend = t;
          pending = 1;
        } else {
          hop_task_done<CFG>(side, t, wg);
        }
      }
    }
    if (defer && pending) hop_task_done<CFG>(side, pend, wg);
    /* TMA epilogue: the last tasks' stores are done before the block's
     * shared memory goes away (and before the launch counts as complete) */
    if (CFG::epi_tma) {
      if (lane == 0) ptx_bulk_wait<0>();
      __syncwarp();
    }
  } else {
    /* ---- ping-pong: the block's tasks j = 0, 1, 2, ... alternate WG 0, 1, 0, ...
     * Order barriers: WG w waits on HOP_BAR_ORDER + w before the mainloop of
     * its task j >= 1 until the other WG has passed the last full barrier of
     * task j-1 (it arrives there only when a task j exists, so every arrive
     * has its sync). This keeps the mainloops in task order, so one WG's
     * epilogue overlaps the other's mainloop, and it is needed for
     * correctness: a WG that jumps over the other's stages must not wait on a
     * stage more than one ring lap ahead of the last fill, or the parity
     * test would pass on an older phase. */
    int j = 0;
    while (hop_sched_next<CFG, hop_side_chunked<SIDE>::value>(&sc, p, &t)) {
      if ((j++ & 1) != wg) { /* the other WG's task: skip its stages in the ring */
        const uint32_t s = stage + (uint32_t)(t.kb1 - t.kb0);
        phase ^= (s / CFG::STAGES) & 1;
        stage = s % CFG::STAGES;
        continue;
      }
      const uint32_t has_next = sc.next < sc.total; /* sc.next: this block's next task */
      if (j > 1) ptx_named_bar_sync(HOP_BAR_ORDER + wg, 128 * CFG::consumer_wgs);
      if (!hop_mainloop_w1<CFG>(acc, sm, da0, db0, t, stage, phase, HOP_BAR_ORDER + (wg ^ 1), has_next)) {
#pragma unroll
        for (int h = 0; h < CFG::m_halves; h++)
          hop_epilogue<CFG, ACT, OUT, CFG::WG_N / 2, hop_side_bias<SIDE>::value, hop_side_rep<SIDE>::value,
                       hop_side_ll<SIDE>::value>(acc + h * (CFG::WG_N / 2), p, t, 64 * h, 0, hop_ll_tag(side));
        hop_task_done<CFG>(side, t, wg);
      }
    }
  }
}

/* ---- layer 2: the engine as a kernel body ------------------------------------ */

/* No side role: warps 1-3 of the producer warpgroup leave after the role
 * split (the plain engine). */
struct hop_no_side {
  static constexpr bool active = false;
  static constexpr bool has_done = false;
  __device__ __forceinline__ void operator()(int) const {}
  __device__ __forceinline__ void done(const hop_task &) const {}
};

/* The engine's whole kernel body, for hop_gemm_kernel and for operator
 * kernels that run their own prologue first (docs/collective_gemm.md).
 * All CFG::threads threads call it, once, with the dynamic shared memory
 * (hop_plan.smem_bytes of it).
 *   ready_bias  added to every group's ready_target: an operator whose
 *               readiness flags hold a per-call number known only on the
 *               device (its epoch) passes it here; the plain engine 0
 *   side        SIDE::active: warps 1-3 of the producer warpgroup call
 *               side(w), w = 0, 1, 2, after the role split (at the
 *               producer's register budget, CFG::producer_regs; they must
 *               not use __syncthreads or the named barriers the engine's
 *               roles use; HOP_BAR_SIDE_FIRST and above are theirs). It
 *               runs alongside the GEMM: the operator's communication role.
 *               SIDE::has_done: side.done(t) after each task's epilogue
 *               (hop_task_done; one consumer thread, consumer budget).
 *               hop_side_after: side.after() by every consumer thread
 *               when its tasks are done (consumer budget; the named
 *               barriers above HOP_BAR_SIDE_FIRST are the operator's).
 * Every warp returns at its role's register budget (consumers
 * CFG::consumer_regs, the producer warpgroup CFG::producer_regs). An
 * operator may go on with block-wide code (a __syncthreads first): ptxas
 * fits code that warps of both budgets reach into the smaller one (the
 * all-gather GEMM's epilogue code and the fault routines it calls use at
 * most 34 registers). Giving the budgets back instead (consumers dec to
 * entry_regs, producers inc) made ptxas hold the consumers' whole region to
 * the entry budget: 1-2.5 KB of spills in the mainloop and epilogue. */
template <class CFG, int ACT, int OUT, class SIDE = hop_no_side>
static __device__ __forceinline__ void hop_gemm_run(const hop_params &p, uint8_t *smem_raw,
                                                    uint32_t ready_bias, const SIDE &side) {
  uint8_t *base = hop_smem_base(smem_raw);
  hop_smem sm = hop_smem_ring<CFG>(base);
  sm.sk = (volatile uint32_t *)(base + CFG::sk_offset);
  sm.dg = p.dg_rows || p.hg_table ? (const int32_t *)(base + CFG::dg_offset) : NULL;
  sm.peer_empty = CFG::CL > 1 ? ptx_mapa_shared(ptx_smem_addr(sm.empty), ptx_cluster_ctarank() ^ 1u) : 0u;

  const int wg = threadIdx.x / 128;
  const int warp_in_wg = (threadIdx.x / 32) % 4;
  if (threadIdx.x == 0) hop_ring_init<CFG>(sm);
  if (wg == CFG::consumer_wgs && warp_in_wg == 1 && (threadIdx.x & 31) == 0) {
    if (!p.group_maps) {
      ptx_prefetch_tensormap(&p.a);
      ptx_prefetch_tensormap(&p.b);
    }
  }
  /* clusters: both CTAs' barriers are initialised before any remote
   * arrive or multicast (the peer's producer writes into this CTA) */
  if (CFG::CL > 1) ptx_cluster_sync();
  if (p.dg_rows) hop_dg_build<CFG>(p, (int32_t *)(base + CFG::dg_offset)); /* uniform branch */
  else if (p.hg_table) hop_hg_build<CFG>(p, (int32_t *)(base + CFG::dg_offset));
  __syncthreads();

  if (wg == CFG::consumer_wgs) { /* producer warpgroup */
    ptx_setmaxnreg_dec<CFG::producer_regs>();
    if (warp_in_wg == 0) {
      if (ptx_elect_one())
        hop_producer<CFG, hop_side_chunked<SIDE>::value, hop_dyn<CFG, SIDE>::value>(p, sm, ready_bias);
    } else if (SIDE::active) {
      side(warp_in_wg - 1);
    }
  } else { /* consumer warpgroups 0 .. consumer_wgs-1 */
    ptx_setmaxnreg_inc<CFG::consumer_regs>();
    hop_consumer<CFG, ACT, OUT>(p, sm, wg, side);
    if constexpr (hop_side_after<SIDE>::value) side.after();
  }
  /* clusters: stay until the peer is done with this CTA: its consumers
   * arrive on this CTA's empty barriers up to their last stage (this CTA's
   * consumers waited for every byte the peer multicast here) */
  if (CFG::CL > 1) {
    __syncwarp();
    ptx_cluster_sync();
  }
}

/* The kernel: grid = min(#SMs, tasks) (device groups: #SMs), CFG::threads
 * threads, hop_plan.smem_bytes of dynamic shared memory (CFG::smem_bytes, plus
 * the task table with device groups). Launch through hop_launch
 * (hopper_host.cuh), with programmatic stream serialization unless the
 * problem asked for none (hop_problem.no_pdl). */
template <class CFG, int ACT, int OUT>
__global__ void __launch_bounds__(CFG::threads, 1) hop_gemm_kernel(const __grid_constant__ hop_params p) {
  extern __shared__ uint8_t hop_smem_raw[];
  /* programmatic dependent launch (hop_launch): the next engine launch may
   * be scheduled onto SMs this grid frees; this grid itself touches no
   * global memory (A, C, counters, tables) before the previous grid of the
   * stream has completed. Both are no-ops without the launch attribute. */
  ptx_griddep_launch_dependents();
  ptx_griddep_wait();
  hop_gemm_run<CFG, ACT, OUT>(p, hop_smem_raw, 0u, hop_no_side());
}

#endif /* LOOM_TILE_HOPPER_CUH */
