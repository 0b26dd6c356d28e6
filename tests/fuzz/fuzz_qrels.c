/*
 * fuzz_qrels.c — fuzz target of the `lik` command's text parsers
 * (programs/lik/eval.c): the input is read as a qrels file (qrels_load, then
 * eval_query over a ranking of up to 256 distinct judged documents: nDCG and
 * recall must lie in [0, 1]) and as a candidate / TREC run file (pairs_load,
 * then qrels_range per entry).
 */
#include "fuzz_util.h" /* first: it asks for _GNU_SOURCE */

#include <stdlib.h>

#include "emb_io.h"
#include "eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[32], err[ERR_LEN];
  const int fd = fuzz_file(data, size, path);
  if (fd < 0) return 0;
  qrels r;
  err[0] = 0;
  if (qrels_load(&r, path, err) == 0) {
    /* a ranking: every judged document once, in reverse order of appearance */
    int64_t *ranked = calloc((size_t)(r.n > 0 ? r.n : 1), sizeof *ranked), m = 0;
    for (int64_t i = r.n - 1; ranked && i >= 0; i--) {
      int64_t j = 0;
      while (j < m && ranked[j] != r.v[i].d) j++;
      if (j == m && m < 256) ranked[m++] = r.v[i].d;
    }
    for (int64_t i = 0; ranked && i < r.n; i++) {
      double ndcg = -1, recall = -1;
      if (eval_query(&r, r.v[i].q, ranked, m, 10, 100, &ndcg, &recall) &&
          !(ndcg >= 0 && ndcg <= 1 + 1e-9 && recall >= 0 && recall <= 1))
        __builtin_trap(); /* metrics out of [0, 1] */
    }
    free(ranked);
    qrels_free(&r);
  } else if (!err[0]) {
    __builtin_trap();
  }
  err[0] = 0;
  if (pairs_load(&r, path, err) == 0) {
    for (int64_t i = 0; i < r.n; i++) {
      int64_t b, n = qrels_range(&r, r.v[i].q, &b);
      if (b > i || b + n <= i) __builtin_trap(); /* the range holds the entry */
    }
    qrels_free(&r);
  } else if (!err[0]) {
    __builtin_trap();
  }
  close(fd);
  return 0;
}
