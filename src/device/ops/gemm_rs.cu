/*
 * GEMM + reduce-scatter as one persistent kernel per GPU
 * (docs/collective_gemm.md): rank r gets rows [r Mo, (r+1) Mo) of
 * act(sum_s A_s B_s^T), Mo = M / R.
 *
 * The kernel is the tile engine (hop_gemm_run) with R host groups, one per
 * owner o of output rows, in the order o = r+1, r+2, ..., r: its partial
 * tiles for o leave first and its own last. The epilogue stores a partial
 * tile straight into o's window (part r of o's staging: peer addresses in
 * the group's output pointer), then one consumer thread signals it
 * (SIDE::done: the call tag, then the epoch into o's flag for that tile).
 * Before a group's first tile the engine's readiness wait holds the
 * producer until o has finished the previous call (o's completion credit,
 * target epoch - 1), so no store reaches a window that is still being read.
 *
 * The reduction runs on the producer warpgroup's warps 1-3 (the side role,
 * 96 threads per block): for each of this rank's tiles, in the engine's
 * raster order, block b taking tiles b, b + grid, ..., wait for the R
 * sources' flags, sum their partials in source order in fp32 (bitwise
 * deterministic), apply the activation, round, store the rows of C.
 */
#include <cuda_runtime.h>

#include "collective.cuh"

#define RS_BAR_REDUCE HOP_BAR_SIDE_FIRST
#define RS_THREADS 96

struct rs_kparams {
  hop_params hp;                           /* group_maps, groups: offsets to maps, groups */
  CUtensorMap maps[2 * LOOM_AG_MAX_RANKS]; /* (A rows of owner g, B) per group */
  hop_group groups[LOOM_AG_MAX_RANKS];
  loom_dev_comm c;
  char *out;        /* C [mo x n] */
  size_t stride;    /* loom_rs_stride */
  int mo, n;        /* this rank's rows, columns */
  int m_tiles, n_tiles, bm, bn, raster_m; /* the engine's tiles of one group */
};
static_assert(sizeof(rs_kparams) <= 4096, "kernel parameter: 4 KB");
static_assert(hop_pp<HOP_BF16>::BM == LOOM_RS_MIN_TILE && hop_pp<HOP_BF16>::BN == LOOM_RS_MIN_TILE &&
                  hop_large_w1<HOP_BF16>::BM >= LOOM_RS_MIN_TILE && hop_large_w1<HOP_BF16>::BN >= LOOM_RS_MIN_TILE,
              "loom_rs_slots counts the smallest tile's flags");

struct rs_state {
  int failed; /* a flag poll gave up (fail holds why) */
  int ok;     /* the poll's outcome, for the 96 threads */
  loom_wait_fail fail;
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

template <int ACT, class T>
struct rs_side {
  static constexpr bool active = true;
  static constexpr bool has_done = true;
  const rs_kparams *P;
  uint64_t epoch;
  rs_state *st; /* shared memory */

  /* A consumer thread, after every store of task t's tile (hop_task_done):
   * this rank's call tag, then the tile's flag, into the owner's window. */
  __device__ __forceinline__ void done(const hop_task &t) const {
    const loom_dev_comm &c = P->c;
    const int o = (c.rank + 1 + t.group) % c.nranks;
    __threadfence_system();
    ptx_st_release_sys_u64(loom_flag_ptr(c, o, c.rank, loom_tag_slot(c)), loom_call_tag(epoch, c.op));
    loom_signal(c, o, t.m_blk * P->n_tiles + t.n_blk, epoch);
  }

