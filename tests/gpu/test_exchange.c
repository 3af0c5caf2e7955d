/*
 * GPU tests of the transport through loom_exchange (ring and all-to-all) on
 * 1, 2, 4 and 8 GPUs, skipping sizes the machine lacks:
 *
 *   test_exchange single   one process drives every GPU (loom_comm_create_all)
 *   test_exchange multi    one process per GPU: rank 0 makes the NCCL unique
 *                          id and hands it to the others through pipes
 *   test_exchange loopback one process, 2, 4 and 8 ranks on device 0
 *                          (loom_comm_create_loopback)
 *
 * Each case: fresh random data per rank and per call (a pure function of
 * seed, rank and call, so every process can compute what any rank sent),
 * receive buffers poisoned, three calls back to back without host sync (the
 * epoch and buffer parity must keep them apart), byte-exact verification.
 * Single mode also captures one call per rank into a CUDA graph (exactly one
 * kernel node) and replays it with new data. Fault case: one rank puts but
 * never signals; every other rank must report LOOM_TIMEOUT within
 * timeout + 1 s and the communicators must still be destroyed.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "reference/reference.h"
#include "host/internal.h"
#include "../check.h"
#include "gpu_check.h"
#include "ranks.h"

#define MAX_RANKS 8
#define CALLS 3
#define FAULT_TIMEOUT_MS 1000
#define CHILD_DEADLINE_S 240
static const uint64_t SEED = 0x5eed10057ull;
static const size_t SIZES[] = {1000, 65536 + 16, (3u << 20) + 4, 16u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define MAX_BPP (16u << 20)
#define PROG "test_exchange"


/* 8-byte word w of what `rank` sends to `dst` in call `call` (splitmix64). */
static uint64_t payload_word(int rank, int dst, int call, size_t w) {
  const uint64_t z = SEED ^ ((uint64_t)rank << 56) ^ ((uint64_t)dst << 48) ^
               ((uint64_t)call << 40) ^ w;
  return ref_splitmix64(z);
}

/* The message as bytes: out[0..bpp) of what rank sends dst in call. */
static void payload(int rank, int dst, int call, size_t bpp, unsigned char *out) {
  for (size_t b = 0; b < bpp; b += 8) {
    uint64_t w = payload_word(rank, dst, call, b >> 3);
    size_t n = bpp - b < 8 ? bpp - b : 8;
    memcpy(out + b, &w, n);
  }
}

/* Per-rank state: the ranks this process drives. */
typedef struct {
  loom_comm_t comm;
  int rank, device;
  cudaStream_t stream;
  void *send[CALLS], *recv[CALLS];
  unsigned char *host;
} rank_ctx;

static int ctx_setup(rank_ctx *c, int nranks) {
  const size_t bytes = (size_t)nranks * MAX_BPP;
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  for (int k = 0; k < CALLS; k++) {
    CUDA_T(cudaMalloc(&c->send[k], bytes));
    CUDA_T(cudaMalloc(&c->recv[k], bytes));
  }
  c->host = (unsigned char *)malloc(bytes);
  CHECK(c->host != NULL, "host buffer");
  return c->host ? 0 : -1;
}

static void ctx_free(rank_ctx *c) {
  cudaSetDevice(c->device);
  for (int k = 0; k < CALLS; k++) {
    cudaFree(c->send[k]);
    cudaFree(c->recv[k]);
  }
  if (c->stream) cudaStreamDestroy(c->stream);
  free(c->host);
}

/* Fill send buffers of call slot k with call `call`'s payload; poison recv. */
static int ctx_fill(rank_ctx *c, int nranks, int ring, size_t bpp, int k, int call) {
  const int ndst = ring ? 1 : nranks;
  for (int d = 0; d < ndst; d++) {
    const int dst = ring ? (c->rank + 1) % nranks : d;
    payload(c->rank, dst, call, bpp, c->host + (size_t)d * bpp);
  }
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaMemcpy(c->send[k], c->host, (size_t)ndst * bpp, cudaMemcpyHostToDevice));
  CUDA_T(cudaMemset(c->recv[k], 0xA5, (size_t)ndst * bpp));
  return 0;
}

