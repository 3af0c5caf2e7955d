/*
 * Epilogues of the Hopper tile engine: what happens to a consumer
 * warpgroup's fp32 accumulators after the last k-block. Included by
 * hopper.cuh; the engine picks one by its ACT/OUT template parameters.
 *
 * Accumulator fragment of wgmma m64nN (fp32 D) for thread (warp w of the
 * warpgroup, lane l), register j in [0, N/2):
 *   chunk i = j / 4 (8 columns each), e = j % 4
 *   row = 16*w + l/4 + 8*(e / 2)         (0..63 inside the WG's 64 rows)
 *   col = 8*i + 2*(l % 4) + (e % 2)      (0..N-1 inside the WG's N columns)
 * so (acc[4i], acc[4i+1]) are two adjacent columns of row l/4 + 16w and
 * (acc[4i+2], acc[4i+3]) the same columns eight rows down. A thread owns
 * the same column pair in every 8-column chunk: SwiGLU's gate chunk i and up
 * chunk i + 4 (32 columns apart) sit in the same thread.
 */
#ifndef LOOM_TILE_HOPPER_EPILOGUE_CUH
#define LOOM_TILE_HOPPER_EPILOGUE_CUH

template <int OUT> struct hop_out_type;
template <> struct hop_out_type<HOP_OUT_BF16> { typedef __nv_bfloat16 T; };
template <> struct hop_out_type<HOP_OUT_FP16> { typedef __half T; };
template <> struct hop_out_type<HOP_OUT_FP32> { typedef float T; };

/* Round two adjacent values to the output type and store them together
 * (4 or 8 bytes: the row pointer must keep that alignment at even columns). */
static __device__ __forceinline__ void hop_store2(__nv_bfloat16 *p, float a, float b) {
  *(__nv_bfloat162 *)p = __floats2bfloat162_rn(a, b);
}
static __device__ __forceinline__ void hop_store2(__half *p, float a, float b) {
  *(__half2 *)p = __floats2half2_rn(a, b);
}
static __device__ __forceinline__ void hop_store2(float *p, float a, float b) {
  *(float2 *)p = make_float2(a, b);
}

/* SiLU without a division subroutine (a call in the consumer region would
 * cap its registers): __fdividef; 0 (or NaN for x = -inf) when 1 + e^-x
 * overflows, as the exact quotient. */
static __device__ __forceinline__ float hop_silu(float x) { return __fdividef(x, 1.f + __expf(-x)); }

/* Element-wise activations (SwiGLU is a pairwise one, handled in the loop). */
template <int ACT> static __device__ __forceinline__ float hop_act(float x) {
  if (ACT == HOP_ACT_RELU) return fmaxf(x, 0.f);
  if (ACT == HOP_ACT_GELU_TANH)
    return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  if (ACT == HOP_ACT_GELU_ERF) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  if (ACT == HOP_ACT_SILU) return hop_silu(x);
  return x;
}

/* Two values rounded to a 16-bit output type, packed as one 32-bit word
 * (the lower column in the low half, as in memory). */
static __device__ __forceinline__ uint32_t hop_pack2(__nv_bfloat16 *, float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *(const uint32_t *)&v;
}
static __device__ __forceinline__ uint32_t hop_pack2(__half *, float a, float b) {
  const __half2 v = __floats2half2_rn(a, b);
  return *(const uint32_t *)&v;
}

/* Quad transpose for 16-byte stores. The four lanes of a quad (q = lane % 4)
 * each hold one word (a column pair 2q, 2q+1) of the same row in four
 * 8-column chunks: w[c] = chunk c. Afterwards lane q holds chunk q whole,
 * columns 0..7 in memory order, ready for one 16-byte store: a warp then
 * writes 8 rows x 64 contiguous bytes per instruction instead of 8 rows x
 * 16 bytes. Two exchange rounds (lanes q^2, then q^1), two words each.
 * Every lane of the warp must call it (shuffles). */
