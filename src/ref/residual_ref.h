/*
 * residual_ref.h — the float64 reference of the residual codec and of
 * residual MaxSim (lik_experimental.h): the test oracle, and nothing else.
 * Inputs are plain contiguous arrays; the bit layout is lik_res_field's.
 */
#ifndef LIK_REF_RESIDUAL_REF_H
#define LIK_REF_RESIDUAL_REF_H

#include <stdint.h>

#include "lik_experimental.h"

/* out[k] = cent[code*d + k] + weights[bucket_k], L2-normalised (x / max(||x||,
 * 1e-12)) with normalize; res holds the token's d*nbits/8 bytes. */
void lik_ref_decode(const float *cent, int64_t d, const float *weights, int nbits,
                    lik_residual_layout layout, int64_t code, const uint8_t *res, int normalize,
                    double *out);

/* MaxSim of one query q [lq, d] against one compressed document of len
 * tokens (codes [len], residuals [len, d*nbits/8]); q normalised with
 * normalize.  argmax (NULL or [lq]): the winning token, lowest index on ties,
 * -1 for an empty document. */
double lik_ref_maxsim_residual(const float *q, int64_t lq, const float *cent, int64_t d,
                               const float *weights, int nbits, lik_residual_layout layout,
                               const int32_t *codes, const uint8_t *res, int64_t len,
                               int normalize, int32_t *argmax);

/* sum_s max_t cs[s*ncent + codes[t]] (0 for an empty document). */
double lik_ref_plaid_approx(const float *cs, int64_t lq, int64_t ncent, const int32_t *codes,
                            int64_t len);

/* The bucket of v: the number of cutoffs (2^nbits - 1 of them) below v. */
int lik_ref_bucket(const float *cutoffs, int nbits, float v);

/* numpy's "linear" quantile q of n values (sorted copy, fp64). */
double lik_ref_quantile(const float *v, int64_t n, double q);

#endif /* LIK_REF_RESIDUAL_REF_H */
