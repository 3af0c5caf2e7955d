/*
 * loom — single-kernel distributed operators for NVIDIA GPUs.
 *
 * This is the whole public C API. Conventions (as in nccl.h):
 *   - every function returns a loom_result_t and writes outputs through
 *     pointers; on failure it also leaves a detailed message, naming the
 *     offending argument or the failing call, for loom_last_error();
 *   - handles are opaque; every loom_x_create has its loom_x_destroy;
 *   - "collective" means every rank of the communicator must make the same
 *     call, in the same order relative to other collective calls;
 *   - device work is enqueued on the caller's stream and never synchronises
 *     the host, unless a contract says otherwise;
 *   - config structs are versioned: start from their _INIT macro, then set
 *     the fields you care about. Fields left at LOOM_UNSET take defaults.
 *
 * Thread safety: calls on distinct communicators may run concurrently from
 * different threads. Calls on one communicator must not overlap.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0
/* Version of the config structs' layout; bumped when a field is added
 * (always at the end of a struct). A caller compiled against an older
 * header passes its own struct_size and version: loom reads only the
 * fields that struct has, and the newer ones take their defaults.
 *   1  loom_comm_config_t, loom_moe_config_t up to capacity_factor
 *   2  loom_moe_config_t.weight_layout
 *   3  loom_moe_config_t.gate_math */
#define LOOM_API_VERSION 3

/* Marks a config field as "not set by the caller: use the default". */
#define LOOM_UNSET (-1)

/* ------------------------------------------------------------------------
 * Results and errors
 * ------------------------------------------------------------------------ */

typedef enum {
  LOOM_SUCCESS = 0,
  /* An argument is out of its documented domain. Nothing was launched. */
  LOOM_INVALID_ARGUMENT = 1,
  /* The call is not allowed in this state (e.g. the communicator already
   * reported an asynchronous error and must be destroyed). */
  LOOM_INVALID_USAGE = 2,
  /* A CUDA runtime call failed; the message holds the CUDA error string. */
  LOOM_CUDA_ERROR = 3,
  /* An NCCL call failed; the message holds NCCL's error string. */
  LOOM_NCCL_ERROR = 4,
  /* A host or device allocation failed. */
  LOOM_OUT_OF_MEMORY = 5,
  /* A bounded wait inside a kernel expired: a peer never signalled. */
  LOOM_TIMEOUT = 6,
  /* The system cannot run this (e.g. a peer not reachable by load/store). */
  LOOM_UNSUPPORTED = 7,
  /* A bug in loom. Please report it with the message. */
  LOOM_INTERNAL_ERROR = 8,
  /* Asynchronous only: another rank's kernel stopped on an error (a
   * timeout, bad routing, a config mismatch) and raised the abort flag in
   * this rank's window, so this rank's kernel stopped too. The message
   * names the rank that failed first and why. */
  LOOM_PEER_ERROR = 9,
  LOOM_NUM_RESULTS = 10
} loom_result_t;

/* Short, static, human-readable name of a result ("invalid argument").
 * Never returns NULL: values outside the enum give "unknown result". */
const char *loom_result_string(loom_result_t result);

/* Detailed message of the last loom call on this thread that did not return
 * LOOM_SUCCESS, e.g. "loom_exchange: bytes_per_peer (0) must be > 0".
 * The string is thread-local and valid until this thread's next loom call.
 * Empty string when the last call succeeded, with one exception:
 * loom_comm_get_async_error returns LOOM_SUCCESS and leaves the reported
 * asynchronous failure's description here. Never NULL. */
const char *loom_last_error(void);

/* ------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------ */

typedef enum {
  LOOM_FP32 = 0,
  LOOM_BF16 = 1,
  LOOM_FP16 = 2,
  LOOM_NUM_DTYPES = 3
} loom_dtype_t;

/* Size in bytes of one element of `dtype`.
 *   dtype [in]  one of loom_dtype_t.
 *   bytes [out] 4 for fp32, 2 for bf16/fp16.
 * Errors: LOOM_INVALID_ARGUMENT for an unknown dtype or bytes == NULL. */
loom_result_t loom_dtype_size(loom_dtype_t dtype, size_t *bytes);

/* Name of a dtype ("fp32", "bf16", "fp16"); "unknown" otherwise. */
const char *loom_dtype_string(loom_dtype_t dtype);

/* ------------------------------------------------------------------------
 * Communicator
 *
 * A loom communicator wraps one rank of an NCCL communicator with what
 * loom's kernels need: a symmetric workspace (ncclMemAlloc memory
 * registered as an NCCL_WIN_COLL_SYMMETRIC window, so every rank can store
 * into every other rank's copy through load/store-accessible pointers), the
 * NCCL device communicator, per-call epochs and a host-visible fault record
 * for asynchronous errors. Every rank must be load/store reachable (one
 * NVLink domain); other topologies return LOOM_UNSUPPORTED.
 * ------------------------------------------------------------------------ */

typedef struct loom_comm *loom_comm_t;

typedef struct {
  /* Set by LOOM_COMM_CONFIG_INIT; do not change. */
  size_t struct_size;
  int version;
  /* Bytes of symmetric data workspace per rank. Size it with the
   * operators' loom_*_workspace_bytes functions (the largest one you will
   * run). LOOM_UNSET: 64 MiB. Must be the same on every rank. The window
   * loom allocates is this plus its signal flags (8 bytes a slot and
   * rank), a 4 KiB abort record and, with two ranks or more, a 4 MiB
   * region for the collective GEMMs' tagged stores at decode sizes. */
  int64_t workspace_bytes;
  /* Signal slots each source rank owns in every rank's window (one 8-byte
   * flag each; the last two are reserved: buffer credits and call tags),
   * >= 3.
   * LOOM_UNSET: 4096. Must be the same on every rank. */
  int signal_slots;
  /* Bound on every wait inside loom's kernels, in milliseconds. LOOM_UNSET:
   * the environment variable LOOM_TIMEOUT_MS if set, else 5000. */
  int timeout_ms;
} loom_comm_config_t;

#define LOOM_COMM_CONFIG_INIT                                                  \
  { sizeof(loom_comm_config_t), LOOM_API_VERSION, LOOM_UNSET, LOOM_UNSET,      \
    LOOM_UNSET }

