/*
 * report.h — the pieces of the command's JSON report that `lik` (search)
 * and `lik search` (PLAID index) share: quality metrics, the ranked results,
 * printing.
 */
#ifndef LIK_CLI_REPORT_H
#define LIK_CLI_REPORT_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* "queries_evaluated", and the mean "ndcg@10" / "recall@100" over them (null
 * when none was evaluated). */
void report_add_quality(cJSON *o, int64_t nevals, double ndcg_sum, double recall_sum);

/* "results": per query i, "query_id" qids[i] and its ranked "doc_ids",
 * "doc_index" and "scores": the first n entries of row i of index [nq, K]
 * and score [nq, K], n = min(kshow, counts[i]) (counts NULL: up to kshow, or
 * the first index < 0); doc_ids NULL: a document's id is its index. */
void report_add_results(cJSON *o, int64_t nq, const int64_t *qids, const int64_t *index,
                        const float *score, int64_t K, const int64_t *counts, int64_t kshow,
                        const int64_t *doc_ids);

/* Prints o (then a newline) to stdout and deletes it.  0, or -1 with a
 * message on stderr when out of memory. */
int report_print(cJSON *o, const char *prog);

#endif /* LIK_CLI_REPORT_H */
