/* JSON output of the loom CLI. */
#include "report.h"

/* Strings here are our own names (dtype, activation, GPU model): escape
 * the two characters JSON cannot carry raw, drop control characters. */
static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s != NULL && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

int cli_write_moe_json(FILE *f, const cli_moe_run *run, const cli_moe_row *rows, int n) {
  static const char *phase_names[5] = {"gate", "place", "dispatch", "experts", "combine"};
  fprintf(f, "{\n  \"command\": \"moe\",\n  \"gpus\": %d,\n  \"device\": ", run->gpus);
  put_string(f, run->device);
  fprintf(f, ",\n  \"experts\": %lld,\n  \"top_k\": %lld,\n  \"hidden\": %lld,\n  \"ffn\": %lld,\n",
          run->experts, run->top_k, run->hidden, run->ffn);
  fprintf(f, "  \"dtype\": ");
  put_string(f, run->dtype);
  fprintf(f, ",\n  \"act\": ");
  put_string(f, run->act);
  fprintf(f, ",\n  \"iters\": %d,\n  \"warmup\": %d,\n  \"rows\": [", run->iters, run->warmup);
  for (int i = 0; i < n; i++) {
    const cli_moe_row *r = &rows[i];
    fprintf(f,
            "%s\n    {\"tokens_per_gpu\": %d, \"median_us\": %.3f, \"min_us\": %.3f, "
            "\"max_us\": %.3f, \"tflops_per_gpu\": %.3f, \"remote_mb_per_gpu\": %.3f, "
            "\"remote_gbps_per_gpu\": %.3f, \"phase_end_us\": {",
            i ? "," : "", r->T, r->med_us, r->min_us, r->max_us, r->tflops, r->remote_mb,
            r->gbps);
    for (int p = 0; p < 5; p++)
      fprintf(f, "%s\"%s\": %.1f", p ? ", " : "", phase_names[p], r->phase_us[p]);
    fprintf(f, "}}");
  }
  fprintf(f, "\n  ]\n}\n");
  return ferror(f) ? -1 : 0;
}