/* Create a loom communicator on top of the caller's NCCL communicator.
 *   nccl   [in]  an initialised NCCL (>= 2.28) communicator. loom borrows it:
 *                the caller keeps ownership and must destroy it only after
 *                loom_comm_destroy.
 *   config [in]  NULL for all defaults, or a struct from
 *                LOOM_COMM_CONFIG_INIT. Copied; may be freed after the call.
 *   comm   [out] the new communicator.
 * Collective over `nccl`. Uses the CUDA device that is current on the
 * calling thread, which must be the device `nccl` was created on.
 * Synchronises the host (allocation, window registration, a check that all
 * ranks passed the same config).
 * Errors: LOOM_INVALID_ARGUMENT (NULL nccl or comm, bad config field, ranks
 * disagreeing on the config), LOOM_UNSUPPORTED (a peer not load/store
 * reachable, NCCL without the device API), LOOM_NCCL_ERROR, LOOM_CUDA_ERROR,
 * LOOM_OUT_OF_MEMORY. On error *comm is set to NULL and nothing leaks. */
loom_result_t loom_comm_create(ncclComm_t nccl, const loom_comm_config_t *config,
                               loom_comm_t *comm);

/* Convenience for one process driving several local GPUs: creates the NCCL
 * communicators with ncclCommInitAll and one loom communicator per GPU.
 *   ndev    [in]  number of GPUs, >= 1.
 *   devlist [in]  ndev distinct CUDA device ordinals, or NULL for 0..ndev-1.
 *   config  [in]  as for loom_comm_create (applies to every rank).
 *   comms   [out] array of ndev handles; comms[i] is rank i on devlist[i].
 * Not collective (it is the whole group). Synchronises the host. The loom
 * communicators own their NCCL communicators and destroy them. loom never
 * uses NVLink multicast: if NCCL_NVLS_ENABLE is unset in the environment,
 * this call sets it to 0 before creating the NCCL communicators.
 * Errors: as loom_comm_create; on error every comms[i] is NULL. */
loom_result_t loom_comm_create_all(int ndev, const int *devlist,
                                   const loom_comm_config_t *config,
                                   loom_comm_t *comms);

/* Testing aid: nranks loom ranks on the current CUDA device, in this
 * process, so that every multi-rank path (dispatch and return over the
 * windows, signals, completion credits, errors that travel) can be
 * exercised where only one GPU is at hand.
 *   nranks [in]  1 .. 64, at most the device's SM count.
 *   config [in]  as for loom_comm_create (applies to every rank).
 *   comms  [out] array of nranks handles; comms[i] is rank i.
 * Each rank gets its own window (a separate allocation on the device,
 * reached by the kernels exactly as an NVLink peer's: flat base + rank x
 * a 4 GiB-multiple stride) and its own control block. Each rank's
 * persistent kernels fill floor(SMs / nranks) SMs, so that every rank's
 * kernel can be resident at once: issue the ranks' calls on one stream per
 * rank, none waiting on another (a rank whose kernel cannot start makes
 * the others time out with LOOM_TIMEOUT, never hang). There is no NCCL
 * communicator (loom_comm_nccl gives NULL), so NCCL-based baselines cannot
 * run on it. Not for speed: "peer" stores are local HBM stores and the
 * ranks share the device. Destroy with loom_comm_destroy (any order) or
 * loom_comm_destroy_all. Errors: LOOM_INVALID_ARGUMENT, LOOM_CUDA_ERROR,
 * LOOM_OUT_OF_MEMORY; on error every comms[i] is NULL. */
loom_result_t loom_comm_create_loopback(int nranks, const loom_comm_config_t *config,
                                        loom_comm_t *comms);

/* Destroy a communicator: waits for its device work (host-synchronising),
 * deregisters and frees the workspace, releases the device communicator.
 *   comm [in] a communicator, or NULL (no-op, returns LOOM_SUCCESS).
 * Collective (window deregistration is). Allowed, and required, after an
 * asynchronous error such as LOOM_TIMEOUT. Destroying from several threads
 * at once (one per communicator) is supported; a single thread destroying
 * several communicators of one clique in turn is not (it would wait on
 * itself): use loom_comm_destroy_all for those. */
loom_result_t loom_comm_destroy(loom_comm_t comm);

/* Destroy the n communicators made by one loom_comm_create_all (or any n
 * communicators forming a whole clique in this process), concurrently.
 *   comms [in] array of n handles (NULL entries are skipped; a handle
 *              listed twice is refused with LOOM_INVALID_ARGUMENT before
 *              any is destroyed). */
loom_result_t loom_comm_destroy_all(int n, loom_comm_t *comms);

/* Query failures raised inside loom kernels after they were launched.
 *   comm        [in]  the communicator.
 *   async_error [out] LOOM_SUCCESS if no kernel of this communicator has
 *                     reported a failure; otherwise the failure's result
 *                     (LOOM_TIMEOUT, LOOM_INVALID_ARGUMENT for bad routing
 *                     or mismatched layers, LOOM_PEER_ERROR when another
 *                     rank failed first), with loom_last_error() describing
 *                     it: which rank failed, on which peer, for what, how
 *                     long.
 * Errors travel: a rank whose kernel stops on an error stores it into every
 * peer's window; their kernels stop at their next wait (milliseconds), and
 * report LOOM_PEER_ERROR naming the rank that failed first and its reason.
 * Non-blocking: it reads a host-visible record; synchronise the stream first
 * to be sure every kernel launched so far has finished. Once an async error
 * is reported the communicator refuses further operators
 * (LOOM_INVALID_USAGE) and must be destroyed. */
loom_result_t loom_comm_get_async_error(loom_comm_t comm,
                                        loom_result_t *async_error);

/* Rank, size and CUDA device of a communicator; workspace bytes per rank. */
loom_result_t loom_comm_rank(loom_comm_t comm, int *rank);
loom_result_t loom_comm_size(loom_comm_t comm, int *nranks);
loom_result_t loom_comm_device(loom_comm_t comm, int *device);
loom_result_t loom_comm_workspace_bytes(loom_comm_t comm, size_t *bytes);
/* The NCCL communicator underneath (borrowed: the one passed to
 * loom_comm_create, or the one loom_comm_create_all made, which
 * loom_comm_destroy frees; NULL for a loopback world's rank). For running
 * NCCL collectives beside loom's. */
