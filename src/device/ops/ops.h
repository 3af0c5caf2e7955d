/*
 * Launchers of loom's operator kernels, callable from the C host runtime.
 * Each launcher chooses its grid, checks co-residency and makes the one
 * kernel launch; it returns the CUDA error of that launch. Argument
 * validation happens before, in src/host.
 */
#ifndef LOOM_OPS_H
#define LOOM_OPS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "../runtime/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- exchange ------------------------------------------------------------
 * Data region of the window (per rank), byte offsets from data_offset:
 *   [source slot 0..nsrc-1][stride]  where
 *   nsrc = 1 (ring: the one left neighbour) or nranks (all-to-all: source
 *   rank s uses slot s), stride = bytes_per_peer rounded up to 256.
 * A source writes call e into a destination only after that destination's
 * completion credit for call e - 1 (loom_wait_peer_ready, transport.cuh),
 * the rule every operator follows, so one buffer suffices. (It used to be
 * two parities and credit e - 2, which was safe only when the previous
 * call on the communicator was also an exchange.)
 * Signal slot c < slots-2 of source s marks chunk c of s's message (the
 * last two slots are the runtime's call tag and credit). */
#define LOOM_EXCHANGE_PARITIES 1
#define LOOM_EXCHANGE_ROW_ALIGN 256u

static inline LOOM_HD size_t loom_exchange_stride(size_t bytes_per_peer) {
  return (bytes_per_peer + LOOM_EXCHANGE_ROW_ALIGN - 1) / LOOM_EXCHANGE_ROW_ALIGN *
         LOOM_EXCHANGE_ROW_ALIGN;
}

static inline LOOM_HD int loom_exchange_sources(int pattern_is_ring, int nranks) {
  return pattern_is_ring ? 1 : nranks;
}

typedef struct {
  int ring;             /* 1: ring, 0: all-to-all */
  const void *send;
  void *recv;
  size_t bytes_per_peer;
  int suppress_signals; /* fault injection: put but never signal (tests) */
} loom_exchange_args;

cudaError_t loom_launch_exchange(const loom_dev_comm *c, const loom_exchange_args *a,
                                 cudaStream_t stream);

/* ---- put bandwidth probe (loom info) ------------------------------------
 * Every block stores its slice of `bytes` from src into `peer`'s data
 * region with loom_put_rows; no signals. bytes <= the data region. */
cudaError_t loom_launch_put_bench(const loom_dev_comm *c, int peer, const void *src,
                                  size_t bytes, cudaStream_t stream);

/* ---- all-gather + GEMM (ag_gemm.cu; docs/collective_gemm.md) -------------
 * Data region of the window (per rank), byte offsets from data_offset:
 *   [source s = 0..nranks-1][loom_ag_stride(m, k, esize)]  rank s's rows
 *   [m x k] (contiguous), written by s; the owner's own part stays unused
 *   (its rows are read from the caller's a).
 * Signal slot j < ceil(m / LOOM_AG_BLOCK_ROWS) of source s: s's row block j
 * (LOOM_AG_BLOCK_ROWS rows, the engine's task height) has landed, the call's
 * epoch (release at system scope). Counters (loom_ag_args.counters, this
 * GPU's memory, [nranks][signal slots], zero between calls): the pieces of
 * row block j already put into destination d; the piece that completes
 * the block resets it and signals. */
#define LOOM_AG_MAX_RANKS 8
#define LOOM_AG_BLOCK_ROWS 128

static inline LOOM_HD size_t loom_ag_stride(int64_t m, int64_t k, size_t esize) {
  return loom_align_up((size_t)m * (size_t)k * esize, 256);
}

/* Per-block times of a communicator's last collective GEMM call
 * (loom_coll_args.stamps, [blocks][LOOM_COLL_STAMPS], globaltimer ns;
 * read by loom_coll_phases for the CLI): the block's start (after
 * loom_kernel_begin), its consumers out of the engine, its side role
 * (pushes, reductions) done, its end (before loom_kernel_end). */
#define LOOM_COLL_STAMP_BEGIN 0
#define LOOM_COLL_STAMP_GEMM 1
#define LOOM_COLL_STAMP_SIDE 2
#define LOOM_COLL_STAMP_END 3
#define LOOM_COLL_STAMPS 4

/* What a collective GEMM launch takes (both operators; each uses the
 * fields its comment names). */
typedef struct {
  int dtype;              /* loom_dtype_t of a, b, c */
  int act;                /* loom_activation_t, or -1: none (RELU, GELU, SILU only) */
  int m, n, k;            /* loom_gemm_args_t's (reduce-scatter: m = every rank's rows) */
  const void *a, *b;
  void *c;
  void *a_gathered;       /* all-gather: NULL, or [nranks m x k], every rank's a in rank order */
  const void *bias;       /* NULL, or [n] in dtype, 16-byte aligned: added before the activation */
  char *data_local;       /* this rank's data region (device address of its window) */
  uint64_t *flags_local;  /* this rank's flags[0][0] (device address of its window) */
  uint32_t *counters;     /* all-gather: [nranks][slots], zero between calls */
  void *const *peer_base; /* reduce-scatter: host array, every rank's window base
                             (this GPU's addresses) */
  uint32_t *error;        /* the engine's error word (loom_ctrl.op_error) */
  uint64_t *stamps;       /* [blocks][LOOM_COLL_STAMPS] (above) */
  size_t l2_bytes;        /* the device's L2 cache (the reduce-scatter's column chunks) */
} loom_coll_args;

