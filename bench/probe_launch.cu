// Probe (session 22, docs/collective_gemm.md "Session 22"): what a persistent
// one-block-per-SM launch costs around its work, the part of the collective
// GEMMs' floor that is not their kernel body (the CLI's median is ~8-9 us
// above the kernel's last stamp). Every variant runs an (almost) empty kernel
// of 1 block per SM x 384 threads and is timed as the CLI times a forward:
// an event before and after each launch, back to back, median of the
// per-launch times ("ev"), and also as the throughput of back-to-back launches
// with no events between them ("q", total / launches). Each launch stamps its
// blocks' first and last globaltimer; "body" is last block end - first block
// start (median), so ev - body is the launch, block start-up and teardown.
// Variants, each adding to the one before unless said:
//   plain      no shared memory, plain launch
//   smem       200 KB dynamic shared memory (the engine's ring)
//   coop       + the cooperative attribute (as coll_launch)
//   param      + a 2.5 KB __grid_constant__ parameter block (ag_kparams-sized)
//   end        + loom_kernel_end's pattern: every block __threadfence + one
//              atomic add, the last block resets words and fences again
//   end-sys    + the last block's release store at system scope
//   pdl        end-sys launched with programmatic stream serialization too
//              (the kernel calls griddepcontrol.launch_dependents first and
//              griddepcontrol.wait before its first global access)
//   pdl-nocoop pdl without the cooperative attribute
// Build: make build/bench/probe_launch; run: build/bench/probe_launch
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define THREADS 384
#define SMEM (200 * 1024)
#define PARAM_BYTES 2560

struct big_param {
  unsigned char pad[PARAM_BYTES];
};

struct ctrl_t {
  unsigned blocks_done;
  unsigned pad;
  unsigned long long epoch, word1, word2, flag;
};

static __device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* END: 0 none, 1 loom_kernel_end's gpu-scope pattern, 2 plus a system-scope
 * release store by the last block; PDL: griddepcontrol at entry. */
template <int END, int PDL>
__global__ void __launch_bounds__(THREADS, 1) k_probe(const __grid_constant__ big_param p, ctrl_t *ctrl,
                                                      unsigned long long *stamps, int use_param) {
  if (PDL) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  if (threadIdx.x == 0) stamps[2 * blockIdx.x] = gtimer();
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long e = ctrl->epoch + (use_param ? p.pad[blockIdx.x % PARAM_BYTES] : 0);
    if (END >= 1) {
      __threadfence();
      unsigned done = atomicAdd(&ctrl->blocks_done, 1u);
      last = done == gridDim.x - 1;
      if (last) {
        ctrl->blocks_done = 0;
        ctrl->word1 = 0;
        ctrl->word2 = 0;
        ctrl->epoch = e + 1;
        __threadfence();
      }
    } else {
      last = 0;
    }
    stamps[2 * blockIdx.x + 1] = gtimer();
  }
  __syncthreads();
  if (END >= 2 && last && threadIdx.x == 0)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&ctrl->flag), "l"(1ull) : "memory");
}

struct variant {
  const char *name;
  int smem, coop, param, end, pdl;
};

static void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

template <int END, int PDL> static void *kernel_of() { return (void *)k_probe<END, PDL>; }

