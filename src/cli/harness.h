/*
 * The benchmark harness behind `loom moe` (and the operators to come):
 * everything that is not one operator's. An operator describes itself with
 * a cli_op (its shape, its buffers, one forward, its reference, its extra
 * checks, the work its bound counts); cli_bench_main does the rest, the
 * same way for every operator:
 *
 *   world   the first --gpus GPUs from one process: a stream and timing
 *           events per GPU, the loom communicators (their NCCL ones for the
 *           baseline), a host thread per GPU for collective host calls
 *           (cli_on_every_gpu) and a task pool for CPU work (cli_run_tasks);
 *   data    per --tokens value T, random x ([T x in_cols] per GPU, --dtype,
 *           --rotate copies) from splitmix64 streams (cli_fill_random); y
 *           ([T x out_cols] per GPU) is poisoned before every verified
 *           forward;
 *   verify  before timing, each implementation: one forward, every y
 *           element must be written, --check-tokens sampled rows per GPU
 *           (evenly spaced, first and last included) within the op's
 *           per-dtype tolerance of its CPU reference (ref_rel_error), then
 *           the op's own checks; the reference runs once per T;
 *   time    --warmup untimed forwards, --iters timed ones between two CUDA
 *           events on every GPU's stream (after overwriting L2 with
 *           --flush-l2, outside the events), x cycling through its copies;
 *           an iteration's time is the largest event gap over the GPUs;
 *           fused forwards are launched from one host thread for every GPU
 *           (--launch threads: a thread per GPU), the baseline's on a
 *           thread per GPU under a deadline (a hung NCCL call ends the
 *           process);
 *   bound   max over GPUs of FLOPs / GEMM ceiling, bytes to other GPUs /
 *           NVLink ceiling, HBM bytes / HBM ceiling (cli_bound_us), the
 *           ceilings measured at startup unless given (ceilings.c);
 *   report  a progress line per step, one table, --json (report.h).
 *
 * Every message starts with "loom <op name>:". Functions return 0 or -1
 * after printing what failed, and never end the process (the deadline
 * excepted).
 */
#ifndef LOOM_CLI_HARNESS_H
#define LOOM_CLI_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "args.h"
#include "loom.h"
#include "report.h"

#define CLI_MAX_GPUS 64
#define CLI_EV_BATCH 32 /* timed iterations between host syncs */

/* The implementation being verified or timed; bit (1 << impl) of --impl. */
enum { CLI_FUSED = 0, CLI_BASELINE = 1 };
extern const char *const cli_impl_names[2]; /* "fused", "baseline" */

/* Random streams: cli_fill_random(kind, index, salt). The harness draws x
 * from kind CLI_RNG_X (index = GPU); operators number theirs below it. */
#define CLI_RNG_X 4

/* The harness's part of one GPU. */
typedef struct {
  cudaStream_t stream;      /* every forward of this GPU runs here */
  cudaEvent_t ev0[CLI_EV_BATCH], ev1[CLI_EV_BATCH];
  int nev;
  void *x[CLI_MAX_ROTATE];  /* [maxT x in_cols]: x[0] is generated, the
                               others are copies (--rotate) */
  void *y;                  /* [maxT x out_cols] */
  void *flush;              /* --flush-l2: overwritten before each timed iteration */
  size_t flush_bytes;
  double *us;               /* this GPU's time of each timed iteration */
  double host_us;           /* host time inside the timed iterations' forward
                               calls (argument checks, tensor maps, launch),
                               summed */
  /* host, per token count: the sampled rows (--check-tokens of them) */
  float *xs;                /* [n x in_cols]: x, as the reference reads it */
  float *ys, *yref;         /* [n x out_cols]: y of the last verified forward, its reference */
  size_t unwritten;         /* y elements the last verified forward left poisoned */
  double err;               /* rel error of ys against yref */
} cli_gpu;

typedef struct cli_op cli_op;

/* One run of one operator. The operator reads everything here and keeps
 * its own state in `state` (op->state_bytes, zeroed). */
typedef struct {
  const cli_options *o;
  const cli_op *op;
  void *state;
  char who[32];             /* "loom moe": prefix of every message */
  int ngpu, nthreads;       /* GPUs; CPU threads for cli_run_tasks */
  loom_dtype_t dtype;       /* --dtype */
  size_t es;                /* bytes per element of dtype */
  int64_t in_cols, out_cols; /* elements per row of x and y (op->plan sets them) */
  int64_t maxT;             /* the largest --tokens (at least 1) */
  loom_comm_t comms[CLI_MAX_GPUS];
  cli_gpu g[CLI_MAX_GPUS];
  cli_ceilings ceil;
  /* the current step */
  int T;                    /* tokens per GPU */
  int impl;                 /* CLI_FUSED or CLI_BASELINE */
  int nsample;              /* rows per GPU verified */
  int *sample;              /* their token indices, ascending */
  int ref_done;             /* the reference of this T has run */
} cli_bench;

