/* JSON output of the loom CLI's benchmark commands. */
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

static void put_field(FILE *f, const char *key, const char *value) {
  fprintf(f, "  \"%s\": ", key);
  put_string(f, value);
  fprintf(f, ",\n");
}

int cli_write_json(FILE *f, const cli_run *run, const cli_row *rows, int n) {
  fprintf(f, "{\n  \"command\": ");
  put_string(f, run->command);
  fprintf(f, ",\n  \"gpus\": %d,\n", run->gpus);
  put_field(f, "device", run->device);
  for (int i = 0; i < run->nfields; i++) {
    const cli_field *x = &run->fields[i];
    if (x->str != NULL)
      put_field(f, x->key, x->str);
    else
      fprintf(f, "  \"%s\": %lld,\n", x->key, x->num);
  }
  fprintf(f, "  \"iters\": %d,\n  \"warmup\": %d,\n  \"flush_l2\": %d,\n  \"rotate\": %d,\n",
          run->iters, run->warmup, run->flush_l2, run->rotate);
  fprintf(f, "  \"ceilings\": {\"gemm_tflops\": %.3f, \"gemm_source\": ", run->ceil.peak_tflops);
  put_string(f, run->ceil.peak_src);
  fprintf(f, ", \"nvlink_gbps\": %.3f, \"nvlink_source\": ", run->ceil.nvlink_gbps);
  put_string(f, run->ceil.nvlink_src);
  fprintf(f, ", \"hbm_gbps\": %.3f, \"hbm_source\": ", run->ceil.hbm_gbps);
  put_string(f, run->ceil.hbm_src);
  fprintf(f, "},\n  \"rows\": [");
  for (int i = 0; i < n; i++) {
    const cli_row *r = &rows[i];
    fprintf(f, "%s\n    {\"tokens_per_gpu\": %d, \"impl\": ", i ? "," : "", r->T);
    put_string(f, r->impl);
    fprintf(f,
            ", \"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, "
            "\"tflops_per_gpu\": %.3f, \"wire_mb_per_gpu\": %.3f, \"wire_gbps_per_gpu\": %.3f, "
            "\"bound_us\": %.3f, \"pct_of_bound\": %.2f",
            r->med_us, r->min_us, r->max_us, r->tflops, r->wire_mb, r->gbps, r->bound_us,
            r->pct_bound);
    if (r->speedup > 0) fprintf(f, ", \"speedup_vs_baseline\": %.3f", r->speedup);
    if (r->nphases > 0) {
      fprintf(f, ", \"phase_end_us\": {");
      for (int p = 0; p < r->nphases; p++)
        fprintf(f, "%s\"%s\": %.1f", p ? ", " : "", r->phase_names[p], r->phase_us[p]);
      fprintf(f, "}");
    }
    if (r->host_us > 0) fprintf(f, ", \"host_us_per_call\": %.2f", r->host_us);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  return ferror(f) ? -1 : 0;
}
