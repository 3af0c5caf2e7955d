/*
 * All-gather + GEMM as one persistent kernel per GPU (docs/collective_gemm.md):
 * rank r computes C = act([A_0; ...; A_{R-1}] B^T) while the A_s arrive.
 *
 * The kernel is the tile engine (hopper.cuh, hop_gemm_run) with R host
 * groups in task order: group g holds the rows of source s = (r + g) % R,
 * so this rank's own rows (g = 0, read straight from the caller's A, no
 * wait) come first, then r+1, r+2, ... Group g >= 1 reads its A from the
 * window part of s; its task for row block j waits (the engine's bounded
 * readiness wait) until flag j of s holds this call's epoch.
 *
 * Communication runs on the producer warpgroup's otherwise idle warps 1-3
 * (the engine's side role, 96 threads per block): they put this rank's
 * rows into every peer's window, destination by destination in the order
 * the peers consume them: r-1 first (it multiplies r's rows right after its
 * own), then r-2, ... Each destination's rows are cut into pieces of a few
 * rows, spread over every block, so all SMs push to one peer at a time; the
 * piece that completes a row block (counted on this GPU) signals it.
 *
 * The one-group mode (sessions 23-24; coll_one_group): with a group per
 * source of at most one row block, each source's group streamed the whole
 * of B. When all R m rows fit one task, or, with B larger than half the
 * L2, when m divides the 128-row block and is smaller (and the R m rows
 * fill whole blocks), the window parts are packed (part s
 * at s m k bytes, one 2D tensor of R m rows), this rank's own rows are
 * pushed into its own part too (the side role's first destination), and one
 * group over all R m rows (C's rows, in source order) reads B once. A task
 * of m-block i waits for flag 0 of each source whose rows it holds (the
 * engine's readiness over several counters: all R in one block, else the
 * 128 / m sources from i 128 / m on). Its lockstep form (session 25,
 * ag_lockstep; also for sources of whole row blocks) has every task wait
 * for all R sources, so the tasks of a B column block start together and
 * read it from HBM once, and sizes the pushes' pieces for the fewest rows a
 * block sends.
 *
 * Parameters travel in the kernel parameter (__grid_constant__): the group
 * table and its tensor maps there need no device memory, no copy before the
 * launch and nothing to keep alive for a CUDA graph. The engine's
 * hop_params inside it reaches them by offsets from its own address
 * (hop_params.maps_const).
 */
#include <cuda_runtime.h>

#include "collective.cuh"

/* The side role's named barrier (its 96 threads). */
#define AG_BAR_PUSH HOP_BAR_SIDE_FIRST
#define AG_PUSH_THREADS 96
struct ag_kparams {
  hop_params hp;                            /* group_maps, groups: offsets to maps, groups */
  CUtensorMap maps[2 * LOOM_AG_MAX_RANKS];  /* (A_g, B) per group */
  hop_group groups[LOOM_AG_MAX_RANKS];
  loom_dev_comm c;
  const char *a;      /* this rank's rows [m x k], contiguous */
  char *gathered;     /* NULL, or [nranks m x k]: every rank's rows (loom_gemm_args_t.a_gathered) */
  size_t row_bytes;   /* k * element size */
  size_t stride;      /* loom_ag_stride */
  int m;
  int piece_rows;     /* rows per piece (divides LOOM_AG_BLOCK_ROWS) */
  int pieces;         /* ceil(m / piece_rows) per destination */
  int one_group;      /* the one-group mode: this rank is its own first destination */
  int lockstep;       /* its lockstep form: a destination's last piece of all signals every row block */
  int defer;          /* bulk pushes: a piece is counted while the next one's writes fly (LOOM_AG_DEFER=0: not) */
  uint32_t *counters; /* [nranks][slots] */
  uint64_t *stamps;   /* [blocks][LOOM_COLL_STAMPS] */
};

static_assert(sizeof(ag_kparams) <= 4096, "kernel parameter: 4 KB (no large-parameter opt-in needed)");
/* the decode tiles (64 or 16 rows) only for groups of <= 64 or 16 rows: one
 * m-block, the row block's flag 0 (the other tiles: one flag per task row
 * block) */
