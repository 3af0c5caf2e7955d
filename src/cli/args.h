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

/* Parse `s` as one of n names. Returns its index, -1 if it is none. */
int cli_parse_name(const char *s, const char *const *names, int n);

/* Names of --dtype, --act and --weights; a name's index is the value
 * stored in cli_options, equal to the loom_dtype_t / loom_activation_t /
 * loom_weight_layout_t value. */
#define CLI_NUM_DTYPES 3
#define CLI_NUM_ACTS 4
#define CLI_NUM_WEIGHT_LAYOUTS 2
#define CLI_NUM_GATES 2
extern const char *const cli_dtype_names[CLI_NUM_DTYPES]; /* fp32 bf16 fp16 */
extern const char *const cli_act_names[CLI_NUM_ACTS];     /* relu gelu silu swiglu */
#define CLI_ACT_NONE (-1) /* --act none: the collective GEMMs' plain epilogue (= LOOM_UNSET) */
/* The --act name of a value: cli_act_names[act], or "none". */
const char *cli_act_name(int act);
extern const char *const cli_weights_names[CLI_NUM_WEIGHT_LAYOUTS]; /* out-in in-out */
extern const char *const cli_gate_names[CLI_NUM_GATES];             /* exact fast (loom_gate_math_t) */

/* Bounds of the `moe` options (the library checks the finer rules, e.g.
 * hidden % 64 == 0, top_k <= 16, experts divisible by the GPU count). */
#define CLI_MAX_TOKENS (1 << 24)
#define CLI_MAX_DIM (1 << 20)
#define CLI_MAX_EXPERTS 1024
#define CLI_MAX_TOPK 1024

typedef struct {
  const char *command; /* "info", "moe", "help", ... */
  int gpus;            /* --gpus N, 0 = all visible */
  uint64_t bytes;      /* --bytes SIZE (info) */
  int iters;           /* --iters N */
  int warmup;          /* --warmup N */
  /* moe: */
  uint64_t tokens[CLI_MAX_LIST]; /* --tokens T[,T2,...]: tokens per GPU, one run each */
  int ntokens;
  int64_t hidden;      /* --hidden H */
  int64_t ffn;         /* --ffn F */
  int64_t experts;     /* --experts E (all GPUs together) */
  int64_t topk;        /* --topk K */
  int dtype;           /* --dtype: index into cli_dtype_names */
  int act;             /* --act: index into cli_act_names, or CLI_ACT_NONE ("none") */
  int act_given;       /* --act was on the command line (ag-gemm's default is none) */
  int weights;         /* --weights: index into cli_weights_names */
  int gate;            /* --gate: index into cli_gate_names (= loom_gate_math_t) */
  int bias;            /* --bias 0|1: ag-gemm, gemm-rs, gemm-ar add a bias */
  int check_tokens;    /* --check-tokens N: tokens per GPU verified */
  const char *json;    /* --json FILE: also write the results there, or NULL */
  const char *trace;   /* --trace FILE: in-kernel trace of one extra fused
                          forward per token count (Perfetto JSON), or NULL */
  int impl;            /* --impl: CLI_IMPL_* bits, which forwards run */
  int flush_l2;        /* --flush-l2: overwrite L2 before every timed iteration */
  int launch;          /* --launch: fused forwards from one host thread for every
                          GPU (CLI_LAUNCH_SERIAL) or a thread per GPU */
  int rotate;          /* --rotate N: input buffers cycled through while timing */
  double peak_tflops;  /* --peak-tflops X: GEMM ceiling per GPU; 0 = measure */
  double nvlink_gbps;  /* --nvlink-gbps X: NVLink egress ceiling per GPU; 0 = measure */
  double hbm_gbps;     /* --hbm-gbps X: HBM ceiling per GPU; 0 = measure */
} cli_options;

/* --impl fused | baseline | both */
#define CLI_IMPL_FUSED 1
#define CLI_IMPL_BASELINE 2
/* --launch serial | threads (fused forwards while timing) */
#define CLI_LAUNCH_SERIAL 0
#define CLI_LAUNCH_THREADS 1
#define CLI_MAX_ROTATE 64

/* Fill defaults, then parse argv[1..argc). On error writes a message into
 * err (size errlen) and returns -1. */
int cli_parse(int argc, char **argv, cli_options *o, char *err, size_t errlen);

#endif