loom_result_t loom_comm_nccl(loom_comm_t comm, ncclComm_t *nccl);

/* ------------------------------------------------------------------------
 * Exchange: a diagnostic operator built only from loom's transport
 * primitives (row put, signal, bounded wait). It moves bytes, nothing else,
 * and is what `loom info` and the transport tests run.
 * ------------------------------------------------------------------------ */

typedef enum {
  /* Rank r sends its sendbuf (bytes_per_peer bytes) to rank (r+1) % n and
   * receives rank (r-1+n) % n's into recvbuf (bytes_per_peer bytes). */
  LOOM_EXCHANGE_RING = 0,
  /* sendbuf holds n blocks of bytes_per_peer; block p goes to rank p.
   * recvbuf receives n blocks; block s comes from rank s (its block r). */
  LOOM_EXCHANGE_ALLTOALL = 1,
  LOOM_NUM_EXCHANGES = 2
} loom_exchange_t;

/* Workspace bytes per rank that loom_exchange needs.
 *   pattern        [in]  a loom_exchange_t.
 *   nranks         [in]  communicator size, >= 1.
 *   bytes_per_peer [in]  > 0.
 *   bytes          [out] the value to give loom_comm_config_t.workspace_bytes
 *                        (at least). */
loom_result_t loom_exchange_workspace_bytes(loom_exchange_t pattern, int nranks,
                                            size_t bytes_per_peer,
                                            size_t *bytes);

/* Run one exchange as a single persistent kernel on `stream`.
 *   comm           [in]  communicator.
 *   pattern        [in]  ring or all-to-all.
 *   sendbuf        [in]  device memory of this rank's GPU: bytes_per_peer
 *                        (ring) or nranks * bytes_per_peer (all-to-all).
 *   recvbuf        [out] device memory, same size rules; must not overlap
 *                        sendbuf.
 *   bytes_per_peer [in]  > 0; the workspace must hold
 *                        loom_exchange_workspace_bytes(...) bytes.
 *   stream         [in]  CUDA stream of the communicator's device (0 allowed).
 * Collective. Asynchronous; capturable in a CUDA graph. Buffers belong to
 * the caller and must stay valid until the stream passes the kernel. A peer
 * that never arrives makes the kernel exit after the timeout; then
 * loom_comm_get_async_error reports LOOM_TIMEOUT. */
loom_result_t loom_exchange(loom_comm_t comm, loom_exchange_t pattern,
                            const void *sendbuf, void *recvbuf,
                            size_t bytes_per_peer, cudaStream_t stream);


/* ------------------------------------------------------------------------
 * Fused collective GEMMs (tensor-parallel linear layers), each one
 * persistent kernel per GPU that moves its operand (all-gather) or its
 * partial products (reduce-scatter) over NVLink tile by tile while it
 * multiplies (docs/collective_gemm.md).
 *
 * Layouts (row-major, dtype = args.dtype, fp32 accumulation; fp32 runs
 * TF32 tensor-core math, as cuBLAS's TF32 mode):
 *   a  [m x k]          this rank's rows
 *   b  [n x k]          this rank's weights, the nn.Linear layout ([out x in])
 *   c  [nranks*m x n]   this rank's output
 * All-gather + GEMM (the column-parallel linear): with A = [a_0; a_1; ...;
 * a_{R-1}] (every rank's a, in rank order), rank r gets c = act(A b^T):
 * rows [s*m, (s+1)*m) of c are a_s b^T. Its own rows are multiplied first,
 * straight from `a`; each peer's rows as soon as they have landed in its
 * workspace.
 * ------------------------------------------------------------------------ */

typedef struct {
  /* Set by LOOM_GEMM_ARGS_INIT; do not change. */
  size_t struct_size;
  int version;
  loom_dtype_t dtype;      /* of a, b and c                                    */
  int64_t m, n, k;         /* as in the layouts above; the same on every rank  */
  const void *a, *b;       /* device memory of this rank's GPU, 16-byte aligned */
  void *c;                 /* device memory, 16-byte aligned; must not overlap a, b */
  int activation;          /* LOOM_UNSET: none; LOOM_ACT_RELU, _GELU, _SILU    */
  /* Since 2026-11-26 (a struct_size without it is still taken, as NULL):
   * loom_ag_gemm only, NULL or device memory of [nranks*m x k], 16-byte
   * aligned, apart from a, b and c: it also gets [a_0; ...; a_{R-1}], the
   * gathered activations (e.g. kept for the backward pass). The others
   * refuse a non-NULL one. */
  void *a_gathered;
  /* Since 2026-11-27 (a struct_size without it is still taken, as NULL):
   * NULL or device memory of [n] elements of dtype, 16-byte aligned, apart
   * from c (and a_gathered): a bias added in fp32 before the activation.
   * All-gather: c = act(A b^T + bias), this rank's own bias (its shard of
   * the column-parallel layer's). Reduce-scatter, all-reduce: c =
   * act(sum_s a_s b_s^T + bias), added once, to the sum, by the rank that
   * reduces each row with its own bias: pass the same one on every rank
   * (the row-parallel layer's). NULL on some ranks only: those rows have
   * none. */
  const void *bias;
} loom_gemm_args_t;

#define LOOM_GEMM_ARGS_INIT                                                    \
  { sizeof(loom_gemm_args_t), LOOM_API_VERSION, LOOM_BF16, 0, 0, 0, NULL, NULL, \
    NULL, LOOM_UNSET, NULL, NULL }

/* Workspace and signal slots loom_ag_gemm needs for these shapes.
 *   args         [in]  dtype, m, n, k, activation (pointers unused).
 *   nranks       [in]  communicator size, 1..8.
 *   bytes        [out] minimum loom_comm_config_t.workspace_bytes:
 *                      nranks * m * k * element size (each peer's rows), each
 *                      rank's part rounded up to 256 bytes.
 *   signal_slots [out] minimum loom_comm_config_t.signal_slots (may be NULL):
 *                      one per 128 rows of m, plus the two reserved.
 * Errors: LOOM_INVALID_ARGUMENT with a message for shapes the operator does
 * not take: m, n, k >= 1; n and k multiples of 8 (16-byte rows for the
 * tensor-memory loads); m, n, k and nranks * m below 2^31; at most 2^20
 * signal slots and 2^40 workspace bytes (a communicator's most). */