static_assert(hop_small_w1<HOP_BF16>::TM == COLL_DECODE_ROWS && hop_dec2<HOP_BF16>::TM == COLL_SWAP_ROWS &&
                  COLL_DECODE_ROWS <= LOOM_AG_BLOCK_ROWS,
              "the decode tiles' readiness");

/* What a block's side role reports back once the engine is done. */
struct ag_side_state {
  int failed;          /* a credit poll gave up (fail holds why) */
  int ok;              /* broadcast of the credit outcome to the 96 threads */
  loom_wait_fail fail;
};

/* The side role's copy of n 16-byte vectors (every address and length
 * here is a multiple of 16: a, c and a_gathered 16-byte aligned, k % 8 ==
 * 0, window parts 256-aligned), 4 loads in flight per thread. Plain and
 * division-free: the side role runs at the producer's 40 registers. CG:
 * the loads go to L2 (ld.cg): the source is window rows a peer wrote, which
 * an L1 line of an earlier call must not stand in for. */
template <bool CG> static __device__ __forceinline__ int4 ag_ld(const int4 *p) { return CG ? __ldcg(p) : *p; }
template <bool CG = false>
static __device__ __forceinline__ void ag_put(int4 *dst, const int4 *src, unsigned n, unsigned tid) {
  constexpr unsigned T = AG_PUSH_THREADS;
  unsigned i = tid;
  for (; i + 3 * T < n; i += 4 * T) {
    const int4 v0 = ag_ld<CG>(src + i), v1 = ag_ld<CG>(src + i + T), v2 = ag_ld<CG>(src + i + 2 * T),
               v3 = ag_ld<CG>(src + i + 3 * T);
    dst[i] = v0;
    dst[i + T] = v1;
    dst[i + 2 * T] = v2;
    dst[i + 3 * T] = v3;
  }
  for (; i < n; i += T) dst[i] = ag_ld<CG>(src + i);
}

/* The other way to push (ag_side<true, .>, the ping-pong tile): bulk copies
 * (TMA) through a staging ring in shared memory, AG_STG_BUFS buffers of
 * AG_STG_BYTES, issued by one thread: ~24 KB of loads and a store in flight
 * per SM where the copy above has 6 KB. It pushes faster, and pays where
 * pushes gate a small GEMM (mKernel M = 4096, 8192 at 4 GPUs: the ping-pong
 * tile), but it shares the SM's TMA unit with the engine's loads and cost
 * up to 9% where the GEMM is large (the cooperative tile; RESULTS session
 * 21). 32 KB fits beside the engine's 192 KB ring. */
#define AG_STG_BUFS 4
#define AG_STG_BYTES 8192
struct ag_staging {
  uint8_t *buf;  /* AG_STG_BUFS x AG_STG_BYTES */
  uint64_t *bar; /* one mbarrier a buffer: one arrival + the load's bytes a phase */
};
/* The ring, in static shared memory of the kernels that instantiate it. */
static __device__ __forceinline__ ag_staging ag_staging_get() {
  __shared__ __align__(128) uint8_t buf[AG_STG_BUFS * AG_STG_BYTES];
  __shared__ uint64_t bar[AG_STG_BUFS];
  return ag_staging{buf, bar};
}

/* One thread copies n bytes (a multiple of 16, 16-aligned addresses) from
 * src (this GPU) to dst (a peer's window) through the ring. `seq` counts
 * the chunks the ring has carried (buffer seq % AG_STG_BUFS, mbarrier phase
 * (seq / AG_STG_BUFS) & 1). On entry it waits until the earlier stores
 * have read their buffers; chunk i's buffer is reloaded (chunk i +
 * AG_STG_BUFS) once the store of chunk i has read it, checked one store
 * later, so a store and AG_STG_BUFS - 1 loads stay in flight. Each chunk's
 * store is its own bulk group; returns without waiting for the writes.
 * Once the stores of its first (up to AG_STG_BUFS) chunks are committed,
 * before the ring wraps, it calls prev(k) with k the groups committed so
 * far: the earlier pieces' writes can be waited for there (ag_bulk_settle(k))
 * while these fly. */
