/*
 * Machine-readable output of `loom moe --json FILE`. Pure C, no GPU: the
 * writer is unit-tested in tests/cpu/test_cli.c.
 */
#ifndef LOOM_CLI_REPORT_H
#define LOOM_CLI_REPORT_H

#include <stdio.h>

/* One timed (token count, implementation). */
typedef struct {
  int T;                          /* tokens per GPU */
  const char *impl;               /* "fused" or "baseline" */
  double med_us, min_us, max_us;  /* layer time over iterations */
  double tflops, wire_mb, gbps;   /* per GPU: expert TFLOP/s, MB sent to
                                     other GPUs, and those MB per second */
  double bound_us, pct_bound;     /* the layer's lower bound and
                                     100 * bound_us / med_us */
  double speedup;                 /* baseline median / this median (fused
                                     rows with a baseline run), else 0 */
  int has_phases;                 /* fused: phase_us holds the in-kernel trace */
  double phase_us[5];             /* phase ends, last iteration */
} cli_moe_row;

/* What was run, for the JSON header. */
typedef struct {
  int gpus;
  const char *device;
  long long experts, top_k, hidden, ffn;
  const char *dtype, *act, *weights; /* weights: "out-in" or "in-out" */
  int iters, warmup, flush_l2, rotate;
  double peak_tflops, nvlink_gbps, hbm_gbps; /* the ceilings of the bound */
  const char *peak_src, *nvlink_src, *hbm_src; /* "measured" or "given" */
} cli_moe_run;

/* Write {"command": "moe", ..., "rows": [...]} to f. Returns 0, or -1 on a
 * write error. */
int cli_write_moe_json(FILE *f, const cli_moe_run *run, const cli_moe_row *rows, int n);

#endif
