/*
 * `loom moe --trace FILE`: the in-kernel trace (loom_moe_set_trace) as a
 * Chrome / Perfetto JSON timeline, and the SM busy figures printed beside
 * it. Pure C, no GPU: unit-tested in tests/cpu/test_trace.c.
 *
 * Timeline: {"traceEvents": [...]} in the Trace Event Format, which
 * ui.perfetto.dev and chrome://tracing load. One process per GPU (pid =
 * GPU index = rank), one thread per SM (tid = SM id), plus a "kernel" track
 * (tid CLI_TRACE_KERNEL_TID) with one slice for the whole kernel. Every
 * event is a complete slice ("ph": "X"); ts and dur in microseconds since
 * that GPU's kernel start, with three decimals (nanoseconds). GPUs' clocks
 * are not assumed to agree: each GPU's times start at its own kernel.
 */
#ifndef LOOM_CLI_TRACE_H
#define LOOM_CLI_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "loom.h"

#define CLI_TRACE_KERNEL_TID 100000

/* One GPU's traced forward, as the kernel left it. */
typedef struct {
  int gpu;                              /* pid in the timeline */
  loom_moe_trace_info_t info;
  const loom_moe_trace_event_t *events; /* info.recorded of them */
} cli_trace_gpu;

/* Name of a kind ("gate", "GEMM0", "wait barrier", ...); "unknown" otherwise. */
const char *cli_trace_kind_name(int kind);

/* Write the timeline of n GPUs to f. Returns 0, or -1 on a write error or
 * an event whose kind is unknown. */
int cli_write_trace_json(FILE *f, const cli_trace_gpu *gpus, int n);

/* SM busy: per SM, the fraction of the kernel's wall time (info.end_ns -
 * info.start_ns) inside a work slice and not inside a wait slice (waits
 * nest in work slices, e.g. a GEMM0 waiting for its dispatch flag), times
 * clipped to the kernel. SMs are 0 .. max(info.blocks, largest sm + 1) - 1
 * (one block per SM: an SM with no event counts as 0% busy). */
typedef struct {
  int sms;                /* SMs counted */
  double mean, min, max;  /* busy fractions in [0, 1] */
} cli_trace_busy;

/* Busy fractions of one GPU's trace: per_sm[0 .. sms) (per_sm may be
 * NULL; else it has room for max_sms) and their mean / min / max. Returns
 * 0, or -1 (no memory, a wall time of 0, more than max_sms SMs). */
int cli_trace_sm_busy(const loom_moe_trace_info_t *info, const loom_moe_trace_event_t *events,
                      double *per_sm, int max_sms, cli_trace_busy *out);

/* The file of one token count: base itself, or with several token counts
 * ".T<tokens>" before base's extension ("t.json" -> "t.T4096.json", "t"
 * -> "t.T4096"). Returns 0, or -1 if it does not fit in n bytes. */
int cli_trace_path(const char *base, int tokens, int several, char *out, size_t n);

#endif