/* What a forward must do on one GPU, for the bound. */
typedef struct {
  double flops;      /* arithmetic it must do */
  double link_bytes; /* bytes it must send to other GPUs */
  double hbm_bytes;  /* bytes it must move through its HBM */
} cli_work;

/*
 * An operator. Callbacks return 0 or -1 (after printing why); those marked
 * optional may be NULL. d is a GPU index; the harness has made it current
 * where noted.
 */
struct cli_op {
  const char *name;     /* the command: "moe" */
  size_t state_bytes;   /* of cli_bench.state */
  double tol[CLI_NUM_DTYPES]; /* rel error of the sampled y rows, per --dtype */
  /* Words of the verify line for op->check: before the y error
   * ("routing exact, ") and after it, per implementation. */
  const char *verify_before[2];
  const char *verify_after[2];
  /* Once, before any GPU memory: read b->o, set in_cols and out_cols, fill
   * the communicators' config. */
  int (*plan)(cli_bench *b, loom_comm_config_t *cc);
  /* The header line's shape part, after "loom <name>: <n> x <GPU>, ". */
  void (*describe)(const cli_bench *b, char *out, size_t n);
  /* The JSON header's shape fields (at most max); returns their count. */
  int (*fields)(const cli_bench *b, cli_field *f, int max);
  /* GPU d's buffers (d current), after the harness's. */
  int (*alloc)(cli_bench *b, int d);
  /* Once, after the ceilings: weights and whatever else every T shares. */
  int (*prepare)(cli_bench *b);
  /* On GPU d's own thread, every GPU at once (collective creation). */
  int (*create)(cli_bench *b, int d);
  /* Optional, d current: poison the op's outputs besides y. */
  int (*poison)(cli_bench *b, int d);
  /* Enqueue one forward of b->impl on GPU d (d current) on g[d].stream,
   * from x into g[d].y. verified: the forward that is checked (x is x[0];
   * produce every output check reads), else a warm-up or timed one. Fused:
   * called from one thread for every GPU in turn; baseline: on GPU d's
   * own thread (it may block it). */
  int (*forward)(cli_bench *b, int d, const void *x, int verified);
  /* Optional, after a verified forward: copy what check reads to the host. */
  int (*download)(cli_bench *b, int d);
  /* Optional: once per token count, before the reference tasks (what
   * every GPU's reference shares, e.g. other GPUs' rows of x). */
  int (*reference_prepare)(cli_bench *b);
  /* Reference of sampled rows s0 .. s0+n of GPU d from g[d].xs into
   * g[d].yref (and the op's own outputs); on a CPU thread. */
  int (*reference)(cli_bench *b, int d, int s0, int n);
  /* Optional: the op's checks of GPU d beyond y, after every GPU's download. */
  int (*check)(cli_bench *b, int d);
  /* Work of one forward at b->T (last verified forward's routing): GPU
   * d's share, for the bound. */
  void (*need)(const cli_bench *b, int d, cli_work *w);
  /* FLOPs done and bytes sent to other GPUs by the last verified forward
   * of b->impl, summed over the GPUs. */
  void (*done)(const cli_bench *b, double *flops, double *wire_bytes);
  /* Optional, after timing b->impl, before its line is printed: the
   * row's phase ends (nphases, phase_names, phase_us). */
  int (*phases)(cli_bench *b, cli_row *row);
  /* Optional, after b->impl's timing line: more runs and output (--trace). */
  int (*after_timing)(cli_bench *b);
  /* Free everything the op made (fields may still be NULL after a failed
   * setup), before the communicators go. */
  int (*destroy)(cli_bench *b);
};

/* Run `op` as `loom <op->name>` with the options o: set up, verify and
 * time every --tokens value, print the table, write --json. Returns the
 * process exit code. */
int cli_bench_main(const cli_options *o, const cli_op *op);

/* ---- helpers for operators -------------------------------------------------- */

/* Fill n floats with uniform [-scale, scale) from stream (kind, index,
 * salt), rounded to dtype t. */
void cli_fill_random(float *dst, size_t n, float scale, int kind, int64_t index, uint64_t salt,
                     loom_dtype_t t);

