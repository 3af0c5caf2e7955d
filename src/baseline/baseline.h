/*
 * The MoE layer forward the conventional, bulk-synchronous way — the
 * baseline `loom moe` is compared with: cuBLAS gate GEMM + top-k kernel,
 * permutation, NCCL all-to-all-v (grouped send/recv) after a host-side
 * exchange of the row counts, per-(source, expert) cuBLAS GEMMs with an
 * activation kernel between them, the reverse all-to-all-v and a weighted
 * combine. Same function as the fused kernel (dropless only), same layouts
 * and config struct (include/loom.h), weight_layout included: OUT_IN
 * weights go to cuBLAS as CUBLAS_OP_T operands, IN_OUT as CUBLAS_OP_N.
 *
 * Layouts: the token side (permuted rows, returned rows) is grouped by
 * global expert; the expert side (received rows, expert outputs) by local
 * expert, then source rank, so each expert runs one GEMM per layer over
 * contiguous rows. The all-to-all-v moves one segment per (peer, local
 * expert). The expert GEMMs are a loop of cublasGemmEx calls, or one
 * cublasGemmGroupedBatchedEx per GEMM when LOOM_BASELINE_GEMM=grouped
 * (bench/RESULTS.md has the measurement that picked the default).
 *
 * Internal (not in loom.h). Each rank is driven by its own host thread:
 * a forward synchronises the host once, to learn how many rows it receives.
 */
#ifndef LOOM_BASELINE_H
#define LOOM_BASELINE_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_baseline *loom_baseline_t;

/* One rank. `nccl` is borrowed; the current device must be its device.
 * capacity_factor > 0 is LOOM_UNSUPPORTED (the baseline is dropless). */
loom_result_t loom_baseline_create(ncclComm_t nccl, const loom_moe_config_t *config,
                                   loom_baseline_t *out);
loom_result_t loom_baseline_set_weights(loom_baseline_t b, const void *gate_w, const void *w1,
                                        const void *w2);
/* Collective; enqueues on `stream` and synchronises it once mid-way.
 * ids_out / wts_out (both or neither, device, [T x top_k]): the routing. */
loom_result_t loom_baseline_forward(loom_baseline_t b, const void *x, int64_t num_tokens,
                                    void *y, int32_t *ids_out, float *wts_out,
                                    cudaStream_t stream);
/* Bytes the last forward sent to other ranks (dispatch + return rows), the
 * counterpart of loom_moe_stats_t.bytes_remote without headers. */
int64_t loom_baseline_bytes_remote(loom_baseline_t b);
loom_result_t loom_baseline_destroy(loom_baseline_t b);

/* The collective GEMMs the bulk-synchronous way (collective.c), the
 * baselines of `loom ag-gemm`, `loom gemm-rs` and `loom gemm-ar`: one
 * cublasGemmEx (fp32 on TF32 tensor cores), an NCCL collective, then the
 * activation kernel, if any (act: loom_activation_t or LOOM_UNSET). Each
 * takes the arguments of its loom operator. `nccl` is borrowed; the current
 * device must be its device; max_m: the largest m of a forward. A forward
 * is collective, enqueued on `stream`, with no host synchronisation. The
 * three share one state type: a handle goes only to the functions of the
 * operator that made it (a forward refuses another's). */
struct loom_coll_baseline;

/* All-gather + GEMM: ncclAllGather of every rank's A [m x k] into one
 * [R*m x k] buffer, then C = A_all B^T (B [n x k], the nn.Linear layout). */
typedef struct loom_coll_baseline *loom_ag_baseline_t;
loom_result_t loom_ag_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t k, loom_ag_baseline_t *out);
loom_result_t loom_ag_baseline_forward(loom_ag_baseline_t b, const loom_gemm_args_t *args,
                                       cudaStream_t stream);
loom_result_t loom_ag_baseline_destroy(loom_ag_baseline_t b);

/* GEMM + reduce-scatter: the partial [m x n] in dtype into a buffer of the
 * baseline's, then ncclReduceScatter (sum) of its rows to their owners. */
typedef struct loom_coll_baseline *loom_rs_baseline_t;
loom_result_t loom_rs_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t n, loom_rs_baseline_t *out);
loom_result_t loom_rs_baseline_forward(loom_rs_baseline_t b, const loom_gemm_args_t *args,
                                       cudaStream_t stream);
loom_result_t loom_rs_baseline_destroy(loom_rs_baseline_t b);

/* GEMM + all-reduce: the partial [m x n] in dtype straight into C, then
 * ncclAllReduce (sum) in place on C. */
typedef struct loom_coll_baseline *loom_ar_baseline_t;
loom_result_t loom_ar_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t n, loom_ar_baseline_t *out);
loom_result_t loom_ar_baseline_forward(loom_ar_baseline_t b, const loom_gemm_args_t *args,
                                       cudaStream_t stream);
loom_result_t loom_ar_baseline_destroy(loom_ar_baseline_t b);

#ifdef __cplusplus
}
#endif
#endif
