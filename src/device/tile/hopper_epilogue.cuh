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
 * x[2k+1]: chunk k) rounded to T and transposed within the quad: this
 * lane's chunk, 16 bytes. Every lane of the warp calls it (shuffles). */
template <typename T> static __device__ __forceinline__ uint4 hop_quad_pack(const float (&x)[8]) {
  return hop_quad_transpose(hop_pack2((T *)0, x[0], x[1]), hop_pack2((T *)0, x[2], x[3]),
                            hop_pack2((T *)0, x[4], x[5]), hop_pack2((T *)0, x[6], x[7]));
}

/* hop_quad_pack, and this lane's chunk stored with one 16-byte store at
 * row + col (16-byte aligned) where ok. Every lane of the warp calls it. */
template <typename T>
static __device__ __forceinline__ void hop_quad_store(T *row, int col, bool ok, const float (&x)[8]) {
  const uint4 v = hop_quad_pack<T>(x);
  if (ok) *(uint4 *)(row + col) = v;
}

/* Replicated outputs (hop_params.n_rep > 1; compiled in for a SIDE with
 * `static constexpr bool replicas`, hop_side_rep): every element stored
 * at its address also goes to that address + hop_rep_delta(p)[i], i = 1 ..
 * n_rep - 1 (byte distances, e.g. the same part of every peer's window). */
static __device__ __forceinline__ const int64_t *hop_rep_delta(const hop_params &p) {
  return (const int64_t *)(hop_param_base(p) + (uintptr_t)p.rep_delta);
}
template <bool REP, typename V> static __device__ __forceinline__ void hop_rep_put(void *at, V v, const hop_params &p) {
  *(V *)at = v;
  if constexpr (REP)
    for (int i = 1; i < p.n_rep; i++) *(V *)((char *)at + hop_rep_delta(p)[i]) = v;
}

/* hop_quad_store with replicas (REP: hop_rep_put). */
template <bool REP, typename T>
static __device__ __forceinline__ void hop_quad_store_rep(T *row, int col, bool ok, const float (&x)[8],
                                                          const hop_params &p) {
  const uint4 v = hop_quad_pack<T>(x);
  if (ok) hop_rep_put<REP>(row + col, v, p);
}

/* Tagged stores (a SIDE with hop_side_ll whose ll_tag() is non-zero for
 * the launch; 16-bit output with store16): this lane's 16-byte chunk,
 * four 32-bit words of two elements each, goes out as four 64-bit words
 * {word, tag << 32} (ptx_st_relaxed_sys_v2_u64, two of them), 32 bytes at
 * twice the chunk's byte offset in a row of twice the bytes (ops.h,
 * loom_rs_ll_stride), and so to every replica (REP). Every lane of the
 * warp calls it (hop_quad_pack shuffles). */
template <bool REP, typename T>
static __device__ __forceinline__ void hop_quad_store_ll(T *row, int col, bool ok, const float (&x)[8],
                                                         const hop_params &p, uint32_t tag) {
  static_assert(sizeof(T) == 2, "tagged stores: 16-bit outputs");
  const uint4 v = hop_quad_pack<T>(x);
  if (!ok) return;
  const uint64_t hi = (uint64_t)tag << 32;
  char *const at = (char *)row + 2 * (size_t)col * sizeof(T);
  const int copies = REP && p.n_rep > 1 ? p.n_rep : 1;
  for (int i = 0; i < copies; i++) {
    char *const d = at + (i ? hop_rep_delta(p)[i] : 0);
    ptx_st_relaxed_sys_v2_u64(d, hi | v.x, hi | v.y);
    ptx_st_relaxed_sys_v2_u64(d + 16, hi | v.z, hi | v.w);
  }
}

/* hop_store2 with replicas (REP: the rounded pair to every copy). */
template <bool REP, typename T>
static __device__ __forceinline__ void hop_store2_rep(T *at, float a, float b, const hop_params &p) {
  hop_store2(at, a, b);
  if constexpr (REP)
    for (int i = 1; i < p.n_rep; i++) hop_store2((T *)((char *)at + hop_rep_delta(p)[i]), a, b);
}

/* Value e (0/1) of the column pair in accumulator chunk `chunk`, row half
 * h, of a fragment, the element-wise activation applied; SwiGLU's from its
 * gate and up chunks. */
template <int ACT>
static __device__ __forceinline__ float hop_out_val(const float *acc, int chunk, int h, int e) {
  return hop_act<ACT>(acc[4 * chunk + 2 * h + e]);
}
static __device__ __forceinline__ float hop_swiglu_val(const float *acc, int gate, int up, int h, int e) {
  return hop_silu(acc[4 * gate + 2 * h + e]) * acc[4 * up + 2 * h + e];
}

