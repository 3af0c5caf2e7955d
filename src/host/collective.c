/* The collective GEMMs: validation, workspace sizing and launch of the
 * all-gather GEMM (src/device/ops/ag_gemm.cu), the GEMM + reduce-scatter and
 * the GEMM + all-reduce (src/device/ops/gemm_rs.cuh; their entry points
 * gemm_rs.cu and gemm_ar.cu); docs/collective_gemm.md.
 * On one rank the reduce-scatter and the all-reduce are the plain GEMM
 * c = act(a b^T): they launch the all-gather kernel, which is that GEMM at
 * one rank (no window, no signal). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../device/ops/coll_rules.h"
#include "../device/ops/ops.h"

/* The struct before a_gathered (2026-11-26): a caller built against that
 * header passes this size, and its a_gathered is NULL. */
#define GEMM_ARGS_V2_SIZE offsetof(loom_gemm_args_t, a_gathered)

/* The struct before bias (2026-11-27). */
#define GEMM_ARGS_V3_SIZE offsetof(loom_gemm_args_t, bias)

/* The caller's a_gathered, NULL where its struct has none. */
static void *gathered_of(const loom_gemm_args_t *a) {
  return a->struct_size > GEMM_ARGS_V2_SIZE ? a->a_gathered : NULL;
}

/* The args struct as the caller built it: LOOM_GEMM_ARGS_INIT's size (or
 * the size before a_gathered, or before bias) and a version this library
 * knows (the struct is new at LOOM_API_VERSION 2). */
static loom_result_t check_args(const char *fn, const loom_gemm_args_t *a, int nranks,
                                size_t *esize) {
  LOOM_ARG(a != NULL, fn, "args is NULL");
  LOOM_ARG((a->struct_size == sizeof(loom_gemm_args_t) || a->struct_size == GEMM_ARGS_V2_SIZE ||
            a->struct_size == GEMM_ARGS_V3_SIZE) &&
               a->version >= 2 &&
               a->version <= LOOM_API_VERSION,
           fn,
           "args->struct_size (%zu) / version (%d) are not a loom_gemm_args_t's (%zu, 2..%d): "
           "initialise it with LOOM_GEMM_ARGS_INIT",
           a->struct_size, a->version, sizeof(loom_gemm_args_t), LOOM_API_VERSION);
  LOOM_ARG(nranks >= 1 && nranks <= LOOM_AG_MAX_RANKS, fn,
           "%d ranks: the all-gather GEMM runs on 1 to %d ranks", nranks, LOOM_AG_MAX_RANKS);
  LOOM_ARG(a->dtype == LOOM_BF16 || a->dtype == LOOM_FP16 || a->dtype == LOOM_FP32, fn,
           "dtype (%d) is not a loom_dtype_t", (int)a->dtype);
  LOOM_ARG(a->activation == LOOM_UNSET || a->activation == LOOM_ACT_RELU ||
               a->activation == LOOM_ACT_GELU || a->activation == LOOM_ACT_SILU,
           fn, "activation (%d) must be LOOM_UNSET (none), LOOM_ACT_RELU, LOOM_ACT_GELU or LOOM_ACT_SILU",
           a->activation);
  LOOM_ARG(a->m >= 1 && a->n >= 1 && a->k >= 1, fn,
           "m, n, k (%lld, %lld, %lld) must all be >= 1", (long long)a->m, (long long)a->n,
           (long long)a->k);
  LOOM_ARG(a->n % 8 == 0 && a->k % 8 == 0, fn,
           "n (%lld) and k (%lld) must be multiples of 8 (rows of 16-byte multiples for the "
           "tensor-memory loads)",
           (long long)a->n, (long long)a->k);
  /* below 2^31 (loom.h): m x nranks <= INT32_MAX exactly when m <= INT32_MAX / nranks */
  LOOM_ARG(a->m <= INT32_MAX / nranks && a->n <= INT32_MAX && a->k <= INT32_MAX, fn,
           "m (%lld) x nranks, n (%lld) and k (%lld) must stay below 2^31", (long long)a->m,
           (long long)a->n, (long long)a->k);
  LOOM_ARG((a->m + 127) / 128 * ((a->n + 127) / 128) < INT32_MAX / 4, fn,
           "m x n (%lld x %lld) has too many tiles", (long long)a->m, (long long)a->n);
  loom_dtype_size(a->dtype, esize);
  return LOOM_SUCCESS;
}

