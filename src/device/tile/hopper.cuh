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
 *            counter, and issues two TMA loads (A box, B box) per stage
 * Stages form a ring in shared memory; stage s has two mbarriers:
 *   full[s]   1 arrival (producer's arrive.expect_tx) + the TMA bytes
 *   empty[s]  one arrival per consumer warp (8) after its wgmmas read s
 * Tasks (output tiles BM x BN of one group) are numbered group by group;
 * block b takes tasks b, b + gridDim.x, ... (static persistent schedule),
 * producer and consumers walk the same sequence independently.
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

/* Error bits OR-ed into *hop_params.error (device memory, host reads after the
 * kernel). A timed-out task is skipped: its output rows are not written. */
#define HOP_ERR_TIMEOUT 1u

/* ---- tile configuration ----------------------------------------------------
 * One struct per kernel instance; every resource number lives here.
 *   BM x BN   output tile; BM = 128: each consumer WG owns 64 rows x BN
 *             columns; BM = 64 (small-M): both own the 64 rows, WG w takes
 *             columns [w*BN/2, (w+1)*BN/2)
 *   BK        K per stage = one 128-byte swizzle row
 *   STAGES    ring depth                                                       */
template <int DT, int BM_, int BN_, int STAGES_> struct hop_cfg {
  static constexpr int dtype = DT;
  static constexpr int esize = DT == HOP_TF32 ? 4 : 2;
  static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_;
  static constexpr int BK = 128 / esize;   /* 64 (16-bit) or 32 (fp32) */
  static constexpr int KSTEP = 32 / esize; /* K of one wgmma: 16 or 8 */
  static constexpr int consumer_wgs = 2;
  static constexpr int threads = 128 * (consumer_wgs + 1);
  static constexpr int WG_N = BM == 128 ? BN : BN / 2; /* wgmma N of each consumer WG */
  static constexpr int acc_regs = WG_N / 2;           /* fp32 accumulators per thread */
  /* registers: 65536 / 384 threads = 170 -> 168 at entry; the producer WG gives
   * (168 - 40) * 128 = 16384 back, the consumers take (232 - 168) * 256 = 16384 */
  static constexpr int entry_regs = (65536 / threads) & ~7;
  static constexpr int producer_regs = 40, consumer_regs = 232;
  static constexpr int empty_arrivals = consumer_wgs * 4; /* one per consumer warp */
  /* shared memory, offsets from a 1024-aligned base */
  static constexpr int a_stage_bytes = BM * 128, b_stage_bytes = BN * 128;
  static constexpr int stage_bytes = a_stage_bytes + b_stage_bytes; /* = TMA bytes per stage */
  static constexpr int a_offset = 0;
  static constexpr int b_offset = STAGES * a_stage_bytes;
  static constexpr int bar_offset = STAGES * stage_bytes;      /* full[STAGES], empty[STAGES] */
  static constexpr int flag_offset = bar_offset + 16 * STAGES; /* u32 task status per stage */
  static constexpr int smem_bytes = 1024 /* alignment slack */ + flag_offset + 4 * STAGES;

  static_assert(BM == 64 || BM == 128, "BM: 64 (small-M) or 128");
  static_assert(WG_N == 64 || WG_N == 128 || WG_N == 256, "wgmma N per warpgroup: 64, 128, 256");
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
  static_assert(HOP_SWIGLU_BLOCK * 2 == 64 && WG_N % 64 == 0, "SwiGLU pairs inside one thread");
};

/* The two configurations the engine ships:
 *   large  128 x 256, 4 stages x 48 KB = 192 KB: dense and grouped GEMMs
 *   small   64 x 128, 8 stages x 24 KB = 192 KB: decode (<= 64 rows a group),
 *           many N tiles so every SM streams weights                        */
template <int DT> struct hop_large : hop_cfg<DT, 128, 256, 4> {};
template <int DT> struct hop_small : hop_cfg<DT, 64, 128, 8> {};

/* ---- problem description (device memory / kernel parameter) -------------- */

/* One group (expert) in device memory, 64 bytes. Group g's A rows and B are
 * reached through tensor maps (hop_params.group_maps[2g], [2g+1]) whose
 * outer dimension is the group's row count: TMA zero-fills rows past the end,
 * so no row of another group is ever read. */
struct hop_group {
  int32_t rows;            /* M_g >= 0                                          */
  int32_t tile_begin;      /* first task index (prefix sum of tiles before g)   */
  void *c;                 /* output [rows x n_out], pitch ldc; unused if row_ptr */
  void *const *row_ptr;    /* or NULL: row r goes to row_ptr[r] (n_out elements) */
  const float *row_scale;  /* or NULL: output row r is multiplied by row_scale[r] */
  const uint32_t *ready;   /* or NULL: task (m_blk) waits for                    */
  uint32_t ready_target;   /*   ready[m_blk * ready_stride] - target >= 0 (signed) */
  int32_t ready_stride;    /*   0: one counter for the whole group              */
  uint32_t pad_[4];
};
static_assert(sizeof(hop_group) == 64, "hop_group layout");

/* Kernel parameter (passed __grid_constant__). Dense problems (one group)
 * use the maps a, b here; grouped problems use group_maps in global memory. */
struct hop_params {
  CUtensorMap a, b;              /* dense: A [rows x K], B [N x K]             */
  const CUtensorMap *group_maps; /* grouped: [2 * num_groups] (A_g, B_g), or NULL */
  const hop_group *groups;       /* [num_groups]                               */
  int32_t num_groups;
  int32_t total_tiles;           /* tasks over all groups                      */
  int32_t n_tiles;               /* ceil(N / BN)                               */
  int32_t raster_m;              /* m-blocks per raster band (L2 reuse)        */
  int32_t n, k;                  /* N = rows of B; K                           */
  int32_t n_out;                 /* output columns: N, or N / 2 for SwiGLU     */
  int32_t ldc;                   /* output pitch in elements                   */
  uint32_t *error;               /* HOP_ERR_* bits, or NULL                    */
  uint64_t timeout_ns;           /* per readiness wait                         */
};

/* ---- layer 1: primitives the roles share ----------------------------------- */

/* Spin (one thread or all threads of a role) until the phase of `bar` with
 * parity `parity` has completed. Unbounded by design: both sides of a ring
 * live in this block, and the only outside wait (readiness) is bounded. */
static __device__ __forceinline__ void hop_mbar_wait(uint64_t *bar, uint32_t parity) {
  while (!ptx_mbar_try_wait_parity(bar, parity)) {
  }
}

/* Bounded wait of one thread for a readiness counter: 1 when
 * (int32)(*ctr - target) >= 0, 0 after timeout_ns (sets HOP_ERR_TIMEOUT) or at
 * once when the error word already has bits (another task timed out: do not
 * wait again for a dead producer). */
static __device__ __forceinline__ int hop_wait_ready(const uint32_t *ctr, uint32_t target,
                                                     uint64_t timeout_ns, uint32_t *error) {
  if ((int32_t)(ptx_ld_acquire_sys_u32(ctr) - target) >= 0) return 1;
  const uint64_t t0 = ptx_globaltimer_ns();
  for (;;) {
    if ((int32_t)(ptx_ld_acquire_sys_u32(ctr) - target) >= 0) return 1;
    if (error && *(volatile uint32_t *)error) return 0;
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
    if (N == 64) ptx_wgmma_m64n64k16_bf16(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k16_bf16(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k16_bf16(d, da, db, acc);
  } else if (DT == HOP_FP16) {
    if (N == 64) ptx_wgmma_m64n64k16_f16(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k16_f16(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k16_f16(d, da, db, acc);
  } else {
    if (N == 64) ptx_wgmma_m64n64k8_tf32(d, da, db, acc);
    if (N == 128) ptx_wgmma_m64n128k8_tf32(d, da, db, acc);
    if (N == 256) ptx_wgmma_m64n256k8_tf32(d, da, db, acc);
  }
}

/* ---- task schedule ------------------------------------------------------------ */

struct hop_task {
  int32_t group; /* index into hop_params.groups             */
  int32_t m_blk; /* BM-row block inside the group            */
  int32_t n_blk; /* BN-column block                          */
  int32_t rows;  /* the group's M_g (rows >= M_g are skipped) */
};

/* Per-role cursor over this block's tasks: blockIdx.x, + gridDim.x, ... */
struct hop_sched {
  int32_t next;  /* next task index        */
  int32_t group; /* group of the last task (tasks only increase) */
};

static __device__ __forceinline__ hop_sched hop_sched_init(void) {
  hop_sched s;
  s.next = blockIdx.x;
  s.group = 0;
  return s;
}

/* Next task of this block, or 0 when done. Inside a group, tiles go in bands
 * of raster_m m-blocks: down the band's m-blocks first, then to the next
 * n-block, so the ~#SMs tiles in flight share a few A row blocks and B column
 * blocks in L2. */
template <class CFG>
static __device__ __forceinline__ int hop_sched_next(hop_sched *s, const hop_params &p,
                                                     hop_task *t) {
  const int task = s->next;
  if (task >= p.total_tiles) return 0;
  s->next += gridDim.x;
  while (s->group + 1 < p.num_groups && task >= p.groups[s->group + 1].tile_begin) s->group++;
  const hop_group *g = &p.groups[s->group];
  const int rows = g->rows;
  const int local = task - g->tile_begin;
  const int m_tiles = (rows + CFG::BM - 1) / CFG::BM;
  const int band = p.raster_m * p.n_tiles;
  const int m0 = (local / band) * p.raster_m;
  const int in = local % band;
  const int band_m = min(p.raster_m, m_tiles - m0);
  t->group = s->group;
  t->m_blk = m0 + in % band_m;
  t->n_blk = in / band_m;
  t->rows = rows;
  return 1;
}

#include "hopper_epilogue.cuh"

/* ---- roles ------------------------------------------------------------------------ */

/* Shared-memory carve-up of one block (see hop_cfg offsets). */
struct hop_smem {
  uint8_t *a;              /* STAGES x a_stage_bytes      */
  uint8_t *b;              /* STAGES x b_stage_bytes      */
  uint64_t *full, *empty;  /* STAGES mbarriers each       */
  volatile uint32_t *flag; /* STAGES: 1 = task skipped (timeout), written on its first stage */
};

/* Producer: one thread. Per task: bounded readiness wait, then for each
 * k-block wait for a free stage, arm full[s] with the stage's bytes and issue
 * the A and B boxes. A skipped task still takes one stage (flag = 1, plain
 * arrive) so consumers learn it in order. */
template <class CFG>
static __device__ __forceinline__ void hop_producer(const hop_params &p, const hop_smem &sm) {
  hop_sched sc = hop_sched_init();
  hop_task t;
  uint32_t stage = 0, phase = 0;
  int fenced_group = -1;
  const int nkb = (p.k + CFG::BK - 1) / CFG::BK;
  while (hop_sched_next<CFG>(&sc, p, &t)) {
    const CUtensorMap *ma = &p.a, *mb = &p.b;
    if (p.group_maps) {
      ma = p.group_maps + 2 * t.group;
      mb = ma + 1;
      if (fenced_group != t.group) { /* maps were written by the host: acquire them once */
        ptx_fence_tensormap_acquire(ma);
        ptx_fence_tensormap_acquire(mb);
        fenced_group = t.group;
      }
    }
    const hop_group *g = &p.groups[t.group];
    const uint32_t *ready = g->ready;
    int ok = 1;
    if (ready) {
      ok = hop_wait_ready(ready + (size_t)t.m_blk * g->ready_stride, g->ready_target, p.timeout_ns,
                          p.error);
      if (ok) ptx_fence_proxy_async_global(); /* TMA reads after the acquire */
    }
    for (int kb = 0; kb < nkb; kb++) {
      hop_mbar_wait(&sm.empty[stage], phase ^ 1); /* fresh barrier: parity 1 passes */
      if (kb == 0) sm.flag[stage] = ok ? 0u : 1u;
      if (ok) {
        ptx_mbar_arrive_expect_tx(&sm.full[stage], CFG::stage_bytes);
        ptx_tma_load_2d(sm.a + stage * CFG::a_stage_bytes, ma, &sm.full[stage], kb * CFG::BK,
                        t.m_blk * CFG::BM);
        ptx_tma_load_2d(sm.b + stage * CFG::b_stage_bytes, mb, &sm.full[stage], kb * CFG::BK,
                        t.n_blk * CFG::BN);
      } else {
        ptx_mbar_arrive(&sm.full[stage]);
      }
      if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
      }
      if (!ok) break;
    }
  }
}

/* Consumer warpgroup `wg` (0 or 1): mainloop of wgmma over the ring, then the
 * epilogue from registers. All 128 threads of the WG run this. */
template <class CFG, int ACT, int OUT>
static __device__ __forceinline__ void hop_consumer(const hop_params &p, const hop_smem &sm,
                                                    int wg) {
  const int lane = threadIdx.x & 31;
  /* this WG's operand offsets inside a stage */
  const int a_off = CFG::BM == 128 ? wg * 64 * 128 : 0;
  const int b_off = CFG::BM == 128 ? 0 : wg * CFG::WG_N * 128;
  const uint64_t da0 = hop_desc(sm.a + a_off), db0 = hop_desc(sm.b + b_off);
  float acc[CFG::acc_regs];
  hop_sched sc = hop_sched_init();
  hop_task t;
  uint32_t stage = 0, phase = 0;
  const int nkb = (p.k + CFG::BK - 1) / CFG::BK;
  while (hop_sched_next<CFG>(&sc, p, &t)) {
    int skipped = 0;
    for (int kb = 0; kb < nkb; kb++) {
      hop_mbar_wait(&sm.full[stage], phase);
      if (kb == 0) skipped = sm.flag[stage] != 0;
      if (!skipped) {
#pragma unroll
        for (int i = 0; i < CFG::acc_regs; i++) ptx_reg_fence(acc[i]);
        ptx_wgmma_fence();
#pragma unroll
        for (int k = 0; k < CFG::BK / CFG::KSTEP; k++) {
          /* +32 bytes per K step; descriptor address field counts 16 bytes */
          const uint64_t da = da0 + (uint64_t)((stage * CFG::a_stage_bytes + k * 32) >> 4);
          const uint64_t db = db0 + (uint64_t)((stage * CFG::b_stage_bytes + k * 32) >> 4);
          hop_wgmma<CFG::dtype, CFG::WG_N>(acc, da, db, (kb | k) != 0);
        }
        ptx_wgmma_commit();
#pragma unroll
        for (int i = 0; i < CFG::acc_regs; i++) ptx_reg_fence(acc[i]);
        ptx_wgmma_wait<0>(); /* this stage's reads are done: hand it back */
#pragma unroll
        for (int i = 0; i < CFG::acc_regs; i++) ptx_reg_fence(acc[i]); /* no read before the wait */
      }
      if (lane == 0) ptx_mbar_arrive(&sm.empty[stage]);
      if (++stage == CFG::STAGES) {
        stage = 0;
        phase ^= 1;
      }
      if (skipped) break;
    }
    if (!skipped) hop_epilogue<CFG, ACT, OUT>(acc, p, t, wg);
  }
}

/* The kernel: grid = min(#SMs, tasks), CFG::threads threads, CFG::smem_bytes
 * of dynamic shared memory. Launch through hop_launch (hopper_host.cuh). */
template <class CFG, int ACT, int OUT>
__global__ void __launch_bounds__(CFG::threads, 1) hop_gemm_kernel(const __grid_constant__ hop_params p) {
  extern __shared__ uint8_t hop_smem_raw[];
  uint8_t *base = (uint8_t *)(((uintptr_t)hop_smem_raw + 1023) & ~(uintptr_t)1023);
  hop_smem sm;
  sm.a = base + CFG::a_offset;
  sm.b = base + CFG::b_offset;
  sm.full = (uint64_t *)(base + CFG::bar_offset);
  sm.empty = sm.full + CFG::STAGES;
  sm.flag = (volatile uint32_t *)(base + CFG::flag_offset);

  const int wg = threadIdx.x / 128;
  const int warp_in_wg = (threadIdx.x / 32) % 4;
  if (threadIdx.x == 0) {
    for (int s = 0; s < CFG::STAGES; s++) {
      ptx_mbar_init(&sm.full[s], 1);
      ptx_mbar_init(&sm.empty[s], CFG::empty_arrivals);
    }
    ptx_fence_mbar_init();
  }
  if (wg == CFG::consumer_wgs && warp_in_wg == 1 && (threadIdx.x & 31) == 0) {
    if (!p.group_maps) {
      ptx_prefetch_tensormap(&p.a);
      ptx_prefetch_tensormap(&p.b);
    }
  }
  __syncthreads();

  if (wg == CFG::consumer_wgs) { /* producer warpgroup */
    ptx_setmaxnreg_dec<CFG::producer_regs>();
    if (warp_in_wg == 0 && ptx_elect_one()) hop_producer<CFG>(p, sm);
  } else { /* consumer warpgroups 0 .. consumer_wgs-1 */
    ptx_setmaxnreg_inc<CFG::consumer_regs>();
    hop_consumer<CFG, ACT, OUT>(p, sm, wg);
  }
}

#endif /* LOOM_TILE_HOPPER_CUH */