/* n random weights of GPU d: uniform [-scale, scale) from stream (kind, d,
 * 0), rounded to --dtype, into host (kept for the reference) and uploaded
 * to dev (d's memory). 0, or -1 after printing why. */
int cli_upload_random(const cli_bench *b, int d, void *dev, float *host, size_t n, float scale, int kind);

/* x is generated CLI_X_CHUNK_ROWS rows at a time: rows [t0, t0 + n) of GPU
 * gpu's x at the current token count (t0 a multiple of CLI_X_CHUNK_ROWS, n
 * up to it, ending at most at b->T) into out [n x in_cols], as uploaded
 * (rounded to --dtype). For an operator whose reference reads other GPUs'
 * rows. */
#define CLI_X_CHUNK_ROWS 256
void cli_x_chunk(const cli_bench *b, int gpu, int t0, int n, float *out);

/* Seconds on the monotonic clock (host-side timing: ceilings, the host
 * time of forward calls). */
double cli_now_s(void);

/* Run fn(ctx, 0..n) on up to `threads` threads (the caller is one of them).
 * Returns -1 if any call did. */
typedef int (*cli_task_fn)(void *ctx, int i);
int cli_run_tasks(int n, int threads, cli_task_fn fn, void *ctx);

/* Run fn(b, d) for every GPU d, each on its own thread with d current
 * (collective host calls). Returns -1 if any call did. */
typedef int (*cli_gpu_fn)(cli_bench *b, int d);
int cli_on_every_gpu(cli_bench *b, cli_gpu_fn fn);

/* Wait for every GPU's stream (bounded: loom kernels end by the comm's
 * timeout) and report the communicators' asynchronous errors. */
int cli_sync_and_check(cli_bench *b);

/* One more untimed fused forward on every GPU (iteration 0's input), waited
 * for as cli_sync_and_check does. */
int cli_fused_once(cli_bench *b);

/* The collective GEMMs' `phases` (ag-gemm, gemm-rs, gemm-ar): from the
 * fused kernel's per-block stamps of the last timed call (loom_coll_phases),
 * the latest over GPUs of: the last block's start, the consumers out of the
 * engine, the side role (pushes, reductions) done, the kernel's end, in us
 * after each GPU's first block started. The end against the median shows
 * what the call costs outside the kernel (launch, host). */
int cli_coll_phases(cli_bench *b, cli_row *row);

/* The collective GEMMs' shape (a tensor-parallel linear layer of `hidden`
 * and `ffn`, the ffn split over the GPUs, --act, --bias): the header line's
 * shape part ("hidden H, ffn F (F/R per GPU), bf16, act none[, bias]") and
 * the JSON header's fields (hidden, ffn, dtype, act, bias; at most max,
 * returns their count). */
void cli_linear_describe(const cli_bench *b, int64_t hidden, int64_t ffn, int act, char *out, size_t n);
int cli_linear_fields(const cli_bench *b, int64_t hidden, int64_t ffn, int act, cli_field *f, int max);

/* The ceilings of the bound: given by --peak-tflops / --nvlink-gbps /
 * --hbm-gbps, else measured (ceilings.c); prints them. */
int cli_measure_ceilings(cli_bench *b);

/* ---- pure helpers (no GPU; tests/cpu/test_cli.c) ------------------------------ */

/* The bound in microseconds: max over the n GPUs of the largest of
 * w.flops / GEMM ceiling, w.link_bytes / NVLink ceiling (counted only with
 * n > 1 and a ceiling > 0) and w.hbm_bytes / HBM ceiling. */
double cli_bound_us(const cli_work *w, int n, const cli_ceilings *c);

/* n evenly spaced rows of T (first and last included; n <= T). */
void cli_sample_rows(int T, int n, int *rows);

/* us[0][i] = max over the ngpu arrays us[d][i], then sorted ascending;
 * median / min / max of the n iterations into row. */
void cli_time_stats(double *const *us, int ngpu, int n, cli_row *row);

/* Check macros for operator code: print "<who>: file:line: call: error"
 * and return -1 from the enclosing function. */
#define CLI_CUDA_OK(b, call)                                                   \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s: %s:%d: %s: %s\n", (b)->who, __FILE__, __LINE__,     \
              #call, cudaGetErrorString(e_));                                  \
      return -1;                                                               \
    }                                                                          \
  } while (0)

#define CLI_LOOM_OK(b, call)                                                   \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    if (r_ != LOOM_SUCCESS) {                                                  \
      fprintf(stderr, "%s: %s: %s: %s\n", (b)->who, #call,                     \
              loom_result_string(r_), loom_last_error());                      \
      return -1;                                                               \
    }                                                                          \
  } while (0)

#endif