/* The same for output chunk o (8 output columns) of the slab: accumulator
 * chunk o, or under SwiGLU gate chunk (o / 4) * 8 + o % 4 (the first four of
 * every eight accumulator chunks are gate columns) and its up chunk 4 later.
 * A slab of NACC accumulators has NACC / 4 output chunks, NACC / 8 under
 * SwiGLU, starting at output column hop_out_col(slab's first B row). */
template <int ACT>
static __device__ __forceinline__ float hop_chunk_val(const float *acc, int o, int h, int e) {
  if (ACT == HOP_ACT_SWIGLU) {
    const int g = (o >> 2) * 8 + (o & 3);
    return hop_swiglu_val(acc, g, g + 4, h, e);
  }
  return hop_out_val<ACT>(acc, o, h, e);
}

/* The bias of B row (pre-activation column) col: hop_params.bias in the
 * output type T, 0 past N. Read-only for the whole launch. */
static __device__ __forceinline__ float hop_to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ float hop_to_f32(__half v) { return __half2float(v); }
static __device__ __forceinline__ float hop_to_f32(float v) { return v; }
template <typename T> static __device__ __forceinline__ float hop_bias1(const hop_params &p, int col) {
  return col < p.n ? hop_to_f32(__ldg((const T *)p.bias + col)) : 0.f;
}

/* The bias of B rows col and col + 1 (col even, 0 past N) in one
 * read-only load of two elements (hop_params.bias is 16-byte aligned). */
static __device__ __forceinline__ float2 hop_to_f32x2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
static __device__ __forceinline__ float2 hop_to_f32x2(__half2 v) { return __half22float2(v); }
static __device__ __forceinline__ float2 hop_to_f32x2(float2 v) { return v; }
template <typename T> struct hop_pair;
template <> struct hop_pair<__nv_bfloat16> { typedef __nv_bfloat162 T2; };
template <> struct hop_pair<__half> { typedef __half2 T2; };
template <> struct hop_pair<float> { typedef float2 T2; };
template <typename T> static __device__ __forceinline__ float2 hop_bias2(const hop_params &p, int col) {
  typedef typename hop_pair<T>::T2 T2;
  if (col + 1 < p.n) return hop_to_f32x2(__ldg((const T2 *)((const T *)p.bias + col)));
  return make_float2(hop_bias1<T>(p, col), 0.f);
}

/* hop_chunk_val, with BIAS (a SIDE's `static constexpr bool bias`,
 * hop_side_bias) the bias value b of its B row added before the activation
 * (not under SwiGLU). The 16-bit epilogues load b in batches of pairs
 * (hop_bias2) before they compute and store, so the loads are in flight
 * together instead of one behind each store. Without BIAS, the same code
 * as before the bias existed: no + 0 (which is not a no-op for -0.f), no
 * load. */
template <int ACT, bool BIAS>
static __device__ __forceinline__ float hop_val_b(const float *acc, int o, int h, int e, float b) {
  static_assert(!(BIAS && ACT == HOP_ACT_SWIGLU), "no bias under SwiGLU");
  if constexpr (BIAS) return hop_act<ACT>(acc[4 * o + 2 * h + e] + b);
  else return hop_chunk_val<ACT>(acc, o, h, e);
}
template <int ACT> static __device__ __forceinline__ int hop_out_col(int b_row) {
  return ACT == HOP_ACT_SWIGLU ? b_row / 2 : b_row; /* b_row: a multiple of 64 under SwiGLU */
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
  /* with maps_const, a row_ptr is a byte offset from &p too (a table in
   * the operator's kernel parameter: the reduce-scatter's one-tile mode) */
  r.row_ptr = g->row_ptr ? (void *const *)(hop_param_base(p) + (uintptr_t)g->row_ptr) : NULL;
  r.row_scale = g->row_scale;
  return r;
}

/* Store one m64 x (2*NACC) accumulator slab of a consumer warpgroup (tile
 * rows row_off.., columns col_off.. inside task t's CM x CN tile): act, row
 * scale, round, store. Rows >= t.rows (past the group's end) and columns
 * >= N are not written. Row r of the group is row t.row_base + r of C,
 * row_ptr and row_scale (device groups: the buffer row).
 * Stores: with p.store16 (16-bit output, every row 16-byte aligned) each
 * quad transposes four chunks and stores 16 bytes per lane (hop_quad_store);
 * otherwise column pairs (4 or 8 bytes) straight from the fragment.
 * LL with a non-zero ll_tag (store16 only: the launcher's promise): the
 * quads' chunks as tagged stores (hop_quad_store_ll). */