template <class PREV>
static __device__ __forceinline__ void ag_put_bulk(char *dst, const char *src, uint32_t n, ag_staging sg,
                                                   uint32_t &seq, const PREV &prev) {
  const uint32_t chunks = (n + AG_STG_BYTES - 1) / AG_STG_BYTES;
  /* chunk i into its buffer, completing on the buffer's mbarrier */
  auto load = [&](uint32_t i) {
    const uint32_t b = (seq + i) % AG_STG_BUFS, off = i * AG_STG_BYTES;
    const uint32_t len = min((uint32_t)AG_STG_BYTES, n - off);
    ptx_mbar_arrive_expect_tx(&sg.bar[b], len);
    ptx_bulk_load(sg.buf + b * AG_STG_BYTES, src + off, len, &sg.bar[b]);
  };
  ptx_bulk_wait_read<0>(); /* the previous piece's stores have read every buffer */
  uint32_t loaded = 0;
  for (; loaded < chunks && loaded < AG_STG_BUFS; loaded++) load(loaded);
  for (uint32_t i = 0; i < chunks; i++) {
    const uint32_t q = seq + i, b = q % AG_STG_BUFS, off = i * AG_STG_BYTES;
    hop_mbar_wait(&sg.bar[b], (q / AG_STG_BUFS) & 1u);
    ptx_bulk_store(dst + off, sg.buf + b * AG_STG_BYTES, min((uint32_t)AG_STG_BYTES, n - off));
    ptx_bulk_commit();
    if (i + 1 == min(chunks, (uint32_t)AG_STG_BUFS)) prev(i + 1);
    if (i >= 1 && loaded < chunks) { /* chunk i - 1's store has read its buffer: reload it */
      ptx_bulk_wait_read<1>();
      load(loaded++);
    }
  }
  seq += chunks;
}

/* Wait until every bulk group of this thread but the newest `keep` has its
 * writes performed (keep above 7 waits as for 7: more than needed, never
 * less), then order them before the thread's later generic-proxy fence and
 * release (the piece's count and signal). */
static __device__ __forceinline__ void ag_bulk_settle(uint32_t keep) {
  switch (keep < 7u ? keep : 7u) {
  case 0: ptx_bulk_wait<0>(); break;
  case 1: ptx_bulk_wait<1>(); break;
  case 2: ptx_bulk_wait<2>(); break;
  case 3: ptx_bulk_wait<3>(); break;
  case 4: ptx_bulk_wait<4>(); break;
  case 5: ptx_bulk_wait<5>(); break;
  case 6: ptx_bulk_wait<6>(); break;
  default: ptx_bulk_wait<7>(); break;
  }
  ptx_fence_proxy_async_global();
}

/* BULK: the pushes as bulk copies (ag_put_bulk, thread 0 of the side role;
 * the other threads only meet at its barriers), else ag_put. BIAS: the
 * engine's epilogue adds hop_params.bias (loom_gemm_args_t.bias;
 * hop_side_bias): the launches without one run the kernels as before. */
