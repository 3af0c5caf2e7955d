/*
 * The benchmark harness (harness.h): world, data, verification, timing,
 * bound and report for any operator described by a cli_op. The ceilings of
 * the bound are measured in ceilings.c.
 */
#include "harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/internal.h"
#include "reference/reference.h"

#define GEN_ROWS CLI_X_CHUNK_ROWS /* rows of x generated and uploaded at a time */
#define REF_TOKENS_PER_TASK 2
#define MAX_THREADS 256
#define MAX_FIELDS 16             /* JSON header fields of an operator */
#define BASELINE_DEADLINE_S 300   /* a baseline phase longer than this is a hang */

static const uint64_t SEED = 0x6c6f6f6d2d6d6f65ull;

const char *const cli_impl_names[2] = {"fused", "baseline"};

_Static_assert(LOOM_FP32 == 0 && LOOM_BF16 == 1 && LOOM_FP16 == 2 && CLI_NUM_DTYPES == 3,
               "cli_dtype_names follow loom_dtype_t");
_Static_assert(CLI_IMPL_FUSED == 1 << CLI_FUSED && CLI_IMPL_BASELINE == 1 << CLI_BASELINE,
               "--impl bits follow the implementation index");

/* ---- random numbers (splitmix64), one stream per (kind, index) ------------- */

typedef struct {
  uint64_t s;
} rng_t;

static rng_t rng_make(uint64_t a, uint64_t b, uint64_t c) {
  rng_t r;
  r.s = ref_splitmix64(SEED ^ ref_splitmix64(a ^ ref_splitmix64(b ^ ref_splitmix64(c))));
  return r;
}

/* Uniform in [-1, 1). */
static float rng_sym(rng_t *r) {
  r->s += 0x9e3779b97f4a7c15ull;
  return (float)((double)(ref_splitmix64(r->s) >> 11) * 0x1.0p-52 - 1.0);
}

void cli_fill_random(float *dst, size_t n, float scale, int kind, int64_t index, uint64_t salt,
                     loom_dtype_t t) {
  rng_t r = rng_make((uint64_t)kind, (uint64_t)index, salt);
  for (size_t i = 0; i < n; i++) dst[i] = rng_sym(&r) * scale;
  ref_round_array(dst, n, (int)t);
}

double cli_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct {
  cli_task_fn fn;
  void *ctx;
  int n;
  atomic_int next, failed;
} task_pool;

static void *pool_worker(void *p) {
  task_pool *pl = (task_pool *)p;
  for (int i; (i = atomic_fetch_add(&pl->next, 1)) < pl->n;)
    if (pl->fn(pl->ctx, i) != 0) atomic_store(&pl->failed, 1);
  return NULL;
}

int cli_run_tasks(int n, int threads, cli_task_fn fn, void *ctx) {
  task_pool pl;
  pl.fn = fn;
  pl.ctx = ctx;
  pl.n = n;
  atomic_init(&pl.next, 0);
  atomic_init(&pl.failed, 0);
  pthread_t th[MAX_THREADS];
  int started = 0;
  const int want = n < threads ? n : threads;
  for (int i = 1; i < want && i < MAX_THREADS; i++)
    if (pthread_create(&th[started], NULL, pool_worker, &pl) == 0) started++;
  pool_worker(&pl);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  return atomic_load(&pl.failed) ? -1 : 0;
}

typedef struct {
  cli_bench *b;
  cli_gpu_fn fn;
  int d, rc;
} gpu_job;

static void *gpu_thread(void *p) {
  gpu_job *j = (gpu_job *)p;
  j->rc = cudaSetDevice(j->d) == cudaSuccess ? j->fn(j->b, j->d) : -1;
  return NULL;
}

int cli_on_every_gpu(cli_bench *b, cli_gpu_fn fn) {
  gpu_job jobs[CLI_MAX_GPUS];
  pthread_t th[CLI_MAX_GPUS];
  int started[CLI_MAX_GPUS] = {0}, rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    jobs[d] = (gpu_job){b, fn, d, -1};
    started[d] = pthread_create(&th[d], NULL, gpu_thread, &jobs[d]) == 0;
    if (!started[d]) fprintf(stderr, "%s: GPU %d: could not start a thread\n", b->who, d);
  }
  for (int d = 0; d < b->ngpu; d++) {
    if (started[d]) pthread_join(th[d], NULL);
    if (jobs[d].rc != 0) rc = -1;
  }
  return rc;
}

