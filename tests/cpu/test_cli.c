/* CLI parsing (sizes, integers, lists and the option set of `loom`), the
 * JSON report and the benchmark harness's pure parts. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "cli/args.h"
#include "cli/harness.h"
#include "cli/report.h"
#include "reference/reference.h"
#include "../check.h"

static int parse(cli_options *o, char *err, int argc, const char **argv) {
  return cli_parse(argc, (char **)argv, o, err, 256);
}

/* The `moe` flags: values, names, lists, missing values, defaults. */
static void test_moe_options(void) {
  cli_options o;
  char err[256];
  const char *d[] = {"loom", "moe"};
  CHECK(parse(&o, err, 2, d) == 0 && strcmp(o.command, "moe") == 0 && o.ntokens == 1 &&
            o.tokens[0] == 8192 && o.hidden == 2048 && o.ffn == 2048 && o.experts == 32 &&
            o.topk == 2 && strcmp(cli_dtype_names[o.dtype], "bf16") == 0 &&
            strcmp(cli_act_names[o.act], "silu") == 0 && o.check_tokens == 64 && o.iters == 20 &&
            o.warmup == 3 && o.gpus == 0 && strcmp(cli_weights_names[o.weights], "out-in") == 0 &&
            o.weights == LOOM_WEIGHTS_OUT_IN && o.gate == LOOM_GATE_EXACT,
        "moe defaults (weights out-in, PyTorch's layout; gate exact)");
  const char *a[] = {"loom",     "moe",  "--gpus",   "4",    "--tokens",       "128,4K,8192",
                     "--hidden", "1024", "--ffn",    "4096", "--experts",      "64",
                     "--topk",   "8",    "--dtype",  "fp16", "--act",          "swiglu",
                     "--iters",  "7",    "--warmup", "0",    "--check-tokens", "16",
                     "--weights", "in-out"};
  CHECK(parse(&o, err, 26, a) == 0 && o.gpus == 4 && o.ntokens == 3 && o.tokens[0] == 128 &&
            o.tokens[1] == 4096 && o.tokens[2] == 8192 && o.hidden == 1024 && o.ffn == 4096 &&
            o.experts == 64 && o.topk == 8 && strcmp(cli_dtype_names[o.dtype], "fp16") == 0 &&
            strcmp(cli_act_names[o.act], "swiglu") == 0 && o.iters == 7 && o.warmup == 0 &&
            o.check_tokens == 16 && o.weights == LOOM_WEIGHTS_IN_OUT,
        "every moe option: %s", err);
  const char *w[] = {"loom", "moe", "--weights", "out-in"};
  CHECK(parse(&o, err, 4, w) == 0 && o.weights == LOOM_WEIGHTS_OUT_IN, "--weights out-in");
  const char *gf[] = {"loom", "moe", "--gate", "fast"}, *ge[] = {"loom", "moe", "--gate", "exact"};
  CHECK(parse(&o, err, 4, gf) == 0 && o.gate == LOOM_GATE_FAST &&
            strcmp(cli_gate_names[o.gate], "fast") == 0,
        "--gate fast: %s", err);
  CHECK(parse(&o, err, 4, ge) == 0 && o.gate == LOOM_GATE_EXACT, "--gate exact: %s", err);
  const char *names[][2] = {{"fp32", "relu"}, {"bf16", "gelu"}, {"fp16", "silu"}};
  for (int i = 0; i < 3; i++) {
    const char *n[] = {"loom", "moe", "--dtype", names[i][0], "--act", names[i][1]};
    CHECK(parse(&o, err, 6, n) == 0 && o.dtype == i && o.act == i, "dtype %s act %s", names[i][0],
          names[i][1]);
  }
  CHECK(parse(&o, err, 2, d) == 0 && !o.act_given, "--act not given");
  const char *none[] = {"loom", "ag-gemm", "--act", "none"};
  CHECK(parse(&o, err, 4, none) == 0 && o.act == CLI_ACT_NONE && o.act_given &&
            strcmp(o.command, "ag-gemm") == 0,
        "--act none (the collective GEMMs' plain epilogue): %s", err);
  const char *ar[] = {"loom",  "gemm-ar", "--tokens", "301,4K", "--hidden", "8192", "--ffn",
                      "28672", "--act",   "gelu",     "--impl", "fused",    "--dtype", "fp16"};
  CHECK(parse(&o, err, 14, ar) == 0 && strcmp(o.command, "gemm-ar") == 0 && o.ntokens == 2 &&
            o.tokens[0] == 301 && o.tokens[1] == 4096 && o.hidden == 8192 && o.ffn == 28672 &&
            o.act == LOOM_ACT_GELU && o.act_given && o.impl == CLI_IMPL_FUSED &&
            o.dtype == LOOM_FP16,
        "gemm-ar takes gemm-rs's flags (any --tokens): %s", err);
  CHECK(strcmp(cli_act_name(CLI_ACT_NONE), "none") == 0 && strcmp(cli_act_name(2), "silu") == 0,
        "cli_act_name");
  const char *one[] = {"loom", "moe", "--tokens", "0"};
  CHECK(parse(&o, err, 4, one) == 0 && o.ntokens == 1 && o.tokens[0] == 0, "zero tokens allowed");
  CHECK(cli_parse_name("bf16", cli_dtype_names, CLI_NUM_DTYPES) == 1, "name lookup");
  CHECK(cli_parse_name("BF16", cli_dtype_names, CLI_NUM_DTYPES) == -1, "names are exact");
  CHECK(cli_parse_name(NULL, cli_act_names, CLI_NUM_ACTS) == -1, "NULL name");

  /* bad values name the option (and the accepted names) */
  const struct {
    const char *opt, *val, *needle;
  } bad[] = {
      {"--dtype", "fp8", "fp32, bf16 or fp16"},
      {"--dtype", "", "--dtype"},
      {"--act", "tanh", "relu, gelu, silu or swiglu"},
      {"--act", "SiLU", "--act"},
      {"--weights", "pytorch", "out-in or in-out"},
      {"--weights", "OUT-IN", "--weights"},
      {"--gate", "fp16", "exact or fast"},
      {"--gate", "FAST", "--gate"},
      {"--tokens", "1,,2", "--tokens"},
      {"--tokens", "1,2,", "--tokens"},
      {"--tokens", ",1", "--tokens"},
      {"--tokens", "x", "--tokens"},
      {"--tokens", "17M", "--tokens"},
      {"--tokens", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "--tokens"},
      {"--hidden", "0", "--hidden"},
      {"--hidden", "-64", "--hidden"},
      {"--ffn", "2k", "--ffn"},
      {"--experts", "0", "--experts"},
      {"--experts", "1025", "--experts"},
      {"--topk", "0", "--topk"},
      {"--topk", "two", "--topk"},
      {"--check-tokens", "0", "--check-tokens"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *v[] = {"loom", "moe", bad[i].opt, bad[i].val};
    err[0] = '\0';
    CHECK(parse(&o, err, 4, v) == -1 && strstr(err, bad[i].needle) != NULL,
          "%s '%s' is refused naming \"%s\": %s", bad[i].opt, bad[i].val, bad[i].needle, err);
  }
  const char *missing[] = {"--tokens", "--hidden", "--ffn", "--experts",
                           "--topk",   "--dtype",  "--act", "--check-tokens", "--weights",
                           "--gate"};
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    const char *v[] = {"loom", "moe", "--topk", "4", missing[i]};
    err[0] = '\0';
    CHECK(parse(&o, err, 5, v) == -1 && strstr(err, missing[i]) && strstr(err, "needs a value"),
          "%s without a value: %s", missing[i], err);
  }
  /* the info command keeps working with the new options around */
  const char *info[] = {"loom", "info", "--bytes", "1M", "--gpus", "2"};
  CHECK(parse(&o, err, 6, info) == 0 && strcmp(o.command, "info") == 0 && o.bytes == 1u << 20 &&
            o.gpus == 2,
        "info after moe options");
}