template <bool BULK, bool BIAS> struct ag_side {
  static constexpr bool active = true;
  static constexpr bool bias = BIAS;
  static constexpr bool has_done = false;
  /* tasks from a counter (the cooperative tile; hop_dyn): the readiness
   * waits and the pushes delay single blocks, and under the static order
   * the blocks then drift apart and stop sharing B in L2 */
  static constexpr bool dynamic = true;
  __device__ __forceinline__ void done(const hop_task &) const {}
  const ag_kparams *P;
  uint64_t epoch;
  ag_side_state *st; /* shared memory */

  /* Warps 1-3 of the producer warpgroup, at the producer's register budget:
   * polls only, no out-of-line call (the fault is settled afterwards). */
  __device__ __forceinline__ void operator()(int w) const {
    const ag_kparams &p = *P;
    const loom_dev_comm &c = p.c;
    const int R = c.nranks, r = c.rank;
    const unsigned tid = (unsigned)(w * 32) + (threadIdx.x & 31u);
    uint32_t credited = 0; /* destinations whose credit this block has (thread 0) */
    uint32_t seq = 0;      /* BULK: chunks through the staging ring (thread 0) */
    int pend_d = -1, pend_row0 = 0; /* BULK: the piece issued but not yet counted (thread 0) */
    /* destinations r - 1, r - 2, ... (the one-group mode: r itself first,
     * into its own window: the previous call on this GPU has ended) */
    const int first = p.one_group ? 0 : 1, items = (R - first) * p.pieces;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const int pos = first + item / p.pieces, piece = item - (pos - first) * p.pieces;
      const int d = (r - pos + R) % R;
      if (tid == 0) {
        int ok = 1;
        if (d != r && !(credited >> d & 1u)) { /* first store into peer d in this call */
          ok = epoch <= 1 ||
               loom_poll_flag(c, d, loom_credit_slot(c), epoch - 1, LOOM_WAIT_CREDIT, &st->fail);
          if (ok) /* relaxed: this thread's next fence (coll_last_part) or release (loom_signal) orders it
                   * before every signal of its rows to d */
            ptx_st_relaxed_sys_u64(loom_flag_ptr(c, d, r, loom_tag_slot(c)), loom_call_tag(epoch, c.op));
          credited |= 1u << d;
        }
        st->ok = ok;
        if (!ok) st->failed = 1;
      }
      ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS);
      if (!st->ok) break;
      const int row0 = piece * p.piece_rows;
      const int rows = min(p.piece_rows, p.m - row0);
      const size_t off = (size_t)row0 * p.row_bytes;
      char *dst = loom_peer_ptr(c, d, c.data_offset + (size_t)r * p.stride + off);
      if constexpr (BULK) {
        if (tid == 0) {
          /* the previous piece is counted once its writes are performed, while
           * this one's first stores are in flight (p.defer; else this one's at
           * once, below) */
          ag_put_bulk(dst, p.a + off, (uint32_t)((size_t)rows * p.row_bytes), ag_staging_get(), seq,
                      [&](uint32_t keep) {
                        if (pend_d < 0) return;
                        ag_bulk_settle(keep);
                        count(pend_d, pend_row0);
                      });
          pend_d = d;
          pend_row0 = row0;
          if (!p.defer) {
            ag_bulk_settle(0);
            count(d, row0);
            pend_d = -1;
          }
        }
        ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS); /* st->ok read by all before thread 0 writes it again */
      } else {
        ag_put((int4 *)dst, (const int4 *)(p.a + off), (unsigned)((size_t)rows * p.row_bytes / 16), tid);
        ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS); /* every store of the piece issued */
        if (tid == 0) count(d, row0);
      }
    }
    if (BULK && tid == 0 && pend_d >= 0) { /* the last piece (also after a failed credit poll) */
      ag_bulk_settle(0);
      count(pend_d, pend_row0);
    }
    if (p.gathered != NULL) {
      const int go = st->ok; /* every thread reads it before thread 0 writes it again (gather) */
      ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS);
      if (go) gather(tid);
    }
    if (tid == 0) coll_stamp(p.stamps, LOOM_COLL_STAMP_SIDE);
  }

  /* Thread 0, once every write of the piece of rows [row0, row0 + piece_rows)
   * to destination d is performed (BULK) or issued (the 96 threads met):
   * count it, and signal d where it completes its unit (a row block, or in
   * the lockstep form every piece of the source). */
  __device__ __forceinline__ void count(int d, int row0) const {
    const ag_kparams &p = *P;
    const loom_dev_comm &c = p.c;
    if (p.lockstep) { /* every task waits for all of it: count the source's pieces */
      if (coll_last_part(p.counters + (size_t)d * c.slots, (uint32_t)p.pieces))
        for (int j = 0; j * LOOM_AG_BLOCK_ROWS < p.m; j++) loom_signal(c, d, j, epoch);
      return;
    }
    const int j = row0 / LOOM_AG_BLOCK_ROWS;
    const int block_rows = min(LOOM_AG_BLOCK_ROWS, p.m - j * LOOM_AG_BLOCK_ROWS);
    const uint32_t need = (uint32_t)((block_rows + p.piece_rows - 1) / p.piece_rows);
    if (coll_last_part(p.counters + (size_t)d * c.slots + j, need)) /* the row block's last piece */
      loom_signal(c, d, j, epoch);                                  /* release, system scope */
  }

  /* After the pushes, the gathered A (loom_gemm_args_t.a_gathered): row
   * block j of source s = (r + g) % R (this rank's rows first, then in the
   * order they arrive) is item g * nb + j, dealt round-robin over the
   * blocks; a peer's rows are copied out of the window once their flag
   * holds the call's epoch (thread 0's bounded poll; one that gives up is
   * this block's fault, settled after the engine). */
  __device__ __forceinline__ void gather(unsigned tid) const {
    const ag_kparams &p = *P;
    const loom_dev_comm &c = p.c;
    const int R = c.nranks, r = c.rank;
    const int nb = (p.m + LOOM_AG_BLOCK_ROWS - 1) / LOOM_AG_BLOCK_ROWS;
    for (int item = blockIdx.x; item < R * nb; item += gridDim.x) {
      const int g = item / nb, j = item - g * nb;
      const int s = (r + g) % R;
      if (tid == 0) {
        const int ok = g == 0 || loom_poll_flag(c, s, j, epoch, LOOM_WAIT_SIGNAL, &st->fail);
        st->ok = ok;
        if (!ok) st->failed = 1;
      }
      ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS);
      if (!st->ok) break;
      const int row0 = j * LOOM_AG_BLOCK_ROWS;
      const size_t off = (size_t)row0 * p.row_bytes;
      const unsigned n = (unsigned)((size_t)min(LOOM_AG_BLOCK_ROWS, p.m - row0) * p.row_bytes / 16);
      /* own rows from a, a peer's from the window (ld.cg: see ag_put) */
      const char *src = g == 0 ? p.a + off : loom_local_ptr(c, c.data_offset + (size_t)s * p.stride + off);
      ag_put<true>((int4 *)(p.gathered + (size_t)s * p.m * p.row_bytes + off), (const int4 *)src, n, tid);
      ptx_named_bar_sync(AG_BAR_PUSH, AG_PUSH_THREADS); /* st->ok read by all before thread 0 writes it again */
    }
  }
};