/* A hung NCCL call cannot be interrupted: past the deadline the process
 * says so and exits rather than burn the machine's time. The message is
 * made before any deadline is set (cli_bench_main). */
static char deadline_msg[160];
static size_t deadline_len;

static void on_deadline(int sig) {
  (void)sig;
  if (write(2, deadline_msg, deadline_len) < 0) _exit(3);
  _exit(3);
}

static void deadline(int on) {
  signal(SIGALRM, on_deadline);
  alarm(on ? BASELINE_DEADLINE_S : 0);
}

int cli_sync_and_check(cli_bench *b) {
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) {
    CLI_CUDA_OK(b, cudaSetDevice(d));
    CLI_CUDA_OK(b, cudaStreamSynchronize(b->g[d].stream));
  }
  for (int d = 0; d < b->ngpu; d++) {
    loom_result_t async = LOOM_SUCCESS;
    CLI_LOOM_OK(b, loom_comm_get_async_error(b->comms[d], &async));
    if (async != LOOM_SUCCESS) {
      fprintf(stderr, "%s: GPU %d: %s: %s\n", b->who, d, loom_result_string(async),
              loom_last_error());
      rc = -1;
    }
  }
  return rc;
}

/* ---- setup -------------------------------------------------------------------- */

static int resolve_world(cli_bench *b, const cli_options *o) {
  int visible = 0;
  CLI_CUDA_OK(b, cudaGetDeviceCount(&visible));
  b->ngpu = o->gpus > 0 ? o->gpus : visible;
  if (b->ngpu > visible || b->ngpu > CLI_MAX_GPUS) {
    fprintf(stderr, "%s: --gpus %d but %d visible (at most %d)\n", b->who, b->ngpu, visible,
            CLI_MAX_GPUS);
    return -1;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  b->nthreads = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
  b->dtype = (loom_dtype_t)o->dtype;
  b->es = b->dtype == LOOM_FP32 ? 4 : 2;
  b->maxT = 1;
  for (int i = 0; i < o->ntokens; i++)
    if ((int64_t)o->tokens[i] > b->maxT) b->maxT = (int64_t)o->tokens[i];
  return 0;
}

static int create_comms(cli_bench *b) {
  loom_comm_config_t cc = LOOM_COMM_CONFIG_INIT;
  if (b->op->plan(b, &cc) != 0) return -1;
  CLI_LOOM_OK(b, loom_comm_create_all(b->ngpu, NULL, &cc, b->comms));
  return 0;
}

/* GPU d's stream, events, x, y and L2 flush buffer, and its host buffers. */
static int alloc_gpu(cli_bench *b, int d) {
  cli_gpu *g = &b->g[d];
  const size_t T = (size_t)b->maxT;
  CLI_CUDA_OK(b, cudaSetDevice(d));
  CLI_CUDA_OK(b, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  for (; g->nev < CLI_EV_BATCH; g->nev++) {
    CLI_CUDA_OK(b, cudaEventCreate(&g->ev0[g->nev]));
    CLI_CUDA_OK(b, cudaEventCreate(&g->ev1[g->nev]));
  }
  for (int r = 0; r < b->o->rotate; r++)
    CLI_CUDA_OK(b, cudaMalloc(&g->x[r], T * (size_t)b->in_cols * b->es));
  CLI_CUDA_OK(b, cudaMalloc(&g->y, T * (size_t)b->out_cols * b->es));
  if (b->o->flush_l2) {
    int l2 = 0;
    CLI_CUDA_OK(b, cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, d));
    g->flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
    CLI_CUDA_OK(b, cudaMalloc(&g->flush, g->flush_bytes));
  }
  const size_t n = (size_t)b->o->check_tokens;
  g->us = malloc((size_t)b->o->iters * sizeof *g->us);
  g->xs = malloc(n * (size_t)b->in_cols * sizeof(float));
  g->ys = malloc(n * (size_t)b->out_cols * sizeof(float));
  g->yref = malloc(n * (size_t)b->out_cols * sizeof(float));
  if (!g->us || !g->xs || !g->ys || !g->yref) {
    fprintf(stderr, "%s: out of host memory\n", b->who);
    return -1;
  }
  return 0;
}

static void print_header(const cli_bench *b) {
  struct cudaDeviceProp p;
  const char *name = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  char shape[512];
  b->op->describe(b, shape, sizeof shape);
  printf("%s: %d x %s, %s; %d iters after %d warm-up, %d rotating inputs, L2 flush %s\n", b->who,
         b->ngpu, name, shape, b->o->iters, b->o->warmup, b->o->rotate,
         b->o->flush_l2 ? "on" : "off");
  fflush(stdout);
}

static int setup(cli_bench *b) {
  if (create_comms(b) != 0) return -1;
  for (int d = 0; d < b->ngpu; d++)
    if (alloc_gpu(b, d) != 0 || b->op->alloc(b, d) != 0) return -1;
  b->sample = malloc((size_t)b->o->check_tokens * sizeof *b->sample);
  if (b->sample == NULL) return -1;
  print_header(b);
  if (cli_measure_ceilings(b) != 0 || b->op->prepare(b) != 0) return -1;
  return cli_on_every_gpu(b, b->op->create);
}

/* ---- one token count: inputs, verify ------------------------------------------- */

void cli_sample_rows(int T, int n, int *rows) {
  for (int s = 0; s < n; s++) rows[s] = n == 1 ? 0 : (int)((int64_t)s * (T - 1) / (n - 1));
}

int cli_upload_random(const cli_bench *b, int d, void *dev, float *host, size_t n, float scale, int kind) {
  void *stage = malloc(n * b->es);
  int rc = -1;
  if (stage != NULL) {
    cli_fill_random(host, n, scale, kind, d, 0, b->dtype);
    ref_pack_array(stage, host, n, (int)b->dtype);
    rc = cudaSetDevice(d) == cudaSuccess && cudaMemcpy(dev, stage, n * b->es, cudaMemcpyHostToDevice) == cudaSuccess
             ? 0
             : -1;
  }
  free(stage);
  if (rc) fprintf(stderr, "%s: GPU %d: uploading weights failed\n", b->who, d);
  return rc;
}

void cli_x_chunk(const cli_bench *b, int gpu, int t0, int n, float *out) {
  cli_fill_random(out, (size_t)n * (size_t)b->in_cols, 1.0f, CLI_RNG_X, gpu,
                  ((uint64_t)b->T << 32) | (uint64_t)t0, b->dtype);
}

/* GPU d's x for this token count, GEN_ROWS rows at a time, and its
 * --rotate copies; keeps the sampled rows. */
static int upload_inputs(cli_bench *b, int d) {
  cli_gpu *g = &b->g[d];
  const size_t H = (size_t)b->in_cols;
  float *rows = malloc(GEN_ROWS * H * sizeof(float));
  void *stage = malloc(GEN_ROWS * H * b->es);
  int rc = -1, next = 0;
  if (rows == NULL || stage == NULL || cudaSetDevice(d) != cudaSuccess) goto out;
  for (int t0 = 0; t0 < b->T; t0 += GEN_ROWS) {
    const int n = b->T - t0 < GEN_ROWS ? b->T - t0 : GEN_ROWS;
    cli_x_chunk(b, d, t0, n, rows);
    for (; next < b->nsample && b->sample[next] < t0 + n; next++)
      memcpy(g->xs + (size_t)next * H, rows + (size_t)(b->sample[next] - t0) * H,
             H * sizeof(float));
    ref_pack_array(stage, rows, (size_t)n * H, (int)b->dtype);
    if (cudaMemcpy((char *)g->x[0] + (size_t)t0 * H * b->es, stage, (size_t)n * H * b->es,
                   cudaMemcpyHostToDevice))
      goto out;
  }
  for (int r = 1; r < b->o->rotate; r++)
    if (cudaMemcpy(g->x[r], g->x[0], (size_t)b->T * H * b->es, cudaMemcpyDeviceToDevice)) goto out;
  if (cudaDeviceSynchronize()) goto out;
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: GPU %d: uploading inputs failed\n", b->who, d);
  free(rows);
  free(stage);
  return rc;
}

static int inputs_task(void *p, int d) { return upload_inputs((cli_bench *)p, d); }

/* Poison y and the op's outputs before a verified forward. */
static int poison(cli_bench *b, int d) {
  CLI_CUDA_OK(b, cudaSetDevice(d));
  CLI_CUDA_OK(b, cudaMemset(b->g[d].y, 0xFF, (size_t)b->maxT * (size_t)b->out_cols * b->es));
  if (b->op->poison != NULL && b->op->poison(b, d) != 0) return -1;
  CLI_CUDA_OK(b, cudaDeviceSynchronize());
  return 0;
}

static int baseline_verified_forward(cli_bench *b, int d) {
  cli_gpu *g = &b->g[d];
  if (b->op->forward(b, d, g->x[0], 1) != 0) return -1;
  CLI_CUDA_OK(b, cudaStreamSynchronize(g->stream));
  return 0;
}

static int verified_forward(cli_bench *b) {
  if (b->impl == CLI_FUSED) {
    for (int d = 0; d < b->ngpu; d++) {
      CLI_CUDA_OK(b, cudaSetDevice(d));
      if (b->op->forward(b, d, b->g[d].x[0], 1) != 0) return -1;
    }
    return cli_sync_and_check(b);
  }
  deadline(1);
  const int rc = cli_on_every_gpu(b, baseline_verified_forward);
  deadline(0);
  return rc;
}

/* Count the y elements still poisoned and copy the sampled rows of y to
 * the host; then the op's own download. */
static int download(cli_bench *b, int d) {
  cli_gpu *g = &b->g[d];
  const size_t H = (size_t)b->out_cols, n = (size_t)b->T * H;
  unsigned char *y = malloc(n * b->es + 1);
  int rc = -1;
  if (!y || cudaSetDevice(d) != cudaSuccess ||
      cudaMemcpy(y, g->y, n * b->es, cudaMemcpyDeviceToHost))
    goto out;
  g->unwritten = 0;
  for (size_t i = 0; i < n; i++) {
    size_t c = 0;
    while (c < b->es && y[i * b->es + c] == 0xFF) c++;
    g->unwritten += c == b->es;
  }
  for (int s = 0; s < b->nsample; s++)
    ref_unpack_array(g->ys + s * H, y + (size_t)b->sample[s] * H * b->es, H, (int)b->dtype);
  rc = b->op->download != NULL ? b->op->download(b, d) : 0;
out:
  if (!y) fprintf(stderr, "%s: out of host memory\n", b->who);
  free(y);
  return rc;
}

/* Reference for REF_TOKENS_PER_TASK sampled tokens of one GPU. */
static int ref_task(void *p, int i) {
  cli_bench *b = (cli_bench *)p;
  const int per_gpu = (b->nsample + REF_TOKENS_PER_TASK - 1) / REF_TOKENS_PER_TASK;
  const int d = i / per_gpu, s0 = i % per_gpu * REF_TOKENS_PER_TASK;
  const int n = b->nsample - s0 < REF_TOKENS_PER_TASK ? b->nsample - s0 : REF_TOKENS_PER_TASK;
  return b->op->reference(b, d, s0, n);
}

/* Compare GPU d's sampled rows with the reference, then the op's checks;
 * 0 when all agree. */
static int compare(cli_bench *b, int d, double tol) {
  cli_gpu *g = &b->g[d];
  const size_t H = (size_t)b->out_cols;
  const char *who = cli_impl_names[b->impl];
  int rc = 0;
  if (g->unwritten) {
    fprintf(stderr, "%s: %s: GPU %d: %zu of %zu y elements never written\n", b->who, who, d,
            g->unwritten, (size_t)b->T * H);
    rc = -1;
  }
  g->err = ref_rel_error(g->ys, g->yref, (size_t)b->nsample * H);
  if (!(g->err <= tol)) {
    fprintf(stderr, "%s: %s: GPU %d: y rel error %.3g over %d sampled tokens > %.1g\n", b->who,
            who, d, g->err, b->nsample, tol);
    rc = -1;
  }
  if (b->op->check != NULL && b->op->check(b, d) != 0) rc = -1;
  return rc;
}

static int verify(cli_bench *b) {
  const double tol = b->op->tol[b->dtype];
  for (int d = 0; d < b->ngpu; d++)
    if (poison(b, d) != 0) return -1;
  if (verified_forward(b) != 0) return -1;
  int rc = 0;
  for (int d = 0; d < b->ngpu; d++) rc |= download(b, d);
  if (rc != 0) return -1;
  if (!b->ref_done) {
    if (b->op->reference_prepare != NULL && b->op->reference_prepare(b) != 0) return -1;
    const int per_gpu = (b->nsample + REF_TOKENS_PER_TASK - 1) / REF_TOKENS_PER_TASK;
    if (cli_run_tasks(per_gpu * b->ngpu, b->nthreads, ref_task, b) != 0) {
      fprintf(stderr, "%s: the CPU reference failed\n", b->who);
      return -1;
    }
    b->ref_done = 1;
  }
  double worst = 0;
  for (int d = 0; d < b->ngpu; d++) {
    rc |= compare(b, d, tol);
    if (b->g[d].err > worst) worst = b->g[d].err;
  }
  if (rc != 0) {
    printf("  %-8s verify: FAILED (details on stderr)\n", cli_impl_names[b->impl]);
    return -1;
  }
  printf("  %-8s verify: ok (%d sampled tokens x %d GPUs, %smax rel err %.2e <= %.0e, y fully "
         "written%s)\n",
         cli_impl_names[b->impl], b->nsample, b->ngpu, b->op->verify_before[b->impl], worst, tol,
         b->op->verify_after[b->impl]);
  fflush(stdout);
  return 0;
}

/* ---- timing ------------------------------------------------------------------------ */

/* Before a timed iteration: overwrite L2 (outside the events) if asked. */
static int pre_iteration(cli_bench *b, int d, int it) {
  cli_gpu *g = &b->g[d];
  if (g->flush) CLI_CUDA_OK(b, cudaMemsetAsync(g->flush, it & 0xFF, g->flush_bytes, g->stream));
  return 0;
}

static const void *x_of(cli_bench *b, int d, int it) { return b->g[d].x[it % b->o->rotate]; }

/* One timed forward of GPU d, its host time added to g->host_us. */
static int timed_forward(cli_bench *b, int d, int it) {
  const double t0 = cli_now_s();
  const int rc = b->op->forward(b, d, x_of(b, d, it), 0);
  b->g[d].host_us += (cli_now_s() - t0) * 1e6;
  return rc;
}

/* Fused: one host thread launches every GPU's forward of iteration `it`;
 * slot >= 0 brackets it with events. */
static int fused_iteration(cli_bench *b, int it, int slot) {
  for (int d = 0; d < b->ngpu; d++) {
    cli_gpu *g = &b->g[d];
    CLI_CUDA_OK(b, cudaSetDevice(d));
    if (slot >= 0 && pre_iteration(b, d, it) != 0) return -1;
    if (slot >= 0) CLI_CUDA_OK(b, cudaEventRecord(g->ev0[slot], g->stream));
    if ((slot >= 0 ? timed_forward(b, d, it) : b->op->forward(b, d, x_of(b, d, it), 0)) != 0) return -1;
    if (slot >= 0) CLI_CUDA_OK(b, cudaEventRecord(g->ev1[slot], g->stream));
  }
  return 0;
}

int cli_fused_once(cli_bench *b) {
  return fused_iteration(b, 0, -1) == 0 && cli_sync_and_check(b) == 0 ? 0 : -1;
}

static int read_batch(cli_bench *b, int d, int done, int n) {
  cli_gpu *g = &b->g[d];
  for (int i = 0; i < n; i++) {
    float ms = 0;
    CLI_CUDA_OK(b, cudaEventElapsedTime(&ms, g->ev0[i], g->ev1[i]));
    g->us[done + i] = ms * 1e3;
  }
  return 0;
}

/* A thread per GPU, each running its own GPU's forwards: the baseline
 * always (a forward may synchronise the thread; NCCL keeps the iterations
 * of the GPUs in step), the fused layer with --launch threads, as a program
 * with one process per GPU does (with one thread for all GPUs, a host
 * slower than the kernels delays every later GPU's launch of an iteration,
 * and the kernels that wait for it, bounded, count that delay). */
static int gpu_timing(cli_bench *b, int d) {
  cli_gpu *g = &b->g[d];
  for (int i = 0; i < b->o->warmup; i++)
    if (b->op->forward(b, d, x_of(b, d, i), 0) != 0) return -1;
  for (int done = 0; done < b->o->iters;) {
    const int n = b->o->iters - done < CLI_EV_BATCH ? b->o->iters - done : CLI_EV_BATCH;
    for (int i = 0; i < n; i++) {
      if (pre_iteration(b, d, done + i) != 0) return -1;
      CLI_CUDA_OK(b, cudaEventRecord(g->ev0[i], g->stream));
      if (timed_forward(b, d, done + i) != 0) return -1;
      CLI_CUDA_OK(b, cudaEventRecord(g->ev1[i], g->stream));
    }
    CLI_CUDA_OK(b, cudaStreamSynchronize(g->stream));
    if (read_batch(b, d, done, n) != 0) return -1;
    done += n;
  }
  return 0;
}

static int time_fused(cli_bench *b) {
  if (b->o->launch == CLI_LAUNCH_THREADS) { /* then the async errors of every GPU */
    const int rc = cli_on_every_gpu(b, gpu_timing);
    return cli_sync_and_check(b) == 0 ? rc : -1;
  }
  for (int i = 0; i < b->o->warmup; i++)
    if (fused_iteration(b, i, -1) != 0) return -1;
  if (cli_sync_and_check(b) != 0) return -1;
  for (int done = 0; done < b->o->iters;) {
    const int n = b->o->iters - done < CLI_EV_BATCH ? b->o->iters - done : CLI_EV_BATCH;
    for (int i = 0; i < n; i++)
      if (fused_iteration(b, done + i, i) != 0) return -1;
    if (cli_sync_and_check(b) != 0) return -1;
    for (int d = 0; d < b->ngpu; d++)
      if (read_batch(b, d, done, n) != 0) return -1;
    done += n;
  }
  return 0;
}

static int time_baseline(cli_bench *b) {
  deadline(1);
  const int rc = cli_on_every_gpu(b, gpu_timing);
  deadline(0);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void cli_time_stats(double *const *us, int ngpu, int n, cli_row *row) {
  double *t = us[0];
  for (int i = 0; i < n; i++)
    for (int d = 1; d < ngpu; d++)
      if (us[d][i] > t[i]) t[i] = us[d][i];
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  row->med_us = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  row->min_us = t[0];
  row->max_us = t[n - 1];
}

double cli_bound_us(const cli_work *w, int n, const cli_ceilings *c) {
  double worst = 0;
  for (int d = 0; d < n; d++) {
    double t = w[d].flops / (c->peak_tflops * 1e12);
    if (n > 1 && c->nvlink_gbps > 0) {
      const double tw = w[d].link_bytes / (c->nvlink_gbps * 1e9);
      if (tw > t) t = tw;
    }
    const double th = w[d].hbm_bytes / (c->hbm_gbps * 1e9);
    if (th > t) t = th;
    if (t > worst) worst = t;
  }
  return worst * 1e6;
}

static int time_impl(cli_bench *b, cli_row *row) {
  for (int d = 0; d < b->ngpu; d++) b->g[d].host_us = 0;
  const int rc = b->impl == CLI_FUSED ? time_fused(b) : time_baseline(b);
  if (rc != 0) return -1;
  double *us[CLI_MAX_GPUS];
  cli_work need[CLI_MAX_GPUS];
  for (int d = 0; d < b->ngpu; d++) {
    us[d] = b->g[d].us;
    b->op->need(b, d, &need[d]);
  }
  memset(row, 0, sizeof *row);
  row->T = b->T;
  row->impl = cli_impl_names[b->impl];
  cli_time_stats(us, b->ngpu, b->o->iters, row);
  double flops = 0, wire = 0;
  b->op->done(b, &flops, &wire);
  const double sec = row->med_us * 1e-6;
  row->tflops = sec > 0 ? flops / sec / b->ngpu / 1e12 : 0;
  row->wire_mb = wire / b->ngpu / 1e6;
  row->gbps = sec > 0 ? wire / b->ngpu / sec / 1e9 : 0;
  row->bound_us = cli_bound_us(need, b->ngpu, &b->ceil);
  row->pct_bound = row->med_us > 0 ? 100.0 * row->bound_us / row->med_us : 0;
  for (int d = 0; d < b->ngpu; d++)
    if (b->g[d].host_us / b->o->iters > row->host_us) row->host_us = b->g[d].host_us / b->o->iters;
  if (b->op->phases != NULL && b->op->phases(b, row) != 0) return -1;
  printf("  %-8s median %.1f us (min %.1f, max %.1f), %.1f TFLOP/s/GPU, %.1f%% of bound",
         row->impl, row->med_us, row->min_us, row->max_us, row->tflops, row->pct_bound);
  printf(", host %.1f us a call", row->host_us);
  if (row->nphases > 0) {
    printf("; phases end at");
    for (int p = 0; p < row->nphases; p++)
      printf("%s %s %.0f", p ? "," : "", row->phase_names[p], row->phase_us[p]);
    printf(" us");
  }
  printf("\n");
  fflush(stdout);
  return 0;
}

/* Verify and time every chosen implementation at T tokens per GPU; rows
 * gets one row per implementation. Returns the number of rows, -1 on error. */
static int run_tokens(cli_bench *b, int T, cli_row *rows) {
  b->T = T;
  b->ref_done = 0;
  b->nsample = T < b->o->check_tokens ? T : b->o->check_tokens;
  cli_sample_rows(T, b->nsample, b->sample);
  if (cli_run_tasks(b->ngpu, b->ngpu, inputs_task, b) != 0) return -1;
  int n = 0;
  for (int impl = CLI_FUSED; impl <= CLI_BASELINE; impl++) {
    if (!(b->o->impl & 1 << impl)) continue;
    b->impl = impl;
    if (verify(b) != 0 || time_impl(b, &rows[n]) != 0) return -1;
    if (b->op->after_timing != NULL && b->op->after_timing(b) != 0) return -1;
    n++;
  }
  if (n == 2) rows[0].speedup = rows[1].med_us / rows[0].med_us;
  return n;
}

/* ---- report and teardown ----------------------------------------------------------- */

static void print_table(const cli_row *rows, int n) {
  printf("\n%10s %-8s %10s %10s %10s %11s %12s %9s %9s %7s %8s\n", "tokens/GPU", "impl",
         "median_us", "min_us", "max_us", "TFLOP/s/GPU", "wire_MB/GPU", "GB/s/GPU", "bound_us",
         "%bound", "speedup");
  for (int i = 0; i < n; i++) {
    const cli_row *r = &rows[i];
    char sp[16] = "-";
    if (r->speedup > 0) snprintf(sp, sizeof sp, "%.2fx", r->speedup);
    printf("%10d %-8s %10.1f %10.1f %10.1f %11.1f %12.2f %9.1f %9.1f %6.1f%% %8s\n", r->T,
           r->impl, r->med_us, r->min_us, r->max_us, r->tflops, r->wire_mb, r->gbps, r->bound_us,
           r->pct_bound, sp);
  }
  fflush(stdout);
}

/* --json: the same rows, machine-readable. */
static int write_json(const cli_bench *b, const cli_row *rows, int n) {
  if (b->o->json == NULL) return 0;
  struct cudaDeviceProp p;
  cli_field fields[MAX_FIELDS];
  cli_run run;
  memset(&run, 0, sizeof run);
  run.command = b->op->name;
  run.gpus = b->ngpu;
  run.device = cudaGetDeviceProperties(&p, 0) == cudaSuccess ? p.name : "?";
  run.fields = fields;
  run.nfields = b->op->fields(b, fields, MAX_FIELDS);
  run.iters = b->o->iters;
  run.warmup = b->o->warmup;
  run.flush_l2 = b->o->flush_l2;
  run.rotate = b->o->rotate;
  run.ceil = b->ceil;
  FILE *f = fopen(b->o->json, "w");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot write %s\n", b->who, b->o->json);
    return -1;
  }
  int rc = cli_write_json(f, &run, rows, n);
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) fprintf(stderr, "%s: error writing %s\n", b->who, b->o->json);
  return rc;
}

