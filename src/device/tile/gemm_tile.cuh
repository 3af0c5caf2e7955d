/*
 * Tile engine: C[BM x BN*parts] += A[BM x K] * B[K x (BN*parts)] for one
 * thread block of 256 threads, operands staged through shared memory by a
 * cp.async pipeline `stages` deep, accumulators in registers.
 *
 *   A   row-major, lda elements; rows >= rows_valid read as zero
 *   B   in one of two layouts (template BL), ldb elements between rows:
 *         TILE_B_KN  [K x N] row-major (row k holds every output column;
 *                    "in x out"), staged as [BK][BN * PARTS + 8]
 *         TILE_B_NK  [N x K] row-major (row n holds the K inputs of output
 *                    n; "out x in", K-major, nn.Linear.weight), staged as
 *                    [BN * PARTS][BK + pad]
 *       part 0 covers output columns [b_col0, b_col0 + BN), part 1
 *       (PARTS == 2) [b_col1, b_col1 + BN): columns of the KN matrix, rows
 *       of the NK one
 *   K   multiple of BK
 * Both layouts feed the math the same values in the same order (the K
 * loop, the mma fragments and each accumulator's FMA chain are the same),
 * so C is bitwise equal between them.
 *
 * Math paths (template MATH):
 *   TILE_BF16 / TILE_FP16  mma.sync m16n8k16, fp32 accumulate; fragments by
 *                          ldmatrix (B: .trans from the KN tile, plain from
 *                          the NK tile, which holds the "col" operand as
 *                          the mma wants it)
 *   TILE_TF32              mma.sync m16n8k8 on fp32 inputs rounded to tf32
 *                          (B fragments by scalar loads from either tile)
 *   TILE_FP32              exact fp32 FMAs (SIMT), for LOOM_MATH_FP32
 *
 * Warp layout for the tensor-core paths: 8 warps as 4 (M) x 2 (N); a warp
 * owns 32 x 32 of each part: 2 m16 x 4 n8 mma tiles. SIMT: a thread owns
 * 8 rows x 4 columns of each part: columns tx*4 .. tx*4+3 from a KN tile
 * (one 16-byte load), tx, tx+16, tx+32, tx+48 from an NK tile (four scalar
 * loads, rows 16 apart: 2-way bank conflicts, as A's loads; 4 adjacent rows
 * would make them 8-way). tile_for_each takes the layout to map them back.
 * The epilogue hands every accumulator element to a functor with its
 * (row, col, part) so callers decide what to store.
 */
#ifndef LOOM_GEMM_TILE_CUH
#define LOOM_GEMM_TILE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

enum { TILE_BF16 = 0, TILE_FP16 = 1, TILE_TF32 = 2, TILE_FP32 = 3 };
enum { TILE_B_KN = 0, TILE_B_NK = 1 }; /* B's layout (file comment) */

struct tile_cfg {
  static constexpr int threads = 256;
  static constexpr int BM = 128;
  static constexpr int BN = 64;   /* per part */
  /* 3 tiles in flight while one is multiplied: measured 4.5 ms -> see
   * bench/RESULTS.md for the MoE layer with 2 stages vs 4 */
  static constexpr int stages = 4;
};
static_assert(tile_cfg::stages >= 2, "the pipeline needs a stage to fill while one computes");
static_assert(tile_cfg::threads == 256, "warp layout below assumes 8 warps");
static_assert(tile_cfg::BM == 4 * 32 && tile_cfg::BN == 2 * 32, "4 x 2 warps of 32 x 32");

/* Element type and shared-memory padding per math path. */
template <int MATH> struct tile_types;
/* BK: K depth of one pipeline stage. 16-bit paths take 64 (half the
 * barriers per K of 32; 4 stages = 143 KB of shared memory); 32-bit paths
 * keep 32 (64 would need 278 KB). K must be a multiple of BK. */
template <> struct tile_types<TILE_BF16> { typedef __nv_bfloat16 T; static constexpr int pad = 8, BK = 64; };
template <> struct tile_types<TILE_FP16> { typedef __half T; static constexpr int pad = 8, BK = 64; };
template <> struct tile_types<TILE_TF32> { typedef float T; static constexpr int pad = 4, BK = 32; };
template <> struct tile_types<TILE_FP32> { typedef float T; static constexpr int pad = 4, BK = 32; };

/* Shared memory of one tile engine instance, in bytes. One stage is the
 * A tile then the B tile; the B slot fits either layout, so the stage
 * size (and the caller's shared memory) does not depend on it. */