loom_result_t loom_ag_gemm_workspace_bytes(const loom_gemm_args_t *args, int nranks,
                                           size_t *bytes, int *signal_slots);

/* All-gather + GEMM as ONE kernel launch on `stream` (layouts above).
 * Collective: every rank calls it with the same dtype, m, n, k and
 * activation, in the same order of calls on this communicator as its other
 * operators. Asynchronous; capturable in a CUDA graph. Buffers belong to
 * the caller and must stay valid until the stream passes the kernel. A peer
 * that never arrives ends the kernel after the communicator's timeout;
 * loom_comm_get_async_error then says LOOM_TIMEOUT (the rows it owed are
 * not written). Bad arguments: LOOM_INVALID_ARGUMENT, nothing launched. */
loom_result_t loom_ag_gemm(loom_comm_t comm, const loom_gemm_args_t *args,
                           cudaStream_t stream);

/* GEMM + reduce-scatter (the row-parallel linear layer), same struct:
 *   a  [m x k]             this rank's activations (every output row's)
 *   b  [n x k]             this rank's weights (nn.Linear layout)
 *   c  [m/nranks x n]      this rank's rows of the sum
 * Rank r gets rows [r m/R, (r+1) m/R) of act(sum over ranks s of a_s b_s^T).
 * Each rank's partial tiles go from the GEMM's epilogue straight to their
 * owner, who sums the nranks partials of a tile in rank order in fp32 (one
 * rounding of each partial to dtype on the way, one of the sum: bitwise
 * deterministic), then applies the activation. m must be a multiple of
 * nranks; otherwise the rules of loom_ag_gemm.
 *   bytes        [out] nranks * (m/nranks) * n * element size, each part
 *                      rounded up to 256 bytes.
 *   signal_slots [out] one per 128 x 128 tile of the m/nranks x n output,
 *                      plus the two reserved. */
loom_result_t loom_gemm_rs_workspace_bytes(const loom_gemm_args_t *args, int nranks,
                                           size_t *bytes, int *signal_slots);
loom_result_t loom_gemm_rs(loom_comm_t comm, const loom_gemm_args_t *args,
                           cudaStream_t stream);

/* GEMM + all-reduce, same struct:
 *   a  [m x k]   this rank's activations
 *   b  [n x k]   this rank's weights (nn.Linear layout)
 *   c  [m x n]   act(sum over ranks s of a_s b_s^T), the same bits on every rank
 * A reduce-scatter (as loom_gemm_rs: rank o sums the partials of its rows in
 * rank order in fp32 and applies the activation) followed, tile by tile, by
 * an all-gather in which every rank pushes its finished rows into the
 * other ranks' workspaces over NVLink, and each copies them into its c.
 * Rank o owns rows [o*q + min(o, m % R), ...), q = m / R,
 * one more row for the first m % R ranks: any m >= 1 is taken. Otherwise
 * the rules of loom_ag_gemm. On one rank it is the plain GEMM.
 * Small calls (while (nranks - 1) * m * n * element size <= 1 MiB) go
 * one-shot instead: every rank's partial of all m rows goes to every
 * rank's workspace and every rank sums all of them in rank order (the same
 * bits everywhere, one hop instead of two).
 *   bytes        [out] the larger of (2 * nranks - 1) * ceil(m/nranks) * n
 *                      * element size and (one-shot) nranks * m1 * n *
 *                      element size, m1 the most rows up to m that go
 *                      one-shot, each part rounded up to 256 bytes
 *                      (nranks > 1; 0 on one): a communicator sized for m
 *                      takes every call of fewer rows. Before 2026-11-26:
 *                      nranks + 1 parts; before 2026-11-27 (session 28)
 *                      no one-shot part.
 *   signal_slots [out] the larger of two per 128 x 128 tile of the
 *                      ceil(m/nranks) x n rows a rank owns and (one-shot)
 *                      one per 128 x 128 tile of m1 x n, plus two (nranks
 *                      > 1; 3 on one). */
loom_result_t loom_gemm_ar_workspace_bytes(const loom_gemm_args_t *args, int nranks,
                                           size_t *bytes, int *signal_slots);
loom_result_t loom_gemm_ar(loom_comm_t comm, const loom_gemm_args_t *args,
                           cudaStream_t stream);

