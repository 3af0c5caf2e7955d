/*
 * The device runtime's C-visible surface: the communicator view every loom
 * kernel receives by value, and the host-callable wrappers around NCCL's
 * device API (which is C++ and stays inside transport.cu).
 */
#ifndef LOOM_TRANSPORT_H
#define LOOM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel knows about its communicator. Passed by value (kernel
 * parameter space), 88 bytes. */
typedef struct {
  ncclWindow_t window;      /* symmetric window (device-side handle) */
  int rank;                 /* world rank == LSA rank (checked at create) */
  int nranks;
  int slots;                /* signal slots per source rank */
  int op;                   /* loom_op_id, for fault records */
  int sms;                  /* SMs a persistent kernel may fill: the device's,
                               or this rank's share in a loopback world */
  size_t flags_offset;      /* start of the signal flags in the window */
  size_t data_offset;       /* start of the data region in the window */
  size_t ll_offset;         /* start of the tagged-store region (layout.h) */
  size_t ll_bytes;          /* its bytes (0: one rank, none) */
  uint64_t timeout_ns;      /* bound on every wait */
  loom_ctrl *ctrl;          /* this rank's control block (device memory) */
  loom_fault_record *fault; /* device alias of the mapped host record */
} loom_dev_comm;

/* Create/destroy NCCL's device communicator for `nccl`. On success *handle
 * owns an ncclDevComm (opaque to C) and *lsa_size is the number of ranks
 * reachable by load/store (== nranks on one NVLink domain). Collective. */
ncclResult_t loom_devcomm_create(ncclComm_t nccl, void **handle, int *lsa_size);
ncclResult_t loom_devcomm_destroy(ncclComm_t nccl, void *handle);

/* A loopback world's window struct for `rank` (device memory): rank p's
 * bytes at flat_base + p * stride4g * 4 GiB (src/host/loopback.c). */
cudaError_t loom_loopback_window_create(char *flat_base, unsigned stride4g, int rank,
                                        ncclWindow_t *out);
cudaError_t loom_loopback_window_destroy(ncclWindow_t window);

/* host_out[p] = rank p's window base as this GPU addresses it (device
 * pointers, for launch parameters that name peer memory). Synchronous; the
 * current device must be the window's. */
cudaError_t loom_window_peer_bases(ncclWindow_t window, int nranks, void **host_out);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_TRANSPORT_H */