static __device__ __forceinline__ uint4 hop_quad_transpose(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
  const int q = threadIdx.x & 3;
  const bool hi = (q & 2) != 0, lo = (q & 1) != 0;
  /* round 1: keep chunks 2hi, 2hi+1; trade the other two with lane q^2 */
  const uint32_t k0 = hi ? w2 : w0, k1 = hi ? w3 : w1;
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, hi ? w0 : w2, 2);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, hi ? w1 : w3, 2);
  /* chunk 2hi: k0 (from lane q), r0 (lane q^2); chunk 2hi+1: k1, r1.
   * round 2: keep chunk q = 2hi+lo, trade chunk 2hi+!lo with lane q^1 */
  const uint32_t own = lo ? k1 : k0, own2 = lo ? r1 : r0; /* chunk q from lanes q, q^2 */
  const uint32_t u0 = __shfl_xor_sync(0xffffffffu, lo ? k0 : k1, 1); /* from lane q^1 */
  const uint32_t u1 = __shfl_xor_sync(0xffffffffu, lo ? r0 : r1, 1); /* from lane q^3 */
  /* word s of the 16 bytes comes from lane s = q ^ d: d = 0 own, 1 u0, 2 own2, 3 u1 */
  const uint32_t a = lo ? u0 : own, b = lo ? own : u0, c = lo ? u1 : own2, d = lo ? own2 : u1;
  return make_uint4(hi ? c : a, hi ? d : b, hi ? a : c, hi ? b : d);
}

/* The fragment's column pairs of four 8-column chunks of one row (x[2k],
 * x[2k+1]: chunk k) rounded to T, transposed within the quad, and this
 * lane's chunk stored with one 16-byte store at row + col (16-byte aligned)
 * where ok. Every lane of the warp calls it (shuffles). */
template <typename T>
static __device__ __forceinline__ void hop_quad_store(T *row, int col, bool ok, const float (&x)[8]) {
  const uint4 v = hop_quad_transpose(hop_pack2((T *)0, x[0], x[1]), hop_pack2((T *)0, x[2], x[3]),
                                     hop_pack2((T *)0, x[4], x[5]), hop_pack2((T *)0, x[6], x[7]));
  if (ok) *(uint4 *)(row + col) = v;
}

/* Value e (0/1) of the column pair in output chunk o, row half h, of a
 * fragment: the activation applied, times the row scale. SwiGLU's gate and
 * up chunks of output chunk o are o_gate and o_gate + up_delta. */
template <int ACT>
static __device__ __forceinline__ float hop_out_val(const float *acc, int chunk, int h, int e) {
  return hop_act<ACT>(acc[4 * chunk + 2 * h + e]);
}
static __device__ __forceinline__ float hop_swiglu_val(const float *acc, int gate, int up, int h, int e) {
  return hop_silu(acc[4 * gate + 2 * h + e]) * acc[4 * up + 2 * h + e];
}

/* The task's group fields the epilogue needs. The cooperative consumers
 * load them before the mainloop (ncu, session 11: loaded here, their
 * latency stalled every epilogue, ~2% of the kernel's warp samples). The
 * group table is never written while tasks run (host groups: the host;
 * device groups: acquired before the role split), unlike the per-row
 * row_ptr / row_scale entries, which are read after the mainloop. */
struct hop_gptrs {
  void *c;
  void *const *row_ptr;
  const float *row_scale;
};
static __device__ __forceinline__ hop_gptrs hop_group_ptrs(const hop_params &p, const hop_task &t) {
  const hop_group *g = &hop_group_table(p)[t.desc];
  hop_gptrs r;
  r.c = g->c;
  r.row_ptr = g->row_ptr;
  r.row_scale = g->row_scale;
  return r;
}

/* Store one m64 x (2*NACC) accumulator slab of a consumer warpgroup (tile
 * rows row_off.., columns col_off.. inside task t's BM x BN tile): act, row
 * scale, round, store. Rows >= t.rows (past the group's end) and columns
 * >= N are not written. Row r of the group is row t.row_base + r of C,
 * row_ptr and row_scale (device groups: the buffer row).
 * Stores: with p.store16 (16-bit output, every row 16-byte aligned) each
 * quad transposes four chunks and stores 16 bytes per lane (hop_quad_store);
 * otherwise column pairs (4 or 8 bytes) straight from the fragment. */