template <class CFG, int ACT, int OUT, int NACC, bool BIAS = false, bool REP = false, bool LL = false>
static __device__ __forceinline__ void hop_epilogue(const float *acc, const hop_params &p, const hop_task &t,
                                                    const hop_gptrs &gp, int row_off, int col_off,
                                                    uint32_t ll_tag = 0) {
  typedef typename hop_out_type<OUT>::T T;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  void *const *row_ptr = gp.row_ptr;
  const float *row_scale = gp.row_scale;
  T *const c = (T *)gp.c;
  const int row0 = t.m_blk * CFG::CM + row_off + warp * 16 + (lane >> 2);
  if constexpr (OUT != HOP_OUT_FP32) if (p.store16) {
    static_assert(NACC % 16 == 0, "quads of four 8-column chunks");
    const int q = lane & 3;
    constexpr int NOUT = ACT == HOP_ACT_SWIGLU ? NACC / 8 : NACC / 4; /* output chunks of the slab */
    const int ocol0 = hop_out_col<ACT>(t.n_blk * CFG::CN + col_off);
    const int bcol0 = t.n_blk * CFG::CN + col_off + 2 * q; /* BIAS: B row of this lane's first value */
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = row0 + 8 * h;
      const bool live = row < t.rows;
      const int brow = t.row_base + row;
      const float scale = live && row_scale ? row_scale[brow] : 1.f;
      T *const dst = !live ? NULL : row_ptr ? (T *)row_ptr[brow] : c + (size_t)brow * p.ldc;
      /* four output chunks a quad: lane q stores chunk 4a + q */
#pragma unroll
      for (int a = 0; a < NOUT / 4; a++) {
        float x[8];
        float2 bb[4]; /* BIAS: chunks 4a .. 4a + 3 */
        if constexpr (BIAS) {
#pragma unroll
          for (int i = 0; i < 4; i++) bb[i] = hop_bias2<T>(p, bcol0 + 8 * (4 * a + i));
        }
#pragma unroll
        for (int k = 0; k < 8; k++)
          x[k] = hop_val_b<ACT, BIAS>(acc, 4 * a + k / 2, h, k % 2, !BIAS ? 0.f : k % 2 ? bb[k / 2].y : bb[k / 2].x) *
                 scale;
        const int col = ocol0 + 32 * a + 8 * q;
        if constexpr (LL && sizeof(T) == 2) {
          if (ll_tag) {
            hop_quad_store_ll<REP>(dst, col, live && col < p.n_out, x, p, ll_tag);
            continue;
          }
        }
        hop_quad_store_rep<REP>(dst, col, live && col < p.n_out, x, p);
      }
    }
    return;
  }
  const int col0 = t.n_blk * CFG::CN + col_off + 2 * (lane & 3);
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
            hop_store2_rep<REP>(dst + oc, hop_swiglu_val(acc, i, i + 4, h, 0) * scale,
                                hop_swiglu_val(acc, i, i + 4, h, 1) * scale, p);
          }
        } else if (col < p.n) {
          hop_store2_rep<REP>(dst + col,
                              hop_val_b<ACT, BIAS>(acc, i, h, 0, BIAS ? hop_bias1<T>(p, col) : 0.f) * scale,
                              hop_val_b<ACT, BIAS>(acc, i, h, 1, BIAS ? hop_bias1<T>(p, col + 1) : 0.f) * scale, p);
        }
      }
    }
  }
}

/* The swapped decode tile (hop_cfg::swap, BM = 128 weight rows x BN = 16
 * group rows): consumer WG wg holds D[64 x 16] = (B rows 64 wg ..) x (the
 * task's 16 group rows)^T, thread (warp w, lane l) acc[4 j + 2 h + e] =
 * output column 64 wg + 16 w + l / 4 + 8 h of group row 8 j + 2 (l % 4) + e
 * (j = 0, 1). The WG writes its 16 x 64 block into `stg` (fp32 rows of
 * HOP_SWAP_PITCH) and reads it back as the 64 x 128 tile's first warp holds
 * its m64n64 fragment (rows l / 4 (+ 8), columns 8 i + 2 (l % 4) (+ 1)): the
 * WG's first warp then stores it with hop_epilogue (row_off 0, col_off 64 wg),
 * so every epilogue of that tile (activations, SwiGLU's pairs, bias, row
 * scale, per-row pointers, 16-byte and tagged stores, replicas) serves the
 * swapped tile unchanged. Warps 1-3 hold no rows of it and go on. The
 * named barrier HOP_BAR_SWAP + wg (the WG's 128 threads) is met twice: the
 * previous task's reads are done before the writes, the writes before the
 * reads. All 128 threads of the WG call it. */