/* Row blocks of m: one signal slot each. */
static int64_t row_blocks(int64_t m) {
  return (m + LOOM_AG_BLOCK_ROWS - 1) / LOOM_AG_BLOCK_ROWS;
}

loom_result_t loom_ag_gemm_workspace_bytes(const loom_gemm_args_t *args, int nranks,
                                           size_t *bytes, int *signal_slots) {
  loom_clear_error();
  const char *fn = "loom_ag_gemm_workspace_bytes";
  size_t es = 0;
  loom_result_t res = check_args(fn, args, nranks, &es);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(bytes != NULL, fn, "bytes is NULL");
  const int64_t slots = row_blocks(args->m) + 2;
  LOOM_ARG(slots <= LOOM_MAX_SIGNAL_SLOTS, fn,
           "m = %lld needs %lld signal slots (one per %d rows, + 2), more than a communicator has "
           "(%d)",
           (long long)args->m, (long long)slots, LOOM_AG_BLOCK_ROWS, LOOM_MAX_SIGNAL_SLOTS);
  const size_t need = (size_t)nranks * loom_ag_stride(args->m, args->k, es);
  LOOM_ARG(need <= (size_t)LOOM_MAX_WORKSPACE_BYTES, fn,
           "m = %lld, k = %lld on %d ranks needs %zu workspace bytes, more than a communicator can "
           "have (%lld)",
           (long long)args->m, (long long)args->k, nranks, need, (long long)LOOM_MAX_WORKSPACE_BYTES);
  *bytes = need;
  if (signal_slots) *signal_slots = (int)slots;
  return LOOM_SUCCESS;
}

/* [p, p + n) and [q, q + m) share a byte. */
static int overlap(const void *p, size_t n, const void *q, size_t m) {
  const char *a = (const char *)p, *b = (const char *)q;
  return a < b + m && b < a + n;
}

/* The checks every collective GEMM call shares, after its own: pointers,
 * alignment, c (c_rows rows) and g (the all-gather's a_gathered, nranks x
 * a's rows, or NULL) apart from a, b and each other, and the communicator's
 * workspace and slots against what `sizer` (its workspace function, named
 * in the message) asked for. Then the launch preparation. */
static loom_result_t check_call(const char *fn, const char *sizer, loom_comm_t comm,
                                const loom_gemm_args_t *a, const void *g, size_t es, int64_t c_rows,
                                size_t need, int slots) {
  const void *const ptr[3] = {a->a, a->b, a->c};
  static const char *const ptr_name[3] = {"a", "b", "c"};
  for (int i = 0; i < 3; i++) LOOM_ARG(ptr[i] != NULL, fn, "%s must not be NULL", ptr_name[i]);
  for (int i = 0; i < 3; i++)
    LOOM_ARG(((uintptr_t)ptr[i] & 15) == 0, fn, "%s (%p) must be 16-byte aligned", ptr_name[i], ptr[i]);
  const size_t a_bytes = (size_t)a->m * (size_t)a->k * es, b_bytes = (size_t)a->n * (size_t)a->k * es;
  const size_t c_bytes = (size_t)c_rows * (size_t)a->n * es;
  LOOM_ARG(!overlap(a->c, c_bytes, a->a, a_bytes) && !overlap(a->c, c_bytes, a->b, b_bytes), fn,
           "c overlaps a or b");
  if (g != NULL) {
    const size_t g_bytes = (size_t)comm->nranks * a_bytes;
    LOOM_ARG(((uintptr_t)g & 15) == 0, fn, "a_gathered must be 16-byte aligned");
    LOOM_ARG(!overlap(g, g_bytes, a->a, a_bytes) && !overlap(g, g_bytes, a->b, b_bytes) &&
                 !overlap(g, g_bytes, a->c, c_bytes),
             fn, "a_gathered overlaps a, b or c");
  }
  const void *bias = loom_gemm_args_bias(a);
  if (bias != NULL) { /* read while c (and a_gathered) are written */
    const size_t n_bytes = (size_t)a->n * es;
    LOOM_ARG(((uintptr_t)bias & 15) == 0, fn, "bias must be 16-byte aligned");
    LOOM_ARG(!overlap(bias, n_bytes, a->c, c_bytes) &&
                 (g == NULL || !overlap(bias, n_bytes, g, (size_t)comm->nranks * a_bytes)),
             fn, "bias overlaps c or a_gathered");
  }
  LOOM_ARG(need <= comm->config.workspace_bytes, fn,
           "m = %lld, n = %lld, k = %lld on %d ranks needs %zu workspace bytes but the communicator "
           "has %zu (see %s)",
           (long long)a->m, (long long)a->n, (long long)a->k, comm->nranks, need,
           comm->config.workspace_bytes, sizer);
  LOOM_ARG(slots <= comm->config.signal_slots, fn,
           "m = %lld, n = %lld on %d ranks needs %d signal slots but the communicator has %d (see %s)",
           (long long)a->m, (long long)a->n, comm->nranks, slots, comm->config.signal_slots, sizer);
  return loom_comm_prepare_launch(fn, comm);
}

