/*
 * Machine-readable output of the benchmark commands (`loom moe --json
 * FILE`, and every operator on the harness, harness.h). Pure C, no GPU: the
 * writer is unit-tested in tests/cpu/test_cli.c.
 */
#ifndef LOOM_CLI_REPORT_H
#define LOOM_CLI_REPORT_H

#include <stdio.h>

#define CLI_MAX_PHASES 8

/* One timed (token count, implementation). */
typedef struct {
  int T;                          /* tokens per GPU */
  const char *impl;               /* "fused" or "baseline" */
  double med_us, min_us, max_us;  /* forward time over iterations */
  double tflops, wire_mb, gbps;   /* per GPU: TFLOP/s, MB sent to other
                                     GPUs, and those MB per second */
  double bound_us, pct_bound;     /* the forward's lower bound and
                                     100 * bound_us / med_us */
  double speedup;                 /* baseline median / this median (fused
                                     rows with a baseline run), else 0 */
  int nphases;                    /* phase_us[0 .. nphases) are set; 0: none */
  const char *const *phase_names; /* nphases names ("gate", ...) */
  double phase_us[CLI_MAX_PHASES]; /* phase ends, last iteration */
  double host_us;                 /* host time of a forward call (the
                                     slowest GPU's mean), 0: not measured */
} cli_row;

/* The ceilings of the bound and where each came from ("measured",
 * "given", "unused (1 GPU)"). */
typedef struct {
  double peak_tflops, nvlink_gbps, hbm_gbps;
  const char *peak_src, *nvlink_src, *hbm_src;
} cli_ceilings;

/* One operator-specific field of the JSON header: str when not NULL,
 * else the integer num. */
typedef struct {
  const char *key;
  const char *str;
  long long num;
} cli_field;

/* What was run, for the JSON header. */
typedef struct {
  const char *command;      /* "moe" */
  int gpus;
  const char *device;
  const cli_field *fields;  /* the operator's shape, written after device */
  int nfields;
  int iters, warmup, flush_l2, rotate;
  cli_ceilings ceil;
} cli_run;

/* Write {"command": ..., <fields>, ..., "rows": [...]} to f. Returns 0, or
 * -1 on a write error. */
int cli_write_json(FILE *f, const cli_run *run, const cli_row *rows, int n);

#endif
