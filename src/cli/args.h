/*
 * Command-line parsing for the `loom` CLI: nccl-tests-like flags shared by
 * every subcommand. Pure C, no GPU: unit-tested in tests/cpu/test_cli.c.
 */
#ifndef LOOM_CLI_ARGS_H
#define LOOM_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define CLI_MAX_LIST 16

/* Parse "123", "64K", "16M", "2G" (binary multiples) into bytes/counts.
 * Returns 0 on success, -1 on anything else (empty, junk, overflow). */
int cli_parse_size(const char *s, uint64_t *out);

/* Parse a decimal int in [lo, hi]. Returns 0 / -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);

/* Parse "a,b,c" sizes into out[0..n). Returns the count, -1 on error or
 * more than max items. */
int cli_parse_size_list(const char *s, uint64_t *out, int max);

typedef struct {
  const char *command; /* "info", "help", ... */
  int gpus;            /* --gpus N, 0 = all visible */
  uint64_t bytes;      /* --bytes SIZE */
  int iters;           /* --iters N */
  int warmup;          /* --warmup N */
} cli_options;

/* Fill defaults, then parse argv[1..argc). On error writes a message into
 * err (size errlen) and returns -1. */
int cli_parse(int argc, char **argv, cli_options *o, char *err, size_t errlen);

#endif