static int teardown(cli_bench *b) {
  int rc = b->op->destroy(b);
  for (int d = 0; d < b->ngpu; d++) {
    cli_gpu *g = &b->g[d];
    cudaSetDevice(d);
    if (g->y) cudaFree(g->y);
    if (g->flush) cudaFree(g->flush);
    for (int r = 0; r < CLI_MAX_ROTATE; r++)
      if (g->x[r]) cudaFree(g->x[r]);
    for (int e = 0; e < g->nev; e++) {
      cudaEventDestroy(g->ev0[e]);
      cudaEventDestroy(g->ev1[e]);
    }
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->us);
    free(g->xs);
    free(g->ys);
    free(g->yref);
  }
  if (b->comms[0] != NULL && loom_comm_destroy_all(b->ngpu, b->comms) != LOOM_SUCCESS) {
    fprintf(stderr, "%s: loom_comm_destroy_all: %s\n", b->who, loom_last_error());
    rc = -1;
  }
  free(b->sample);
  return rc;
}

int cli_bench_main(const cli_options *o, const cli_op *op) {
  cli_bench *b = calloc(1, sizeof *b);
  cli_row rows[2 * CLI_MAX_LIST];
  int n = 0, done = 0, rc = 1;
  if (b != NULL) b->state = calloc(1, op->state_bytes);
  if (b == NULL || b->state == NULL) {
    fprintf(stderr, "loom %s: out of host memory\n", op->name);
    free(b);
    return 1;
  }
  b->o = o;
  b->op = op;
  snprintf(b->who, sizeof b->who, "loom %s", op->name);
  snprintf(deadline_msg, sizeof deadline_msg,
           "%s: the baseline did not finish within its deadline (a hung NCCL call?); exiting\n",
           b->who);
  deadline_len = strlen(deadline_msg);
  if (resolve_world(b, o) == 0) {
    const int ok = setup(b) == 0;
    for (; ok && done < o->ntokens; done++) {
      printf("\n[%d/%d] tokens/GPU %d\n", done + 1, o->ntokens, (int)o->tokens[done]);
      fflush(stdout);
      const int got = run_tokens(b, (int)o->tokens[done], &rows[n]);
      if (got < 0) break;
      n += got;
    }
    if (ok && done == o->ntokens) {
      print_table(rows, n);
      rc = write_json(b, rows, n) == 0 ? 0 : 1;
    }
    if (teardown(b) != 0) rc = 1;
  }
  free(b->state);
  free(b);
  return rc;
}