template <class CFG, int ACT, int OUT, bool BIAS, bool REP, bool LL>
static __device__ __forceinline__ void hop_epilogue_swap(const float *acc, const hop_params &p, const hop_task &t,
                                                         const hop_gptrs &gp, float *stg, int wg,
                                                         uint32_t ll_tag) {
  static_assert(CFG::swap && CFG::acc_regs == 8 && CFG::CM == 16 && CFG::CN == 128, "the m64n16 x 2 WG tile");
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, q = lane & 3;
  float *const s = stg + wg * 16 * HOP_SWAP_PITCH;
  ptx_named_bar_sync(HOP_BAR_SWAP + wg, 128);
#pragma unroll
  for (int i = 0; i < 8; i++) /* group row 8 (i / 4) + 2 q + i % 2, column 16 w + l / 4 + 8 ((i / 2) % 2) */
    s[(8 * (i >> 2) + 2 * q + (i & 1)) * HOP_SWAP_PITCH + 16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1)] = acc[i];
  ptx_named_bar_sync(HOP_BAR_SWAP + wg, 128);
  if (warp != 0) return;
  float f[32]; /* the m64n64 fragment's rows 0-15: f[4 i + 2 h + e] = row l / 4 + 8 h, column 8 i + 2 q + e */
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float2 v = *(const float2 *)&s[((lane >> 2) + 8 * h) * HOP_SWAP_PITCH + 8 * i + 2 * q];
      f[4 * i + 2 * h] = v.x;
      f[4 * i + 2 * h + 1] = v.y;
    }
  hop_epilogue<CFG, ACT, OUT, 32, BIAS, REP, LL>(f, p, t, gp, 0, 64 * wg, ll_tag);
}

/* Whether this consumer warp's rows of task t go out through the TMA
 * epilogue: the launch has C maps, and (device groups, one map over the
 * whole buffer) all 16 of the warp's rows are live, since a box would
 * otherwise write into the next group's rows. Host-group maps end at the
 * group's last row: TMA drops the rows past it. Uniform across the warp. */
template <class CFG>
static __device__ __forceinline__ int hop_tma_rows(const hop_params &p, const hop_task &t, int row_off) {
  const int warp = (threadIdx.x >> 5) & 3;
  return p.c_maps != NULL && (p.dg_rows == NULL || t.m_blk * CFG::CM + row_off + warp * 16 + 16 <= t.rows);
}

/* TMA epilogue (HOP_EPI_TMA, 16-bit output) of one consumer warp: its 16
 * rows of the WG's m64 x (2*NACC) slab, in blocks of 64 output columns.
 * Block b is rounded (act, row scale) into staging half b % 2 (16 rows x
 * 128 bytes, the 128-byte swizzle: 16-byte chunk c of row r at c ^ (r % 8),
 * so the eight rows of an 8 x 8 matrix hit eight different bank groups)
 * with four stmatrix.x4, fenced for the async proxy, and lane 0 stores it
 * with one TMA box (64 columns x 16 rows at C map row t.row_base + first
 * row; columns >= n_out and, with host groups, rows past the group's end
 * are dropped by TMA) and commits one bulk group per block. Before writing
 * a half, lane 0 waits until at most one group still reads staging: the
 * groups alternate halves (an even number of blocks per task), so that one
 * is the other half's. The global writes drain behind the next mainloop;
 * the consumer waits for them once, at the end (hop_consumer).
 * `cmap_fenced`: the C map last acquired by this thread (host groups'
 * maps are written by the host: fence.proxy.tensormap before the first
 * store through each). Every lane of the warp calls it. */