/* After the engine: what this block must report (thread 0, at the full
 * register budget), as one loom_wait_fail for one settle call (ptxas keeps
 * the consumers' 232 registers only with a single out-of-line call site
 * here). Returns 1 with *f filled, or 0. A credit poll that gave up (the
 * side role) comes first; then a timed-out task (the engine's error word),
 * named by the first source row block whose flag is still behind; then,
 * block 0 only, the call tag of every peer (after acquiring one of its
 * flags): a peer in another call or running another operator is
 * LOOM_INVALID_USAGE. */
static __device__ __forceinline__ int ag_diagnose(const ag_kparams &p, const hop_params &hp,
                                                  const ag_side_state *st, uint64_t epoch,
                                                  loom_wait_fail *f) {
  const loom_dev_comm &c = p.c;
  if (st->failed) {
    *f = st->fail;
    return 1;
  }
  if (*(volatile uint32_t *)hp.error & HOP_ERR_TIMEOUT) {
    /* status 0: settle copies a peer's fault if one came first */
    *f = loom_wait_fail{0, c.rank, LOOM_WAIT_SIGNAL, -1, epoch, 0, c.timeout_ns};
    if (loom_abort_seen(c)) return 1;
    const int nb = (p.m + LOOM_AG_BLOCK_ROWS - 1) / LOOM_AG_BLOCK_ROWS;
    f->status = LOOM_TIMEOUT;
    for (int s = 0; s < c.nranks; s++) {
      if (s == c.rank) continue;
      for (int j = 0; j < nb; j++) {
        const uint64_t seen = ptx_ld_acquire_sys_u64(loom_flag_ptr(c, c.rank, s, j));
        if (seen < epoch) {
          f->peer = s;
          f->slot = j;
          f->observed = seen;
          return 1;
        }
      }
    }
    return 1;
  }
  if (blockIdx.x != 0) return 0;
  /* this block may have run no task of a peer: acquire its last row block's flag */
  return coll_check_tags<true>(c, epoch, (p.m - 1) / LOOM_AG_BLOCK_ROWS, f);
}