/* ---- the collective GEMMs' phases ------------------------------------------------ */

static const char *const coll_phase_names[LOOM_COLL_STAMPS] = {"start", "gemm", "side", "end"};
_Static_assert(LOOM_COLL_STAMPS <= CLI_MAX_PHASES, "a row holds the collective GEMMs' phases");

int cli_coll_phases(cli_bench *b, cli_row *row) {
  if (b->impl != CLI_FUSED) return 0;
  row->nphases = LOOM_COLL_STAMPS;
  row->phase_names = coll_phase_names;
  for (int i = 0; i < LOOM_COLL_STAMPS; i++) row->phase_us[i] = 0;
  for (int d = 0; d < b->ngpu; d++) {
    double us[LOOM_COLL_STAMPS];
    CLI_LOOM_OK(b, loom_coll_phases(b->comms[d], us));
    for (int i = 0; i < LOOM_COLL_STAMPS; i++)
      if (us[i] > row->phase_us[i]) row->phase_us[i] = us[i];
  }
  return 0;
}

/* ---- the collective GEMMs' shape -------------------------------------------------- */

void cli_linear_describe(const cli_bench *b, int64_t hidden, int64_t ffn, int act, char *out, size_t n) {
  snprintf(out, n, "hidden %lld, ffn %lld (%lld per GPU), %s%s, act %s%s", (long long)hidden, (long long)ffn,
           (long long)(ffn / b->ngpu), loom_dtype_string(b->dtype), b->dtype == LOOM_FP32 ? " (TF32)" : "",
           cli_act_name(act), b->o->bias ? ", bias" : "");
}

int cli_linear_fields(const cli_bench *b, int64_t hidden, int64_t ffn, int act, cli_field *f, int max) {
  const cli_field all[] = {{"hidden", NULL, (long long)hidden},
                           {"ffn", NULL, (long long)ffn},
                           {"dtype", loom_dtype_string(b->dtype), 0},
                           {"act", cli_act_name(act), 0},
                           {"bias", NULL, (long long)b->o->bias}};
  int n = 0;
  for (; n < max && n < (int)(sizeof all / sizeof all[0]); n++) f[n] = all[n];
  return n;
}