/* --json parsing and the JSON writer, read back as text. */
static void test_json(void) {
  cli_options o;
  char err[256];
  const char *a1[] = {"loom", "moe", "--json", "out.json"};
  CHECK(parse(&o, err, 4, a1) == 0 && o.json != NULL && strcmp(o.json, "out.json") == 0,
        "--json FILE");
  const char *a2[] = {"loom", "moe", "--json", ""};
  CHECK(parse(&o, err, 4, a2) == -1 && strstr(err, "--json"), "--json needs a name");
  const char *a3[] = {"loom", "moe"};
  CHECK(parse(&o, err, 2, a3) == 0 && o.json == NULL, "no --json by default");
  CHECK(o.impl == (CLI_IMPL_FUSED | CLI_IMPL_BASELINE) && o.rotate == 4 && o.flush_l2 == 0 &&
            o.launch == CLI_LAUNCH_THREADS && o.peak_tflops == 0 && o.nvlink_gbps == 0 && o.hbm_gbps == 0,
        "benchmark defaults");
  const char *a5[] = {"loom", "gemm-rs", "--launch", "serial"};
  CHECK(parse(&o, err, 4, a5) == 0 && o.launch == CLI_LAUNCH_SERIAL, "--launch serial");
  CHECK(o.bias == 0, "no bias by default");
  const char *a6[] = {"loom", "ag-gemm", "--bias", "1"};
  CHECK(parse(&o, err, 4, a6) == 0 && o.bias == 1, "--bias 1");
  const char *a4[] = {"loom", "moe", "--impl", "baseline", "--flush-l2", "1", "--rotate", "8",
                      "--peak-tflops", "750.5", "--nvlink-gbps", "400", "--hbm-gbps", "4.2e3"};
  CHECK(parse(&o, err, 14, a4) == 0 && o.impl == CLI_IMPL_BASELINE && o.flush_l2 == 1 &&
            o.rotate == 8 && o.peak_tflops == 750.5 && o.nvlink_gbps == 400 &&
            o.hbm_gbps == 4200,
        "benchmark options");
  const char *bad[][2] = {{"--impl", "nccl"},      {"--flush-l2", "yes"}, {"--rotate", "0"},
                          {"--rotate", "65"},      {"--peak-tflops", "0"}, {"--nvlink-gbps", "-1"},
                          {"--hbm-gbps", "inf"},   {"--hbm-gbps", "12x"}, {"--peak-tflops", "nan"},
                          {"--launch", "parallel"}, {"--bias", "yes"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *a[] = {"loom", "moe", bad[i][0], bad[i][1]};
    CHECK(parse(&o, err, 4, a) == -1 && strstr(err, bad[i][0]), "%s %s refused: %s", bad[i][0],
          bad[i][1], err);
  }

  const cli_field shape[] = {{"experts", NULL, 32},     {"top_k", NULL, 2},
                             {"hidden", NULL, 2048},    {"ffn", NULL, 2048},
                             {"dtype", "bf16", 0},      {"act", "silu", 0},
                             {"weights", "out-in", 0}};
  const cli_run run = {"moe", 4, "NVIDIA \"H200\"", shape, 7, 20, 3, 0, 4,
                       {700.5, 410.25, 4200, "measured", "given", "measured"}};
  static const char *const phases[] = {"gate", "place", "dispatch", "experts", "combine"};
  cli_row rows[2] = {
      {8192, "fused", 2249.7, 2245.0, 2264.8, 122.2, 100.77, 44.8, 346.0, 15.38, 1.5, 5, phases,
       {295, 349, 592, 2106, 2238}, 0},
      {8192, "baseline", 3374.5, 3300.0, 3400.0, 81.5, 100.0, 29.6, 346.0, 10.25, 0, 0, NULL, {0}, 0}};
  FILE *f = tmpfile();
  CHECK(f != NULL, "tmpfile");
  if (f == NULL) return;
  CHECK(cli_write_json(f, &run, rows, 2) == 0, "json written");
  char buf[4096] = {0};
  rewind(f);
  const size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  CHECK(got > 0 && buf[0] == '{' && strstr(buf, "\n}\n") != NULL, "one object: %s", buf);
  CHECK(strstr(buf, "\"gpus\": 4,") && strstr(buf, "\"experts\": 32,") &&
            strstr(buf, "\"dtype\": \"bf16\"") && strstr(buf, "\"act\": \"silu\"") &&
            strstr(buf, "\"weights\": \"out-in\"") &&
            strstr(buf, "\"rotate\": 4,"),
        "header fields: %s", buf);
  CHECK(strstr(buf, "\"gemm_tflops\": 700.500, \"gemm_source\": \"measured\"") &&
            strstr(buf, "\"nvlink_gbps\": 410.250, \"nvlink_source\": \"given\""),
        "ceilings: %s", buf);
  CHECK(strstr(buf, "\"device\": \"NVIDIA \\\"H200\\\"\""), "quotes escaped: %s", buf);
  CHECK(strstr(buf, "{\"tokens_per_gpu\": 8192, \"impl\": \"fused\", \"median_us\": 2249.700") &&
            strstr(buf, "{\"tokens_per_gpu\": 8192, \"impl\": \"baseline\", \"median_us\": 3374.500") &&
            strstr(buf, "\"pct_of_bound\": 15.38, \"speedup_vs_baseline\": 1.500") &&
            strstr(buf, "\"experts\": 2106.0, \"combine\": 2238.0}}"),
        "rows: %s", buf);
  CHECK(strstr(buf, "\"pct_of_bound\": 10.25}"), "baseline row: no speedup, no phases: %s", buf);
  int braces = 0, brackets = 0;
  for (const char *p = buf; *p; p++) {
    braces += *p == '{' ? 1 : *p == '}' ? -1 : 0;
    brackets += *p == '[' ? 1 : *p == ']' ? -1 : 0;
  }
  CHECK(braces == 0 && brackets == 0, "balanced: %d %d", braces, brackets);
  /* byte for byte what `loom moe --json` wrote before the harness split */
  static const char want[] =
      "{\n"
      "  \"command\": \"moe\",\n"
      "  \"gpus\": 4,\n"
      "  \"device\": \"NVIDIA \\\"H200\\\"\",\n"
      "  \"experts\": 32,\n"
      "  \"top_k\": 2,\n"
      "  \"hidden\": 2048,\n"
      "  \"ffn\": 2048,\n"
      "  \"dtype\": \"bf16\",\n"
      "  \"act\": \"silu\",\n"
      "  \"weights\": \"out-in\",\n"
      "  \"iters\": 20,\n"
      "  \"warmup\": 3,\n"
      "  \"flush_l2\": 0,\n"
      "  \"rotate\": 4,\n"
      "  \"ceilings\": {\"gemm_tflops\": 700.500, \"gemm_source\": \"measured\", "
      "\"nvlink_gbps\": 410.250, \"nvlink_source\": \"given\", \"hbm_gbps\": 4200.000, "
      "\"hbm_source\": \"measured\"},\n"
      "  \"rows\": [\n"
      "    {\"tokens_per_gpu\": 8192, \"impl\": \"fused\", \"median_us\": 2249.700, "
      "\"min_us\": 2245.000, \"max_us\": 2264.800, \"tflops_per_gpu\": 122.200, "
      "\"wire_mb_per_gpu\": 100.770, \"wire_gbps_per_gpu\": 44.800, \"bound_us\": 346.000, "
      "\"pct_of_bound\": 15.38, \"speedup_vs_baseline\": 1.500, "
      "\"phase_end_us\": {\"gate\": 295.0, \"place\": 349.0, \"dispatch\": 592.0, "
      "\"experts\": 2106.0, \"combine\": 2238.0}},\n"
      "    {\"tokens_per_gpu\": 8192, \"impl\": \"baseline\", \"median_us\": 3374.500, "
      "\"min_us\": 3300.000, \"max_us\": 3400.000, \"tflops_per_gpu\": 81.500, "
      "\"wire_mb_per_gpu\": 100.000, \"wire_gbps_per_gpu\": 29.600, \"bound_us\": 346.000, "
      "\"pct_of_bound\": 10.25}\n"
      "  ]\n"
      "}\n";
  CHECK(strcmp(buf, want) == 0, "the JSON of `loom moe` is unchanged:\n%s", buf);
  /* a measured host time per call follows the phases */
  rows[0].host_us = 12.25;
  FILE *g = tmpfile();
  CHECK(g != NULL, "tmpfile");
  if (g == NULL) return;
  CHECK(cli_write_json(g, &run, rows, 2) == 0, "json written");
  rewind(g);
  const size_t m = fread(buf, 1, sizeof buf - 1, g);
  buf[m] = 0;
  fclose(g);
  CHECK(strstr(buf, "\"combine\": 2238.0}, \"host_us_per_call\": 12.25},\n") &&
            strstr(buf, "\"pct_of_bound\": 10.25}\n"),
        "host time per call: %s", buf);
}

/* The harness's pure parts: the bound, the sampled rows, the time
 * statistics, the random streams and the task pool. */
static int near(double got, double want) { return fabs(got - want) <= 1e-9 * fabs(want); }

static int add_task(void *ctx, int i) {
  atomic_int *sum = (atomic_int *)ctx;
  atomic_fetch_add(sum, i);
  return i == 13 ? -1 : 0;
}

static void test_harness(void) {
  /* 100 TFLOP/s, 100 GB/s NVLink, 1000 GB/s HBM */
  const cli_ceilings c = {100, 100, 1000, "given", "given", "given"};
  const cli_work w[2] = {{1e12, 5e8, 1e9},  /* GEMM-bound: 10 ms */
                         {1e11, 2e9, 1e9}}; /* NVLink-bound: 20 ms */
  CHECK(near(cli_bound_us(w, 2, &c), 2e4), "bound: the slowest GPU's largest term: %g",
        cli_bound_us(w, 2, &c));
  CHECK(near(cli_bound_us(w, 1, &c), 1e4), "bound: one GPU sends nothing over NVLink: %g",
        cli_bound_us(w, 1, &c));
  const cli_ceilings no_link = {100, 0, 1000, "given", "unused (1 GPU)", "given"};
  const cli_work w1[2] = {{1e11, 2e9, 1e9}, {1e11, 2e9, 5e10}}; /* HBM-bound: 50 ms */
  CHECK(near(cli_bound_us(w1, 2, &no_link), 5e4), "bound: no NVLink ceiling, HBM term: %g",
        cli_bound_us(w1, 2, &no_link));

  int rows[8];
  cli_sample_rows(10, 4, rows);
  CHECK(rows[0] == 0 && rows[1] == 3 && rows[2] == 6 && rows[3] == 9, "sampled rows of 10");
  cli_sample_rows(7, 1, rows);
  CHECK(rows[0] == 0, "one sampled row is the first");
  cli_sample_rows(5, 5, rows);
  CHECK(rows[0] == 0 && rows[1] == 1 && rows[2] == 2 && rows[3] == 3 && rows[4] == 4,
        "every row when T <= --check-tokens");

  double g0[4] = {3, 1, 4, 1}, g1[4] = {2, 5, 1, 1};
  double *us[2] = {g0, g1};
  cli_row r;
  memset(&r, 0, sizeof r);
  cli_time_stats(us, 2, 4, &r); /* per iteration max: 3 5 4 1 */
  CHECK(r.med_us == 3.5 && r.min_us == 1 && r.max_us == 5, "even iterations: %g %g %g", r.med_us,
        r.min_us, r.max_us);
  double h0[3] = {9, 2, 4};
  double *one[1] = {h0};
  cli_time_stats(one, 1, 3, &r);
  CHECK(r.med_us == 4 && r.min_us == 2 && r.max_us == 9, "odd iterations, one GPU");

  float a[64], b[64], c2[64];
  cli_fill_random(a, 64, 0.5f, CLI_RNG_X, 1, 7, LOOM_BF16);
  cli_fill_random(b, 64, 0.5f, CLI_RNG_X, 1, 7, LOOM_BF16);
  cli_fill_random(c2, 64, 0.5f, CLI_RNG_X, 2, 7, LOOM_BF16);
  int same = 1, differ = 0, in_range = 1, rounded = 1;
  for (int i = 0; i < 64; i++) {
    same &= a[i] == b[i];
    differ += a[i] != c2[i];
    in_range &= a[i] >= -0.5f && a[i] <= 0.5f;
    float t = a[i];
    ref_round_array(&t, 1, LOOM_BF16);
    rounded &= t == a[i];
  }
  CHECK(same && differ > 32 && in_range && rounded,
        "random streams: repeatable, per index, in range, rounded to the dtype");

  /* The collective GEMMs' shape words and JSON fields (ag-gemm, gemm-rs, gemm-ar). */
  cli_options lo;
  memset(&lo, 0, sizeof lo);
  lo.bias = 1;
  cli_bench lb;
  memset(&lb, 0, sizeof lb);
  lb.o = &lo;
  lb.ngpu = 4;
  lb.dtype = LOOM_FP32;
  char text[160];
  cli_linear_describe(&lb, 8192, 28672, CLI_ACT_NONE, text, sizeof text);
  CHECK(strcmp(text, "hidden 8192, ffn 28672 (7168 per GPU), fp32 (TF32), act none, bias") == 0,
        "linear layer's header words: %s", text);
  lo.bias = 0;
  lb.dtype = LOOM_BF16;
  cli_linear_describe(&lb, 4096, 4096, 0, text, sizeof text);
  CHECK(strcmp(text, "hidden 4096, ffn 4096 (1024 per GPU), bf16, act relu") == 0,
        "linear layer's header words, no bias: %s", text);
  cli_field lf[8];
  const int nlf = cli_linear_fields(&lb, 4096, 14336, 0, lf, 8);
  CHECK(nlf == 5 && strcmp(lf[0].key, "hidden") == 0 && lf[0].num == 4096 && strcmp(lf[1].key, "ffn") == 0 &&
            lf[1].num == 14336 && strcmp(lf[2].str, "bf16") == 0 && strcmp(lf[3].str, "relu") == 0 &&
            strcmp(lf[4].key, "bias") == 0 && lf[4].num == 0,
        "linear layer's JSON fields (%d)", nlf);
  CHECK(cli_linear_fields(&lb, 4096, 14336, 0, lf, 2) == 2, "linear layer's JSON fields stop at max");

  atomic_int sum;
  atomic_init(&sum, 0);
  CHECK(cli_run_tasks(100, 8, add_task, &sum) == -1 && atomic_load(&sum) == 4950,
        "task pool: every task ran once, a failure is reported");
  atomic_init(&sum, 0);
  CHECK(cli_run_tasks(10, 3, add_task, &sum) == 0 && atomic_load(&sum) == 45,
        "task pool: no failure");
}

int main(void) {
  uint64_t v = 0;
  CHECK(cli_parse_size("123", &v) == 0 && v == 123, "plain");
  CHECK(cli_parse_size("64K", &v) == 0 && v == 65536, "K");
  CHECK(cli_parse_size("16M", &v) == 0 && v == 16u << 20, "M");
  CHECK(cli_parse_size("2g", &v) == 0 && v == 2ull << 30, "g");
  CHECK(cli_parse_size("", &v) == -1, "empty");
  CHECK(cli_parse_size("-1", &v) == -1, "negative");
  CHECK(cli_parse_size("12X", &v) == -1, "junk suffix");
  CHECK(cli_parse_size("1KB", &v) == -1, "two-letter suffix");
  CHECK(cli_parse_size("99999999999999999999", &v) == -1, "overflow");
  CHECK(cli_parse_size("17179869184G", &v) == -1, "overflow after shift");
  long n = 0;
  CHECK(cli_parse_int("42", 0, 100, &n) == 0 && n == 42, "int");
  CHECK(cli_parse_int("101", 0, 100, &n) == -1, "int above range");
  CHECK(cli_parse_int("4x", 0, 100, &n) == -1, "int junk");
  uint64_t list[4];
  CHECK(cli_parse_size_list("4096,8192,16K", list, 4) == 3 && list[2] == 16384, "list");
  CHECK(cli_parse_size_list("1,,2", list, 4) == -1, "empty item");
  CHECK(cli_parse_size_list("1,2,", list, 4) == -1, "trailing comma");
  CHECK(cli_parse_size_list("1,2,3,4,5", list, 4) == -1, "too many");

  cli_options o;
  char err[256];
  const char *a1[] = {"loom"};
  CHECK(parse(&o, err, 1, a1) == 0 && strcmp(o.command, "help") == 0, "no args is help");
  const char *a2[] = {"loom", "info", "--gpus", "4", "--bytes", "64M", "--iters", "5"};
  CHECK(parse(&o, err, 8, a2) == 0 && strcmp(o.command, "info") == 0 && o.gpus == 4 &&
            o.bytes == 64u << 20 && o.iters == 5 && o.warmup == 3,
        "info options");
  const char *a3[] = {"loom", "info", "--gpus"};
  CHECK(parse(&o, err, 3, a3) == -1 && strstr(err, "--gpus"), "missing value: %s", err);
  const char *a4[] = {"loom", "info", "--frobnicate", "1"};
  CHECK(parse(&o, err, 4, a4) == -1 && strstr(err, "--frobnicate"), "unknown option");
  const char *a5[] = {"loom", "info", "--iters", "0"};
  CHECK(parse(&o, err, 4, a5) == -1 && strstr(err, "--iters"), "iters must be >= 1");
  const char *a6[] = {"loom", "info", "--bytes", "0"};
  CHECK(parse(&o, err, 4, a6) == -1 && strstr(err, "--bytes"), "bytes must be > 0");
  CHECK(o.ntokens == 1 && o.tokens[0] == 8192 && o.hidden == 2048 && o.ffn == 2048 &&
            o.experts == 32 && o.topk == 2 && o.dtype == 1 && o.act == 2 && o.check_tokens == 64 &&
            o.weights == LOOM_WEIGHTS_OUT_IN,
        "moe defaults are FlashDMoE's setup, bf16, silu, out-in weights, whatever the command");
  test_moe_options();
  test_json();
  test_harness();
  return check_summary("test_cli");
}