/* ------------------------------------------------------------------------
 * The MoE layer forward, as one persistent kernel per GPU.
 *
 * y = sum over the top_k experts chosen for each token of
 *     weight * expert(x),   expert(x) = act(x * W1) * W2
 * (W1, W2, Wg as [in x out] matrices; see "Layouts" for their storage)
 * with the gate (logits = x * Wg, softmax, top-k, optional renormalisation)
 * fused in, or routing supplied by the caller. Expert placement: rank r
 * owns experts [r * E/R, (r+1) * E/R). Tokens are per rank; every rank
 * may pass a different num_tokens (including 0) on every call.
 *
 * Layouts (row-major, dtype = config.dtype unless noted):
 *   x        [num_tokens x hidden]        this rank's tokens
 *   y        [num_tokens x hidden]        written completely
 *   weights  gate_w (every rank passes the same), w1 and w2 (this rank's
 *            experts, back to back), in config.weight_layout:
 *     LOOM_WEIGHTS_OUT_IN (default; PyTorch's nn.Linear.weight, K-major):
 *            gate_w [num_experts x hidden]
 *            w1     [E/R][ffn x hidden]; for SwiGLU [E/R][2*ffn x hidden]:
 *                   rows [0, ffn) are the gate projection, [ffn, 2*ffn)
 *                   the up projection
 *            w2     [E/R][hidden x ffn]
 *     LOOM_WEIGHTS_IN_OUT (each matrix transposed):
 *            gate_w [hidden x num_experts]
 *            w1     [E/R][hidden x ffn]; for SwiGLU [E/R][hidden x 2*ffn]:
 *                   columns [0, ffn) gate, [ffn, 2*ffn) up
 *            w2     [E/R][ffn x hidden]
 *            The two layouts give bitwise the same y (the same products
 *            summed in the same order).
 *   routing  expert_ids int32 [num_tokens x top_k], weights fp32
 *            [num_tokens x top_k] (device memory); a token's top_k ids must
 *            be distinct and in [0, num_experts) (checked in the kernel:
 *            a violation stops the call with the async error
 *            LOOM_INVALID_ARGUMENT naming the entry)
 * Numerics: fp32 accumulation always. fp32 runs on TF32 tensor cores by
 * default (LOOM_MATH_TF32) or exact fp32 FMAs (LOOM_MATH_FP32); bf16/fp16
 * on bf16/fp16 tensor cores. The FFN intermediate and each expert's output
 * row are rounded to dtype (as a bf16/fp16 framework would store them);
 * the combine sums the top_k contributions in fp32, in ascending choice
 * order, so repeated runs are bitwise identical. The fused gate computes
 * logits on the fp64 tensor cores in a fixed order (products of two inputs
 * are exact in fp64) and rounds them to fp32 once. A logit equals the fp64
 * sum of the reference (any order) whenever every partial sum is exact --
 * always for bf16/fp16 inputs whose nonzero products x_h * w_h lie within a
 * factor 2^24 of each other at hidden <= 8192; otherwise it is within a few
 * fp64 units in the last place of it, which changes the fp32 logit only
 * when that lies within ~2^-29 (relative) of an fp32 rounding boundary, and
 * the routing only when such a logit also ties at the top_k edge. That is
 * config.gate_math = LOOM_GATE_EXACT, the default. LOOM_GATE_FAST (bf16 /
 * fp16 layers) sums on the 16-bit tensor cores in fp32 instead, in the
 * same fixed order (deterministic, the same for every token count):
 * see "The fast gate" below for what it guarantees.
 *
 * Gate order and non-finite input. The fused gate ranks a token's fp32
 * logits by value, a NaN logit below every number (-Inf included), equal
 * values (and NaNs among themselves) to the lower expert index first, and
 * takes the first top_k: always top_k DISTINCT ids in [0, num_experts),
 * whatever x and gate_w hold. Weights are the softmax of the logits at the
 * chosen ids (renormalised over the k when normalize_top_k). A token with
 * any non-finite logit (NaN, +Inf, -Inf) gets NaN weights, so its y row is
 * non-finite; no other token's row changes (each row is computed from its
 * own x row only, and the combine order is fixed).
 *
 * The fast gate (LOOM_GATE_FAST). Each of a token's logits l_e is within
 *   eps_e = (2 ceil(hidden / 256) + 1) x 2^-18 x P_e,
 *   P_e = sum over h of |x_h w_eh|   (w = gate_w's weights of expert e)
 * of the exact sum: the 16-bit products are exact in fp32, at most 2
 * ceil(hidden / 256) MMAs of 16 products are chained in one fp32
 * accumulator, each adding at most 2^-18 P_e of error (the bound of an
 * accumulation that keeps 24 bits at the largest addend's exponent and
 * truncates; NVIDIA does not document the tensor cores' rounding), the
 * accumulators are then added in fp64 and rounded to fp32 once. Hence:
 * a token's routing is the exact gate's wherever its k-th and (k+1)-th
 * largest exact logits differ by more than those two experts' eps summed,
 * and its chosen ids come in the exact gate's order wherever neighbouring
 * chosen logits are that far apart. A weight is the softmax of the fast
 * logits at the chosen ids: within a factor exp(+-2 max_e eps_e) of the
 * exact logits' softmax there (renormalised or not). Random O(1) inputs
 * lie almost always outside that band: test_moe and `loom moe --gate fast`
 * count the tokens routed otherwise than the exact gate routes them, and
 * bench/RESULTS.md records the counts and the time saved. Inputs built to
 * tie within a few fp32 ulps are routed differently. The order of equal
 * values, the non-finite rules, determinism and the independence from
 * the token count are as for the exact gate. Status (2026-12-05, one
 * H100, bench/RESULTS.md session 52): test_moe's fast cases pass (0 of
 * 3603 tokens routed otherwise than the exact gate); every token of a
 * 16384-token bf16 layer and of an 8192-token fp16 Qwen3-shaped layer
 * routed as the exact gate routes it; the gate phase 85 -> 65 us at 16384
 * tokens (layer -1.9%), Qwen3 shape -3.2%.
 *
 * Buffer reuse across calls and operators. Any sequence of loom calls on
 * one communicator is safe without host synchronisation (MoE layers of
 * different configs, exchanges, in any order): before its first store into
 * rank d's window in a call, a kernel waits (bounded) until d's kernel of
 * the previous call on the communicator has finished reading. Every rank
 * must make the same sequence of calls: each kernel tags its stores with
 * its call number and operator, and a rank that is out of step (one call
 * more, or another operator or layer config in the same call) gets an
 * asynchronous error, not wrong data. A rank that is idle when a peer
 * fails learns of it at its next call on the communicator (which stops at
 * once with LOOM_PEER_ERROR), not from loom_comm_get_async_error before.
 *
 * Workspace. Dropless buffers are sized for the worst case: every rank may
 * send one destination max_tokens_per_rank x min(top_k, E/R) rows, into a
 * dispatch and a return region of R such slots each, so
 *   workspace ~= (2 x R x max_tokens_per_rank x min(top_k, E/R) + 128 x E/R)
 *                x hidden x dtype size  (+ small headers and counters)
 * (the dispatch region is expert-major: each local expert's rows, from
 * every source, start on a 128-row tile, hence up to 128 padding rows per
 * local expert; no padding row is ever sent or multiplied into a result)
 * per rank (28 GiB at R = 8, 16384 tokens, top_k 8, hidden 7168, bf16).
 * loom_moe_workspace_describe() spells out the terms for a config.
 * ------------------------------------------------------------------------ */

typedef enum {
  LOOM_ACT_RELU = 0,
  LOOM_ACT_GELU = 1,   /* exact (erf) form */
  LOOM_ACT_SILU = 2,
  LOOM_ACT_SWIGLU = 3, /* silu(x * W1_gate) * (x * W1_up) */
  LOOM_NUM_ACTIVATIONS = 4
} loom_activation_t;

