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

static __device__ __forceinline__ float hop_silu(float x) { return x / (1.f + expf(-x)); }

/* Element-wise activations (SwiGLU is a pairwise one, handled in the loop). */
template <int ACT> static __device__ __forceinline__ float hop_act(float x) {
  if (ACT == HOP_ACT_RELU) return fmaxf(x, 0.f);
  if (ACT == HOP_ACT_GELU_TANH)
    return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  if (ACT == HOP_ACT_GELU_ERF) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  if (ACT == HOP_ACT_SILU) return hop_silu(x);
  return x;
}

/* Store one m64 x (2*NACC) accumulator slab of a consumer warpgroup (tile
 * rows row_off.., columns col_off.. inside task t's BM x BN tile): act, row
 * scale, round, plain st.global of column pairs. Rows >= t.rows (past the
 * group's end) and columns >= N are not written. Row r of the group is row
 * t.row_base + r of C, row_ptr and row_scale (device groups: the buffer row). */
template <class CFG, int ACT, int OUT, int NACC>
static __device__ __forceinline__ void hop_epilogue(const float *acc, const hop_params &p,
                                                    const hop_task &t, int row_off, int col_off) {
  typedef typename hop_out_type<OUT>::T T;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const hop_group *g = &p.groups[t.desc];
  void *const *row_ptr = g->row_ptr;
  const float *row_scale = g->row_scale;
  T *const c = (T *)g->c;
  const int row0 = t.m_blk * CFG::BM + row_off + warp * 16 + (lane >> 2);
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
            const float g0 = acc[4 * i + 2 * h], g1 = acc[4 * i + 2 * h + 1];
            const float u0 = acc[4 * (i + 4) + 2 * h], u1 = acc[4 * (i + 4) + 2 * h + 1];
            hop_store2(dst + oc, hop_silu(g0) * u0 * scale, hop_silu(g1) * u1 * scale);
          }
        } else if (col < p.n) {
          hop_store2(dst + col, hop_act<ACT>(acc[4 * i + 2 * h]) * scale,
                     hop_act<ACT>(acc[4 * i + 2 * h + 1]) * scale);
        }
      }
    }
  }
}

#endif /* LOOM_TILE_HOPPER_EPILOGUE_CUH */
