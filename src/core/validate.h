/*
 * validate.h — checks shared by every public entry point.  Each returns LIK_OK
 * or a status whose message (lik_fail) names the argument and the sizes.
 */
#ifndef LIK_VALIDATE_H
#define LIK_VALIDATE_H

#include "problem.h"

/* LIK_ERR_UNSUPPORTED for CUDA tensors in a build without the CUDA backend. */
lik_status lik_no_cuda_backend(void);

/* Clears the thread-local message at the start of a public call. */
void lik_clear_error(void);

/* Short dtype name ("float32", "bfloat16", ...). */
const char *lik_dtype_name(lik_dtype dtype);

/* Bytes per element. */
size_t lik_dtype_size(lik_dtype dtype);

/* Formats t's shape as "[2, 3, 4]" into buf (size >= 96). */
const char *lik_shape_str(const lik_tensor *t, char *buf);

/* name must be non-NULL, have ndim in [min_ndim, max_ndim], non-negative
 * sizes, data set when it has elements, a known dtype and device, and
 * strides whose byte extent int64 can count (so no offset into the view
 * overflows). */
lik_status lik_check_tensor(const lik_tensor *t, const char *name, int min_ndim,
                            int max_ndim);

/* Embeddings: F32, F16, BF16 or F64. */
lik_status lik_check_float(const lik_tensor *t, const char *name);

/* An index tensor (cu_seqlens, pair lists, codes, lengths, ids):
 * lik_check_tensor, then dtype I32 or I64. */
lik_status lik_check_index(const lik_tensor *t, const char *name, int min_ndim, int max_ndim);

/* A mask (BOOL or U8) whose shape equals the expected ndim/shape. */
lik_status lik_check_mask(const lik_tensor *m, const char *name, int ndim,
                          const int64_t *shape);

/* An output view with elements writes each once: sorted by |stride|, every
 * dimension of size > 1 steps past what the smaller strides reach (so no
 * stride 0 over a dimension of size > 1). */
lik_status lik_check_no_overlap(const lik_tensor *t, const char *name);

/* Aliasing: ts[0 .. n) are a call's tensors (NULL entries skipped), the last
 * nout of them its outputs, all accepted by lik_check_tensor.  The byte
 * range of every non-empty output may not intersect that of any other
 * listed tensor (LIK_ERR_VALUE, naming both). */
lik_status lik_check_disjoint(const lik_tensor *const *ts, const char *const *names, int n,
                              int nout);

/* An output of the given dtype and exact shape. */
lik_status lik_check_output(const lik_tensor *t, const char *name,
                            lik_dtype dtype, int ndim, const int64_t *shape);

/* A forward's scores: F32, or F64 when p's inputs are F64 (the sum kept in
 * double), with the given shape and non-overlapping elements; sets
 * p->out.scores or p->out.scores_f64 (the strides are the caller's to set). */
lik_status lik_fill_scores(lik_problem *p, const lik_tensor *scores, int ndim,
                           const int64_t *shape);

/* All non-NULL tensors of a call are on one device; *device, *device_id get it. */
lik_status lik_check_devices(const lik_tensor *const *ts, const char *const *names,
                             int n, lik_device_type *device, int32_t *device_id);

/* Q and D: present, ndim in [q_min, q_max] / [d_min, d_max], floating, the
 * same dtype and the same d, 1 <= d <= INT32_MAX; padded (not packed [rows,
 * d]) also Lq, Ld <= INT32_MAX.  The one place these limits are enforced, so
 * every backend and dtype path returns the same status. */
lik_status lik_check_embeddings(const lik_tensor *Q, const lik_tensor *D, int q_min,
                                int q_max, int d_min, int d_max, int padded);

/* The pairing of lik_maxsim's Q and D (cross, or KD for a 4-D D, which must
 * match a 3-D Q's Nq): sets p->pairing and p->ncand, and the scores' shape
 * grid[0..*ndim) (the dims of 2-D inputs dropped); *has_i / *has_j say whether
 * the query / candidate dimension is present. */
lik_status lik_layout_of(const lik_tensor *Q, const lik_tensor *D, lik_problem *p,
                         int64_t grid[2], int *ndim, int *has_i, int *has_j);

