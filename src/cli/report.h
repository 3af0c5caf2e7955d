/*
 * Machine-readable output of `loom moe --json FILE`. Pure C, no GPU: the
 * writer is unit-tested in tests/cpu/test_cli.c.
 */
#ifndef LOOM_CLI_REPORT_H
#define LOOM_CLI_REPORT_H

#include <stdio.h>

/* One timed token count. */
typedef struct {
  int T;                                   /* tokens per GPU */
  double med_us, min_us, max_us;           /* layer time over iterations */
  double tflops, remote_mb, gbps;          /* per GPU */
  double phase_us[5];                      /* in-kernel phase ends, last iteration */
} cli_moe_row;

/* What was run, for the JSON header. */
typedef struct {
  int gpus;
  const char *device;
  long long experts, top_k, hidden, ffn;
  const char *dtype, *act;
  int iters, warmup;
} cli_moe_run;

/* Write {"command": "moe", ..., "rows": [...]} to f. Returns 0, or -1 on a
 * write error. */
int cli_write_moe_json(FILE *f, const cli_moe_run *run, const cli_moe_row *rows, int n);

#endif
