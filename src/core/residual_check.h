/*
 * residual_check.h — checks of the codec and residual-scoring calls
 * (src/core/residual.c).  Each returns LIK_OK or a status whose message
 * names the argument and the sizes.
 */
#ifndef LIK_CORE_RESIDUAL_CHECK_H
#define LIK_CORE_RESIDUAL_CHECK_H

#include "residual.h"
#include "validate.h"

/* nbits in {1, 2, 4, 8}. */
lik_status lik_check_nbits(int nbits);

/* The codec's nbits, layout and centroids [C, d] (F32/F16/BF16, d * nbits a
 * multiple of 8), and bucket_cutoffs [2^nbits - 1] / bucket_weights
 * [2^nbits] where needed, into *v. */
lik_status lik_codec_view_from(const lik_codec *c, int need_cutoffs, int need_weights,
                               lik_codec_view *v);

/* codes [T] I32/I64 and residuals U8 [T, width] as one sequence of T tokens;
 * with check_values, every code in [0, C). */
lik_status lik_ctokens_flat(const lik_tensor *codes, const lik_tensor *residuals,
                            const lik_codec_view *v, int check_values, lik_ctokens *ct);

/* codes [Nd, Ld], residuals [Nd, Ld, width], doc_lengths [Nd]; on the host
 * also every length in [0, Ld] and every code within a length in [0, C). */
lik_status lik_ctokens_padded(const lik_tensor *codes, const lik_tensor *residuals,
                              const lik_tensor *doc_lengths, const lik_codec_view *v,
                              int on_host, lik_ctokens *ct);

/* codes [T], residuals NULL or [T, width] (v may be NULL without them),
 * cu_seqlens_d [Nd + 1] over T; on the host also the cu_seqlens values and
 * every code in [0, ncent). */
lik_status lik_ctokens_packed(const lik_tensor *codes, const lik_tensor *residuals,
                              const lik_tensor *cu_seqlens_d, int64_t ncent,
                              const lik_codec_view *v, int on_host, lik_ctokens *ct);

#endif /* LIK_CORE_RESIDUAL_CHECK_H */