  /* Warps 1-3 of the producer warpgroup, 40 registers: the reduction of
   * this rank's tiles (polls only; a fault is settled afterwards). */
  __device__ __forceinline__ void operator()(int w) const {
    typedef rs_vec<T> V;
    const rs_kparams &p = *P;
    const loom_dev_comm &c = p.c;
    const unsigned tid = (unsigned)(w * 32) + (threadIdx.x & 31u);
    const char *staging = loom_local_ptr(c, c.data_offset);
    const int total = p.m_tiles * p.n_tiles, band = p.raster_m * p.n_tiles;
    for (int local = blockIdx.x; local < total; local += gridDim.x) {
      /* the engine's raster order (hop_sched_next): tiles finish about in it */
      const int m0 = local / band * p.raster_m, in = local % band;
      const int band_m = min(p.raster_m, p.m_tiles - m0);
      const int mb = m0 + in % band_m, nb = in / band_m;
      if (tid == 0) {
        int ok = 1;
        for (int s = 0; s < c.nranks && ok; s++)
          ok = loom_poll_flag(c, s, mb * p.n_tiles + nb, epoch, LOOM_WAIT_SIGNAL, &st->fail);
        st->ok = ok;
        if (!ok) st->failed = 1;
      }
      ptx_named_bar_sync(RS_BAR_REDUCE, RS_THREADS);
      if (!st->ok) break;
      const int rows = min(p.bm, p.mo - mb * p.bm), cols = min(p.bn, p.n - nb * p.bn);
      const int vpr = cols / V::n; /* 16-byte vectors per row (n % 8 == 0) */
      for (int v = (int)tid; v < rows * vpr; v += RS_THREADS) {
        const int i = v / vpr, j = v - i * vpr;
        const size_t off = ((size_t)(mb * p.bm + i) * p.n + (size_t)nb * p.bn) * sizeof(T) + (size_t)j * 16;
        float acc[V::n];
#pragma unroll
        for (int e = 0; e < V::n; e++) acc[e] = 0.f;
        for (int s = 0; s < c.nranks; s++) /* source order: deterministic */
          V::add(acc, ptx_ld_cg_v4((const int4 *)(staging + (size_t)s * p.stride + off)));
#pragma unroll
        for (int e = 0; e < V::n; e++) acc[e] = hop_act<ACT>(acc[e]);
        *(int4 *)(p.out + off) = V::pack(acc);
      }
      ptx_named_bar_sync(RS_BAR_REDUCE, RS_THREADS); /* st->ok read by all before the next poll */
    }
  }
};

/* After the engine (thread 0, the smaller register budget's code; one
 * settle call site): a flag poll that gave up; a timed-out readiness wait
 * (a peer that has not finished the previous call: named by the first
 * credit still behind); then, block 0 (which acquired every source's flag
 * of its first tile), every peer's call tag. */
static __device__ __forceinline__ int rs_diagnose(const rs_kparams &p, const rs_state *st, uint64_t epoch,
                                                  loom_wait_fail *f) {
  const loom_dev_comm &c = p.c;
  if (st->failed) {
    *f = st->fail;
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
  if (blockIdx.x != 0) return 0;
  return coll_check_tags<false>(c, epoch, 0, f); /* its first tile acquired every source's flag */
}

template <class CFG, int ACT, int OUT>
__global__ void __launch_bounds__(CFG::threads, 1) rs_gemm_kernel(const __grid_constant__ rs_kparams P) {
  typedef typename hop_out_type<OUT>::T T;
  extern __shared__ uint8_t rs_smem_raw[];
  __shared__ rs_state st;
  const uint64_t epoch = loom_kernel_begin(P.c);
  if (loom_block_aborted(P.c)) { /* a peer failed since our last call */
    loom_kernel_end(P.c, epoch);
    return;
  }
  if (threadIdx.x == 0) {
    st.failed = 0;
    st.ok = 1;
  }
  __syncthreads();
  /* partials leave the epilogue as they are: the activation comes after the sum */
  hop_gemm_run<CFG, HOP_ACT_NONE, OUT, rs_side<ACT, T>>(P.hp, rs_smem_raw, (uint32_t)epoch,
                                                        rs_side<ACT, T>{&P, epoch, &st});
  __syncthreads(); /* consumers at 232 registers, the producer warpgroup at 40: light code only */
  if (threadIdx.x == 0) {
    loom_wait_fail f;
    if (rs_diagnose(P, &st, epoch, &f)) loom_wait_settle(P.c, f);
  }
  loom_kernel_end(P.c, epoch);
}

/* ---- host ------------------------------------------------------------------ */

template <class CFG, int ACT, int OUT>
static cudaError_t rs_launch(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t stream) {
  const int R = c->nranks, r = c->rank, mo = a->m / R;
  if (R > LOOM_AG_MAX_RANKS || a->m % R) return cudaErrorInvalidValue;
  rs_kparams kp;
  memset(&kp, 0, sizeof kp);
  const size_t es = CFG::esize;
  const size_t stride = loom_rs_stride(mo, a->n, es);
  cudaError_t e = coll_params<CFG>(&kp.hp, HOP_ACT_NONE, R, mo, a->n, a->k, a->n, c->sms, a->error,
                                   c->timeout_ns, offsetof(rs_kparams, groups) - offsetof(rs_kparams, hp),
                                   offsetof(rs_kparams, maps) - offsetof(rs_kparams, hp),
                                   a->n % 8 == 0 /* window parts: 256-aligned, rows of 16-byte multiples */);
  if (e != cudaSuccess) return e;
  const int tiles = kp.hp.total_tiles / R;
  for (int g = 0; g < R; g++) {
    const int o = (r + 1 + g) % R;
    const char *rows = (const char *)a->a + (size_t)o * mo * a->k * es;
    if ((e = hop_make_map(&kp.maps[2 * g], CFG::dtype, rows, mo, a->k, a->k, CFG::BK, CFG::BM)) != cudaSuccess)
      return e;
    if (g == 0) { /* every group's B is the same map: encode it once */
      if ((e = hop_make_map(&kp.maps[1], CFG::dtype, a->b, a->n, a->k, a->k, CFG::BK, CFG::b_box_rows)) !=
          cudaSuccess)
        return e;
    } else {
      kp.maps[2 * g + 1] = kp.maps[1];
    }
    hop_group *hg = &kp.groups[g];
    hg->rows = mo;
    hg->tile_begin = g * tiles;
    hg->c = (char *)a->peer_base[o] + c->data_offset + (size_t)r * stride; /* o's window, part r */
    /* o's completion credit of the previous call (in this rank's window):
     * target epoch - 1 = 0xFFFFFFFF + the epoch bias */
    hg->ready = (const uint32_t *)(a->flags_local + (size_t)o * c->slots + (c->slots - 1));
    hg->ready_target = 0xFFFFFFFFu;
    hg->ready_stride = 0;
  }
  kp.c = *c;
  kp.out = (char *)a->c;
  kp.stride = stride;
  kp.mo = mo;
  kp.n = a->n;
  kp.m_tiles = (mo + CFG::BM - 1) / CFG::BM;
  kp.n_tiles = kp.hp.n_tiles;
  kp.bm = CFG::BM;
  kp.bn = CFG::BN;
  kp.raster_m = kp.hp.raster_m;
  return coll_launch<CFG>(rs_gemm_kernel<CFG, ACT, OUT>, kp, c, stream);
}

template <class CFG, int ACT, int OUT> struct rs_launcher {
  static cudaError_t run(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t s) {
    return rs_launch<CFG, ACT, OUT>(c, a, s);
  }
};

extern "C" cudaError_t loom_launch_gemm_rs(const loom_dev_comm *c, const loom_coll_args *a,
                                           cudaStream_t stream) {
  return coll_dispatch<rs_launcher>(c, a, a->dtype, a->act, c->nranks, a->m / c->nranks, a->n, stream);
}