template <class CFG, int ACT, int OUT, bool BIAS>
__global__ void __launch_bounds__(CFG::threads, 1) ag_gemm_kernel(const __grid_constant__ ag_kparams P) {
  extern __shared__ uint8_t ag_smem_raw[];
  __shared__ ag_side_state st;
  const uint64_t epoch = loom_kernel_begin(P.c);
  if (loom_block_aborted(P.c)) { /* a peer failed since our last call */
    loom_kernel_end(P.c, epoch);
    return;
  }
  if (threadIdx.x == 0) {
    coll_stamp(P.stamps, LOOM_COLL_STAMP_BEGIN);
    st.failed = 0;
    st.ok = 1;
    if constexpr (CFG::pingpong) { /* ag_side<true, .>'s staging ring */
      const ag_staging sg = ag_staging_get();
      for (int b = 0; b < AG_STG_BUFS; b++) ptx_mbar_init(&sg.bar[b], 1);
      ptx_fence_mbar_init();
    }
  }
  __syncthreads();
  /* P.hp.groups / group_maps: offsets to P.groups / P.maps (maps_const) */
  hop_gemm_run<CFG, ACT, OUT, ag_side<CFG::pingpong, BIAS>>(P.hp, ag_smem_raw, (uint32_t)epoch,
                                                             ag_side<CFG::pingpong, BIAS>{&P, epoch, &st});
  if (threadIdx.x == 0) coll_stamp(P.stamps, LOOM_COLL_STAMP_GEMM); /* a consumer thread */
  __syncthreads(); /* consumers at 232 registers, the producer warpgroup at 40: light code only (hop_gemm_run) */
  if (threadIdx.x == 0) {
    loom_wait_fail f;
    if (ag_diagnose(P, P.hp, &st, epoch, &f)) loom_wait_settle(P.c, f);
    coll_stamp(P.stamps, LOOM_COLL_STAMP_END);
  }
  loom_kernel_end(P.c, epoch); /* its last block also zeroes the dynamic order's counter */
}

/* ---- host ------------------------------------------------------------------ */

/* The lockstep form of the one-group mode (session 25): every task waits
 * for every source's rows, not only for those it multiplies, so all the
 * tasks start together and the R tasks of a B column block read it from
 * HBM once, in step. Where the tasks fill about one wave (few rows a
 * source) and B is larger than half the L2, a task that started as soon
 * as its own sources landed ran ahead of the others of its column block,
 * and each of them streamed that block of B again from HBM: at 128 rows a
 * source on 4x H100 the GEMM phase took 140-200 us where the engine alone
 * takes 99 (bench/RESULTS.md session 25). Taken for sources of at most
 * one row block whose R m rows fill whole blocks (one flag per source),
 * B past half the L2, and at most two waves of wide tiles; also for
 * sources of whole row blocks (m a multiple of 128), whose pieces are then
 * counted per source: its last piece signals every row block's flag, so
 * the tasks wait for flag 0 of each source alone. LOOM_AG_LOCKSTEP=0 turns
 * it off (so does LOOM_AG_ONE_GROUP=0), =1 forces it where the rows allow. */
static int ag_lockstep(const loom_coll_args *a, int R, int sms) {
  const int64_t m = a->m, all = (int64_t)R * m;
  const int blocks = m % COLL_ONE_GROUP_ROWS == 0;
  if (R < 2 || (!blocks && (m > COLL_ONE_GROUP_ROWS || COLL_ONE_GROUP_ROWS % m || all % COLL_ONE_GROUP_ROWS)))
    return 0;
  const char *off = getenv("LOOM_AG_ONE_GROUP");
  if (off && !strcmp(off, "0")) return 0;
  const char *force = getenv("LOOM_AG_LOCKSTEP");
  if (force && !strcmp(force, "0")) return 0;
  if (force && !strcmp(force, "1")) return 1;
  const int wbn = coll_wide<HOP_BF16>::cfg::BN; /* every dtype's wide tile is as wide */
  const int64_t wide = all / COLL_ONE_GROUP_ROWS * ((a->n + wbn - 1) / wbn);
  return coll_b_past_l2(a) && wide <= 2 * (int64_t)sms;
}

