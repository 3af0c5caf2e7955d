/*
 * `loom info`: what the machine offers loom, measured with loom's own
 * transport: GPUs, NVLink state, peer access, NCCL version, then the
 * load/store put bandwidth of every ordered GPU pair (one at a time) and of
 * a ring exchange on all GPUs at once.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cli.h"
#include "loom.h"
#include "host/internal.h"
#include "device/ops/ops.h"

#define INFO_MAX_GPUS 64

#define CUDA_OR_FAIL(call)                                                     \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "loom info: %s: %s\n", #call, cudaGetErrorString(e_));   \
      goto out;                                                                \
    }                                                                          \
  } while (0)

#define LOOM_OR_FAIL(call)                                                     \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    if (r_ != LOOM_SUCCESS) {                                                  \
      fprintf(stderr, "loom info: %s: %s: %s\n", #call, loom_result_string(r_), \
              loom_last_error());                                              \
      goto out;                                                                \
    }                                                                          \
  } while (0)

/* Active NVLink links of a GPU through NVML, loaded at run time so loom
 * does not link against the driver's library. -1 when NVML is missing. */
static int nvlink_active_links(const char *pci_bus_id) {
  typedef int (*init_fn)(void);
  typedef int (*by_pci_fn)(const char *, void **);
  typedef int (*state_fn)(void *, unsigned, int *);
  static void *lib;
  static int inited;
  if (!inited) {
    inited = 1;
    lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    if (lib != NULL) {
      init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
      if (init == NULL || init() != 0) lib = NULL;
    }
  }
  if (lib == NULL) return -1;
  by_pci_fn by_pci = (by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  state_fn state = (state_fn)dlsym(lib, "nvmlDeviceGetNvLinkState");
  void *dev;
  if (by_pci == NULL || state == NULL || by_pci(pci_bus_id, &dev) != 0) return -1;
  int active = 0;
  for (unsigned link = 0; link < 18; link++) {
    int on = 0;
    if (state(dev, link, &on) == 0 && on) active++;
  }
  return active;
}

static void print_gpus(int ngpu) {
  int drv = 0, rt = 0, nccl = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  printf("loom %d.%d.%d  CUDA driver %d.%d runtime %d.%d  NCCL %d.%d.%d\n",
         LOOM_VERSION_MAJOR, LOOM_VERSION_MINOR, LOOM_VERSION_PATCH, drv / 1000,
         drv % 1000 / 10, rt / 1000, rt % 1000 / 10, nccl / 10000, nccl % 10000 / 100,
         nccl % 100);
  printf("\nGPUs (%d)\n", ngpu);
  for (int g = 0; g < ngpu; g++) {
    struct cudaDeviceProp p;
    char bus[32] = "?";
    if (cudaGetDeviceProperties(&p, g) != cudaSuccess) continue;
    cudaDeviceGetPCIBusId(bus, sizeof bus, g);
    int links = nvlink_active_links(bus);
    printf("  %d  %-22s sm_%d%d  %3d SMs  %6.1f GiB  L2 %2d MiB  %s  NVLink links %s",
           g, p.name, p.major, p.minor, p.multiProcessorCount,
           (double)p.totalGlobalMem / (1 << 30), p.l2CacheSize >> 20, bus,
           links < 0 ? "n/a" : "");
    if (links >= 0) printf("%d", links);
    printf("\n");
  }
  printf("\nPeer access (P2P = load/store capable, A = native atomics)\n      ");
  for (int j = 0; j < ngpu; j++) printf("  GPU%-3d", j);
  printf("\n");
  for (int i = 0; i < ngpu; i++) {
    printf("  GPU%-2d", i);
    for (int j = 0; j < ngpu; j++) {
      int can = 0, atom = 0;
      if (i == j) {
        printf("  %-6s", "X");
        continue;
      }
      cudaDeviceCanAccessPeer(&can, i, j);
      cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, i, j);
      printf("  %-6s", can ? (atom ? "P2P+A" : "P2P") : "--");
    }
    printf("\n");
  }
}

