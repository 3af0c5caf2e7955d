/*
 * Host side of the transport: NCCL device-communicator lifetime. The only
 * translation unit (with transport.cuh) that includes nccl_device.h.
 */
#include <stdlib.h>
#include <string.h>

#include <nccl.h>
#include <nccl_device.h>

#include "transport.h"

extern "C" ncclResult_t loom_devcomm_create(ncclComm_t nccl, void **handle,
                                            int *lsa_size) {
  ncclDevComm *dev = (ncclDevComm *)calloc(1, sizeof(ncclDevComm));
  if (dev == NULL) return ncclSystemError;
  /* No barriers, multimem or GIN resources: loom keeps its own flags in its
   * window. Newer NCCL versions require the initializer macro. */
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof(reqs));
#endif
  reqs.lsaMultimem = false;
  ncclResult_t r = ncclDevCommCreate(nccl, &reqs, dev);
  if (r != ncclSuccess) {
    free(dev);
    return r;
  }
  *lsa_size = dev->lsaSize;
  *handle = dev;
  return ncclSuccess;
}

extern "C" ncclResult_t loom_devcomm_destroy(ncclComm_t nccl, void *handle) {
  if (handle == NULL) return ncclSuccess;
  ncclResult_t r = ncclDevCommDestroy(nccl, (ncclDevComm *)handle);
  free(handle);
  return r;
}

/* A loopback world's window for `rank` (src/host/loopback.c): the struct
 * ncclGetLsaPointer reads, filled as NCCL fills its own: rank p's bytes at
 * flat_base + p * stride4g * 4 GiB. No multimem, no GIN. */
extern "C" cudaError_t loom_loopback_window_create(char *flat_base, unsigned stride4g, int rank,
                                                   ncclWindow_t *out) {
  struct ncclWindow_vidmem w;
  memset(&w, 0, sizeof w);
  w.lsaFlatBase = flat_base;
  w.lsaRank = rank;
  w.worldRank = rank;
  w.stride4G = stride4g;
  void *dev = NULL;
  cudaError_t e = cudaMalloc(&dev, sizeof w);
  if (e != cudaSuccess) return e;
  if ((e = cudaMemcpy(dev, &w, sizeof w, cudaMemcpyHostToDevice)) != cudaSuccess) {
    cudaFree(dev);
    return e;
  }
  *out = (ncclWindow_t)dev;
  return cudaSuccess;
}

extern "C" cudaError_t loom_loopback_window_destroy(ncclWindow_t window) {
  return cudaFree((void *)window);
}

/* Every rank's window base as this GPU addresses it (ncclGetLsaPointer at
 * offset 0), for launches whose parameters name peer addresses (the tile
 * engine's output pointers). */
__global__ void loom_peer_bases_kernel(ncclWindow_t window, int nranks, void **out) {
  for (int p = threadIdx.x; p < nranks; p += blockDim.x) out[p] = ncclGetLsaPointer(window, 0, p);
}

extern "C" cudaError_t loom_window_peer_bases(ncclWindow_t window, int nranks, void **host_out) {
  void **dev = NULL;
  cudaError_t e = cudaMalloc((void **)&dev, sizeof(void *) * (size_t)nranks);
  if (e != cudaSuccess) return e;
  loom_peer_bases_kernel<<<1, 64>>>(window, nranks, dev);
  e = cudaGetLastError();
  if (e == cudaSuccess)
    e = cudaMemcpy(host_out, dev, sizeof(void *) * (size_t)nranks, cudaMemcpyDeviceToHost);
  cudaFree(dev);
  return e;
}
