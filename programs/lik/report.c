/* report.c — shared pieces of the command's JSON report (see report.h). */
#include "report.h"

#include <stdio.h>

void report_add_quality(cJSON *o, int64_t nevals, double ndcg_sum, double recall_sum) {
  cJSON_AddNumberToObject(o, "queries_evaluated", (double)nevals);
  if (nevals) {
    cJSON_AddNumberToObject(o, "ndcg@10", ndcg_sum / (double)nevals);
    cJSON_AddNumberToObject(o, "recall@100", recall_sum / (double)nevals);
  } else {
    cJSON_AddNullToObject(o, "ndcg@10");
    cJSON_AddNullToObject(o, "recall@100");
  }
}

void report_add_results(cJSON *o, int64_t nq, const int64_t *qids, const int64_t *index,
                        const float *score, int64_t K, const int64_t *counts, int64_t kshow,
                        const int64_t *doc_ids) {
  cJSON *res = cJSON_AddArrayToObject(o, "results");
  for (int64_t i = 0; i < nq; i++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "query_id", (double)qids[i]);
    cJSON *ids = cJSON_AddArrayToObject(r, "doc_ids");
    cJSON *idx = cJSON_AddArrayToObject(r, "doc_index");
    cJSON *sc = cJSON_AddArrayToObject(r, "scores");
    const int64_t n = counts && counts[i] < kshow ? counts[i] : kshow;
    for (int64_t j = 0; j < n && (counts || index[i * K + j] >= 0); j++) {
      const int64_t x = index[i * K + j];
      cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)(doc_ids ? doc_ids[x] : x)));
      cJSON_AddItemToArray(idx, cJSON_CreateNumber((double)x));
      cJSON_AddItemToArray(sc, cJSON_CreateNumber((double)score[i * K + j]));
    }
    cJSON_AddItemToArray(res, r);
  }
}

int report_print(cJSON *o, const char *prog) {
  char *txt = cJSON_Print(o);
  cJSON_Delete(o);
  if (!txt) {
    fprintf(stderr, "%s: error: out of memory writing JSON\n", prog);
    return -1;
  }
  fputs(txt, stdout);
  fputc('\n', stdout);
  cJSON_free(txt);
  return 0;
}