template <int MATH, int PARTS> struct tile_smem {
  typedef typename tile_types<MATH>::T T;
  static constexpr int pad = tile_types<MATH>::pad;
  static constexpr int BK = tile_types<MATH>::BK;
  static constexpr int a_ld = BK + pad;                 /* A row pitch */
  static constexpr int b_ld = tile_cfg::BN * PARTS + 8; /* KN tile: row pitch (a k) */
  static constexpr int bk_ld = BK + pad;                /* NK tile: row pitch (an n) */
  static constexpr int a_elems = tile_cfg::BM * a_ld;
  static constexpr int b_elems_kn = BK * b_ld;
  static constexpr int b_elems_nk = tile_cfg::BN * PARTS * bk_ld;
  static constexpr int b_elems = b_elems_kn > b_elems_nk ? b_elems_kn : b_elems_nk;
  static constexpr int stage_elems = a_elems + b_elems;
  static constexpr size_t bytes = (size_t)tile_cfg::stages * stage_elems * sizeof(T);
};
/* ldmatrix and cp.async want 16-byte aligned rows; the NK tile's pitch
 * (like A's) spreads 8 consecutive rows over all 32 banks. */
static_assert(tile_smem<TILE_BF16, 2>::bk_ld * 2 % 16 == 0 &&
                  tile_smem<TILE_TF32, 2>::bk_ld * 4 % 16 == 0,
              "NK tile rows must stay 16-byte aligned");

/* Accumulators of one thread. Tensor-core paths: [part][mi][ni][4];
 * SIMT: [part][8 rows][4 cols] stored in the same 32 floats per part. */
template <int PARTS> struct tile_acc {
  float v[PARTS][32];
};

