/*
 * maxsim_ref.h — the float64 reference of MaxSim and of its backward
 * (include/lik.h): the test oracle, and nothing else.  Scalar, unblocked,
 * every sum in double in ascending order.
 *
 * One layout serves every call: a sequence is a run of rows of a dense
 * [rows, dim] array (padded batches are runs of equal length), so the cross,
 * KD, pairs and packed (cu_seqlens) calls are all "score query sequence qi
 * against document sequence dj" for the pairs the call names.
 *
 * Semantics (lik.h): a masked token is never read; a query token with no
 * valid document token contributes 0 (argmax -1); a similarity of -inf wins
 * a max nothing else won (argmax: its first token), +inf beats everything; a
 * NaN similarity never wins; ties go to the lowest token index.  normalize:
 * every token x becomes x / max(||x||, LIK_NORM_EPS) (computed in double).
 */
#ifndef LIK_REF_MAXSIM_REF_H
#define LIK_REF_MAXSIM_REF_H

#include <stdint.h>

/* Sequence n is rows offsets[n] .. offsets[n+1]-1 of x[rows * dim]; mask
 * NULL (all valid) or mask[row] != 0 for a valid row. */
typedef struct {
  const double *x;
  const int64_t *offsets; /* [count + 1] */
  int64_t dim;
  const uint8_t *mask;
} lik_ref_seqs;

/* The similarity <q, d> of query token s of sequence qi and document token t
 * of sequence dj (normalised with normalize); absum (NULL or out): sum_k
 * |q_k d_k| of the same terms, the error scale of a kernel's dot. */
double lik_ref_sim(const lik_ref_seqs *Q, int64_t qi, int64_t s, const lik_ref_seqs *D,
                   int64_t dj, int64_t t, int normalize, double *absum);

/* score(qi, dj) = sum over valid query tokens s of max over valid document
 * tokens t of lik_ref_sim.  argmax: NULL or [length of qi], the winning t
 * per s (-1: s masked or no winner).  scale: NULL or out, sum over those s of
 * max over t of absum (where an fp32 kernel's rounding error scales). */
double lik_ref_maxsim_pair(const lik_ref_seqs *Q, int64_t qi, const lik_ref_seqs *D, int64_t dj,
                           int normalize, int32_t *argmax, double *scale);

/* Gradient accumulators, [rows, dim] each (NULL: skipped): gq / gd of the
 * query / document side, and their error scales gq_scale / gd_scale (sum of
 * the terms' absolute values: where a kernel's rounding error scales). */
typedef struct {
  double *gq, *gd, *gq_scale, *gd_scale;
} lik_ref_grads;

/* The backward of one pair given the forward's argmax ([length of qi]; the
 * gradient flows through the winning token only) and grad_score g: adds
 * g * d score / d Q to the rows of qi and g * d score / d D to the rows of
 * dj, through the normalisation's Jacobian (I - x̂ x̂ᵀ) / ||x|| (1 / eps
 * below the clamp).  A masked query token, or argmax -1, contributes
 * nothing. */
void lik_ref_maxsim_pair_backward(const lik_ref_seqs *Q, int64_t qi, const lik_ref_seqs *D,
                                  int64_t dj, int normalize, const int32_t *argmax, double g,
                                  const lik_ref_grads *out);

#endif /* LIK_REF_MAXSIM_REF_H */