/* The engine groups of a call (the launch's tile is chosen on them): one
 * of all R m rows in the one-group mode (file comment; coll_one_group,
 * LOOM_AG_ONE_GROUP=0 turns it off, =1 on where the rows allow), or one
 * per source of m; *rows the rows of each. */
static int ag_groups(const loom_coll_args *a, int R, int sms, int *rows) {
  const int64_t m = a->m, all = (int64_t)R * m;
  /* above one block: sources of fewer rows than a block (a group per source
   * left its tiles part empty and read B once per source), every block of
   * as many sources (one readiness count). Sources of a whole block each
   * gained nothing from one group (the same tiles, B shared in L2 alike)
   * and lost the wait for the own rows' copy into the window: 4x H100,
   * 128 rows a source, 196.2 -> 203.7 us; 2x H100 180.7 -> 203.2
   * (bench/RESULTS.md session 24). That was with each task waiting for its
   * own sources only; the lockstep form takes them (and sources of whole
   * blocks) where it applies. */
  const int one = ag_lockstep(a, R, sms) ||
                  (coll_one_group(all, R, all, coll_b_past_l2(a), "LOOM_AG_ONE_GROUP") &&
                   (all <= COLL_ONE_GROUP_ROWS || (m < COLL_ONE_GROUP_ROWS && all % COLL_ONE_GROUP_ROWS == 0)));
  *rows = (int)(one ? R * m : m);
  return one ? 1 : R;
}