/* Launch the all-gather GEMM kernel: every SM of the communicator (a
 * loopback rank's share), one block each, cooperative. */
cudaError_t loom_launch_ag_gemm(const loom_dev_comm *c, const loom_coll_args *a,
                                cudaStream_t stream);

/* ---- GEMM + reduce-scatter (gemm_rs.cu, kernel in gemm_rs.cuh; docs/collective_gemm.md) -
 * Rank r computes its partial P_r = A_r B_r^T, [M x N], tile by tile; the
 * rows of owner o ([o Mo, (o+1) Mo), Mo = M / R) go straight from the
 * epilogue into o's window. Data region of the window (per rank), byte
 * offsets from data_offset:
 *   [source s = 0..nranks-1][loom_rs_stride(Mo, N, esize)]  s's partial of
 *   this rank's rows [Mo x N] (contiguous), output dtype.
 * Signal slot t of source s: s's partial tile t (m-block * tiles across N +
 * n-block, the kernel's tile) has landed, the call's epoch. The owner sums
 * the R partials of a tile in source order (fp32), applies the activation
 * and writes its rows of C. */
static inline LOOM_HD size_t loom_rs_stride(int64_t mo, int64_t n, size_t esize) {
  return loom_align_up((size_t)mo * (size_t)n * esize, 256);
}

/* The tagged form of a part (the one-tile mode and the all-reduce's
 * one-shot mode where coll_rs_ll_rule takes it; gemm_rs.cuh): the same
 * rows, each 16-bit row of n elements as n / 2 64-bit words {two elements,
 * the call's tag}, so twice the bytes, in the window's tagged-store
 * region (layout.h) at [source s][loom_rs_ll_stride(rows, N, esize)]
 * instead of the data region. No signal slots: a word's tag is its
 * signal. */
static inline LOOM_HD size_t loom_rs_ll_stride(int64_t rows, int64_t n, size_t esize) {
  return loom_align_up(2 * (size_t)rows * (size_t)n * esize, 256);
}

/* Signal slots a reduce-scatter needs for Mo x N: one per tile of the
 * narrower of the kernel's two tiles (LOOM_RS_MIN_TILE square, the larger
 * count), plus the two reserved. */
#define LOOM_RS_MIN_TILE 128
static inline LOOM_HD int64_t loom_rs_slots(int64_t mo, int64_t n) {
  return (mo + LOOM_RS_MIN_TILE - 1) / LOOM_RS_MIN_TILE * ((n + LOOM_RS_MIN_TILE - 1) / LOOM_RS_MIN_TILE) + 2;
}


cudaError_t loom_launch_gemm_rs(const loom_dev_comm *c, const loom_coll_args *a,
                                cudaStream_t stream);

/* ---- GEMM + all-reduce (gemm_ar.cu, kernel in gemm_rs.cuh; docs/collective_gemm.md) ----
 * The reduce-scatter above with owner o's rows [loom_ar_row0(m, R, o),
 * + loom_ar_rows(m, R, o)) (any m: the first m % R owners one row more),
 * every part of the data region loom_rs_stride(ceil(m / R), N) bytes, and
 * R - 1 more parts after the R partials:
 *   [loom_ar_fin_part(o, r, R)][stride]  on rank r, owner o's reduced rows
 *                (act applied, output dtype, o != r), which o pushes there
 *                over NVLink and r copies into its C.
 * Signal slots: [0, T) the partial tiles as for the reduce-scatter (T =
 * loom_rs_slots(ceil(m / R), N) - 2 tiles), [T, 2T) from owner o: its
 * reduced tile t is in this rank's window; then the two reserved. */
static inline LOOM_HD int64_t loom_ar_rows(int64_t m, int R, int o) {
  return m / R + (o < m % R ? 1 : 0);
}
static inline LOOM_HD int64_t loom_ar_row0(int64_t m, int R, int o) {
  return o * (m / R) + (o < m % R ? o : m % R);
}
static inline LOOM_HD int64_t loom_ar_slots(int64_t m, int R, int64_t n) {
  return 2 * (loom_rs_slots((m + R - 1) / R, n) - 2) + 2;
}
/* The data part of rank r's window that holds owner o's reduced rows
 * (o != r): R .. 2R - 2, the owners after r in rank order. */
static inline LOOM_HD int loom_ar_fin_part(int o, int r, int R) {
  return R - 1 + (o - r + R) % R;
}

cudaError_t loom_launch_gemm_ar(const loom_dev_comm *c, const loom_coll_args *a,
                                cudaStream_t stream);

/* The all-reduce's one-shot mode (gemm_rs.cuh): every rank's partial of
 * all m rows in every rank's window, [source s][loom_rs_stride(m, N)],
 * signal slot t of source s its tile t (over all m rows), every rank
 * summing all R. Whether a call of m x n (esize bytes) on R ranks takes
 * it: coll_ar_one_shot_rule (coll_rules.h); LOOM_AR_ONE_SHOT=0|1 forces
 * it off or on (R >= 2; tests, diagnostics; every rank must see the same
 * setting). The workspace and slot counts (loom_gemm_ar_workspace_bytes)
 * follow the same choice. Host code (src/host/collective.c). */
int loom_ar_one_shot(int64_t m, int64_t n, size_t esize, int R);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_OPS_H */