typedef enum {
  LOOM_MATH_TF32 = 0, /* fp32 inputs on TF32 tensor cores (default) */
  LOOM_MATH_FP32 = 1, /* exact fp32 FMAs, no tensor cores */
  LOOM_NUM_MATHS = 2
} loom_math_t;

/* How the fused gate sums its logits ("Numerics", "The fast gate"). */
typedef enum {
  LOOM_GATE_EXACT = 0, /* fp64 tensor cores: the exact sum, rounded once (default) */
  LOOM_GATE_FAST = 1,  /* bf16 / fp16 tensor cores, fp32 sums (bf16 / fp16 layers only) */
  LOOM_NUM_GATE_MATHS = 2
} loom_gate_math_t;

/* How a MoE layer's weight matrices lie in memory (see "Layouts" above).
 * Every weight matrix of a layer uses the same layout. */
typedef enum {
  /* [out x in] row-major: row o holds the weights of output o over all
   * inputs (PyTorch's nn.Linear.weight; K-major for the GEMMs). Default. */
  LOOM_WEIGHTS_OUT_IN = 0,
  /* [in x out] row-major: row i holds input i's weights to every output. */
  LOOM_WEIGHTS_IN_OUT = 1,
  LOOM_NUM_WEIGHT_LAYOUTS = 2
} loom_weight_layout_t;

/* Largest communicator a MoE layer supports (sizes loom_moe_stats_t). */
#define LOOM_MOE_MAX_RANKS 64

typedef struct {
  size_t struct_size; /* set by LOOM_MOE_CONFIG_INIT */
  int version;
  /* Required (LOOM_UNSET is an error): */
  int64_t hidden;              /* multiple of 64, 64..65536 */
  int64_t ffn;                 /* multiple of 64, 64..65536 */
  int64_t num_experts;         /* divisible by the number of ranks, <= 1024; the
                                  gate's tile of logits (32 tokens x 4 bytes an
                                  expert) must also fit a block's shared memory:
                                  on H100/H200 up to 910 (loom_moe_forward says
                                  how many fit) */
  int64_t top_k;               /* 1..16, <= num_experts */
  int64_t max_tokens_per_rank; /* 1..2^24; bounds every call's num_tokens.
                                  With nranks R: R x max_tokens_per_rank x
                                  min(top_k, E/R) + 128 x E/R (the dispatch
                                  region's rows) <= 2^31 - 128 */
  /* Optional: */
  int activation;        /* loom_activation_t; LOOM_UNSET: LOOM_ACT_SILU */
  int dtype;             /* loom_dtype_t; LOOM_UNSET: LOOM_BF16 */
  int fp32_math;         /* loom_math_t for fp32; LOOM_UNSET: LOOM_MATH_TF32 */
  int normalize_top_k;   /* 1: weights of the k choices sum to 1; LOOM_UNSET: 1 */
  /* 0 (and LOOM_UNSET): dropless, every assignment computed. c in (0,
   * 1e6]: each expert keeps, per source rank, the first ceil(c *
   * num_tokens * top_k / num_experts) assignments in token-major order;
   * the others add 0. */
  double capacity_factor;
  /* Since LOOM_API_VERSION 2: */
  int weight_layout;     /* loom_weight_layout_t of gate_w, w1 and w2;
                            LOOM_UNSET (or a version-1 struct, which lacks
                            the field): LOOM_WEIGHTS_OUT_IN */
  /* Since LOOM_API_VERSION 3: */
  int gate_math;         /* loom_gate_math_t of the fused gate; LOOM_UNSET
                            (or an older struct): LOOM_GATE_EXACT.
                            LOOM_GATE_FAST with an fp32 dtype is an error */
} loom_moe_config_t;

#define LOOM_MOE_CONFIG_INIT                                                   \
  { sizeof(loom_moe_config_t), LOOM_API_VERSION, LOOM_UNSET, LOOM_UNSET,       \
    LOOM_UNSET, LOOM_UNSET, LOOM_UNSET, LOOM_UNSET, LOOM_UNSET, LOOM_UNSET,    \
    LOOM_UNSET, 0.0, LOOM_UNSET, LOOM_UNSET }

typedef struct loom_moe *loom_moe_t;

/* Workspace a MoE layer needs in its communicator.
 *   config       [in]  the layer's config.
 *   nranks       [in]  communicator size (>= 1, divides num_experts).
 *   bytes        [out] minimum loom_comm_config_t.workspace_bytes.
 *   signal_slots [out] minimum loom_comm_config_t.signal_slots (may be NULL).
 * Pure function; no GPU. */
loom_result_t loom_moe_workspace_bytes(const loom_moe_config_t *config, int nranks,
                                       size_t *bytes, int *signal_slots);

/* The workspace loom_moe_workspace_bytes returns, in words: each term of
 * the formula with its value, and the layer's own device buffers beside
 * the window. E.g. for 8 ranks, E = 64, top_k 8, hidden 7168, bf16,
 * max_tokens_per_rank 16384: "30064772096 bytes (28.00 GiB) = 2 regions
 * (dispatch + return) x 8 ranks x 131072 rows (max_tokens_per_rank 16384 x
 * min(top_k 8, E/R 8)) x 14336 bytes a row (hidden 7168 x 2) [...] +
 * headers 1024 bytes; besides the window the layer allocates ...".
 *   config [in] the layer's config.  nranks [in] communicator size.
 *   buf    [out] NUL-terminated text, truncated to len bytes.
 * Pure function; no GPU. Errors as loom_moe_workspace_bytes. */
loom_result_t loom_moe_workspace_describe(const loom_moe_config_t *config, int nranks,
                                          char *buf, size_t len);

/* Create a MoE layer on a communicator.
 *   comm   [in]  communicator whose workspace and signal slots are at least
 *                what loom_moe_workspace_bytes says.
 *   config [in]  copied.
 *   moe    [out] the layer.
 * Not collective (so one thread may create the layers of every rank in
 * turn), but every rank must pass the same config: each forward's headers
 * carry a hash of it, and a rank that receives a different one stops the
 * call with the async error LOOM_INVALID_ARGUMENT naming the peer.
 * Allocates the layer's private device buffers on the communicator's
 * device. Several layers (of any configs) may share one communicator and
 * run one after another on it: they share its window, see "Buffer reuse"
 * above. */