template <class CFG, int ACT, int OUT, int NACC, bool BIAS = false>
static __device__ __forceinline__ void hop_epilogue_tma(const float *acc, const hop_params &p, const hop_task &t,
                                                        const hop_gptrs &gp, uint8_t *stg, int row_off,
                                                        int col_off, int &cmap_fenced) {
  typedef typename hop_out_type<OUT>::T T;
  constexpr int NB = (ACT == HOP_ACT_SWIGLU ? NACC / 8 : NACC / 4) / 8; /* 64-column output blocks */
  static_assert(NB % 2 == 0, "blocks alternate the two staging halves within a task");
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int wrow = t.m_blk * CFG::CM + row_off + warp * 16; /* group row of the warp's first row */
  const int ocol0 = hop_out_col<ACT>(t.n_blk * CFG::CN + col_off);
  const int bcol0 = t.n_blk * CFG::CN + col_off + 2 * (lane & 3); /* BIAS: B row of this lane's first value */
  const CUtensorMap *map = p.c_maps + t.desc;
  if (lane == 0 && cmap_fenced != t.desc) {
    ptx_fence_tensormap_acquire(map);
    cmap_fenced = t.desc;
  }
  float scale[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int row = wrow + (lane >> 2) + 8 * h;
    scale[h] = gp.row_scale && row < t.rows ? gp.row_scale[t.row_base + row] : 1.f;
  }
  /* stmatrix addresses: lane l gives row l % 8 of matrix l / 8; matrix m is
   * (output chunk j + m / 2, row half m % 2) of the four a call stores */
  const int mat = lane >> 3, r8 = lane & 7;
  const uint32_t row_addr = ptx_smem_addr(stg) + (uint32_t)((8 * (mat & 1) + r8) * 128);
#pragma unroll
  for (int b = 0; b < NB; b++) {
    const uint32_t half = row_addr + (uint32_t)((b & 1) * 16 * 128);
    float2 bb[8]; /* BIAS: chunks 8b .. 8b + 7, loaded before the staging buffer is waited for */
    if constexpr (BIAS) {
#pragma unroll
      for (int i = 0; i < 8; i++) bb[i] = hop_bias2<T>(p, bcol0 + 8 * (8 * b + i));
    }
    if (lane == 0) ptx_bulk_wait_read<1>();
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      uint32_t r[4];
#pragma unroll
      for (int m = 0; m < 4; m++) {
        const int o = 8 * b + j + (m >> 1), h = m & 1; /* output chunk, row half */
        const float2 bo = BIAS ? bb[j + (m >> 1)] : make_float2(0.f, 0.f);
        r[m] = hop_pack2((T *)0, hop_val_b<ACT, BIAS>(acc, o, h, 0, bo.x) * scale[h],
                         hop_val_b<ACT, BIAS>(acc, o, h, 1, bo.y) * scale[h]);
      }
      const int cc = j + (mat >> 1); /* chunk of this lane's row inside the block */
      ptx_stmatrix_x4(half + (uint32_t)((cc ^ r8) << 4), r[0], r[1], r[2], r[3]);
    }
    ptx_fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) {
      const int col = ocol0 + 64 * b;
      if (col < p.n_out) ptx_tma_store_2d(map, stg + (b & 1) * 16 * 128, col, t.row_base + wrow);
      ptx_bulk_commit();
    }
  }
}

/* A cooperative consumer WG's slab: through TMA (HOP_EPI_TMA, 16-bit
 * output, hop_tma_rows) or with direct stores. */
template <class CFG, int ACT, int OUT, int NACC, bool BIAS = false, bool REP = false, bool LL = false>
static __device__ __forceinline__ void hop_epilogue_store(const float *acc, const hop_params &p, const hop_task &t,
                                                          const hop_gptrs &gp, uint8_t *stg, int row_off,
                                                          int col_off, int &cmap_fenced, uint32_t ll_tag = 0) {
  static_assert(!(REP && CFG::epi_tma), "replicas: direct stores only");
  if constexpr (CFG::epi_tma && OUT != HOP_OUT_FP32) {
    if (hop_tma_rows<CFG>(p, t, row_off)) {
      hop_epilogue_tma<CFG, ACT, OUT, NACC, BIAS>(acc, p, t, gp, stg, row_off, col_off, cmap_fenced);
      return;
    }
  }
  hop_epilogue<CFG, ACT, OUT, NACC, BIAS, REP, LL>(acc, p, t, gp, row_off, col_off, ll_tag);
}

template <class CFG, int ACT, int OUT, int NACC, bool BIAS = false, bool REP = false, bool LL = false>
static __device__ __forceinline__ void hop_epilogue(const float *acc, const hop_params &p, const hop_task &t,
                                                    int row_off, int col_off, uint32_t ll_tag = 0) {
  hop_epilogue<CFG, ACT, OUT, NACC, BIAS, REP, LL>(acc, p, t, hop_group_ptrs(p, t), row_off, col_off, ll_tag);
}

#endif /* LOOM_TILE_HOPPER_EPILOGUE_CUH */