/* Check recv slot k against what the senders of call `call` sent. */
static int ctx_verify(rank_ctx *c, int nranks, int ring, size_t bpp, int k, int call,
                      const char *what) {
  const int nsrc = ring ? 1 : nranks;
  CUDA_T(cudaSetDevice(c->device));
  CUDA_T(cudaMemcpy(c->host, c->recv[k], (size_t)nsrc * bpp, cudaMemcpyDeviceToHost));
  size_t bad = 0, first = 0;
  unsigned char *want = (unsigned char *)malloc(bpp);
  CHECK(want != NULL, "host buffer");
  if (want == NULL) return -1;
  for (int s = 0; s < nsrc; s++) {
    const int src = ring ? (c->rank - 1 + nranks) % nranks : s;
    payload(src, c->rank, call, bpp, want);
    for (size_t b = 0; b < bpp; b++)
      if (c->host[(size_t)s * bpp + b] != want[b] && bad++ == 0) first = (size_t)s * bpp + b;
  }
  free(want);
  CHECK(bad == 0, "%s: rank %d of %d, %s, %zu bytes/peer, call %d: %zu bytes wrong (first at %zu)",
        what, c->rank, nranks, ring ? "ring" : "all-to-all", bpp, call, bad, first);
  return bad == 0 ? 0 : -1;
}

/* The exchange cases over the ranks this process drives (n local of nranks). */
static int run_cases(rank_ctx *cs, int nlocal, int nranks, const char *mode) {
  int call = 0;
  for (int ring = 1; ring >= 0; ring--) {
    for (size_t si = 0; si < NSIZES; si++) {
      const size_t bpp = SIZES[si];
      for (int k = 0; k < CALLS; k++)
        for (int i = 0; i < nlocal; i++)
          if (ctx_fill(&cs[i], nranks, ring, bpp, k, call + k)) return -1;
      for (int i = 0; i < nlocal; i++) {
        CUDA_T(cudaSetDevice(cs[i].device));
        CUDA_T(cudaDeviceSynchronize());
      }
      /* back to back, no host sync between calls */
      for (int k = 0; k < CALLS; k++)
        for (int i = 0; i < nlocal; i++)
          LOOM_T(loom_exchange(cs[i].comm, ring ? LOOM_EXCHANGE_RING : LOOM_EXCHANGE_ALLTOALL,
                               cs[i].send[k], cs[i].recv[k], bpp, cs[i].stream));
      for (int i = 0; i < nlocal; i++) {
        CUDA_T(cudaSetDevice(cs[i].device));
        CUDA_T(cudaStreamSynchronize(cs[i].stream));
      }
      for (int i = 0; i < nlocal; i++) {
        if (check_no_async_error(cs[i].comm, cs[i].rank, mode)) return -1;
        for (int k = 0; k < CALLS; k++) ctx_verify(&cs[i], nranks, ring, bpp, k, call + k, mode);
      }
      call += CALLS;
    }
  }
  return 0;
}

/* One process: capture one all-to-all per rank, replay with fresh data. */
static int run_graph_case(rank_ctx *cs, int n) {
  const size_t bpp = 65536 + 16;
  cudaGraph_t graph[MAX_RANKS] = {0};
  cudaGraphExec_t exec[MAX_RANKS] = {0};
  for (int i = 0; i < n; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaStreamBeginCapture(cs[i].stream, cudaStreamCaptureModeThreadLocal));
    LOOM_T(loom_exchange(cs[i].comm, LOOM_EXCHANGE_ALLTOALL, cs[i].send[0], cs[i].recv[0], bpp,
                         cs[i].stream));
    CUDA_T(cudaStreamEndCapture(cs[i].stream, &graph[i]));
    size_t nodes = 0;
    CUDA_T(cudaGraphGetNodes(graph[i], NULL, &nodes));
    cudaGraphNode_t node;
    size_t one = 1;
    enum cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    if (nodes == 1 && cudaGraphGetNodes(graph[i], &node, &one) == cudaSuccess)
      cudaGraphNodeGetType(node, &type);
    CHECK(nodes == 1 && type == cudaGraphNodeTypeKernel,
          "graph of one exchange has %zu nodes (want exactly one kernel node)", nodes);
    CUDA_T(cudaGraphInstantiate(&exec[i], graph[i], 0));
  }
  for (int rep = 0; rep < 5; rep++) {
    const int call = 1000 + rep;
    for (int i = 0; i < n; i++)
      if (ctx_fill(&cs[i], n, 0, bpp, 0, call)) return -1;
    for (int i = 0; i < n; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      CUDA_T(cudaDeviceSynchronize());
    }
    for (int i = 0; i < n; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      CUDA_T(cudaGraphLaunch(exec[i], cs[i].stream));
    }
    for (int i = 0; i < n; i++) {
      CUDA_T(cudaSetDevice(cs[i].device));
      CUDA_T(cudaStreamSynchronize(cs[i].stream));
    }
    for (int i = 0; i < n; i++) {
      if (check_no_async_error(cs[i].comm, cs[i].rank, "graph replay")) return -1;
      ctx_verify(&cs[i], n, 0, bpp, 0, call, "graph replay");
    }
  }
  for (int i = 0; i < n; i++) {
    cudaSetDevice(cs[i].device);
    cudaGraphExecDestroy(exec[i]);
    cudaGraphDestroy(graph[i]);
  }
  return 0;
}

