/* loom_exchange: validation and launch of the transport's test-bed kernel. */
#include "internal.h"
#include "../device/ops/ops.h"

loom_result_t loom_exchange_workspace_bytes(loom_exchange_t pattern, int nranks,
                                            size_t bytes_per_peer, size_t *bytes) {
  loom_clear_error();
  const char *fn = "loom_exchange_workspace_bytes";
  LOOM_ARG(pattern == LOOM_EXCHANGE_RING || pattern == LOOM_EXCHANGE_ALLTOALL, fn,
           "pattern (%d) is not a loom_exchange_t", (int)pattern);
  LOOM_ARG(nranks >= 1, fn, "nranks (%d) must be >= 1", nranks);
  LOOM_ARG(bytes_per_peer > 0, fn, "bytes_per_peer must be > 0");
  LOOM_ARG(bytes != NULL, fn, "bytes is NULL");
  const size_t nsrc = (size_t)loom_exchange_sources(pattern == LOOM_EXCHANGE_RING, nranks);
  const size_t stride = loom_exchange_stride(bytes_per_peer);
  LOOM_ARG(bytes_per_peer <= ((size_t)1 << 40) / nsrc - LOOM_EXCHANGE_ROW_ALIGN, fn,
           "bytes_per_peer (%zu) is too large (max 2^40 / %zu sources)", bytes_per_peer, nsrc);
  *bytes = LOOM_EXCHANGE_PARITIES * nsrc * stride; /* see ops.h */
  return LOOM_SUCCESS;
}

loom_result_t loom_exchange(loom_comm_t comm, loom_exchange_t pattern, const void *sendbuf,
                            void *recvbuf, size_t bytes_per_peer, cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_exchange";
  loom_result_t res = loom_check_comm(fn, comm);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(pattern == LOOM_EXCHANGE_RING || pattern == LOOM_EXCHANGE_ALLTOALL, fn,
           "pattern (%d) is not a loom_exchange_t", (int)pattern);
  LOOM_ARG(sendbuf != NULL, fn, "sendbuf is NULL");
  LOOM_ARG(recvbuf != NULL, fn, "recvbuf is NULL");
  LOOM_ARG(bytes_per_peer > 0, fn, "bytes_per_peer must be > 0");
  const size_t blocks = pattern == LOOM_EXCHANGE_RING ? 1 : (size_t)comm->nranks;
  const char *s = (const char *)sendbuf, *r = (const char *)recvbuf;
  LOOM_ARG(s + blocks * bytes_per_peer <= r || r + blocks * bytes_per_peer <= s, fn,
           "sendbuf and recvbuf overlap");
  size_t need;
  res = loom_exchange_workspace_bytes(pattern, comm->nranks, bytes_per_peer, &need);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(need <= comm->config.workspace_bytes, fn,
           "bytes_per_peer (%zu) needs %zu workspace bytes but the communicator has %zu "
           "(see loom_exchange_workspace_bytes)",
           bytes_per_peer, need, comm->config.workspace_bytes);
  res = loom_comm_prepare_launch(fn, comm);
  if (res != LOOM_SUCCESS) return res;

  loom_dev_comm dc = loom_comm_dev_view(comm, LOOM_OP_EXCHANGE);
  loom_exchange_args a;
  a.ring = pattern == LOOM_EXCHANGE_RING;
  a.send = sendbuf;
  a.recv = recvbuf;
  a.bytes_per_peer = bytes_per_peer;
  a.suppress_signals = comm->inject_no_signal;
  CUDA_CHECK(loom_launch_exchange(&dc, &a, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}