/* ---- layer 0: PTX -------------------------------------------------------- */

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int valid) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  int n = valid ? 16 : 0; /* 0: zero-fill, nothing read */
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n)
               : "memory");
}
static __device__ __forceinline__ void cp_async_commit(void) {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> static __device__ __forceinline__ void cp_async_wait(void) {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
template <int MATH>
static __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0,
                                                 uint32_t b1) {
  if (MATH == TILE_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void mma_1688_tf32(float c[4], const uint32_t a[4],
                                                     uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ uint32_t to_tf32(float f) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}

/* ---- loading a stage ------------------------------------------------------ */

template <int MATH, int PARTS, int BL>
static __device__ __forceinline__ void tile_load_stage(
    typename tile_types<MATH>::T *st, const typename tile_types<MATH>::T *A, size_t lda,
    int rows_valid, const typename tile_types<MATH>::T *B, size_t ldb, int b_col0, int b_col1,
    int k0) {
  typedef typename tile_types<MATH>::T T;
  typedef tile_smem<MATH, PARTS> S;
  constexpr int per16 = 16 / sizeof(T);               /* elements per 16 bytes */
  constexpr int a_chunks_row = S::BK / per16;
  constexpr int a_chunks = tile_cfg::BM * a_chunks_row;
  T *sa = st, *sb = st + S::a_elems;
  for (int c = threadIdx.x; c < a_chunks; c += tile_cfg::threads) {
    const int r = c / a_chunks_row, kc = (c % a_chunks_row) * per16;
    const int ok = r < rows_valid;
    const T *g = A + (size_t)(ok ? r : 0) * lda + k0 + kc;
    cp_async16(sa + r * S::a_ld + kc, g, ok);
  }
  if (BL == TILE_B_KN) { /* BK rows of k, BN columns per part */
    constexpr int b_chunks_row = tile_cfg::BN / per16; /* per part */
    constexpr int b_chunks = S::BK * b_chunks_row * PARTS;
    for (int c = threadIdx.x; c < b_chunks; c += tile_cfg::threads) {
      const int p = c / (S::BK * b_chunks_row);
      const int rem = c % (S::BK * b_chunks_row);
      const int k = rem / b_chunks_row, nc = (rem % b_chunks_row) * per16;
      const T *g = B + (size_t)(k0 + k) * ldb + (p ? b_col1 : b_col0) + nc;
      cp_async16(sb + k * S::b_ld + p * tile_cfg::BN + nc, g, 1);
    }
  } else { /* BN rows of n per part, BK of k each */
    constexpr int b_chunks_row = S::BK / per16;
    constexpr int b_chunks = tile_cfg::BN * PARTS * b_chunks_row;
    for (int c = threadIdx.x; c < b_chunks; c += tile_cfg::threads) {
      const int n = c / b_chunks_row, kc = (c % b_chunks_row) * per16; /* n: 0..BN*PARTS */
      const int p = n / tile_cfg::BN, nn = n % tile_cfg::BN;
      const T *g = B + (size_t)((p ? b_col1 : b_col0) + nn) * ldb + k0 + kc;
      cp_async16(sb + n * S::bk_ld + kc, g, 1);
    }
  }
}

/* ---- one stage of math ------------------------------------------------------ */

template <int MATH, int PARTS, int BL>
static __device__ __forceinline__ void tile_compute_stage(const typename tile_types<MATH>::T *st,
                                                          tile_acc<PARTS> &acc) {
  typedef typename tile_types<MATH>::T T;
  typedef tile_smem<MATH, PARTS> S;
  const T *sa = st, *sb = st + S::a_elems;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp & 3, wn = warp >> 2; /* 4 x 2 warps */
  if (MATH == TILE_BF16 || MATH == TILE_FP16) {
#pragma unroll
    for (int kk = 0; kk < S::BK; kk += 16) {
      uint32_t a[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; mi++) {
        const int row = wm * 32 + mi * 16 + (lane & 15);
        const int col = kk + (lane >> 4) * 8;
        ldmatrix_x4(a[mi], sa + row * S::a_ld + col);
      }
#pragma unroll
      for (int p = 0; p < PARTS; p++) {
#pragma unroll
        for (int nj = 0; nj < 2; nj++) { /* two n8 tiles per ldmatrix.x4 */
          /* b[0], b[1]: k 0-7 and 8-15 of n8 tile 2nj; b[2], b[3]: of tile
           * 2nj+1. Lanes 8q..8q+7 address matrix q's rows. */
          uint32_t b[4];
          const int n0 = p * tile_cfg::BN + wn * 32 + nj * 16;
          if (BL == TILE_B_KN) { /* rows are k: transpose on the way */
            const int krow = kk + (lane & 15);
            const int ncol = n0 + (lane >> 4) * 8;
            ldmatrix_x4_trans(b, sb + krow * S::b_ld + ncol);
          } else { /* rows are n: already the mma's "col" operand */
            const int nrow = n0 + (lane >> 4) * 8 + (lane & 7);
            const int kcol = kk + ((lane >> 3) & 1) * 8;
            ldmatrix_x4(b, sb + nrow * S::bk_ld + kcol);
          }
#pragma unroll
          for (int mi = 0; mi < 2; mi++) {
            mma_16816<MATH>(&acc.v[p][(mi * 4 + nj * 2 + 0) * 4], a[mi], b[0], b[1]);
            mma_16816<MATH>(&acc.v[p][(mi * 4 + nj * 2 + 1) * 4], a[mi], b[2], b[3]);
          }
        }
      }
    }
  } else if (MATH == TILE_TF32) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kk = 0; kk < S::BK; kk += 8) {
      uint32_t a[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; mi++) {
        const float *base = (const float *)sa + (wm * 32 + mi * 16 + g) * S::a_ld + kk + t;
        a[mi][0] = to_tf32(base[0]);
        a[mi][1] = to_tf32(base[8 * S::a_ld]);
        a[mi][2] = to_tf32(base[4]);
        a[mi][3] = to_tf32(base[8 * S::a_ld + 4]);
      }
#pragma unroll
      for (int p = 0; p < PARTS; p++) {
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
          /* b0 = B[k = kk + t][n], b1 = B[k = kk + t + 4][n], n = ... + g */
          const int n = p * tile_cfg::BN + wn * 32 + ni * 8 + g;
          uint32_t b0, b1;
          if (BL == TILE_B_KN) {
            const float *bb = (const float *)sb + (kk + t) * S::b_ld + n;
            b0 = to_tf32(bb[0]);
            b1 = to_tf32(bb[4 * S::b_ld]);
          } else {
            const float *bb = (const float *)sb + n * S::bk_ld + kk + t;
            b0 = to_tf32(bb[0]);
            b1 = to_tf32(bb[4]);
          }
#pragma unroll
          for (int mi = 0; mi < 2; mi++) mma_1688_tf32(&acc.v[p][(mi * 4 + ni) * 4], a[mi], b0, b1);
        }
      }
    }
  } else { /* TILE_FP32: thread owns rows ty*8.., cols tx*4.. of each part */
    const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
#pragma unroll 4
    for (int k = 0; k < S::BK; k++) {
      float a[8];
#pragma unroll
      for (int i = 0; i < 8; i++) a[i] = ((const float *)sa)[(ty * 8 + i) * S::a_ld + k];
#pragma unroll
      for (int p = 0; p < PARTS; p++) {
        float4 b;
        if (BL == TILE_B_KN) {
          b = *(const float4 *)((const float *)sb + k * S::b_ld + p * tile_cfg::BN + tx * 4);
        } else { /* columns tx + 16j (file comment) */
          const float *bn = (const float *)sb + (p * tile_cfg::BN + tx) * S::bk_ld + k;
          b = make_float4(bn[0], bn[16 * S::bk_ld], bn[32 * S::bk_ld], bn[48 * S::bk_ld]);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
          acc.v[p][i * 4 + 0] = fmaf(a[i], b.x, acc.v[p][i * 4 + 0]);
          acc.v[p][i * 4 + 1] = fmaf(a[i], b.y, acc.v[p][i * 4 + 1]);
          acc.v[p][i * 4 + 2] = fmaf(a[i], b.z, acc.v[p][i * 4 + 2]);
          acc.v[p][i * 4 + 3] = fmaf(a[i], b.w, acc.v[p][i * 4 + 3]);
        }
      }
    }
  }
}

