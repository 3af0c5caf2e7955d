/*
 * Host runtime internals: the communicator object, error helpers and the
 * check macros used by every src/host file. Not installed; tests include it
 * to reach fault-injection hooks and to validate arguments without a GPU.
 */
#ifndef LOOM_INTERNAL_H
#define LOOM_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "loom.h"
#include "../device/runtime/layout.h"
#include "../device/runtime/transport.h"
#include "../device/ops/ops.h"

#define LOOM_COMM_MAGIC 0x6c6f6f6du /* "loom" */

#define LOOM_DEFAULT_WORKSPACE_BYTES ((int64_t)64 << 20)
#define LOOM_DEFAULT_SIGNAL_SLOTS 4096
#define LOOM_DEFAULT_TIMEOUT_MS 5000
#define LOOM_MAX_SIGNAL_SLOTS (1 << 20)
#define LOOM_MAX_TIMEOUT_MS (3600 * 1000)
#define LOOM_MAX_WORKSPACE_BYTES ((int64_t)1 << 40)

/* A config with every field resolved (no LOOM_UNSET left). */
typedef struct {
  size_t workspace_bytes;
  int signal_slots;
  int timeout_ms;
} loom_resolved_config;

/* Loopback worlds (loopback.c): several ranks' windows on one device. */
#define LOOM_LOOPBACK_MAX_RANKS 64
typedef struct loom_loopback loom_loopback;
/* Reserve and map nranks windows of window_bytes on the current device,
 * zeroed, with their window structs; refs = nranks. */
loom_result_t loom_loopback_create(int nranks, size_t window_bytes, loom_loopback **out);
void *loom_loopback_base(const loom_loopback *lb, int rank);
ncclWindow_t loom_loopback_window(const loom_loopback *lb, int rank);
/* One communicator is done with it; the last one frees it (synchronises
 * the device first). */
void loom_loopback_release(loom_loopback *lb);

struct loom_comm {
  uint32_t magic;            /* LOOM_COMM_MAGIC while alive */
  ncclComm_t nccl;           /* NULL in a loopback world */
  loom_loopback *loopback;   /* non-NULL: a loopback world's rank */
  int sms;                   /* SMs its persistent kernels fill */
  int l2_bytes;              /* the device's L2 cache (the operators' task-order choices) */
  int owns_nccl;             /* made by loom_comm_create_all */
  int rank, nranks, device;
  loom_resolved_config config;
  loom_window_layout layout;
  void *window_base;         /* ncclMemAlloc'd, layout.total_bytes */
  ncclWindow_t window;
  void *devcomm;             /* ncclDevComm, owned by transport.cu */
  loom_ctrl *ctrl;           /* device memory */
  void **peer_base;          /* host array [nranks]: each rank's window base as this
                                GPU addresses it (loom_window_peer_bases) */
  uint32_t *op_counters;     /* device memory, [nranks][signal_slots], zero between
                                calls: operators' own arrival counters (the
                                collective GEMMs' per-destination row blocks) */
  uint64_t *op_stamps;       /* device memory, [sms][LOOM_COLL_STAMPS]: the last
                                collective GEMM call's per-block times (ops.h) */
  loom_fault_record *fault_host; /* pinned, mapped */
  loom_fault_record *fault_dev;  /* its device alias */
  loom_result_t async_error; /* sticky once reported */
  int inject_no_signal;      /* test hook: kernels put but never signal */
};

#include "../device/ops/moe.h"

/* The caller's loom_gemm_args_t.bias, NULL where its struct predates the
 * field (2026-11-27): the library's checks and launches, and the
 * baselines, read it through this. */
static inline const void *loom_gemm_args_bias(const loom_gemm_args_t *a) {
  return a->struct_size > offsetof(loom_gemm_args_t, bias) ? a->bias : NULL;
}

#define LOOM_MOE_MAGIC 0x6d6f6531u /* "moe1" */

/* The layer's window layout for `config` on `nranks` ranks (moe.h has the
 * picture): fills p's shape (weight layout and config hash included),
 * window offsets (relative to the data region) and slot numbers, the data
 * bytes and signal slots it needs. Validates the config like
 * loom_moe_workspace_bytes (messages name `fn`). Pure. */
loom_result_t loom_moe_layout(const char *fn, const loom_moe_config_t *config, int nranks,
                              loom_moe_params *p, size_t *window_bytes, int *slots);

