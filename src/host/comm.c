/*
 * Communicator: symmetric workspace on NCCL windows, the device
 * communicator, the control block and the host-visible fault record.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- config ------------------------------------------------------------------ */

/* Strict decimal parse of an environment value: digits only, in [lo, hi]. */
static int parse_env_int(const char *s, long lo, long hi, long *out) {
  if (s == NULL || *s < '0' || *s > '9') return 0; /* strtol alone takes " 12" and "+12" */
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

loom_result_t loom_resolve_comm_config(const char *fn, const loom_comm_config_t *in,
                                       loom_resolved_config *out) {
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  if (in != NULL) {
    LOOM_ARG(in->struct_size == sizeof(loom_comm_config_t), fn,
             "config->struct_size (%zu) is not sizeof(loom_comm_config_t) (%zu): "
             "initialise it with LOOM_COMM_CONFIG_INIT",
             in->struct_size, sizeof(loom_comm_config_t));
    /* the struct is the same at every version so far */
    LOOM_ARG(in->version >= 1 && in->version <= LOOM_API_VERSION, fn,
             "config->version (%d) is not in [1, LOOM_API_VERSION = %d]", in->version,
             LOOM_API_VERSION);
    c = *in;
  }
  if (c.workspace_bytes == LOOM_UNSET) c.workspace_bytes = LOOM_DEFAULT_WORKSPACE_BYTES;
  LOOM_ARG(c.workspace_bytes > 0 && c.workspace_bytes <= LOOM_MAX_WORKSPACE_BYTES, fn,
           "config->workspace_bytes (%lld) must be in [1, 2^40] or LOOM_UNSET",
           (long long)c.workspace_bytes);
  if (c.signal_slots == LOOM_UNSET) c.signal_slots = LOOM_DEFAULT_SIGNAL_SLOTS;
  LOOM_ARG(c.signal_slots >= 3 && c.signal_slots <= LOOM_MAX_SIGNAL_SLOTS, fn,
           "config->signal_slots (%d) must be in [3, %d] or LOOM_UNSET", c.signal_slots,
           LOOM_MAX_SIGNAL_SLOTS);
  if (c.timeout_ms == LOOM_UNSET) {
    const char *env = getenv("LOOM_TIMEOUT_MS");
    long v = LOOM_DEFAULT_TIMEOUT_MS;
    if (env != NULL)
      LOOM_ARG(parse_env_int(env, 1, LOOM_MAX_TIMEOUT_MS, &v), fn,
               "environment LOOM_TIMEOUT_MS (\"%s\") must be an integer in [1, %d]", env,
               LOOM_MAX_TIMEOUT_MS);
    c.timeout_ms = (int)v;
  }
  LOOM_ARG(c.timeout_ms > 0 && c.timeout_ms <= LOOM_MAX_TIMEOUT_MS, fn,
           "config->timeout_ms (%d) must be in [1, %d] or LOOM_UNSET", c.timeout_ms,
           LOOM_MAX_TIMEOUT_MS);
  out->workspace_bytes = (size_t)c.workspace_bytes;
  out->signal_slots = c.signal_slots;
  out->timeout_ms = c.timeout_ms;
  return LOOM_SUCCESS;
}

/* ---- handles ----------------------------------------------------------------- */

loom_result_t loom_check_comm(const char *fn, loom_comm_t comm) {
  LOOM_ARG(comm != NULL, fn, "comm is NULL");
  LOOM_ARG(comm->magic == LOOM_COMM_MAGIC, fn,
           "comm is not a live loom communicator (destroyed or corrupt)");
  return LOOM_SUCCESS;
}

loom_dev_comm loom_comm_dev_view(loom_comm_t comm, int op) {
  loom_dev_comm d;
  memset(&d, 0, sizeof d);
  d.window = comm->window;
  d.rank = comm->rank;
  d.nranks = comm->nranks;
  d.slots = comm->config.signal_slots;
  d.op = op;
  d.sms = comm->sms;
  d.flags_offset = comm->layout.flags_offset;
  d.data_offset = comm->layout.data_offset;
  d.ll_offset = comm->layout.ll_offset;
  d.ll_bytes = comm->layout.ll_bytes;
  d.timeout_ns = (uint64_t)comm->config.timeout_ms * 1000000ull;
  d.ctrl = comm->ctrl;
  d.fault = comm->fault_dev;
  return d;
}

static const char *op_name(int op) {
  switch (op) {
  case LOOM_OP_EXCHANGE: return "exchange";
  case LOOM_OP_PUT_BENCH: return "put-bench";
  case LOOM_OP_MOE: return "moe forward";
  case LOOM_OP_AG_GEMM: return "all-gather gemm";
  case LOOM_OP_GEMM_RS: return "gemm reduce-scatter";
  case LOOM_OP_GEMM_AR: return "gemm all-reduce";
  }
  return "unknown operator";
}

/* The original fault of a record in words (rank = the rank that failed). */
static void describe_fault(const loom_fault_record *f, char *buf, size_t n) {
  const double ms = (double)f->waited_ns / 1e6;
  const unsigned long long want = f->epoch, seen = f->observed;
  switch (f->what) {
  case LOOM_WAIT_GRID_BARRIER:
    snprintf(buf, n,
             "rank %d timed out after %.1f ms in %s (block %d) at grid barrier %d: %llu of %llu "
             "block arrivals",
             f->rank, ms, op_name(f->op), f->block, f->slot, seen, want);
    return;
  case LOOM_WAIT_TILE_DEP:
    snprintf(buf, n,
             "rank %d timed out after %.1f ms in %s (block %d) waiting for local tile %d: %llu of "
             "%llu tasks done",
             f->rank, ms, op_name(f->op), f->block, f->slot, seen, want);
    return;
  case LOOM_WAIT_BAD_ROUTING:
    snprintf(buf, n,
             "rank %d: %s: caller routing entry %d (token %llu) names expert %lld, outside [0, "
             "num_experts)",
             f->rank, op_name(f->op), f->slot, want, (long long)(int64_t)seen);
    return;
  case LOOM_WAIT_DUP_ROUTING:
    snprintf(buf, n,
             "rank %d: %s: caller routing entry %d (token %llu) repeats expert %lld (a token's "
             "top_k experts must be distinct)",
             f->rank, op_name(f->op), f->slot, want, (long long)(int64_t)seen);
    return;
  case LOOM_WAIT_CONFIG_MISMATCH:
    snprintf(buf, n,
             "rank %d: %s: rank %d built its layer with a different config (hash 0x%08llx, ours "
             "0x%08llx): every rank must pass the same loom_moe_config_t",
             f->rank, op_name(f->op), f->peer, seen, want);
    return;
  case LOOM_WAIT_CALL_MISMATCH:
    snprintf(buf, n,
             "rank %d: %s: rank %d is in call %llu of %s while this rank is in call %llu of %s: "
             "the ranks made different sequences of calls on this communicator",
             f->rank, op_name(f->op), f->peer, seen >> 8, op_name((int)(seen & 0xff)), want >> 8,
             op_name((int)(want & 0xff)));
    return;
  case LOOM_WAIT_ROWS:
    snprintf(buf, n,
             "rank %d timed out after %.1f ms in %s (block %d) waiting for rows from peer %d "
             "(counter %d): %llu of %llu rows arrived",
             f->rank, ms, op_name(f->op), f->block, f->peer, f->slot, seen, want);
    return;
  case LOOM_WAIT_CREDIT:
    snprintf(buf, n,
             "rank %d timed out after %.1f ms in %s (block %d) waiting for peer %d to finish call "
             "%llu (its completion credit; it has finished call %llu): the peer is stuck, dead, "
             "or made fewer calls on this communicator",
             f->rank, ms, op_name(f->op), f->block, f->peer, want, seen);
    return;
  default:
    snprintf(buf, n,
             "rank %d timed out after %.1f ms in %s (block %d) waiting for peer %d: signal slot %d "
             "to reach epoch %llu (last seen %llu)",
             f->rank, ms, op_name(f->op), f->block, f->peer, f->slot, want, seen);
  }
}

loom_result_t loom_report_fault(const loom_fault_record *f, int my_rank) {
  char why[640];
  describe_fault(f, why, sizeof why);
  if (f->status == LOOM_PEER_ERROR)
    return loom_set_error(LOOM_PEER_ERROR, "rank %d stopped because rank %d failed first (%s): %s",
                          my_rank, f->rank, loom_result_string((loom_result_t)f->cause), why);
  return loom_set_error((loom_result_t)f->status, "%s", why);
}

loom_result_t loom_comm_get_async_error(loom_comm_t comm, loom_result_t *async_error) {
  loom_clear_error();
  loom_result_t res = loom_check_comm("loom_comm_get_async_error", comm);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(async_error != NULL, "loom_comm_get_async_error", "async_error is NULL");
  if (comm->async_error == LOOM_SUCCESS && comm->fault_host->status != 0)
    comm->async_error = (loom_result_t)comm->fault_host->status;
  *async_error = comm->async_error;
  if (comm->async_error != LOOM_SUCCESS) loom_report_fault(comm->fault_host, comm->rank);
  return LOOM_SUCCESS;
}

loom_result_t loom_comm_prepare_launch(const char *fn, loom_comm_t comm) {
  loom_result_t res = loom_check_comm(fn, comm);
  if (res != LOOM_SUCCESS) return res;
  if (comm->async_error == LOOM_SUCCESS && comm->fault_host->status != 0)
    comm->async_error = (loom_result_t)comm->fault_host->status;
  if (comm->async_error != LOOM_SUCCESS) {
    char why[768];
    loom_report_fault(comm->fault_host, comm->rank);
    loom_copy_error(why, sizeof why);
    return loom_set_error(LOOM_INVALID_USAGE,
                          "%s: communicator has an asynchronous error and must be destroyed: %s",
                          fn, why);
  }
  CUDA_CHECK(cudaSetDevice(comm->device));
  return LOOM_SUCCESS;
fail:
  return res;
}

/* `out` is the output's name in loom.h, for the message. */
#define GETTER(name, type, out, expr)                                          \
  loom_result_t name(loom_comm_t comm, type *out) {                            \
    loom_clear_error();                                                        \
    loom_result_t res = loom_check_comm(#name, comm);                          \
    if (res != LOOM_SUCCESS) return res;                                       \
    LOOM_ARG(out != NULL, #name, #out " is NULL");                             \
    *out = (expr);                                                             \
    return LOOM_SUCCESS;                                                       \
  }
GETTER(loom_comm_rank, int, rank, comm->rank)
GETTER(loom_comm_size, int, nranks, comm->nranks)
GETTER(loom_comm_device, int, device, comm->device)
GETTER(loom_comm_workspace_bytes, size_t, bytes, comm->config.workspace_bytes)
GETTER(loom_comm_nccl, ncclComm_t, nccl, comm->nccl)

/* ---- create / destroy ------------------------------------------------------------ */

/* Release everything a (possibly half-built) communicator holds. Collective
 * where NCCL's calls are. Returns the first failure, keeps going. */
static loom_result_t comm_release(struct loom_comm *c) {
  loom_result_t res = LOOM_SUCCESS, first = LOOM_SUCCESS;
  char first_msg[1024] = "";
#define KEEP_FIRST()                                                           \
  do {                                                                         \
    if (first == LOOM_SUCCESS) {                                               \
      first = res;                                                             \
      loom_copy_error(first_msg, sizeof first_msg);                            \
    }                                                                          \
    res = LOOM_SUCCESS;                                                        \
  } while (0)
  if (c->device >= 0) {
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  goto devcomm;
fail:
  KEEP_FIRST();
devcomm:
  if (c->devcomm != NULL) {
    ncclResult_t n = loom_devcomm_destroy(c->nccl, c->devcomm);
    c->devcomm = NULL;
    if (n != ncclSuccess) {
      res = loom_set_error(LOOM_NCCL_ERROR, "ncclDevCommDestroy: %s", ncclGetErrorString(n));
      KEEP_FIRST();
    }
  }
  if (c->loopback != NULL) {
    /* the world's windows and their structs: freed with its last rank */
    loom_loopback_release(c->loopback);
    c->loopback = NULL;
    c->window = NULL;
    c->window_base = NULL;
  }
  if (c->window != NULL) {
    ncclResult_t n = ncclCommWindowDeregister(c->nccl, c->window);
    c->window = NULL;
    if (n != ncclSuccess) {
      res = loom_set_error(LOOM_NCCL_ERROR, "ncclCommWindowDeregister: %s",
                           ncclGetErrorString(n));
      KEEP_FIRST();
    }
  }
  if (c->window_base != NULL) ncclMemFree(c->window_base);
  if (c->ctrl != NULL) cudaFree(c->ctrl);
  if (c->op_counters != NULL) cudaFree(c->op_counters);
  if (c->op_stamps != NULL) cudaFree(c->op_stamps);
  free(c->peer_base);
  c->peer_base = NULL;
  if (c->fault_host != NULL) cudaFreeHost(c->fault_host);
  if (c->owns_nccl && c->nccl != NULL) ncclCommDestroy(c->nccl);
  c->window_base = NULL;
  c->ctrl = NULL;
  c->op_counters = NULL;
  c->op_stamps = NULL;
  c->fault_host = NULL;
  c->nccl = NULL;
#undef KEEP_FIRST
  if (first != LOOM_SUCCESS) loom_set_error(first, "%s", first_msg);
  return first;
}

/* A communicator's control block and operator counters (device memory,
 * zeroed) and its fault record (mapped host memory, zeroed, with its
 * device alias), for both
 * kinds of communicator. On failure what was allocated stays in c for
 * comm_release. */
static loom_result_t comm_alloc_control(struct loom_comm *c) {
  loom_result_t res = LOOM_SUCCESS;
  CUDA_CHECK(cudaMalloc((void **)&c->ctrl, sizeof(loom_ctrl)));
  CUDA_CHECK(cudaMemset(c->ctrl, 0, sizeof(loom_ctrl)));
  const size_t counters = (size_t)c->nranks * (size_t)c->config.signal_slots * sizeof(uint32_t);
  CUDA_CHECK(cudaMalloc((void **)&c->op_counters, counters));
  CUDA_CHECK(cudaMemset(c->op_counters, 0, counters));
  const size_t stamps = (size_t)c->sms * LOOM_COLL_STAMPS * sizeof(uint64_t);
  CUDA_CHECK(cudaMalloc((void **)&c->op_stamps, stamps));
  CUDA_CHECK(cudaMemset(c->op_stamps, 0, stamps));
  CUDA_CHECK(cudaHostAlloc((void **)&c->fault_host, sizeof(loom_fault_record),
                           cudaHostAllocMapped));
  memset((void *)c->fault_host, 0, sizeof(loom_fault_record));
  CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->fault_dev, (void *)c->fault_host, 0));
fail:
  return res;
}

/* Every rank's window base as this GPU addresses it, for launches that name
 * peer memory in their parameters (the collective GEMMs' epilogues). After
 * the window exists; on failure what was allocated stays in c. */
static loom_result_t comm_query_peer_bases(struct loom_comm *c) {
  loom_result_t res = LOOM_SUCCESS;
  c->peer_base = (void **)calloc((size_t)c->nranks, sizeof(void *));
  if (c->peer_base == NULL)
    return loom_set_error(LOOM_OUT_OF_MEMORY, "loom_comm_create: host allocation failed");
  CUDA_CHECK(loom_window_peer_bases(c->window, c->nranks, c->peer_base));
fail:
  return res;
}

/* Every rank must pass the same workspace and slot count: the window is
 * symmetric. All-gather them once (the only host collective at create). */
static loom_result_t check_config_agreement(struct loom_comm *c) {
  loom_result_t res = LOOM_SUCCESS;
  int64_t mine[2] = {(int64_t)c->config.workspace_bytes, c->config.signal_slots};
  int64_t *all_host = NULL, *dev = NULL;
  cudaStream_t s = NULL;
  all_host = (int64_t *)malloc(sizeof(int64_t) * 2 * (size_t)c->nranks);
  if (all_host == NULL) {
    res = loom_set_error(LOOM_OUT_OF_MEMORY, "loom_comm_create: host allocation failed");
    goto fail;
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaMalloc((void **)&dev, sizeof(int64_t) * 2 * ((size_t)c->nranks + 1)));
  CUDA_CHECK(cudaMemcpy(dev, mine, sizeof mine, cudaMemcpyHostToDevice));
  NCCL_CHECK(ncclAllGather(dev, dev + 2, 2, ncclInt64, c->nccl, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaMemcpy(all_host, dev + 2, sizeof(int64_t) * 2 * (size_t)c->nranks,
                        cudaMemcpyDeviceToHost));
  for (int r = 0; r < c->nranks; r++) {
    if (all_host[2 * r] != mine[0] || all_host[2 * r + 1] != mine[1]) {
      res = loom_set_error(LOOM_INVALID_ARGUMENT,
                           "loom_comm_create: config differs between ranks: rank %d has "
                           "workspace_bytes %lld, signal_slots %lld; rank %d has %lld, %lld",
                           r, (long long)all_host[2 * r], (long long)all_host[2 * r + 1],
                           c->rank, (long long)mine[0], (long long)mine[1]);
      goto fail;
    }
  }
fail:
  if (dev != NULL) cudaFree(dev);
  if (s != NULL) cudaStreamDestroy(s);
  free(all_host);
  return res;
}

/* A multi-rank communicator's window (c->layout's bytes, zeroed by a
 * cudaMemset the caller synchronises before registering it) from NCCL,
 * after checking that every rank is load/store reachable (NCCL's device
 * communicator). On failure what was allocated stays in c for
 * comm_release. */
static loom_result_t comm_alloc_nccl_window(struct loom_comm *c) {
  loom_result_t res = LOOM_SUCCESS;
  int lsa_size = 0;
  NCCL_CHECK(loom_devcomm_create(c->nccl, &c->devcomm, &lsa_size));
  if (lsa_size != c->nranks)
    return loom_set_error(LOOM_UNSUPPORTED,
                          "loom_comm_create: only %d of %d ranks are load/store reachable; "
                          "loom needs one NVLink domain (network peers are not supported yet)",
                          lsa_size, c->nranks);
  /* A window that does not fit is LOOM_OUT_OF_MEMORY naming the bytes,
   * not an NCCL error from deep inside. */
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int fits = c->layout.total_bytes <= free_b;
  const ncclResult_t n = fits ? ncclMemAlloc(&c->window_base, c->layout.total_bytes) : ncclSuccess;
  if (!fits || n != ncclSuccess)
    return loom_set_error(LOOM_OUT_OF_MEMORY,
                          "loom_comm_create: cannot allocate the symmetric window on device %d: "
                          "%zu bytes (workspace_bytes %zu + tagged-store region %zu + signal flags "
                          "%zu + abort record %zu) with %zu of %zu bytes free (%s)",
                          c->device, c->layout.total_bytes, c->layout.data_bytes,
                          c->layout.ll_bytes, c->layout.flags_bytes, c->layout.flags_offset, free_b, total_b,
                          fits ? ncclGetErrorString(n) : "more than is free");
  CUDA_CHECK(cudaMemset(c->window_base, 0, c->layout.total_bytes));
fail:
  return res;
}

static loom_result_t comm_create(ncclComm_t nccl, const loom_resolved_config *cfg,
                                 int owns_nccl, loom_comm_t *out) {
  loom_result_t res = LOOM_SUCCESS;
  struct loom_comm *c = (struct loom_comm *)calloc(1, sizeof *c);
  if (c == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "loom_comm_create: out of host memory");
  c->nccl = nccl;
  c->owns_nccl = 0; /* adopted only on success; the caller cleans up otherwise */
  c->device = -1;
  c->config = *cfg;
  NCCL_CHECK(ncclCommCount(nccl, &c->nranks));
  NCCL_CHECK(ncclCommUserRank(nccl, &c->rank));
  int nccl_dev, cur_dev;
  NCCL_CHECK(ncclCommCuDevice(nccl, &nccl_dev));
  CUDA_CHECK(cudaGetDevice(&cur_dev));
  if (nccl_dev != cur_dev) {
    res = loom_set_error(LOOM_INVALID_ARGUMENT,
                         "loom_comm_create: nccl communicator is on device %d but the current "
                         "device is %d (call cudaSetDevice first)",
                         nccl_dev, cur_dev);
    goto fail;
  }
  c->device = cur_dev;
  CUDA_CHECK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, cur_dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&c->l2_bytes, cudaDevAttrL2CacheSize, cur_dev));
  LOOM_CHECK(check_config_agreement(c));
  c->layout = loom_window_layout_make(c->nranks, cfg->signal_slots, cfg->workspace_bytes);
  if (c->nranks == 1) {
    /* One rank reaches no peer: its window is plain device memory, the
     * loopback world's of one rank (zeroed), with no NCCL window or device
     * communicator (NCCL 2.28 on the 2026-11-26 device image refused both
     * to a one-rank communicator: "Communicator does not support symmetric
     * memory"). The NCCL communicator stays the caller's, or ours to
     * destroy (owns_nccl). */
    LOOM_CHECK(loom_loopback_create(1, c->layout.total_bytes, &c->loopback));
    c->window_base = loom_loopback_base(c->loopback, 0);
    c->window = loom_loopback_window(c->loopback, 0);
  } else if ((res = comm_alloc_nccl_window(c)) != LOOM_SUCCESS) {
    goto fail;
  }
  if ((res = comm_alloc_control(c)) != LOOM_SUCCESS) goto fail;
  CUDA_CHECK(cudaDeviceSynchronize());
  /* the window zeroed and the zeroing finished before the collective
   * registration, so no peer can signal into stale memory */
  if (c->nranks > 1)
    NCCL_CHECK(ncclCommWindowRegister(nccl, c->window_base, c->layout.total_bytes, &c->window,
                                      NCCL_WIN_COLL_SYMMETRIC));
  if ((res = comm_query_peer_bases(c)) != LOOM_SUCCESS) goto fail;
  c->owns_nccl = owns_nccl;
  c->magic = LOOM_COMM_MAGIC;
  *out = c;
  return LOOM_SUCCESS;
fail:;
  char msg[1024];
  loom_copy_error(msg, sizeof msg);
  comm_release(c);
  free(c);
  return loom_set_error(res, "%s", msg);
}

loom_result_t loom_comm_create(ncclComm_t nccl, const loom_comm_config_t *config,
                               loom_comm_t *comm) {
  loom_clear_error();
  const char *fn = "loom_comm_create";
  LOOM_ARG(comm != NULL, fn, "comm is NULL");
  *comm = NULL;
  LOOM_ARG(nccl != NULL, fn, "nccl is NULL");
  loom_resolved_config cfg;
  loom_result_t res = loom_resolve_comm_config(fn, config, &cfg);
  if (res != LOOM_SUCCESS) return res;
  return comm_create(nccl, &cfg, 0, comm);
}

/* ---- one process, several GPUs ------------------------------------------------- */

typedef struct {
  ncclComm_t nccl;
  int device;
  const loom_resolved_config *cfg;
  loom_comm_t comm;     /* in: for destroy; out: for create */
  loom_result_t result;
  char message[1024];
} rank_job;

static void *create_rank(void *arg) {
  rank_job *j = (rank_job *)arg;
  loom_clear_error();
  cudaError_t e = cudaSetDevice(j->device);
  if (e != cudaSuccess) {
    j->result = loom_set_error(LOOM_CUDA_ERROR, "cudaSetDevice(%d): %s", j->device,
                               cudaGetErrorString(e));
  } else {
    j->result = comm_create(j->nccl, j->cfg, 1, &j->comm);
  }
  loom_copy_error(j->message, sizeof j->message);
  return NULL;
}

static void *destroy_rank(void *arg) {
  rank_job *j = (rank_job *)arg;
  j->result = loom_comm_destroy(j->comm);
  loom_copy_error(j->message, sizeof j->message);
  return NULL;
}

/* Run fn on every job, one thread each (the collective calls inside must
 * overlap). Returns the first failure, with its message on this thread. */
static loom_result_t run_ranks(int n, rank_job *jobs, void *(*fn)(void *)) {
  pthread_t *t = (pthread_t *)calloc((size_t)n, sizeof *t);
  if (t == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "out of host memory");
  int started = 0;
  for (; started < n; started++) {
    if (pthread_create(&t[started], NULL, fn, &jobs[started]) != 0) break;
  }
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  free(t);
  if (started < n)
    return loom_set_error(LOOM_INTERNAL_ERROR, "pthread_create failed for rank %d", started);
  for (int i = 0; i < n; i++)
    if (jobs[i].result != LOOM_SUCCESS)
      return loom_set_error(jobs[i].result, "rank %d: %s", i, jobs[i].message);
  return LOOM_SUCCESS;
}

loom_result_t loom_comm_create_all(int ndev, const int *devlist,
                                   const loom_comm_config_t *config, loom_comm_t *comms) {
  loom_clear_error();
  const char *fn = "loom_comm_create_all";
  LOOM_ARG(comms != NULL, fn, "comms is NULL");
  LOOM_ARG(ndev >= 1, fn, "ndev (%d) must be >= 1", ndev);
  for (int i = 0; i < ndev; i++) comms[i] = NULL;
  if (devlist != NULL) {
    for (int i = 0; i < ndev; i++) {
      LOOM_ARG(devlist[i] >= 0, fn, "devlist[%d] (%d) is negative", i, devlist[i]);
      for (int j = 0; j < i; j++)
        LOOM_ARG(devlist[j] != devlist[i], fn, "devlist[%d] and devlist[%d] are both device %d",
                 j, i, devlist[i]);
    }
  }
  loom_resolved_config cfg;
  loom_result_t res = loom_resolve_comm_config(fn, config, &cfg);
  if (res != LOOM_SUCCESS) return res;

  int count = 0;
  ncclComm_t *nccl = NULL;
  rank_job *jobs = NULL;
  int *devs = NULL;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  LOOM_ARG(ndev <= count, fn, "ndev (%d) exceeds the %d visible CUDA devices", ndev, count);
  if (devlist != NULL)
    for (int i = 0; i < ndev; i++)
      LOOM_ARG(devlist[i] < count, fn, "devlist[%d] (%d) is not a visible device (0..%d)", i,
               devlist[i], count - 1);
  nccl = (ncclComm_t *)calloc((size_t)ndev, sizeof *nccl);
  jobs = (rank_job *)calloc((size_t)ndev, sizeof *jobs);
  devs = (int *)calloc((size_t)ndev, sizeof *devs);
  if (nccl == NULL || jobs == NULL || devs == NULL) {
    res = loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
    goto fail;
  }
  for (int i = 0; i < ndev; i++) devs[i] = devlist ? devlist[i] : i;
  /* loom never uses NVLink multicast; keep NCCL from setting it up. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  NCCL_CHECK(ncclCommInitAll(nccl, ndev, devs));
  for (int i = 0; i < ndev; i++) {
    jobs[i].nccl = nccl[i];
    jobs[i].device = devs[i];
    jobs[i].cfg = &cfg;
  }
  res = run_ranks(ndev, jobs, create_rank);
  if (res != LOOM_SUCCESS) goto fail;
  for (int i = 0; i < ndev; i++) comms[i] = jobs[i].comm;
  free(nccl);
  free(jobs);
  free(devs);
  return LOOM_SUCCESS;
fail:;
  char msg[1024];
  loom_copy_error(msg, sizeof msg);
  if (jobs != NULL) {
    /* Tear down whatever was built, then NCCL comms nobody adopted. */
    rank_job *undo = (rank_job *)calloc((size_t)ndev, sizeof *undo);
    int any = 0;
    for (int i = 0; undo && i < ndev; i++) {
      undo[i].comm = jobs[i].comm;
      any |= jobs[i].comm != NULL;
    }
    if (undo && any) run_ranks(ndev, undo, destroy_rank);
    for (int i = 0; nccl && i < ndev; i++)
      if (jobs[i].comm == NULL && nccl[i] != NULL) ncclCommDestroy(nccl[i]);
    free(undo);
  }
  free(nccl);
  free(jobs);
  free(devs);
  return loom_set_error(res, "%s", msg);
}