/* A validated call's launch arguments: the caller's, and where this rank's
 * window, counters, peers and error word are. */
static loom_coll_args launch_args(loom_comm_t comm, const loom_gemm_args_t *a) {
  loom_coll_args la;
  la.dtype = (int)a->dtype;
  la.act = a->activation == LOOM_UNSET ? -1 : a->activation;
  la.m = (int)a->m;
  la.n = (int)a->n;
  la.k = (int)a->k;
  la.a = a->a;
  la.b = a->b;
  la.c = a->c;
  la.a_gathered = gathered_of(a);
  la.bias = loom_gemm_args_bias(a);
  la.data_local = (char *)comm->window_base + comm->layout.data_offset;
  la.flags_local = (uint64_t *)((char *)comm->window_base + comm->layout.flags_offset);
  la.counters = comm->op_counters;
  la.peer_base = comm->peer_base;
  la.error = &comm->ctrl->op_error;
  la.stamps = comm->op_stamps;
  la.l2_bytes = (size_t)comm->l2_bytes;
  return la;
}

/* The signal slots a reduce-scatter or all-reduce of these shapes needs,
 * into *signal_slots (if not NULL), or a message when no communicator has
 * that many. */
static loom_result_t slots_out(const char *fn, const loom_gemm_args_t *a, int nranks, int64_t slots,
                               int *signal_slots) {
  LOOM_ARG(slots <= LOOM_MAX_SIGNAL_SLOTS, fn,
           "m = %lld over %d ranks, n = %lld needs %lld signal slots, more than a communicator has (%d)",
           (long long)a->m, nranks, (long long)a->n, (long long)slots, LOOM_MAX_SIGNAL_SLOTS);
  if (signal_slots) *signal_slots = (int)slots;
  return LOOM_SUCCESS;
}

/* ---- GEMM + reduce-scatter ------------------------------------------------ */

loom_result_t loom_gemm_rs_workspace_bytes(const loom_gemm_args_t *args, int nranks, size_t *bytes,
                                           int *signal_slots) {
  loom_clear_error();
  const char *fn = "loom_gemm_rs_workspace_bytes";
  size_t es = 0;
  loom_result_t res = check_args(fn, args, nranks, &es);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(args->m % nranks == 0, fn,
           "m (%lld) must be a multiple of the %d ranks (each gets m / nranks rows)", (long long)args->m,
           nranks);
  LOOM_ARG(bytes != NULL, fn, "bytes is NULL");
  const int64_t mo = args->m / nranks;
  res = slots_out(fn, args, nranks, loom_rs_slots(mo, args->n), signal_slots);
  if (res != LOOM_SUCCESS) return res; /* *bytes untouched, as on every refusal */
  *bytes = (size_t)nranks * loom_rs_stride(mo, args->n, es);
  return LOOM_SUCCESS;
}