/* The whole K loop through the cp.async pipeline, B in layout BL. `smem`
 * holds tile_smem<MATH, PARTS>::bytes. All threads of the block call it; on
 * return the shared memory is free for the caller. */
template <int MATH, int PARTS, int BL>
static __device__ __forceinline__ void tile_gemm(void *smem, const void *A, size_t lda,
                                                 int rows_valid, const void *B, size_t ldb,
                                                 int b_col0, int b_col1, int K,
                                                 tile_acc<PARTS> &acc) {
  typedef typename tile_types<MATH>::T T;
  typedef tile_smem<MATH, PARTS> S;
  constexpr int NS = tile_cfg::stages;
#pragma unroll
  for (int p = 0; p < PARTS; p++)
#pragma unroll
    for (int i = 0; i < 32; i++) acc.v[p][i] = 0.f;
  /* stage i lives at st0 + i * stage_elems (pointer arithmetic, no arrays:
   * a runtime-indexed array would go to local memory) */
  T *const st0 = (T *)smem;
  const int nk = K / S::BK;
#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (s < nk)
      tile_load_stage<MATH, PARTS, BL>(st0 + s * S::stage_elems, (const T *)A, lda, rows_valid,
                                   (const T *)B, ldb, b_col0, b_col1, s * S::BK);
    cp_async_commit();
  }
  for (int kt = 0; kt < nk; kt++) {
    cp_async_wait<NS - 2>(); /* stage kt has landed (this thread's part) */
    __syncthreads();         /* ... everyone's; and stage kt-1 is free */
    const int next = kt + NS - 1;
    if (next < nk)
      tile_load_stage<MATH, PARTS, BL>(st0 + (next % NS) * S::stage_elems, (const T *)A, lda,
                                   rows_valid, (const T *)B, ldb, b_col0, b_col1,
                                   next * S::BK);
    cp_async_commit();
    tile_compute_stage<MATH, PARTS, BL>(st0 + (kt % NS) * S::stage_elems, acc);
  }
  cp_async_wait<0>();
  __syncthreads();
}

/* Visit every accumulator element: f(row, col, part, value). Rows/cols are
 * tile-relative (0..BM-1, 0..BN-1). b_layout: the BL tile_gemm ran with
 * (the SIMT path's columns depend on it; a runtime value, as the visit is
 * once per tile). A (row, col)'s parts arrive in consecutive calls, part 0
 * first; adjacent column pairs arrive together as (col, col+1) on the
 * tensor-core paths. */
template <int MATH, int PARTS, class F>
static __device__ __forceinline__ void tile_for_each(const tile_acc<PARTS> &acc, int b_layout,
                                                     F f) {
  if (MATH == TILE_FP32) {
    const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    const int c0 = b_layout == TILE_B_KN ? tx * 4 : tx, cs = b_layout == TILE_B_KN ? 1 : 16;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int p = 0; p < PARTS; p++) f(ty * 8 + i, c0 + j * cs, p, acc.v[p][i * 4 + j]);
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
      for (int ni = 0; ni < 4; ni++)
#pragma unroll
        for (int c = 0; c < 4; c++)
#pragma unroll
          for (int p = 0; p < PARTS; p++)
            f(wm * 32 + mi * 16 + g + (c >> 1) * 8, wn * 32 + ni * 8 + t * 2 + (c & 1), p,
              acc.v[p][(mi * 4 + ni) * 4 + c]);
  }
}

#endif /* LOOM_GEMM_TILE_CUH */