template <class CFG, int ACT, int OUT, int NACC>
static __device__ __forceinline__ void hop_epilogue(const float *acc, const hop_params &p, const hop_task &t,
                                                    const hop_gptrs &gp, int row_off, int col_off) {
  typedef typename hop_out_type<OUT>::T T;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  void *const *row_ptr = gp.row_ptr;
  const float *row_scale = gp.row_scale;
  T *const c = (T *)gp.c;
  const int row0 = t.m_blk * CFG::BM + row_off + warp * 16 + (lane >> 2);
  if constexpr (OUT != HOP_OUT_FP32) if (p.store16) {
    static_assert(NACC % 16 == 0, "quads of four 8-column chunks");
    const int q = lane & 3;
    const int cbase = t.n_blk * CFG::BN + col_off; /* first B row (pre-activation column) of the slab */
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = row0 + 8 * h;
      const bool live = row < t.rows;
      const int brow = t.row_base + row;
      const float scale = live && row_scale ? row_scale[brow] : 1.f;
      T *const dst = !live ? NULL : row_ptr ? (T *)row_ptr[brow] : c + (size_t)brow * p.ldc;
      if (ACT == HOP_ACT_SWIGLU) {
        /* 8 accumulator chunks = 4 gate + 4 up chunks -> 4 output chunks */
#pragma unroll
        for (int b = 0; b < NACC / 32; b++) {
          float x[8];
#pragma unroll
          for (int k = 0; k < 8; k++) x[k] = hop_swiglu_val(acc, 8 * b + k / 2, 8 * b + k / 2 + 4, h, k % 2) * scale;
          const int gcol = cbase + 64 * b + 8 * q; /* gate column of this lane's output chunk */
          hop_quad_store(dst, (gcol >> 6) * HOP_SWIGLU_BLOCK + (gcol & 63), live && gcol < p.n, x);
        }
      } else {
#pragma unroll
        for (int a = 0; a < NACC / 16; a++) {
          float x[8];
#pragma unroll
          for (int k = 0; k < 8; k++) x[k] = hop_out_val<ACT>(acc, 4 * a + k / 2, h, k % 2) * scale;
          const int col = cbase + 32 * a + 8 * q;
          hop_quad_store(dst, col, live && col < p.n, x);
        }
      }
    }
    return;
  }
  const int col0 = t.n_blk * CFG::BN + col_off + 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int row = row0 + 8 * h;
    if (row < t.rows) {
      const int brow = t.row_base + row;
      const float scale = row_scale ? row_scale[brow] : 1.f;
      T *const dst = row_ptr ? (T *)row_ptr[brow] : c + (size_t)brow * p.ldc;
#pragma unroll
      for (int i = 0; i < NACC / 4; i++) {
        const int col = col0 + 8 * i; /* B row (pre-activation column) of acc[4i + 2h] */
        if (ACT == HOP_ACT_SWIGLU) {
          if ((i & 7) < 4 && col < p.n) { /* gate chunk; its up chunk is i + 4 */
            const int oc = (col >> 6) * HOP_SWIGLU_BLOCK + (col & 63);
            hop_store2(dst + oc, hop_swiglu_val(acc, i, i + 4, h, 0) * scale,
                       hop_swiglu_val(acc, i, i + 4, h, 1) * scale);
          }
        } else if (col < p.n) {
          hop_store2(dst + col, hop_out_val<ACT>(acc, i, h, 0) * scale, hop_out_val<ACT>(acc, i, h, 1) * scale);
        }
      }
    }
  }
}

template <class CFG, int ACT, int OUT, int NACC>
static __device__ __forceinline__ void hop_epilogue(const float *acc, const hop_params &p, const hop_task &t,
                                                    int row_off, int col_off) {
  hop_epilogue<CFG, ACT, OUT, NACC>(acc, p, t, hop_group_ptrs(p, t), row_off, col_off);
}

#endif /* LOOM_TILE_HOPPER_EPILOGUE_CUH */