/* Fault: rank `silent` puts but never signals. Everyone else that expects
 * data from it (ring: its right neighbour; with 1 rank: itself) must time
 * out within timeout + 1 s and name it; the communicator then refuses work. */
static int run_fault_case(rank_ctx *cs, int nlocal, int nranks, int silent) {
  const size_t bpp = 65536;
  const int victim = (silent + 1) % nranks;
  for (int i = 0; i < nlocal; i++) {
    if (ctx_fill(&cs[i], nranks, 1, bpp, 0, 7)) return -1;
    cs[i].comm->inject_no_signal = cs[i].rank == silent;
  }
  double t0 = now_s();
  for (int i = 0; i < nlocal; i++)
    LOOM_T(loom_exchange(cs[i].comm, LOOM_EXCHANGE_RING, cs[i].send[0], cs[i].recv[0], bpp,
                         cs[i].stream));
  for (int i = 0; i < nlocal; i++) {
    CUDA_T(cudaSetDevice(cs[i].device));
    CUDA_T(cudaStreamSynchronize(cs[i].stream));
    const double waited = now_s() - t0;
    loom_result_t async;
    LOOM_T(loom_comm_get_async_error(cs[i].comm, &async));
    if (cs[i].rank == victim) {
      char expect[32];
      snprintf(expect, sizeof expect, "peer %d", silent);
      CHECK(async == LOOM_TIMEOUT, "rank %d: async error %s, expected timeout", cs[i].rank,
            loom_result_string(async));
      CHECK(strstr(loom_last_error(), expect) != NULL, "timeout message names %s: %s", expect,
            loom_last_error());
      CHECK(waited <= FAULT_TIMEOUT_MS / 1000.0 + 1.0,
            "rank %d returned after %.2f s (timeout %d ms + 1 s allowed)", cs[i].rank, waited,
            FAULT_TIMEOUT_MS);
      printf("fault: rank %d reported after %.2f s: %s\n", cs[i].rank, waited, loom_last_error());
      loom_result_t r = loom_exchange(cs[i].comm, LOOM_EXCHANGE_RING, cs[i].send[0],
                                      cs[i].recv[0], bpp, cs[i].stream);
      CHECK(r == LOOM_INVALID_USAGE, "after a timeout the communicator refuses work (got %s)",
            loom_result_string(r));
    } else {
      CHECK(async == LOOM_SUCCESS, "rank %d (not awaiting the silent rank) got %s: %s",
            cs[i].rank, loom_result_string(async), loom_last_error());
    }
  }
  return 0;
}

static loom_comm_config_t test_config(int nranks, int timeout_ms) {
  loom_comm_config_t cfg = LOOM_COMM_CONFIG_INIT;
  size_t ws = 0;
  loom_exchange_workspace_bytes(LOOM_EXCHANGE_ALLTOALL, nranks, MAX_BPP, &ws);
  cfg.workspace_bytes = (int64_t)ws;
  cfg.timeout_ms = timeout_ms;
  return cfg;
}

/* ---- one process, all GPUs (or, loopback, every rank on device 0) ------------ */

static ranks_mode g_mode = RANKS_SINGLE;