/* ---- GEMM + all-reduce ------------------------------------------------------ */

/* LOOM_AR_ONE_SHOT: 0 or 1 where it forces the mode, -1 where it does not. */
static int ar_one_shot_forced(void) {
  const char *force = getenv("LOOM_AR_ONE_SHOT");
  return force && (!strcmp(force, "0") || !strcmp(force, "1")) ? force[0] == '1' : -1;
}

int loom_ar_one_shot(int64_t m, int64_t n, size_t esize, int R) {
  const int forced = ar_one_shot_forced();
  if (R >= 2 && forced >= 0) return forced;
  return coll_ar_one_shot_rule(m * n * (int64_t)esize, R);
}

loom_result_t loom_gemm_ar_workspace_bytes(const loom_gemm_args_t *args, int nranks, size_t *bytes,
                                           int *signal_slots) {
  loom_clear_error();
  const char *fn = "loom_gemm_ar_workspace_bytes";
  size_t es = 0;
  loom_result_t res = check_args(fn, args, nranks, &es);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(bytes != NULL, fn, "bytes is NULL");
  const int64_t mo = (args->m + nranks - 1) / nranks; /* the largest owner's rows */
  if (nranks == 1) {
    *bytes = 0;
    return slots_out(fn, args, nranks, 3, signal_slots);
  }
  size_t need = (size_t)(2 * nranks - 1) * loom_rs_stride(mo, args->n, es);
  int64_t slots = loom_ar_slots(args->m, nranks, args->n);
  /* the one-shot mode (every rank's partial of all rows): at m, or at the
   * most rows up to m it takes by its rule, so that every smaller call
   * fits a communicator sized for this one */
  int64_t m1 = ar_one_shot_forced() == 0 ? 0 : args->m;
  if (m1 > 0 && !loom_ar_one_shot(m1, args->n, es, nranks)) {
    const int64_t most = coll_ar_one_shot_rows(args->n * (int64_t)es, nranks);
    m1 = most < args->m ? most : args->m;
  }
  if (m1 >= 1) {
    const size_t one = (size_t)nranks * loom_rs_stride(m1, args->n, es);
    if (one > need) need = one;
    if (loom_rs_slots(m1, args->n) > slots) slots = loom_rs_slots(m1, args->n);
  }
  res = slots_out(fn, args, nranks, slots, signal_slots);
  if (res != LOOM_SUCCESS) return res; /* *bytes untouched, as on every refusal */
  *bytes = need;
  return LOOM_SUCCESS;
}

/* ---- the calls ------------------------------------------------------------- */

/* One call of operator `op` (LOOM_OP_AG_GEMM, _GEMM_RS, _GEMM_AR): the
 * shared checks, the operator's own (its workspace function, named in the
 * messages, and c's rows), then the launch. One rank: the reduce-scatter
 * and the all-reduce are the plain GEMM, which is the all-gather kernel's. */