loom_result_t loom_moe_create(loom_comm_t comm, const loom_moe_config_t *config,
                              loom_moe_t *moe);

/* Point the layer at its weights (device memory of the comm's device, in
 * config.dtype and config.weight_layout, shapes under "Layouts" above; no
 * copy is made: they must stay valid and unchanged while forwards run).
 * gate_w may be NULL if every forward supplies routing. Each pointer must
 * be 16-byte aligned. Not collective. */
loom_result_t loom_moe_set_weights(loom_moe_t moe, const void *gate_w, const void *w1,
                                   const void *w2);

/* Per-call statistics, written by the kernel when requested. */
typedef struct {
  int64_t rows_sent[LOOM_MOE_MAX_RANKS];     /* token rows dispatched to rank d */
  int64_t rows_received[LOOM_MOE_MAX_RANKS]; /* token rows received from rank s */
  int64_t rows_dropped;    /* assignments past capacity (never sent) */
  int64_t bytes_sent;      /* all bytes this rank stored into peers' windows,
                              peer == self included: (sum rows_sent + sum
                              rows_received) * hidden * dtype size + nranks *
                              header, header = round_up(4 * (E/R + 2), 16)
                              (kept counts per local expert, config hash,
                              call number);
                              the 8-byte signal flags are not counted */
  int64_t bytes_remote;    /* the part of bytes_sent that crossed NVLink */
  /* In-kernel trace: latest end over all blocks of each phase (gate, place,
   * dispatch, experts, combine), ns after the block started; 0 if the
   * kernel stopped before it. %globaltimer resolution (~1 us). With K-major
   * weights on bf16 / fp16 / TF32, "dispatch" ends with the rows copied
   * before the expert phase; the rest are copied during it. */
  int64_t phase_end_ns[5];
} loom_moe_stats_t;

typedef struct {
  const void *x;           /* [num_tokens x hidden]; may be NULL if 0 tokens */
  int64_t num_tokens;      /* 0..max_tokens_per_rank */
  void *y;                 /* [num_tokens x hidden]; may be NULL if 0 tokens */
  /* Caller-supplied routing (both or neither); NULL: the fused gate. */
  const int32_t *expert_ids_in;
  const float *weights_in;
  /* Optional outputs (both or neither; device memory, [num_tokens x
   * top_k]): the routing used (for the fused gate: what it chose). */
  int32_t *expert_ids_out;
  float *weights_out;
  /* Optional: device memory for this call's statistics. */
  loom_moe_stats_t *stats;
} loom_moe_args_t;

/* Run the layer forward as ONE kernel launch on `stream`.
 *   moe    [in] the layer, weights set.
 *   args   [in] buffers as described; x/y must not overlap.
 *   stream [in] stream of the comm's device.
 * Collective (every rank calls, with its own num_tokens). Asynchronous, no
 * host synchronisation: capturable in a CUDA graph and replayable (each
 * replay reads the buffers captured). A dead peer ends the kernel after the
 * communicator's timeout; loom_comm_get_async_error then says LOOM_TIMEOUT
 * and names it. */
loom_result_t loom_moe_forward_ex(loom_moe_t moe, const loom_moe_args_t *args,
                                  cudaStream_t stream);

/* Shorthand: fused gate, no optional outputs. */
loom_result_t loom_moe_forward(loom_moe_t moe, const void *x, int64_t num_tokens, void *y,
                               cudaStream_t stream);

/* ------------------------------------------------------------------------
 * In-kernel trace of a MoE forward.
 *
 * With a trace buffer set (loom_moe_set_trace), every forward of the layer
 * records what each block of its kernel did, as slices with a start and an
 * end on %globaltimer (nanoseconds; the clock ticks in steps of about 1 us
 * on H100/H200, so short slices may read as 0 or 1 us long). The kernel
 * runs one block per SM, so an SM's slices are one block's. Recorded:
 *   - one slice per unit of work (LOOM_MOE_TRACE_GATE .. _COMBINE): a
 *     gate token tile (at small T, where the gate runs as jobs of one warp
 *     spread over the SMs: a block's jobs, and a tile's finish), the
 *     block's place phase, a dispatch piece of up to
 *     8 rows sent (one warp's; pieces overlap each other and, with K-major
 *     weights on bf16 / fp16 / TF32, their SM's GEMM slices), a GEMM0 or
 *     GEMM1 task (one ticket), a combine token tile;
 *   - one slice per bounded wait that waited at least
 *     LOOM_MOE_TRACE_MIN_WAIT_NS (LOOM_MOE_TRACE_WAIT_*: what it waited
 *     for). Waits inside a work slice (a GEMM0's dispatch flag, the place
 *     phase's credit waits) nest in it; barriers and header waits stand
 *     alone between work slices.
 * Time not covered by any slice is the block's bookkeeping: taking a
 * ticket, reading headers, deriving offsets.
 *
 * Cost. Off (the default, or after loom_moe_set_trace(moe, NULL, ...)): one
 * uniform branch on a NULL kernel parameter per record site, none inside
 * the GEMM, gate or copy loops, and no trace value held in registers across
 * the work it times (docs/moe.md has the ptxas numbers; occupancy is
 * unchanged, one block per SM). On: per slice, thread 0 of the block
 * reads %globaltimer twice and writes 32 bytes into a 16-event batch in
 * shared memory; a full batch costs one atomicAdd on a global counter and
 * 512 bytes of stores; two %globaltimer reads per wait, recorded or not.
 * The other threads wait for thread 0 at the block's next barrier, so a
 * traced forward is a little slower (loom moe reports untraced timings
 * and traces one extra forward).
 * ------------------------------------------------------------------------ */