static int single_process(int n, int fault) {
  rank_ctx cs[MAX_RANKS];
  loom_comm_t comms[MAX_RANKS] = {0};
  memset(cs, 0, sizeof cs);
  loom_comm_config_t cfg = test_config(n, fault ? FAULT_TIMEOUT_MS : LOOM_UNSET);
  if (ranks_world_create(g_mode, n, &cfg, comms) != 0) return -1;
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    cs[i].comm = comms[i];
    cs[i].rank = i;
    cs[i].device = ranks_device(g_mode, i);
    rc = ctx_setup(&cs[i], n);
  }
  if (rc == 0) {
    if (fault) {
      rc = run_fault_case(cs, n, n, n - 1);
    } else {
      rc = run_cases(cs, n, n, "single-process");
      if (rc == 0) rc = run_graph_case(cs, n);
    }
  }
  for (int i = 0; i < n; i++) ctx_free(&cs[i]);
  loom_result_t r = loom_comm_destroy_all(n, comms);
  CHECK(r == LOOM_SUCCESS, "destroy_all: %s", loom_last_error());
  return rc;
}

/* ---- one process per GPU ----------------------------------------------------- */

static int child_rank(const ranks_child *rc, void *arg) {
  const int rank = rc->rank, n = rc->n, fault = *(const int *)arg;
  alarm(CHILD_DEADLINE_S);
  ncclUniqueId id;
  if (ranks_unique_id(rc, &id) != 0) return 1;
  rank_ctx c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.device = rank;
  ncclComm_t nccl;
  if (cudaSetDevice(rank) != cudaSuccess || ncclCommInitRank(&nccl, n, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: NCCL init failed\n", rank);
    return 1;
  }
  loom_comm_config_t cfg = test_config(n, fault ? FAULT_TIMEOUT_MS : LOOM_UNSET);
  loom_result_t r = loom_comm_create(nccl, &cfg, &c.comm);
  CHECK(r == LOOM_SUCCESS, "rank %d loom_comm_create: %s", rank, loom_last_error());
  if (r == LOOM_SUCCESS && ctx_setup(&c, n) == 0) {
    if (fault)
      run_fault_case(&c, 1, n, n - 1);
    else
      run_cases(&c, 1, n, "multi-process");
  }
  ctx_free(&c);
  r = loom_comm_destroy(c.comm);
  CHECK(r == LOOM_SUCCESS, "rank %d destroy: %s", rank, loom_last_error());
  ncclCommDestroy(nccl);
  char name[64];
  snprintf(name, sizeof name, "test_exchange multi rank %d/%d%s", rank, n, fault ? " fault" : "");
  return check_summary(name);
}

/* Fork n ranks; returns 0 when every one exits 0 before the deadline. */
static int multi_process(int n, int fault) {
  char what[32];
  snprintf(what, sizeof what, "n=%d%s", n, fault ? " fault" : "");
  return ranks_run(n, child_rank, &fault, what);
}

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (ranks_mode_parse(argc, argv, PROG, "", &g_mode) != 0) return RANKS_USAGE_EXIT;
  const int multi = g_mode == RANKS_MULTI;
  char name[64];
  snprintf(name, sizeof name, "%s %s", PROG, RANKS_MODE_NAMES[g_mode]);
  alarm(2 * CHILD_DEADLINE_S); /* a hang becomes a failure, never a stall */
  const int ngpu = ranks_mode_gpu_count(g_mode);
  if (ngpu == 0) {
    CHECK_SKIP("no GPU visible");
    return check_summary(name);
  }
  printf("%s: %d GPUs visible, seed 0x%llx\n", name, ngpu, (unsigned long long)SEED);
  const int sizes[] = {1, 2, 4, 8};
  for (int i = g_mode == RANKS_LOOPBACK ? 1 : 0; i < 4; i++) {
    const int n = sizes[i];
    if (!ranks_world_fits(g_mode, n, ngpu) || n > MAX_RANKS) {
      CHECK_SKIP("%d GPUs needed, %d visible", n, ngpu);
      continue;
    }
    for (int fault = 0; fault <= 1; fault++) {
      double t = now_s();
      if (multi)
        multi_process(n, fault);
      else
        single_process(n, fault);
      printf("  n=%d %s done in %.1f s (%d failed so far)\n", n, fault ? "fault" : "exchange",
             now_s() - t, check_failed_);
      fflush(stdout);
    }
  }
  return check_summary(name);
}
