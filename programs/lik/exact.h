/*
 * exact.h — the exact job of the `lik` command (`lik [OPTIONS] QUERIES
 * DOCS`): exact MaxSim top-k of every query over all documents (or over its
 * --rerank candidates), scored in blocks and merged in the library's top-k
 * order, with throughput and, given qrels, nDCG@10 / recall@100, on the CPU
 * or a CUDA device (--device).  main.c parses the options into an
 * exact_job; exact_run does the work.
 */
#ifndef LIK_CLI_EXACT_H
#define LIK_CLI_EXACT_H

#include "device.h"
#include "emb_io.h"

typedef struct exact_job {
  emb_sources qs, ds;        /* the query and document files (+ companions) */
  const char *qrels_path;    /* NULL: no quality metrics */
  const char *rerank_path;   /* NULL: search every document */
  long long top_k;           /* >= 1 */
  long long threads;         /* 0: the library's default */
  long long limit;           /* queries scored, -1: all */
  long long nprint;          /* queries printed (text report), -1: all */
  long long block_tokens;    /* padded document tokens per scoring block, >= 1 */
  long long rescore;         /* 0, or C: low-bit top k*C rescored exactly */
  int normalize, json;       /* 0 / 1 */
  int precision;             /* a precision (precision.h) */
  int using_default;         /* the bundled Cranfield data (the report says so) */
  device_kind device;        /* --device (device.h) */
  int device_id;             /* its CUDA ordinal */
} exact_job;

/* Runs the job; messages on stderr, the report on stdout.  Exit status: 0,
 * or 1 on an error (a file, a library call, memory, a device that is not
 * there: --device cuda without the CUDA backend or without a device). */
int exact_run(const exact_job *job);

#endif