/* config->weight_layout resolved: LOOM_UNSET, or a version-1 struct that
 * lacks the field, is LOOM_WEIGHTS_OUT_IN. Not validated (the layout
 * functions above do that). */
int loom_moe_weight_layout(const loom_moe_config_t *config);

/* config->gate_math resolved likewise (LOOM_UNSET, or a struct older than
 * version 3: LOOM_GATE_EXACT). Not validated. */
int loom_moe_gate_math(const loom_moe_config_t *config);

struct loom_moe {
  uint32_t magic;    /* LOOM_MOE_MAGIC while alive */
  loom_comm_t comm;
  loom_moe_params p; /* shapes, window offsets, private buffers, weights */
  int weights_set;
  loom_moe_plan *plan; /* what a forward launches (moe.h); built by the first forward after
                          loom_moe_set_weights, which drops the old one */
  /* loom_moe_set_trace: the caller's buffers (events NULL: off) */
  loom_moe_trace_event_t *trace_events;
  int64_t trace_capacity;
  loom_moe_trace_info_t *trace_info;
};

/* ---- diagnostics (the CLI) ------------------------------------------------- */

/* The last collective GEMM call on comm, from its blocks' stamps
 * (LOOM_COLL_STAMP_*, ops.h): ends_us[i] = the latest block's stamp i in
 * microseconds after the earliest block's start (ends_us[0]: how late the
 * last block started). Synchronises comm's device (a copy); the device
 * current on entry is current again on return. All zero before any call. */
loom_result_t loom_coll_phases(loom_comm_t comm, double ends_us[LOOM_COLL_STAMPS]);

/* ---- errors ---------------------------------------------------------------- */

/* Clear this thread's last-error message (every public entry point). */
void loom_clear_error(void);
/* Set the message and return `result` (so `return loom_set_error(...)`). */
loom_result_t loom_set_error(loom_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Copy this thread's message (for handing errors across threads). */
void loom_copy_error(char *dst, size_t n);

/* Validate an argument: on failure return LOOM_INVALID_ARGUMENT with a
 * message "<fn>: <what>". */
#define LOOM_ARG(cond, fn, ...)                                                \
  do {                                                                         \
    if (!(cond)) {                                                             \
      char m_[512];                                                            \
      snprintf(m_, sizeof m_, __VA_ARGS__);                                    \
      return loom_set_error(LOOM_INVALID_ARGUMENT, "%s: %s", fn, m_);          \
    }                                                                          \
  } while (0)

/* Check macros for functions with `loom_result_t res` and a `fail:` label. */
#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      res = loom_set_error(e_ == cudaErrorMemoryAllocation ? LOOM_OUT_OF_MEMORY \
                                                           : LOOM_CUDA_ERROR,  \
                           "%s:%d: %s: %s", __FILE__, __LINE__, #call,         \
                           cudaGetErrorString(e_));                            \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

#define NCCL_CHECK(call)                                                       \
  do {                                                                         \
    ncclResult_t n_ = (call);                                                  \
    if (n_ != ncclSuccess) {                                                   \
      res = loom_set_error(LOOM_NCCL_ERROR, "%s:%d: %s: %s (%s)", __FILE__,    \
                           __LINE__, #call, ncclGetErrorString(n_),            \
                           ncclGetLastError(NULL));                            \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

#define LOOM_CHECK(call)                                                       \
  do {                                                                         \
    res = (call);                                                              \
    if (res != LOOM_SUCCESS) goto fail;                                        \
  } while (0)

/* ---- communicator helpers ------------------------------------------------ */

/* Resolve a caller's config (NULL allowed) against defaults and the
 * environment (LOOM_TIMEOUT_MS). `fn` names the API function in messages. */
loom_result_t loom_resolve_comm_config(const char *fn, const loom_comm_config_t *in,
                                       loom_resolved_config *out);

/* Validate a handle: non-NULL and alive. */
loom_result_t loom_check_comm(const char *fn, loom_comm_t comm);

/* Ready to launch: valid handle, no pending async error, its device
 * current. */
loom_result_t loom_comm_prepare_launch(const char *fn, loom_comm_t comm);

/* The kernel-side view of a communicator for operator `op`. */
loom_dev_comm loom_comm_dev_view(loom_comm_t comm, int op);

/* Describe a fault record in words (into the thread's error message) and
 * return its result. my_rank: the rank whose record it is (a
 * LOOM_PEER_ERROR record describes another rank's fault). */
loom_result_t loom_report_fault(const loom_fault_record *f, int my_rank);

#endif /* LOOM_INTERNAL_H */