static loom_result_t coll_call(const char *fn, int op, loom_comm_t comm, const loom_gemm_args_t *a,
                               cudaStream_t stream) {
  loom_clear_error();
  loom_result_t res = loom_check_comm(fn, comm);
  if (res != LOOM_SUCCESS) return res;
  size_t es = 0, need = 0;
  int slots = 0;
  res = check_args(fn, a, comm->nranks, &es);
  if (res != LOOM_SUCCESS) return res;
  const int R = comm->nranks;
  const char *sizer;
  int64_t c_rows;
  if (op == LOOM_OP_GEMM_RS) {
    LOOM_ARG(a->m % R == 0, fn, "m (%lld) must be a multiple of the %d ranks (each gets m / nranks rows)",
             (long long)a->m, R);
    sizer = "loom_gemm_rs_workspace_bytes";
    c_rows = a->m / R;
    res = loom_gemm_rs_workspace_bytes(a, R, &need, &slots);
  } else if (op == LOOM_OP_GEMM_AR) {
    sizer = "loom_gemm_ar_workspace_bytes";
    c_rows = a->m;
    res = loom_gemm_ar_workspace_bytes(a, R, &need, &slots);
  } else {
    sizer = "loom_ag_gemm_workspace_bytes";
    c_rows = (int64_t)R * a->m;
    res = loom_ag_gemm_workspace_bytes(a, R, &need, &slots);
  }
  if (res != LOOM_SUCCESS) return res;
  const void *g = gathered_of(a);
  LOOM_ARG(g == NULL || op == LOOM_OP_AG_GEMM, fn,
           "a_gathered is the all-gather's output (loom_ag_gemm only): set it NULL");
  res = check_call(fn, sizer, comm, a, g, es, c_rows, need, slots);
  if (res != LOOM_SUCCESS) return res;

  loom_dev_comm dc = loom_comm_dev_view(comm, op);
  const loom_coll_args la = launch_args(comm, a);
  if (R == 1 || op == LOOM_OP_AG_GEMM)
    CUDA_CHECK(loom_launch_ag_gemm(&dc, &la, stream));
  else if (op == LOOM_OP_GEMM_RS)
    CUDA_CHECK(loom_launch_gemm_rs(&dc, &la, stream));
  else
    CUDA_CHECK(loom_launch_gemm_ar(&dc, &la, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_ag_gemm(loom_comm_t comm, const loom_gemm_args_t *args, cudaStream_t stream) {
  return coll_call("loom_ag_gemm", LOOM_OP_AG_GEMM, comm, args, stream);
}

loom_result_t loom_gemm_rs(loom_comm_t comm, const loom_gemm_args_t *args, cudaStream_t stream) {
  return coll_call("loom_gemm_rs", LOOM_OP_GEMM_RS, comm, args, stream);
}

loom_result_t loom_gemm_ar(loom_comm_t comm, const loom_gemm_args_t *args, cudaStream_t stream) {
  return coll_call("loom_gemm_ar", LOOM_OP_GEMM_AR, comm, args, stream);
}

/* ---- diagnostics ------------------------------------------------------------ */

loom_result_t loom_coll_phases(loom_comm_t comm, double ends_us[LOOM_COLL_STAMPS]) {
  loom_clear_error();
  const char *fn = "loom_coll_phases";
  loom_result_t res = loom_check_comm(fn, comm);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(ends_us != NULL, fn, "ends_us is NULL");
  const size_t n = (size_t)comm->sms * LOOM_COLL_STAMPS;
  uint64_t *t = (uint64_t *)malloc(n * sizeof *t);
  if (t == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
  int prev = 0;
  cudaError_t e = cudaGetDevice(&prev);
  if (e == cudaSuccess) e = cudaSetDevice(comm->device);
  if (e == cudaSuccess) e = cudaMemcpy(t, comm->op_stamps, n * sizeof *t, cudaMemcpyDeviceToHost);
  cudaSetDevice(prev);
  if (e != cudaSuccess) {
    free(t);
    return loom_set_error(LOOM_CUDA_ERROR, "%s: %s", fn, cudaGetErrorString(e));
  }
  uint64_t begin = UINT64_MAX, last[LOOM_COLL_STAMPS] = {0};
  for (int b = 0; b < comm->sms; b++) {
    const uint64_t *s = t + (size_t)b * LOOM_COLL_STAMPS;
    if (s[LOOM_COLL_STAMP_BEGIN] != 0 && s[LOOM_COLL_STAMP_BEGIN] < begin) begin = s[LOOM_COLL_STAMP_BEGIN];
    for (int i = 0; i < LOOM_COLL_STAMPS; i++)
      if (s[i] > last[i]) last[i] = s[i];
  }
  for (int i = 0; i < LOOM_COLL_STAMPS; i++)
    ends_us[i] = begin != UINT64_MAX && last[i] > begin ? (double)(last[i] - begin) / 1e3 : 0.0;
  free(t);
  return LOOM_SUCCESS;
}
