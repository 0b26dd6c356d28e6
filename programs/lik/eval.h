/*
 * eval.h — relevance judgments and ranking metrics for the `lik` command.
 *
 * qrels file: one judgment a line, whitespace separated, either
 *   "query_id doc_id gain"            (3 columns), or
 *   "query_id iteration doc_id gain"  (4 columns, TREC qrels);
 * '#' starts a comment line.  Ids are integers, gains are integers >= 0
 * (negative gains are read as 0).  A (query, doc) pair judged twice counts
 * once; judged with two different gains it is an error.
 *
 * nDCG@k: DCG = sum_{r=1..k} gain_r / log2(r + 1) (linear gains, trec_eval's
 * convention), divided by the DCG of all judged gains of the query sorted
 * descending.  recall@k: |relevant in top k| / |relevant|, relevant = gain > 0.
 * A query with no relevant judgment is left out of both means.
 */
#ifndef LIK_CLI_EVAL_H
#define LIK_CLI_EVAL_H

#include <stdint.h>

/* The cut-offs the command reports (`lik` and `lik search`). */
#define NDCG_K 10
#define RECALL_K 100

typedef struct qrel {
  int64_t q, d, gain;
} qrel;

typedef struct qrels {
  qrel *v;
  int64_t n;
} qrels;

/* Reads, sorts and de-duplicates a qrels file; 0 on success, else a message
 * in err. */
int qrels_load(qrels *r, const char *path, char *err);
void qrels_free(qrels *r);

/* Metrics of one ranked list of `n` doc ids for query `q`.  Returns 0 when
 * the query has no relevant judgment (metrics not defined), 1 otherwise. */
int eval_query(const qrels *r, int64_t q, const int64_t *ranked, int64_t n, int ndcg_k,
               int recall_k, double *ndcg, double *recall);

/* Reads (query, doc) candidate pairs for reranking: "query doc" lines or a
 * TREC run ("query Q0 doc rank score tag"); sorted, duplicates dropped,
 * gain = 0.  0 on success. */
int pairs_load(qrels *r, const char *path, char *err);

/* The entries of query q: returns their count, *begin their first index. */
int64_t qrels_range(const qrels *r, int64_t q, int64_t *begin);

#endif