static void *pick(int end, int pdl) {
  if (pdl) return end == 2 ? kernel_of<2, 1>() : end == 1 ? kernel_of<1, 1>() : kernel_of<0, 1>();
  return end == 2 ? kernel_of<2, 0>() : end == 1 ? kernel_of<1, 0>() : kernel_of<0, 0>();
}

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  ctrl_t *ctrl;
  unsigned long long *stamps;
  check(cudaMalloc(&ctrl, sizeof *ctrl), "malloc");
  check(cudaMemset(ctrl, 0, sizeof *ctrl), "memset");
  const int N = 200;
  check(cudaMalloc(&stamps, (size_t)N * 2 * sms * sizeof *stamps), "malloc");
  std::vector<unsigned long long> hs((size_t)N * 2 * sms);
  big_param bp;
  for (int i = 0; i < PARAM_BYTES; i++) bp.pad[i] = 0;
  const variant vs[] = {
      {"plain", 0, 0, 0, 0, 0},      {"smem", 1, 0, 0, 0, 0},   {"coop", 1, 1, 0, 0, 0},
      {"param", 1, 1, 1, 0, 0},      {"end", 1, 1, 1, 1, 0},    {"end-sys", 1, 1, 1, 2, 0},
      {"pdl", 1, 1, 1, 2, 1},        {"pdl-nocoop", 1, 0, 1, 2, 1},
  };
  cudaEvent_t e0[N], e1[N], q0, q1;
  for (int i = 0; i < N; i++) {
    check(cudaEventCreate(&e0[i]), "event");
    check(cudaEventCreate(&e1[i]), "event");
  }
  check(cudaEventCreate(&q0), "event");
  check(cudaEventCreate(&q1), "event");
  printf("probe_launch: %d blocks x %d threads, %d SMs; N = %d launches per measurement\n", sms, THREADS, sms, N);
  printf("%-11s %8s %8s %8s %8s %8s\n", "variant", "ev_med", "ev_min", "body_med", "ev-body", "q_per");
  for (int rep = 0; rep < 2; rep++)
    for (const variant &v : vs) {
      void *k = pick(v.end, v.pdl);
      check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM), "smem attr");
      cudaLaunchAttribute attr[2];
      int na = 0;
      if (v.coop) {
        attr[na].id = cudaLaunchAttributeCooperative;
        attr[na].val.cooperative = 1;
        na++;
      }
      if (v.pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
      }
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(sms);
      cfg.blockDim = dim3(THREADS);
      cfg.dynamicSmemBytes = v.smem ? SMEM : 0;
      cfg.stream = s;
      cfg.attrs = attr;
      cfg.numAttrs = na;
      int use_param = v.param;
      auto launch = [&](int i) {
        unsigned long long *st = stamps + (size_t)i * 2 * sms;
        void *args[] = {&bp, &ctrl, &st, &use_param};
        check(cudaLaunchKernelExC(&cfg, k, args), v.name);
      };
      for (int i = 0; i < 20; i++) launch(0);
      /* the CLI's way: events around each launch */
      for (int i = 0; i < N; i++) {
        check(cudaEventRecord(e0[i], s), "record");
        launch(i);
        check(cudaEventRecord(e1[i], s), "record");
      }
      check(cudaStreamSynchronize(s), v.name);
      std::vector<double> ev(N), body(N);
      for (int i = 0; i < N; i++) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0[i], e1[i]), "elapsed");
        ev[i] = ms * 1e3;
      }
      check(cudaMemcpy(hs.data(), stamps, hs.size() * sizeof hs[0], cudaMemcpyDeviceToHost), "copy");
      for (int i = 0; i < N; i++) {
        unsigned long long b = ~0ull, e = 0;
        for (int j = 0; j < sms; j++) {
          b = std::min(b, hs[(size_t)i * 2 * sms + 2 * j]);
          e = std::max(e, hs[(size_t)i * 2 * sms + 2 * j + 1]);
        }
        body[i] = (double)(e - b) / 1e3;
      }
      /* back to back, no events between */
      check(cudaEventRecord(q0, s), "record");
      for (int i = 0; i < N; i++) launch(i);
      check(cudaEventRecord(q1, s), "record");
      check(cudaStreamSynchronize(s), v.name);
      float qms = 0;
      check(cudaEventElapsedTime(&qms, q0, q1), "elapsed");
      std::vector<double> evs = ev, bodys = body;
      std::sort(evs.begin(), evs.end());
      std::sort(bodys.begin(), bodys.end());
      const double em = evs[N / 2], bm = bodys[N / 2];
      printf("%-11s %8.2f %8.2f %8.2f %8.2f %8.2f\n", v.name, em, evs[0], bm, em - bm, qms * 1e3 / N);
    }
  return 0;
}
