/*
 * The MoE layer kernel's parameters, shared by src/host/moe.c (which fills
 * them) and src/device/ops/moe.cu. Plain C.
 *
 * Window data region of every rank (offsets from loom_dev_comm.data_offset):
 *   header   [2 parities][R sources][hdr_stride]  int32 kept-row counts of
 *            EVERY expert (E of them: each rank learns the whole count
 *            matrix, so a source knows where its rows go in an expert-major
 *            region before any row moves), then the source's config hash
 *            (uint32) and the call number (uint32, low bits of the epoch),
 *            written by the source after the destination's credit of call
 *            e-1 (the runtime's reuse rule); parity = epoch % 2 is kept as
 *            a second guard
 *   ready    [NT] uint32  rows arrived per 128-row tile of the dispatch
 *            region (sources add with a release atomic)
 *   back     [R dests][El] uint32  rows returned by dest d for its local
 *            expert le (dests add with a release atomic)
 *            The owner zeroes both in its gate phase, before grid barrier 1:
 *            no peer adds to them before it has the owner's header of the
 *            call, sent after barrier 1. (Zeroing at the end of a call would
 *            not do: another operator or layer on the communicator may
 *            write this memory in between.)
 *   dispatch [DR rows][H]  expert-major: local expert 0's rows from source
 *            0, 1, ..., R-1, then expert 1's, ...; each expert starts on a
 *            128-row boundary (base(le) = sum over le' < le of its rows
 *            rounded up to 128), so a compute tile never spans experts and
 *            only an expert's last tile is partial.
 *            DR = R * Cs + 128 * El, NT = DR / 128.
 *   return   [R dests][Cs rows][H]    expert outputs coming back; row i from
 *            dest d is the output for row i of the rows this rank sent to d
 *            (source-major: its local experts in order, tokens in order)
 *   Cs = max_tokens * min(top_k, E/R): the most rows one source can send one
 *   destination; each region row is H * dtype bytes, 16-byte aligned.
 *
 * Signal slots of every source s (flags[s][slot] in the receiver's window):
 *   0                         header of the call
 *   slots-2                   call tag (runtime)
 *   slots-1                   completion credit (runtime)
 *
 * Private device buffers (cudaMalloc'd by the host, layout per field).
 */
#ifndef LOOM_MOE_OPS_H
#define LOOM_MOE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "../runtime/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MOE_BM 128       /* rows per dispatch / compute tile */
#define LOOM_MOE_BN 64        /* output columns per GEMM task */
#define LOOM_MOE_TT 32        /* tokens per gate / combine tile */
#define LOOM_MOE_DIM_ALIGN 64 /* hidden and ffn must be multiples */
#define LOOM_MOE_MAX_EXPERTS 1024
#define LOOM_MOE_MAX_TOPK 16
#define LOOM_MOE_MAX_BLOCKS 4096 /* grid size bound (trace buffer) */
#define LOOM_MOE_SPLIT_PAIRS (LOOM_MOE_MAX_BLOCKS / 2) /* column blocks of a split GEMM1 (<= half the grid) */
#define LOOM_MOE_GATE_PART_WARPS 12 /* gate jobs' parts a unit at most (moe.cu GATE_MAX_WARPS) */
#define LOOM_MOE_GATE_PART_UNITS 128 /* gate jobs run where units (tiles x passes) <= half the grid: bound on those held */
#define LOOM_MOE_TRACE_BATCH 16  /* events a block gathers in shared memory
                                    before reserving space for them */

/* The layer's own state for loom_moe_set_trace (device memory, zeroed at
 * create). `next` counts the events of the running forward (reserved in
 * batches; those at or past the capacity are dropped); the last block
 * copies it into the caller's loom_moe_trace_info_t and sets it back to 0.
 * block_start[b]: block b's first %globaltimer read of the forward. */
typedef struct {
  unsigned long long next;
  unsigned long long block_start[LOOM_MOE_MAX_BLOCKS];
} loom_moe_trace_state;

