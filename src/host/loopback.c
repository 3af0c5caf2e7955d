/*
 * Loopback worlds: several loom ranks on one CUDA device, for testing the
 * multi-rank protocols (dispatch, signals, credits, faults) where only one
 * GPU is at hand.
 *
 * A kernel reaches rank p's window at flat_base + p * stride + offset, with
 * stride a multiple of 4 GiB (NCCL's symmetric-window arithmetic, which the
 * kernels use through ncclGetLsaPointer). Here the flat range is reserved
 * with the driver's virtual-memory calls and one physical allocation of
 * the window's size is mapped at the start of every rank's 4 GiB slot, so
 * the kernels run unchanged. The driver calls are looked up at run time
 * through the runtime (cudaGetDriverEntryPointByVersion): libloom does not
 * link libcuda, so it still loads on machines without a driver.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "internal.h"

typedef CUresult (*pfn_granularity)(size_t *, const CUmemAllocationProp *,
                                    CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_addr_free)(CUdeviceptr, size_t);
typedef CUresult (*pfn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                               unsigned long long);
typedef CUresult (*pfn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                            unsigned long long);
typedef CUresult (*pfn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

typedef struct {
  pfn_granularity granularity;
  pfn_reserve reserve;
  pfn_addr_free addr_free;
  pfn_create create;
  pfn_release release;
  pfn_map map;
  pfn_unmap unmap;
  pfn_set_access set_access;
} vmm_api;

struct loom_loopback {
  int nranks, device, refs; /* refs: communicators still using it */
  vmm_api api;
  CUdeviceptr va;           /* nranks * stride bytes reserved */
  size_t stride;            /* multiple of 4 GiB */
  size_t bytes;             /* mapped per rank (window rounded to the granularity) */
  int mapped;               /* ranks mapped so far */
  CUmemGenericAllocationHandle handle[LOOM_LOOPBACK_MAX_RANKS];
  ncclWindow_t window[LOOM_LOOPBACK_MAX_RANKS]; /* device structs (transport.cu) */
  pthread_mutex_t lock;
};

static loom_result_t lookup(const char *name, void **fn) {
  enum cudaDriverEntryPointQueryResult q;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL)
    return loom_set_error(LOOM_CUDA_ERROR, "loopback world: driver entry point %s not found (%s)",
                          name, cudaGetErrorString(e));
  return LOOM_SUCCESS;
}

static loom_result_t vmm_load(vmm_api *a) {
  loom_result_t res;
#define LOAD(field, name)                                                      \
  if ((res = lookup(name, (void **)&a->field)) != LOOM_SUCCESS) return res
  LOAD(granularity, "cuMemGetAllocationGranularity");
  LOAD(reserve, "cuMemAddressReserve");
  LOAD(addr_free, "cuMemAddressFree");
  LOAD(create, "cuMemCreate");
  LOAD(release, "cuMemRelease");
  LOAD(map, "cuMemMap");
  LOAD(unmap, "cuMemUnmap");
  LOAD(set_access, "cuMemSetAccess");
#undef LOAD
  return LOOM_SUCCESS;
}

#define CU_CHECK(call)                                                         \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      res = loom_set_error(r_ == CUDA_ERROR_OUT_OF_MEMORY ? LOOM_OUT_OF_MEMORY \
                                                          : LOOM_CUDA_ERROR,   \
                           "loopback world: %s failed (CUresult %d)", #call,   \
                           (int)r_);                                           \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

static void loopback_free(loom_loopback *lb) {
  for (int r = 0; r < lb->nranks; r++)
    if (lb->window[r] != NULL) loom_loopback_window_destroy(lb->window[r]);
  for (int r = 0; r < lb->mapped; r++) {
    lb->api.unmap(lb->va + (CUdeviceptr)r * lb->stride, lb->bytes);
    lb->api.release(lb->handle[r]);
  }
  if (lb->va != 0) lb->api.addr_free(lb->va, (size_t)lb->nranks * lb->stride);
  pthread_mutex_destroy(&lb->lock);
  free(lb);
}

loom_result_t loom_loopback_create(int nranks, size_t window_bytes, loom_loopback **out) {
  loom_result_t res = LOOM_SUCCESS;
  *out = NULL;
  loom_loopback *lb = (loom_loopback *)calloc(1, sizeof *lb);
  if (lb == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "loopback world: out of host memory");
  pthread_mutex_init(&lb->lock, NULL);
  lb->nranks = nranks;
  lb->refs = nranks;
  CUDA_CHECK(cudaGetDevice(&lb->device));
  LOOM_CHECK(vmm_load(&lb->api));
  {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = lb->device;
    size_t g = 0;
    CU_CHECK(lb->api.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    lb->bytes = (window_bytes + g - 1) / g * g;
    const size_t four_g = (size_t)1 << 32;
    lb->stride = (lb->bytes + four_g - 1) / four_g * four_g;
    CU_CHECK(lb->api.reserve(&lb->va, (size_t)nranks * lb->stride, four_g, 0, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int r = 0; r < nranks; r++) {
      const CUdeviceptr at = lb->va + (CUdeviceptr)r * lb->stride;
      CU_CHECK(lb->api.create(&lb->handle[r], lb->bytes, &prop, 0));
      if (lb->api.map(at, lb->bytes, 0, lb->handle[r], 0) != CUDA_SUCCESS) {
        lb->api.release(lb->handle[r]);
        res = loom_set_error(LOOM_CUDA_ERROR, "loopback world: cuMemMap of rank %d failed", r);
        goto fail;
      }
      lb->mapped = r + 1;
      CU_CHECK(lb->api.set_access(at, lb->bytes, &access, 1));
      CUDA_CHECK(cudaMemset((void *)at, 0, lb->bytes));
    }
    for (int r = 0; r < nranks; r++)
      CUDA_CHECK(loom_loopback_window_create((char *)lb->va, (unsigned)(lb->stride >> 32), r,
                                             &lb->window[r]));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  *out = lb;
  return LOOM_SUCCESS;
fail:;
  char msg[1024];
  loom_copy_error(msg, sizeof msg);
  loopback_free(lb);
  return loom_set_error(res, "%s", msg);
}

void *loom_loopback_base(const loom_loopback *lb, int rank) {
  return (void *)(lb->va + (CUdeviceptr)rank * lb->stride);
}

ncclWindow_t loom_loopback_window(const loom_loopback *lb, int rank) { return lb->window[rank]; }

void loom_loopback_release(loom_loopback *lb) {
  pthread_mutex_lock(&lb->lock);
  const int left = --lb->refs;
  pthread_mutex_unlock(&lb->lock);
  if (left > 0) return;
  cudaSetDevice(lb->device);
  cudaDeviceSynchronize();
  loopback_free(lb);
}