/* ---- loopback world: several ranks on one device (testing) --------------- */

loom_result_t loom_comm_create_loopback(int nranks, const loom_comm_config_t *config,
                                        loom_comm_t *comms) {
  loom_clear_error();
  const char *fn = "loom_comm_create_loopback";
  LOOM_ARG(comms != NULL, fn, "comms is NULL");
  LOOM_ARG(nranks >= 1 && nranks <= LOOM_LOOPBACK_MAX_RANKS, fn,
           "nranks (%d) must be in [1, %d]", nranks, LOOM_LOOPBACK_MAX_RANKS);
  for (int i = 0; i < nranks; i++) comms[i] = NULL;
  loom_resolved_config cfg;
  loom_result_t res = loom_resolve_comm_config(fn, config, &cfg);
  if (res != LOOM_SUCCESS) return res;
  int dev = 0, sms = 0, l2 = 0;
  loom_loopback *lb = NULL;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  LOOM_ARG(sms / nranks >= 1, fn, "nranks (%d) exceeds the device's %d SMs", nranks, sms);
  const loom_window_layout layout =
      loom_window_layout_make(nranks, cfg.signal_slots, cfg.workspace_bytes);
  LOOM_CHECK(loom_loopback_create(nranks, layout.total_bytes, &lb));
  for (int r = 0; r < nranks; r++) {
    struct loom_comm *c = (struct loom_comm *)calloc(1, sizeof *c);
    if (c == NULL) {
      res = loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
      goto fail;
    }
    comms[r] = c;
    c->loopback = lb; /* one reference per rank, released by comm_release */
    c->rank = r;
    c->nranks = nranks;
    c->device = dev;
    c->sms = sms / nranks;
    c->l2_bytes = l2; /* the device's: shared by the world's ranks */
    c->config = cfg;
    c->layout = layout;
    c->window_base = loom_loopback_base(lb, r);
    c->window = loom_loopback_window(lb, r);
    if ((res = comm_alloc_control(c)) != LOOM_SUCCESS) goto fail;
    if ((res = comm_query_peer_bases(c)) != LOOM_SUCCESS) goto fail;
    c->magic = LOOM_COMM_MAGIC;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return LOOM_SUCCESS;
fail:;
  char msg[1024];
  loom_copy_error(msg, sizeof msg);
  int released = 0;
  for (int r = 0; r < nranks; r++) {
    if (comms[r] == NULL) continue;
    comm_release(comms[r]);
    free(comms[r]);
    comms[r] = NULL;
    released++;
  }
  /* ranks never built still hold their references */
  for (int r = released; lb != NULL && r < nranks; r++) loom_loopback_release(lb);
  return loom_set_error(res, "%s", msg);
}

loom_result_t loom_comm_destroy(loom_comm_t comm) {
  loom_clear_error();
  if (comm == NULL) return LOOM_SUCCESS;
  loom_result_t res = loom_check_comm("loom_comm_destroy", comm);
  if (res != LOOM_SUCCESS) return res;
  comm->magic = 0;
  res = comm_release(comm);
  free(comm);
  return res;
}

loom_result_t loom_comm_destroy_all(int n, loom_comm_t *comms) {
  loom_clear_error();
  const char *fn = "loom_comm_destroy_all";
  LOOM_ARG(n >= 0, fn, "n (%d) is negative", n);
  if (n == 0) return LOOM_SUCCESS;
  LOOM_ARG(comms != NULL, fn, "comms is NULL");
  for (int i = 0; i < n; i++) {
    if (comms[i] == NULL) continue;
    LOOM_ARG(comms[i]->magic == LOOM_COMM_MAGIC, fn,
             "comms[%d] is not a live loom communicator", i);
    /* one handle twice would be destroyed (and freed) by two threads */
    for (int j = 0; j < i; j++)
      LOOM_ARG(comms[j] != comms[i], fn, "comms[%d] and comms[%d] are the same communicator", j, i);
  }
  rank_job *jobs = (rank_job *)calloc((size_t)n, sizeof *jobs);
  if (jobs == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int i = 0; i < n; i++) jobs[i].comm = comms[i];
  loom_result_t res = run_ranks(n, jobs, destroy_rank);
  for (int i = 0; i < n; i++) comms[i] = NULL;
  free(jobs);
  return res;
}