/* What a trace event records: its kind, and what a, b, c and peer mean. */
typedef enum {
  /* work (an SM is busy inside these, but for nested waits) */
  LOOM_MOE_TRACE_GATE = 0,     /* a token tile: a = tile, b = first token,
                                  c = tokens (<= 32); a block's gate jobs
                                  carry their first job's tile */
  LOOM_MOE_TRACE_PLACE = 1,    /* the block's place phase: a = token tiles
                                  it placed, b = headers it sent */
  LOOM_MOE_TRACE_DISPATCH = 2, /* a piece of up to 8 rows of one
                                  (destination, local expert) put into the
                                  destination's window by one warp:
                                  peer = destination, a = local expert,
                                  b = first row (among the rows this rank
                                  sends that expert), c = rows. Several
                                  warps of a block copy pieces at once,
                                  and with K-major weights on bf16 / fp16 /
                                  TF32 most pieces are copied beside the
                                  GEMM slices of the same SM */
  LOOM_MOE_TRACE_GEMM0 = 3,    /* one GEMM0 task (x * W1 + activation):
                                  peer = source rank of the rows, a = local
                                  expert, b = row tile (128 rows of that
                                  source and expert), c = column block (128
                                  h columns; 64 for SwiGLU) */
  LOOM_MOE_TRACE_GEMM1 = 4,    /* one GEMM1 task (h * W2, rows returned to
                                  the source): as GEMM0, c = column block
                                  of 128 output (hidden) columns */
  LOOM_MOE_TRACE_COMBINE = 5,  /* a token tile of y: a = tile, b = first
                                  token, c = tokens (<= 32) */
  /* waits, recorded when they lasted >= LOOM_MOE_TRACE_MIN_WAIT_NS */
  LOOM_MOE_TRACE_WAIT_BARRIER = 6,  /* grid barrier a (1 or 2) */
  LOOM_MOE_TRACE_WAIT_CREDIT = 7,   /* peer's completion credit of the
                                       previous call (buffer reuse) */
  LOOM_MOE_TRACE_WAIT_HEADER = 8,   /* peer's header of this call */
  LOOM_MOE_TRACE_WAIT_DISPATCH = 9, /* the dispatch flag of a GEMM0's row
                                       tile: peer = source, a = local
                                       expert, b = row tile */
  LOOM_MOE_TRACE_WAIT_GEMM0 = 10,   /* a GEMM1 waiting for its row tile's
                                       GEMM0 tasks: peer, a, b as the GEMM1,
                                       c = GEMM0 tasks of the tile */
  LOOM_MOE_TRACE_WAIT_RETURN = 11,  /* a combine tile waiting for the
                                       expert outputs of its tokens (from
                                       any rank): a, b, c as the combine */
  LOOM_MOE_TRACE_WAIT_STAGE = 12,   /* Hopper engine (K-major weights): the
                                       block's GEMM warpgroups waiting for
                                       their next task's first operand
                                       stage, i.e. for the producer's
                                       ticket, its dispatch / GEMM0 wait
                                       and the loads (or, last, for the
                                       end of the phase); a = the block's
                                       task number (0, 1, ...) */
  LOOM_MOE_TRACE_NUM_KINDS = 13
} loom_moe_trace_kind_t;

/* Kinds below this are work, the others waits. */
#define LOOM_MOE_TRACE_FIRST_WAIT LOOM_MOE_TRACE_WAIT_BARRIER
/* Shorter waits leave no slice. */
#define LOOM_MOE_TRACE_MIN_WAIT_NS 1000
/* loom_moe_trace_event_t.peer when the kind names no rank (gate, place,
 * combine, barriers, return waits). */
#define LOOM_MOE_TRACE_NO_PEER 0xff

/* One slice, 32 bytes. Times are %globaltimer values (ns) of the GPU that
 * ran the kernel; subtract loom_moe_trace_info_t.start_ns for times since
 * the kernel began. */
typedef struct {
  uint64_t start_ns; /* when the slice began */
  uint64_t end_ns;   /* when it ended, >= start_ns */
  uint16_t sm;       /* %smid of the SM (the block) that recorded it */
  uint8_t kind;      /* loom_moe_trace_kind_t */
  uint8_t peer;      /* the other rank, per kind; LOOM_MOE_TRACE_NO_PEER */
  int32_t a, b, c;   /* per kind (loom_moe_trace_kind_t); 0 when unused */
} loom_moe_trace_event_t;

/* What a traced forward writes besides its events (at its very end). */
typedef struct {
  int64_t recorded;  /* events written: events[0 .. recorded), in no
                        particular order, recorded <= capacity */
  int64_t dropped;   /* events that did not fit (capacity too small) */
  uint64_t start_ns; /* %globaltimer at the kernel's start (its earliest
                        block's first read); every event starts at or after it */
  uint64_t end_ns;   /* %globaltimer when its last block finished; every
                        event ends at or before it */
  int32_t blocks;    /* blocks of the launch: one per SM of the device */
  int32_t rank;      /* the communicator rank that ran it */
} loom_moe_trace_info_t;

/* Turn the in-kernel trace of a layer on or off for the forwards launched
 * after this call (those already enqueued keep what they were launched
 * with; a CUDA graph keeps what was set when it was captured).
 *   moe      [in]  the layer.
 *   events   [in]  device memory of the layer's device, `capacity` events,
 *                  16-byte aligned, owned by the caller; or NULL: tracing
 *                  off (capacity and info are then ignored).
 *   capacity [in]  events that fit, 1 .. 2^40. A forward that has more drops
 *                  the rest and counts them in info->dropped.
 *   info     [in]  device memory for one loom_moe_trace_info_t, 8-byte
 *                  aligned, owned by the caller.
 * Every traced forward overwrites events[0 .. recorded) and *info; read
 * them after the stream has passed that forward, before the next traced
 * forward on the same buffers. Nothing else of the buffers is touched.
 * Not collective: each rank traces or not on its own, and tracing never
 * changes y (bitwise). Not thread-safe against a concurrent forward of the
 * same layer. Errors: LOOM_INVALID_ARGUMENT (a live layer, capacity,
 * info, alignment). */
loom_result_t loom_moe_set_trace(loom_moe_t moe, loom_moe_trace_event_t *events,
                                 int64_t capacity, loom_moe_trace_info_t *info);

/* Free the layer's buffers (waits for the device). NULL is a no-op. Not
 * collective. Destroy every layer before the communicator it was created
 * on (the layer uses the communicator's device and window). */
loom_result_t loom_moe_destroy(loom_moe_t moe);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_H */