int cli_info(const cli_options *o) {
  int rc = 1, ngpu = 0;
  loom_comm_t comms[INFO_MAX_GPUS] = {0};
  void *src[INFO_MAX_GPUS] = {0}, *dst[INFO_MAX_GPUS] = {0};
  cudaStream_t stream[INFO_MAX_GPUS] = {0};
  cudaEvent_t ev0[INFO_MAX_GPUS] = {0}, ev1[INFO_MAX_GPUS] = {0};
  double bw[INFO_MAX_GPUS][INFO_MAX_GPUS];
  const size_t bytes = (size_t)o->bytes / 16 * 16;

  CUDA_OR_FAIL(cudaGetDeviceCount(&ngpu));
  if (o->gpus > 0) {
    if (o->gpus > ngpu) {
      fprintf(stderr, "loom info: --gpus %d but only %d visible\n", o->gpus, ngpu);
      goto out;
    }
    ngpu = o->gpus;
  }
  if (ngpu > INFO_MAX_GPUS) ngpu = INFO_MAX_GPUS;
  if (bytes == 0) {
    fprintf(stderr, "loom info: --bytes must be at least 16\n");
    goto out;
  }
  print_gpus(ngpu);

  size_t ring_ws;
  LOOM_OR_FAIL(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, ngpu, bytes, &ring_ws));
  loom_comm_config_t cfg = LOOM_COMM_CONFIG_INIT;
  cfg.workspace_bytes = (int64_t)(ring_ws > bytes ? ring_ws : bytes);
  LOOM_OR_FAIL(loom_comm_create_all(ngpu, NULL, &cfg, comms));
  for (int g = 0; g < ngpu; g++) {
    CUDA_OR_FAIL(cudaSetDevice(g));
    CUDA_OR_FAIL(cudaStreamCreateWithFlags(&stream[g], cudaStreamNonBlocking));
    CUDA_OR_FAIL(cudaEventCreate(&ev0[g]));
    CUDA_OR_FAIL(cudaEventCreate(&ev1[g]));
    CUDA_OR_FAIL(cudaMalloc(&src[g], bytes));
    CUDA_OR_FAIL(cudaMalloc(&dst[g], bytes));
    CUDA_OR_FAIL(cudaMemset(src[g], (g * 37 + 1) & 0xff, bytes));
    CUDA_OR_FAIL(cudaDeviceSynchronize());
  }

  /* Every ordered pair alone: GPU i stores `bytes` into GPU j's window. */
  printf("\nLSA put bandwidth, GB/s (row = source, column = destination; %zu MiB x %d, "
         "one pair at a time; diagonal = local window)\n      ",
         bytes >> 20, o->iters);
  for (int j = 0; j < ngpu; j++) printf("  GPU%-4d", j);
  printf("\n");
  double worst = 1e30, best = 0;
  for (int i = 0; i < ngpu; i++) {
    CUDA_OR_FAIL(cudaSetDevice(i));
    loom_dev_comm dc = loom_comm_dev_view(comms[i], LOOM_OP_PUT_BENCH);
    printf("  GPU%-2d", i);
    for (int j = 0; j < ngpu; j++) {
      for (int it = 0; it < o->warmup; it++)
        CUDA_OR_FAIL(loom_launch_put_bench(&dc, j, src[i], bytes, stream[i]));
      CUDA_OR_FAIL(cudaEventRecord(ev0[i], stream[i]));
      for (int it = 0; it < o->iters; it++)
        CUDA_OR_FAIL(loom_launch_put_bench(&dc, j, src[i], bytes, stream[i]));
      CUDA_OR_FAIL(cudaEventRecord(ev1[i], stream[i]));
      CUDA_OR_FAIL(cudaEventSynchronize(ev1[i]));
      float ms;
      CUDA_OR_FAIL(cudaEventElapsedTime(&ms, ev0[i], ev1[i]));
      bw[i][j] = (double)bytes * o->iters / (ms * 1e-3) / 1e9;
      printf("  %7.1f", bw[i][j]);
      if (i != j && bw[i][j] < worst) worst = bw[i][j];
      if (i != j && bw[i][j] > best) best = bw[i][j];
    }
    printf("\n");
  }
  if (ngpu > 1) printf("  off-diagonal: min %.1f GB/s, max %.1f GB/s\n", worst, best);

  /* All GPUs at once: ring exchange (put + signal + bounded wait + copy-in). */
  for (int it = 0; it < o->warmup + 1; it++)
    for (int g = 0; g < ngpu; g++)
      LOOM_OR_FAIL(loom_exchange(comms[g], LOOM_EXCHANGE_RING, src[g], dst[g], bytes, stream[g]));
  for (int g = 0; g < ngpu; g++) {
    CUDA_OR_FAIL(cudaSetDevice(g));
    CUDA_OR_FAIL(cudaStreamSynchronize(stream[g]));
  }
  for (int g = 0; g < ngpu; g++) {
    /* the ring delivered the left neighbour's fill byte, first and last */
    unsigned char first, last;
    const int left = (g - 1 + ngpu) % ngpu;
    CUDA_OR_FAIL(cudaSetDevice(g));
    CUDA_OR_FAIL(cudaMemcpy(&first, dst[g], 1, cudaMemcpyDeviceToHost));
    CUDA_OR_FAIL(cudaMemcpy(&last, (char *)dst[g] + bytes - 1, 1, cudaMemcpyDeviceToHost));
    if (first != ((left * 37 + 1) & 0xff) || last != first) {
      fprintf(stderr, "loom info: ring exchange delivered wrong data on GPU %d\n", g);
      goto out;
    }
  }
  for (int g = 0; g < ngpu; g++) {
    CUDA_OR_FAIL(cudaSetDevice(g));
    CUDA_OR_FAIL(cudaEventRecord(ev0[g], stream[g]));
  }
  for (int it = 0; it < o->iters; it++)
    for (int g = 0; g < ngpu; g++)
      LOOM_OR_FAIL(loom_exchange(comms[g], LOOM_EXCHANGE_RING, src[g], dst[g], bytes, stream[g]));
  printf("\nRing exchange on all %d GPUs at once (%zu MiB per GPU per call, x %d)\n", ngpu,
         bytes >> 20, o->iters);
  for (int g = 0; g < ngpu; g++) {
    float ms;
    CUDA_OR_FAIL(cudaSetDevice(g));
    CUDA_OR_FAIL(cudaEventRecord(ev1[g], stream[g]));
    CUDA_OR_FAIL(cudaEventSynchronize(ev1[g]));
    CUDA_OR_FAIL(cudaEventElapsedTime(&ms, ev0[g], ev1[g]));
    printf("  GPU%-2d egress %7.1f GB/s  (%.1f us per call)\n", g,
           (double)bytes * o->iters / (ms * 1e-3) / 1e9, ms * 1e3 / o->iters);
  }
  for (int g = 0; g < ngpu; g++) {
    loom_result_t async;
    LOOM_OR_FAIL(loom_comm_get_async_error(comms[g], &async));
    if (async != LOOM_SUCCESS) {
      fprintf(stderr, "loom info: GPU %d: %s\n", g, loom_last_error());
      goto out;
    }
  }
  rc = 0;
out:
  for (int g = 0; g < ngpu; g++) {
    cudaSetDevice(g);
    if (src[g]) cudaFree(src[g]);
    if (dst[g]) cudaFree(dst[g]);
    if (stream[g]) cudaStreamDestroy(stream[g]);
    if (ev0[g]) cudaEventDestroy(ev0[g]);
    if (ev1[g]) cudaEventDestroy(ev1[g]);
  }
  if (loom_comm_destroy_all(ngpu, comms) != LOOM_SUCCESS) {
    fprintf(stderr, "loom info: destroy: %s\n", loom_last_error());
    rc = 1;
  }
  return rc;
}