/* The pairs layout (lik_maxsim_pairs and its backward): Q [B, Lq, d] and
 * D [B, Ld, d] with the same B; sets p->pairing (KD with K = 1) and
 * p->ncand. */
lik_status lik_pairs_layout(const lik_tensor *Q, const lik_tensor *D, lik_problem *p);

/* Strides of an output-grid tensor t (scores, argmax, grad_scores) whose
 * first ndim dims are the grid: *si over queries (0 without that dim),
 * *sj over candidates (0 without). */
void lik_grid_strides(const lik_tensor *t, int ndim, int has_i, int has_j, int64_t *si,
                      int64_t *sj);

/* o->argmax and its strides from an argmax view (NULL: none) over the grid
 * plus the query tokens. */
void lik_set_argmax(lik_out *o, const lik_tensor *argmax, int ndim, int has_i, int has_j);

/* opts->q_lengths / d_lengths of a padded call over Q / D (after p's
 * sequences and device are set): I32, Q's / D's shape without [L, d], on
 * the call's device; on the CPU every entry in [0, L] (LIK_ERR_VALUE).
 * Also checks opts->fp32_precision. */
lik_status lik_fill_lengths(lik_problem *p, const lik_tensor *Q, const lik_tensor *D,
                            const lik_options *opts);

/* Calls that take no lik_options lengths (packed, low-bit, fused head,
 * residual MaxSim): opts
 * carries no lengths and a valid fp32_precision, else LIK_ERR_VALUE with
 * why ("packed calls take their lengths from cu_seqlens") in the message. */
lik_status lik_check_no_lengths(const lik_options *opts, const char *why);

/* Fills a padded lik_seqs from a [.., L, d] view (2-D [T, d]: one sequence
 * of T tokens, as the codec's and the index's row arrays). */
lik_seqs lik_seqs_from(const lik_tensor *t);

/* Fills a lik_mask from a [.., L] mask view (NULL: all valid). */
lik_mask lik_mask_from(const lik_tensor *m);

/* The part every forward shares: checks q_mask / d_mask against Q / D, the
 * devices of Q, D, the masks and the outputs out1 ("scores") and out2
 * (named out2_name), then fills p's sequences, masks and options. */
lik_status lik_fill_common(lik_problem *p, const lik_tensor *Q, const lik_tensor *D,
                           const lik_tensor *q_mask, const lik_tensor *d_mask,
                           const lik_tensor *out1, const lik_tensor *out2,
                           const char *out2_name, const lik_options *opts);

/* ---- packed layouts (src/core/packed.c) ---- */

/* Sizes of a packed call, read from cu_seqlens (lq_max / ld_max: -1 where the
 * lengths stay on the device) and the pair list. */
typedef struct {
  int64_t nq, nd, lq_max, ld_max, npairs;
} lik_packed_dims;

/* cu_seqlens: 1-D I32/I64 [N+1], starts at 0, non-decreasing, last == rows
 * (named rows_name in messages); *out views it, *count = N.  The values are
 * checked (and *maxlen found) on the host only: on CUDA they stay on the
 * device (no copy, no sync) and *maxlen is -1. */
lik_status lik_check_cu_seqlens(const lik_tensor *cu, const char *name, int64_t rows,
                                const char *rows_name, int on_host, lik_index *out,
                                int64_t *count, int64_t *maxlen);

/* Q, D [rows, d], cu_seqlens (checked on the host unless on CUDA), optional
 * pair lists, masks and options into p and pd (devices of the inputs set). */
lik_status lik_packed_problem(lik_problem *p, lik_packed_dims *pd, const lik_tensor *Q,
                              const lik_tensor *D, const lik_tensor *cu_q,
                              const lik_tensor *cu_d, const lik_tensor *pair_q,
                              const lik_tensor *pair_d, const lik_tensor *q_mask,
                              const lik_tensor *d_mask, const lik_options *opts);

/* The output grid of a packed call: [npairs] (pair list) or [Nq, Nd];
 * returns its ndim. */
int lik_packed_grid(const lik_problem *p, const lik_packed_dims *pd, int64_t grid[2]);

/* argmax of a packed call: I32, grid + [Lmax] with Lmax >= lq_max. */
lik_status lik_check_packed_argmax(const lik_tensor *a, int ndim, const int64_t *grid,
                                   int64_t lq_max);

#endif /* LIK_VALIDATE_H */
