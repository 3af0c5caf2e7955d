/* Command-line parsing for the loom CLI. */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

int cli_parse_size(const char *s, uint64_t *out) {
  if (s == NULL || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return -1;
  unsigned shift = 0;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  default: return -1;
  }
  if (*end != '\0') return -1;
  if (shift && v > (~0ull >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

int cli_parse_int(const char *s, long lo, long hi, long *out) {
  if (s == NULL || *s == '\0') return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int cli_parse_size_list(const char *s, uint64_t *out, int max) {
  if (s == NULL || *s == '\0') return -1;
  char buf[512];
  if (strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == max || cli_parse_size(tok, &out[n]) != 0) return -1;
    n++;
  }
  /* "1,,2" and trailing commas leave empty tokens strtok skips: reject */
  if (strstr(s, ",,") || s[0] == ',' || s[strlen(s) - 1] == ',') return -1;
  return n;
}

const char *const cli_dtype_names[CLI_NUM_DTYPES] = {"fp32", "bf16", "fp16"};
const char *const cli_act_names[CLI_NUM_ACTS] = {"relu", "gelu", "silu", "swiglu"};

const char *cli_act_name(int act) {
  return act >= 0 && act < CLI_NUM_ACTS ? cli_act_names[act] : "none";
}
const char *const cli_weights_names[CLI_NUM_WEIGHT_LAYOUTS] = {"out-in", "in-out"};
const char *const cli_gate_names[CLI_NUM_GATES] = {"exact", "fast"};

int cli_parse_name(const char *s, const char *const *names, int n) {
  if (s == NULL) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* --tokens: a list of counts, each in [0, CLI_MAX_TOKENS]. */
static int parse_tokens(const char *v, cli_options *o) {
  int n = cli_parse_size_list(v, o->tokens, CLI_MAX_LIST);
  if (n < 1) return -1;
  for (int i = 0; i < n; i++)
    if (o->tokens[i] > CLI_MAX_TOKENS) return -1;
  o->ntokens = n;
  return 0;
}

static int parse_int64(const char *v, long lo, long hi, int64_t *out) {
  long n;
  if (cli_parse_int(v, lo, hi, &n)) return -1;
  *out = n;
  return 0;
}

/* A finite number > 0 (a ceiling given instead of measured). */
static int parse_positive(const char *v, double *out) {
  char *end = NULL;
  const double d = strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0) || !isfinite(d)) return -1;
  *out = d;
  return 0;
}

/* One `moe` option: 1 if `a` is not one, 0 if parsed, -1 on a bad value. */
static int parse_moe_option(const char *a, const char *v, cli_options *o) {
  long n;
  int i;
  if (strcmp(a, "--tokens") == 0) return parse_tokens(v, o);
  if (strcmp(a, "--hidden") == 0) return parse_int64(v, 1, CLI_MAX_DIM, &o->hidden);
  if (strcmp(a, "--ffn") == 0) return parse_int64(v, 1, CLI_MAX_DIM, &o->ffn);
  if (strcmp(a, "--experts") == 0) return parse_int64(v, 1, CLI_MAX_EXPERTS, &o->experts);
  if (strcmp(a, "--topk") == 0) return parse_int64(v, 1, CLI_MAX_TOPK, &o->topk);
  if (strcmp(a, "--dtype") == 0) {
    if ((i = cli_parse_name(v, cli_dtype_names, CLI_NUM_DTYPES)) < 0) return -1;
    o->dtype = i;
    return 0;
  }
  if (strcmp(a, "--act") == 0) {
    if (strcmp(v, "none") == 0) i = CLI_ACT_NONE;
    else if ((i = cli_parse_name(v, cli_act_names, CLI_NUM_ACTS)) < 0) return -1;
    o->act = i;
    o->act_given = 1;
    return 0;
  }
  if (strcmp(a, "--weights") == 0) {
    if ((i = cli_parse_name(v, cli_weights_names, CLI_NUM_WEIGHT_LAYOUTS)) < 0) return -1;
    o->weights = i;
    return 0;
  }
  if (strcmp(a, "--gate") == 0) {
    if ((i = cli_parse_name(v, cli_gate_names, CLI_NUM_GATES)) < 0) return -1;
    o->gate = i;
    return 0;
  }
  if (strcmp(a, "--check-tokens") == 0) {
    if (cli_parse_int(v, 1, CLI_MAX_TOKENS, &n)) return -1;
    o->check_tokens = (int)n;
    return 0;
  }
  if (strcmp(a, "--impl") == 0) {
    static const char *const names[] = {"fused", "baseline", "both"};
    if ((i = cli_parse_name(v, names, 3)) < 0) return -1;
    o->impl = i == 0 ? CLI_IMPL_FUSED : i == 1 ? CLI_IMPL_BASELINE : CLI_IMPL_FUSED | CLI_IMPL_BASELINE;
    return 0;
  }
  if (strcmp(a, "--launch") == 0) {
    static const char *const names[] = {"serial", "threads"};
    if ((i = cli_parse_name(v, names, 2)) < 0) return -1;
    o->launch = i == 0 ? CLI_LAUNCH_SERIAL : CLI_LAUNCH_THREADS;
    return 0;
  }
  if (strcmp(a, "--flush-l2") == 0) {
    static const char *const names[] = {"0", "1"};
    if ((i = cli_parse_name(v, names, 2)) < 0) return -1;
    o->flush_l2 = i;
    return 0;
  }
  if (strcmp(a, "--bias") == 0) {
    static const char *const names[] = {"0", "1"};
    if ((i = cli_parse_name(v, names, 2)) < 0) return -1;
    o->bias = i;
    return 0;
  }
  if (strcmp(a, "--rotate") == 0) {
    if (cli_parse_int(v, 1, CLI_MAX_ROTATE, &n)) return -1;
    o->rotate = (int)n;
    return 0;
  }
  if (strcmp(a, "--peak-tflops") == 0) return parse_positive(v, &o->peak_tflops);
  if (strcmp(a, "--nvlink-gbps") == 0) return parse_positive(v, &o->nvlink_gbps);
  if (strcmp(a, "--hbm-gbps") == 0) return parse_positive(v, &o->hbm_gbps);
  if (strcmp(a, "--json") == 0) {
    if (*v == '\0') return -1;
    o->json = v;
    return 0;
  }
  if (strcmp(a, "--trace") == 0) {
    if (*v == '\0') return -1;
    o->trace = v;
    return 0;
  }
  return 1;
}

int cli_parse(int argc, char **argv, cli_options *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->command = "help";
  o->gpus = 0;
  o->bytes = 256ull << 20;
  o->iters = 20;
  o->warmup = 3;
  /* moe: FlashDMoE's setup */
  o->tokens[0] = 8192;
  o->ntokens = 1;
  o->hidden = 2048;
  o->ffn = 2048;
  o->experts = 32;
  o->topk = 2;
  o->dtype = 1; /* bf16 */
  o->act = 2;   /* silu */
  o->weights = 0; /* out-in (PyTorch's layout) */
  o->gate = 0;    /* exact */
  o->check_tokens = 64;
  o->impl = CLI_IMPL_FUSED | CLI_IMPL_BASELINE;
  o->launch = CLI_LAUNCH_THREADS; /* as the baseline; docs/benchmark.md */
  o->rotate = 4;
  int i = 1;
  if (i < argc && argv[i][0] != '-') o->command = argv[i++];
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      o->command = "help";
      continue;
    }
    if (v == NULL) {
      snprintf(err, errlen, "option %s needs a value", a);
      return -1;
    }
    if (strcmp(a, "--gpus") == 0) {
      if (cli_parse_int(v, 0, 1024, &n)) goto bad;
      o->gpus = (int)n;
    } else if (strcmp(a, "--bytes") == 0) {
      if (cli_parse_size(v, &o->bytes) || o->bytes == 0) goto bad;
    } else if (strcmp(a, "--iters") == 0) {
      if (cli_parse_int(v, 1, 1000000, &n)) goto bad;
      o->iters = (int)n;
    } else if (strcmp(a, "--warmup") == 0) {
      if (cli_parse_int(v, 0, 1000000, &n)) goto bad;
      o->warmup = (int)n;
    } else {
      const int m = parse_moe_option(a, v, o);
      if (m < 0) goto bad;
      if (m > 0) {
        snprintf(err, errlen, "unknown option %s", a);
        return -1;
      }
    }
    i++;
    continue;
  bad:
    if (strcmp(a, "--dtype") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (fp32, bf16 or fp16)", v, a);
    else if (strcmp(a, "--impl") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (fused, baseline or both)", v, a);
    else if (strcmp(a, "--flush-l2") == 0 || strcmp(a, "--bias") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (0 or 1)", v, a);
    else if (strcmp(a, "--launch") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (serial or threads)", v, a);
    else if (strcmp(a, "--act") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (none, relu, gelu, silu or swiglu)", v, a);
    else if (strcmp(a, "--weights") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (out-in or in-out)", v, a);
    else if (strcmp(a, "--gate") == 0)
      snprintf(err, errlen, "bad value '%s' for %s (exact or fast)", v, a);
    else
      snprintf(err, errlen, "bad value '%s' for %s", v, a);
    return -1;
  }
  return 0;
}