typedef struct {
  /* shape */
  int H, F, E, K, R, El, Tmax, Cs;
  int DR, NT;          /* dispatch region rows and 128-row tiles */
  int act, dtype, math, normalize, gated;
  int wlayout;         /* loom_weight_layout_t of wg, w1, w2 */
  int gate_math;       /* loom_gate_math_t (LOOM_GATE_FAST: bf16 / fp16 only; selects the kernel) */
  double capacity_factor;
  int es;              /* bytes per element */
  size_t smem_need, smem_have; /* shared memory a block needs, may have (set by loom_moe_plan_create;
                                  need > have: cudaErrorInvalidConfiguration) */
  int experts_fit;     /* then: the most experts whose gate fits (0: none) */
  int gate_depth;      /* chunks in flight per gate warp (moe.cu "gate ring"; set by loom_moe_plan_create) */
  int fg_experts;      /* local experts whose dispatch pieces go out before the expert phase
                          (0: one piece a warp; moe.cu moe_hop_fg_pieces; set by loom_moe_plan_create) */
  int raster;          /* row tiles a band in an expert's task order (moe.cu moe_raster; set by
                          loom_moe_plan_create) */
  int local_first;     /* 2: this rank's own rows first, in the dispatch and in each expert's GEMM
                          order; 1: also alone in the foreground dispatch share; 0: off (moe.cu
                          moe_decode; set by loom_moe_plan_create) */
  int warm_counts;     /* 1: blocks idle at grid barrier 1 run moe_counts dry first (moe.cu
                          moe_kernel; set by loom_moe_plan_create, LOOM_MOE_WARM=0 off) */
  /* window (offsets from the window base) */
  size_t hdr_off, hdr_stride, hdr_parity_bytes, ready_off, back_off, disp_off, ret_off, row_bytes;
  uint32_t cfg_hash;   /* of the shape; travels after the counts in headers */
  const char *win_base; /* this rank's window memory (host allocation's address), for TMA maps */
  /* private buffers */
  int32_t *ids;        /* [Tmax*K] routing used */
  float *wts;          /* [Tmax*K] */
  int32_t *dest_row;   /* [Tmax*K] row in the destination's region, -1 dropped */
  int32_t *tile_counts;/* [ceil(Tmax/TT)][E] assignments per token tile */
  float *gate_lg;      /* [ceil(Tmax/TT)][TT][E] logits of a tile whose passes ran on several blocks */
  unsigned long long *gate_cnt; /* [1 + ceil(Tmax/TT)] ticket, passes (or gate jobs) done per tile: (epoch << 32) | count (moe.cu phase_gate) */
  double *gate_part;   /* [gate_part_units][LOOM_MOE_GATE_PART_WARPS][TT][16] gate jobs' partial logits (moe.cu gate_jobs) */
  uint32_t *gate_flag; /* [gate_part_units][LOOM_MOE_GATE_PART_WARPS] a part's call (low 32 bits of its epoch) */
  int gate_part_units; /* units (tile, pass of 16 experts) gate_part holds: gate jobs run where a call has no more */
  int gate_fin_parts;  /* blocks that finish a tile of gate jobs, a share of its tokens each (<= 0: 1; moe.cu gate_jobs) */
  int narrow;          /* 1: a GEMM whose tasks fill at most half the grid takes half-width tasks (moe.cu moe_task_cols) */
  int swap;            /* swapped decode tiles (moe.cu moe_counts, plan_parts): 0 off, 16 the 16-row one, 32 both */
  int split;           /* 1: that tile's GEMM1 over K shares where its tasks fill at most half the grid (moe.cu moe_task_cols) */
  uint32_t *split_cnt; /* [LOOM_MOE_SPLIT_PAIRS] K shares arrived per GEMM1 column block of a split call (moe.cu moe_swap_store) */
  int32_t *kept;       /* [E] kept rows per expert (this source) */
  int32_t *row_token;  /* [R][Cs] token of each row sent, per destination */
  void *h;             /* [DR][F] FFN intermediate, dtype, rows as dispatch */
  uint32_t *done0;     /* [NT] GEMM0 tasks finished per row tile (zeroed by its GEMM1s' last) */
  uint32_t *done1;     /* [NT] GEMM1 tasks finished per row tile (zeroed by its last) */
  uint32_t *ticket;    /* [2] next compute task, next dispatch piece (moe.cu phase_dispatch) */
  uint64_t *trace;     /* [LOOM_MOE_MAX_BLOCKS][5] each block's phase ends (ns) */
  loom_moe_trace_state *tr_state; /* [1] loom_moe_set_trace's counter and starts */
  /* weights, in wlayout (loom.h "Layouts"): OUT_IN wg [E x H], w1
   * [El][F1 x H], w2 [El][H x F]; IN_OUT wg [H x E], w1 [El][H x F1],
   * w2 [El][F x H]; F1 = 2F for SwiGLU (gate then up), else F */
  const void *wg, *w1, *w2;
} loom_moe_params;

typedef struct {
  const void *x;
  void *y;
  int T;
  const int32_t *ids_in;
  const float *wts_in;
  int32_t *ids_out;
  float *wts_out;
  loom_moe_stats_t *stats;
  /* loom_moe_set_trace's buffers; tr_events NULL: no trace */
  loom_moe_trace_event_t *tr_events;
  long long tr_capacity;
  loom_moe_trace_info_t *tr_info;
} loom_moe_call;

/* What a forward launches, fixed for a layer once its weights are set:
 * the kernel, its grid and shared memory, the gate ring depth, the expert
 * phase's tensor maps (over the weights, h and the window). Built by
 * loom_moe_plan (runtime queries, tensor map encoding), so a forward is
 * only the launch. Opaque: moe.cu owns it. */
typedef struct loom_moe_plan loom_moe_plan;
/* Build the plan for layer p on this rank's view c (the current device must
 * be the layer's). Also sets p->gate_depth. NULL *out on error. */
cudaError_t loom_moe_plan_create(const loom_dev_comm *c, loom_moe_params *p, loom_moe_plan **out);
void loom_moe_plan_destroy(loom_moe_plan *plan);
/* Test hook (tests/cpu/test_layout.c; no GPU): the expert phase's task
 * decode (moe.cu moe_decode) on the host for one rank, over every ticket
 * of a layout with rc[s * El + le] rows from source s for local expert le:
 * every (GEMM, expert, row tile, column block) exactly once, GEMM0s before
 * GEMM1s, rows and first source of each tile, and with local_first an
 * expert's first tile at this rank's own rows. 0, or -1 and a message. */
int loom_moe_decode_check(int R, int El, int rank, int raster, int local_first, int nF, int nH, const int *rc,
                          char *msg, size_t len);
/* One forward: the single kernel launch (p as given to loom_moe_plan_create). */
cudaError_t loom_launch_moe(const loom_moe_plan *plan, const loom_dev_comm *c, const loom_moe_params *p,
                            const loom_moe_call *call, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_MOE_OPS_H */