template <class CFG, int ACT, int OUT>
static cudaError_t ag_launch(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t stream) {
  const int R = c->nranks, r = c->rank;
  if (R > LOOM_AG_MAX_RANKS) return cudaErrorInvalidValue;
  ag_kparams kp;
  memset(&kp, 0, sizeof kp);
  const size_t es = CFG::esize;
  int g_rows = 0;
  const int g_count = ag_groups(a, R, c->sms, &g_rows);
  cudaError_t e = coll_params<CFG>(&kp.hp, ACT, g_count, g_rows, a->n, a->k, a->n, c->sms, a->error, c->timeout_ns,
                                   offsetof(ag_kparams, groups) - offsetof(ag_kparams, hp),
                                   offsetof(ag_kparams, maps) - offsetof(ag_kparams, hp),
                                   ((uintptr_t)a->c & 15) == 0 && a->n % 8 == 0);
  if (e != cudaSuccess) return e;
  const int one = g_count == 1 && R > 1, tiles = kp.hp.total_tiles / g_count;
  /* the one-group mode packs the parts: one tensor of R m rows */
  const size_t stride = one ? (size_t)a->m * a->k * es : loom_ag_stride(a->m, a->k, es);
  /* every group's B is the same map: encode it once */
  if ((e = hop_make_map(&kp.maps[1], CFG::dtype, a->b, a->n, a->k, a->k, CFG::BK, CFG::b_box_rows)) != cudaSuccess)
    return e;
  for (int g = 0; g < R && !one; g++) {
    const int s = (r + g) % R;
    const void *src = g == 0 ? a->a : (const void *)(a->data_local + (size_t)s * stride);
    if ((e = hop_make_map(&kp.maps[2 * g], CFG::dtype, src, a->m, a->k, a->k, CFG::BK, CFG::a_box_rows)) !=
        cudaSuccess)
      return e;
    kp.maps[2 * g + 1] = kp.maps[1];
    hop_group *hg = &kp.groups[g];
    hg->rows = a->m;
    hg->tile_begin = g * tiles;
    hg->c = (char *)a->c + (size_t)s * a->m * a->n * es;
    hg->ready = g == 0 ? NULL : (const uint32_t *)(a->flags_local + (size_t)s * c->slots);
    hg->ready_target = 0;  /* + the epoch, on the device */
    hg->ready_stride = 2;  /* one 8-byte flag per row block: its low word */
  }
  const int lock = one && ag_lockstep(a, R, c->sms);
  if (one) { /* one group: all R m rows from the packed parts, every source's flag 0 */
    const int one_block = R * a->m <= CFG::TM;
    if (!one_block && CFG::TM % a->m && a->m % CFG::TM) return cudaErrorInvalidValue; /* ag_groups' promise */
    if ((e = hop_make_map(&kp.maps[0], CFG::dtype, a->data_local, R * a->m, a->k, a->k, CFG::BK,
                          CFG::a_box_rows)) != cudaSuccess)
      return e;
    hop_group *hg = &kp.groups[0];
    hg->rows = R * a->m;
    hg->tile_begin = 0;
    hg->c = a->c; /* rows in source order: C's */
    /* m-block i: flags[s][0] of its sources s = i per .. i per + per - 1
     * (one block, or the lockstep form: all R) */
    const int all = one_block || lock;
    const int per = all ? R : CFG::TM / (int)a->m;
    hg->ready = (const uint32_t *)a->flags_local;
    hg->ready_target = 0;
    hg->ready_stride = all ? 0 : per * 2 * c->slots;
    hg->ready_n = per;
    hg->ready_n_stride = 2 * c->slots; /* 8-byte flags, slots a source */
    /* B ahead of the rows where the group has a row block or more (coll_b_ahead) */
    kp.hp.b_ahead = coll_b_ahead<CFG>(R * a->m >= COLL_ONE_GROUP_ROWS, kp.hp.total_tasks, c->sms, a->l2_bytes,
                                      kp.hp.nkb);
  }
  kp.c = *c;
  kp.a = (const char *)a->a;
  kp.gathered = (char *)a->a_gathered;
  kp.row_bytes = (size_t)a->k * es;
  kp.stride = stride;
  kp.m = a->m;
  /* pieces (coll_rules.h) */
  int pr_rows = lock ? coll_ag_lockstep_piece_rows(a->m, kp.row_bytes, R, c->sms)
                     : coll_ag_piece_rows(a->m, kp.row_bytes, one ? R : R - 1, c->sms, CFG::pingpong);
  const char *force = getenv("LOOM_AG_PIECE_ROWS"); /* diagnostics: a power of two <= LOOM_AG_BLOCK_ROWS */
  if (force && atoi(force) >= 1) pr_rows = coll_pow2_floor(atoi(force), LOOM_AG_BLOCK_ROWS);
  kp.piece_rows = pr_rows;
  kp.pieces = (a->m + pr_rows - 1) / pr_rows;
  kp.one_group = one;
  kp.lockstep = lock;
  const char *defer = getenv("LOOM_AG_DEFER");
  kp.defer = !(defer && !strcmp(defer, "0"));
  kp.counters = a->counters;
  kp.stamps = a->stamps;
  kp.hp.tile_counter = &c->ctrl->tiles;
  kp.hp.bias = a->bias; /* the engine's epilogue adds it (one rank's reduce-scatter / all-reduce too) */
  if (a->bias) return coll_launch<CFG>(ag_gemm_kernel<CFG, ACT, OUT, true>, kp, c, stream);
  return coll_launch<CFG>(ag_gemm_kernel<CFG, ACT, OUT, false>, kp, c, stream);
}

template <class CFG, int ACT, int OUT> struct ag_launcher {
  static cudaError_t run(const loom_dev_comm *c, const loom_coll_args *a, cudaStream_t s) {
    return ag_launch<CFG, ACT, OUT>(c, a, s);
  }
};

extern "C" cudaError_t loom_launch_ag_gemm(const loom_dev_comm *c, const loom_coll_args *a,
                                           cudaStream_t stream) {
  int rows = 0;
  const int groups = ag_groups(a, c->nranks, c->sms, &rows);
  return coll_dispatch<ag_launcher, true>(c, a, a->dtype, a->act, groups, rows, a->n, coll_wide_ok(a, 1), stream);
}
