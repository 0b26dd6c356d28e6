/*
 * codec.cu — the codec's compress on a CUDA device (kernels in codec.cuh):
 *
 * lik_cuda_codec_compress: lik_codec_compress on CUDA tensors, on the call's
 *   stream, no host synchronisation; scratch from lik's pool of the device.
 *   A token without a finite best centroid gets code -1 (its residual bytes
 *   are not written): the device cannot report it without a host sync.
 * lik_cuda_codec_compress_host: the same arithmetic for host data (the PLAID
 *   index's build / train / add with a device in the options): centroids and
 *   cutoffs copied once, tokens in chunks, codes and residual bytes copied
 *   back, synchronous; a token without a code is the CPU's error.  A staged
 *   handle keeps the device buffers between calls, and the tokens (k-means'
 *   assignment passes: LIK_CUDA_SAME_ROWS) or the centroids and cutoffs (the
 *   batches of an add: LIK_CUDA_SAME_CODEC) the caller says did not change.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.cuh"
#include "device.cuh"
#include "host.cuh"

extern "C" {
#include "../core/dtype.h"
#include "../core/validate.h"
}

namespace lik_cuda {
namespace codec {

static int elem_bytes(int dt) { return (int)lik_dtype_size((lik_dtype)dt); }

/* An operand's loader (codec.cuh, LD_*): vector loads for contiguous fp32 /
 * fp16 / bf16 rows with d and the row stride multiples of 4, aligned. */
static int loader(const void *p, int dt, int64_t sl, int64_t sk, int64_t dim) {
  const int es = elem_bytes(dt);
  if (sk != 1 || dim % 4 || sl % 4 || (uintptr_t)p % (uintptr_t)(4 * es)) return LD_GEN;
  return dt == LIK_F32 ? LD_F32 : dt == LIK_F16 ? LD_F16 : dt == LIK_BF16 ? LD_BF16 : LD_GEN;
}

typedef void (*argmax_fn)(KComp);

template <int XL> static argmax_fn argmax_for(int cl) {
  switch (cl) {
    case LD_F32: return argmax_kernel<XL, LD_F32>;
    case LD_F16: return argmax_kernel<XL, LD_F16>;
    case LD_BF16: return argmax_kernel<XL, LD_BF16>;
    default: return argmax_kernel<XL, LD_GEN>;
  }
}

static argmax_fn argmax_for(int xl, int cl) {
  switch (xl) {
    case LD_F32: return argmax_for<LD_F32>(cl);
    case LD_F16: return argmax_for<LD_F16>(cl);
    case LD_BF16: return argmax_for<LD_BF16>(cl);
    default: return argmax_for<LD_GEN>(cl);
  }
}

/* Launches the three kernels of one compress on st (P: everything but the
 * scratch and the split). */
static lik_status run(const Device &dev, cudaStream_t st, KComp &P) {
  const int64_t tiles = (P.T + CB_M - 1) / CB_M;
  if (tiles > INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "X: T=%lld tokens exceed one CUDA compress launch (at most "
                    "%lld)", (long long)P.T, (long long)INT32_MAX * CB_M);
  const int64_t ctiles = (P.c.ncent + CB_N - 1) / CB_N;
  const int64_t want = (int64_t)dev.info->sms * 4; /* 2 waves of 2 CTAs per SM */
  int64_t nsplit = tiles >= want ? 1 : (want + tiles - 1) / tiles;
  if (nsplit > ctiles) nsplit = ctiles;
  if (nsplit > 65535) nsplit = 65535;
  if (nsplit < 1) nsplit = 1;
  P.cper = ((P.c.ncent + nsplit - 1) / nsplit + CB_N - 1) / CB_N * CB_N;
  P.nsplit = (int)((P.c.ncent + P.cper - 1) / P.cper);
  StreamScratch sc(dev, st);
  cudaError_t e;
  if ((e = sc.get((void **)&P.part_m, (size_t)(P.nsplit * P.T) * sizeof(float))) ||
      (e = sc.get((void **)&P.part_i, (size_t)(P.nsplit * P.T) * sizeof(int32_t))) ||
      (e = sc.get((void **)&P.best, (size_t)P.T * sizeof(int32_t))))
    return lik_fail(LIK_ERR_ALLOC, "lik_codec_compress: cannot allocate %lld bytes of device "
                    "scratch for T=%lld tokens (%s)", (long long)((2 * P.nsplit + 1) * P.T * 4),
                    (long long)P.T, cudaGetErrorString(e));
  const argmax_fn fn = argmax_for(loader(P.x, P.x_dt, P.x_sl, P.x_sk, P.c.dim),
                                  loader(P.c.cent, P.c.cent_dt, P.c.cent_sc, P.c.cent_sk, P.c.dim));
  fn<<<dim3((unsigned)tiles, (unsigned)P.nsplit), 256, 0, st>>>(P);
  lik_status s = launched("the compress argmax kernel launch");
  if (s) return s;
  const int64_t cap = (int64_t)dev.info->sms * 8;
  int64_t g = (P.T + 255) / 256;
  pick_kernel<<<(unsigned)(g < cap ? g : cap), 256, 0, st>>>(P);
  if ((s = launched("the compress pick kernel launch"))) return s;
  if (!P.t.res) return LIK_OK;
  g = (P.T * P.c.width + 255) / 256;
  res_kernel<<<(unsigned)(g < cap ? g : cap), 256, 0, st>>>(P);
  return launched("the compress residual kernel launch");
}

/* P's codec (res::kcodec: the decoder's view, centroids on the device) and
 * cutoffs (NULL: codes only). */
static void set_codec(KComp &P, const lik_codec_view &v, const void *cut, int cut_dt,
                      int64_t cut_s) {
  P.c = res::kcodec(v);
  P.cut = cut;
  P.cut_dt = cut_dt;
  P.cut_s = cut_s;
  P.ncut = cut ? (1 << v.nbits) - 1 : 0;
}

} // namespace codec
} // namespace lik_cuda

using namespace lik_cuda;
using namespace lik_cuda::codec;

extern "C" lik_status lik_cuda_codec_compress(const lik_codec_problem *p) {
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  KComp P;
  memset(&P, 0, sizeof P);
  set_codec(P, p->codec, p->tok.res ? p->codec.cutoffs : NULL, p->codec.cutoffs_dtype,
            p->codec.cutoffs_s);
  P.x = p->x.data;
  P.x_dt = p->x.dtype;
  P.x_sl = p->x.sl;
  P.x_sk = p->x.sk;
  P.T = p->x.len;
  P.t = res::ktok(p->tok, p->codec.nbits);
  return run(dev, (cudaStream_t)p->call.stream, P);
}

/* ---- host data (the PLAID index's build on a device) ------------------------------ */

struct lik_cuda_staged {
  int device;
  void *x, *cent, *codes, *res, *hbuf;
  float *cut;
  size_t x_cap, cent_cap, codes_cap, res_cap, hbuf_cap;
  /* what x holds for a next call (all rows of these host tokens), or data NULL */
  const void *x_host;
  int64_t x_len, x_dim, x_sl, x_sk;
  int x_dt;
  /* what cent / cut hold (these host centroids and ncut cutoffs), or c_host NULL */
  const void *c_host, *cut_host;
  int64_t c_len, c_dim, c_sc, c_sk;
  int c_dt, ncut;
};

static void staged_release(lik_cuda_staged *s) {
  cudaFree(s->x);
  cudaFree(s->cent);
  cudaFree(s->codes);
  cudaFree(s->res);
  cudaFree(s->cut);
  free(s->hbuf);
  memset(s, 0, sizeof *s);
}

extern "C" void lik_cuda_staged_free(lik_cuda_staged *s) {
  if (!s) return;
  DeviceGuard scope(s->device);
  staged_release(s);
  free(s);
  (void)cudaGetLastError();
}

/* *p holds at least bytes (device memory). */
static lik_status dgrow(void **p, size_t *cap, size_t bytes, const char *what) {
  if (*cap >= bytes && *p) return LIK_OK;
  cudaFree(*p);
  *p = NULL;
  *cap = 0;
  const cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
  if (e != cudaSuccess) {
    *p = NULL;
    (void)cudaGetLastError();
    return lik_fail(LIK_ERR_ALLOC, "PLAID build on the GPU: cannot allocate %zu bytes of device "
                    "memory for %s (%s)", bytes, what, cudaGetErrorString(e));
  }
  *cap = bytes;
  return LIK_OK;
}

static lik_status hgrow(lik_cuda_staged *s, size_t bytes) {
  if (s->hbuf_cap >= bytes && s->hbuf) return LIK_OK;
  free(s->hbuf);
  s->hbuf = malloc(bytes ? bytes : 16);
  s->hbuf_cap = s->hbuf ? bytes : 0;
  return s->hbuf ? LIK_OK
                 : lik_fail(LIK_ERR_ALLOC, "PLAID build on the GPU: cannot allocate %zu bytes",
                            bytes);
}

/* Rows r0 .. r0+n of a strided host array (element (r, k) at r*sl + k*sk, es
 * bytes each) into dst [n][d], dense. */
static void pack_rows(const void *src, int es, int64_t sl, int64_t sk, int64_t r0, int64_t n,
                      int64_t d, void *dst) {
  const char *b = (const char *)src;
  char *o = (char *)dst;
  for (int64_t r = 0; r < n; r++)
    for (int64_t k = 0; k < d; k++)
      memcpy(o + (r * d + k) * es, b + ((r0 + r) * sl + k * sk) * es, (size_t)es);
}

static lik_status copy_fail(cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  return cuda_fail(e, what);
}

/* The centroids (dense, in their dtype) and ncut cutoffs (fp32) of v into
 * S->cent / S->cut, on st (pageable copies: the host data is read before the
 * return). */
static lik_status upload_codec(cudaStream_t st, const lik_codec_view &v, int ncut,
                               lik_cuda_staged *S) {
  const int64_t K = v.ncent, d = v.dim;
  const int ec = elem_bytes(v.cent_dtype);
  const size_t cb = (size_t)(K * d) * (size_t)ec;
  lik_status s;
  cudaError_t e;
  S->c_host = NULL;
  if ((s = dgrow(&S->cent, &S->cent_cap, cb, "the centroids"))) return s;
  const void *csrc = v.cent;
  if (!(v.cent_sk == 1 && v.cent_sc == d)) {
    if ((s = hgrow(S, cb))) return s;
    pack_rows(v.cent, ec, v.cent_sc, v.cent_sk, 0, K, d, S->hbuf);
    csrc = S->hbuf;
  }
  if ((e = cudaMemcpyAsync(S->cent, csrc, cb, cudaMemcpyHostToDevice, st)))
    return copy_fail(e, "copying the centroids to the device");
  if (!ncut) return LIK_OK;
  float cut[255];
  for (int i = 0; i < ncut; i++) cut[i] = lik_load_f32(v.cutoffs, v.cutoffs_dtype, i * v.cutoffs_s);
  size_t cap = S->cut ? 255 * sizeof(float) : 0;
  if ((s = dgrow((void **)&S->cut, &cap, 255 * sizeof(float), "the cutoffs"))) return s;
  if ((e = cudaMemcpyAsync(S->cut, cut, (size_t)ncut * sizeof(float), cudaMemcpyHostToDevice, st)))
    return copy_fail(e, "copying the cutoffs to the device");
  return LIK_OK;
}

static lik_status compress_host(const Device &dev, cudaStream_t st, const lik_codec_problem *p,
                                lik_cuda_staged *S, int keep, unsigned same) {
  const lik_codec_view &v = p->codec;
  const int64_t T = p->x.len, d = v.dim, K = v.ncent, W = v.width;
  const int ex = elem_bytes(p->x.dtype);
  const int want_res = p->tok.res != NULL;
  lik_status s;
  cudaError_t e;
  const int ncut = want_res && v.cutoffs ? (1 << v.nbits) - 1 : 0;
  const int same_codec = keep && (same & LIK_CUDA_SAME_CODEC) && S->c_host == v.cent &&
                         S->cut_host == v.cutoffs && S->c_len == K && S->c_dim == d &&
                         S->c_dt == v.cent_dtype && S->c_sc == v.cent_sc && S->c_sk == v.cent_sk &&
                         S->ncut == ncut;
  if (!same_codec && (s = upload_codec(st, v, ncut, S))) return s;
  if (keep && !same_codec) {
    S->c_host = v.cent;
    S->cut_host = v.cutoffs;
    S->c_len = K;
    S->c_dim = d;
    S->c_dt = v.cent_dtype;
    S->c_sc = v.cent_sc;
    S->c_sk = v.cent_sk;
    S->ncut = ncut;
  }
  /* tokens: all at once when kept (at most 4 GiB), else chunks of ~512 MiB */
  const size_t row_b = (size_t)d * (size_t)ex;
  const int resident = keep && (same & LIK_CUDA_SAME_ROWS) && S->x_host == p->x.data &&
                       S->x_len == T && S->x_dim == d && S->x_dt == p->x.dtype &&
                       S->x_sl == p->x.sl && S->x_sk == p->x.sk;
  int64_t piece = (int64_t)(((size_t)512 << 20) / row_b);
  if (piece < CB_M) piece = CB_M;
  if (piece > T) piece = T;
  int64_t ch = keep && (size_t)T * row_b <= ((size_t)4 << 30) ? T : piece;
  if (!resident) {
    S->x_host = NULL;
    if ((s = dgrow(&S->x, &S->x_cap, (size_t)ch * row_b, "the tokens"))) {
      if (ch == piece) return s;
      ch = piece; /* the device has no room for all of them: pieces */
      if ((s = dgrow(&S->x, &S->x_cap, (size_t)ch * row_b, "the tokens"))) return s;
    }
  }
  if ((s = dgrow(&S->codes, &S->codes_cap, (size_t)ch * sizeof(int32_t), "the codes"))) return s;
  if (want_res && (s = dgrow(&S->res, &S->res_cap, (size_t)(ch * W), "the residuals"))) return s;
  const int dense_x = p->x.sk == 1 && p->x.sl == d;
  const int dense_c = p->tok.codes_dtype == LIK_I32 && p->tok.code_s == 1;
  const int dense_r = !want_res || (p->tok.res_sp == 1 && p->tok.res_st == W);
  for (int64_t t0 = 0; t0 < T; t0 += ch) {
    const int64_t n = ch < T - t0 ? ch : T - t0;
    if (!resident) {
      const void *src = (const char *)p->x.data + (size_t)t0 * row_b;
      if (!dense_x) {
        if ((s = hgrow(S, (size_t)n * row_b))) return s;
        pack_rows(p->x.data, ex, p->x.sl, p->x.sk, t0, n, d, S->hbuf);
        src = S->hbuf;
      }
      if ((e = cudaMemcpyAsync(S->x, src, (size_t)n * row_b, cudaMemcpyHostToDevice, st)))
        return copy_fail(e, "copying the tokens to the device");
    }
    KComp P;
    memset(&P, 0, sizeof P);
    lik_codec_view dv = v; /* the staged centroids, dense, in their dtype */
    dv.cent = S->cent;
    dv.cent_sc = d;
    dv.cent_sk = 1;
    set_codec(P, dv, ncut ? S->cut : NULL, LIK_F32, 1);
    P.x = S->x;
    P.x_dt = p->x.dtype;
    P.x_sl = d;
    P.x_sk = 1;
    P.T = n;
    lik_ctokens dt; /* the staged codes (I32) and residual bytes, dense */
    memset(&dt, 0, sizeof dt);
    dt.codes = S->codes;
    dt.codes_dtype = LIK_I32;
    dt.code_s = 1;
    dt.res = ncut ? (uint8_t *)S->res : NULL;
    dt.res_st = W;
    dt.res_sp = 1;
    dt.len = n;
    P.t = res::ktok(dt, v.nbits);
    if ((s = run(dev, st, P))) return s;
    /* back to the host: straight into the outputs where they are dense */
    int32_t *hc = dense_c ? (int32_t *)p->tok.codes + t0 : NULL;
    uint8_t *hr = want_res && dense_r ? (uint8_t *)p->tok.res + t0 * W : NULL;
    size_t tmp = (size_t)n * (hc ? 0 : sizeof(int32_t)) + (size_t)(want_res && !hr ? n * W : 0);
    if (tmp && (s = hgrow(S, tmp))) return s;
    if (!hc) hc = (int32_t *)S->hbuf;
    if (want_res && !hr) hr = (uint8_t *)S->hbuf + (dense_c ? 0 : (size_t)n * sizeof(int32_t));
    if ((e = cudaMemcpyAsync(hc, S->codes, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                             st)) ||
        (want_res && (e = cudaMemcpyAsync(hr, S->res, (size_t)(n * W), cudaMemcpyDeviceToHost,
                                          st))) ||
        (e = cudaStreamSynchronize(st)))
      return copy_fail(e, "the compress on the device");
    for (int64_t j = 0; j < n; j++)
      if (hc[j] < 0)
        return lik_fail(LIK_ERR_VALUE,
                        "X: token %lld has no finite inner product with any centroid (NaN or "
                        "infinite values); its code and residual are not written",
                        (long long)(t0 + j));
    if (!dense_c)
      for (int64_t j = 0; j < n; j++) {
        const int64_t o = (t0 + j) * p->tok.code_s;
        if (p->tok.codes_dtype == LIK_I32) ((int32_t *)p->tok.codes)[o] = hc[j];
        else ((int64_t *)p->tok.codes)[o] = hc[j];
      }
    if (want_res && !dense_r)
      for (int64_t j = 0; j < n; j++)
        for (int64_t b = 0; b < W; b++)
          ((uint8_t *)p->tok.res)[(t0 + j) * p->tok.res_st + b * p->tok.res_sp] = hr[j * W + b];
  }
  if (keep && ch == T && !resident) { /* the rows stay for the next call */
    S->x_host = p->x.data;
    S->x_len = T;
    S->x_dim = d;
    S->x_dt = p->x.dtype;
    S->x_sl = p->x.sl;
    S->x_sk = p->x.sk;
  }
  return LIK_OK;
}

extern "C" lik_status lik_cuda_codec_compress_host(const lik_codec_problem *p,
                                                   lik_cuda_staged **keep, unsigned same) {
  { /* as lik_plaid_index_to_device: a device that cannot be selected is the caller's */
    DeviceGuard probe(p->call.device_id);
    if (probe.err != cudaSuccess) {
      (void)cudaGetLastError();
      return lik_fail(LIK_ERR_DEVICE, "options.device_id: CUDA device %d cannot be selected (%s)",
                      (int)p->call.device_id, cudaGetErrorString(probe.err));
    }
  }
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  if (p->x.len == 0) return LIK_OK;
  lik_cuda_staged local;
  lik_cuda_staged *S = &local;
  memset(&local, 0, sizeof local);
  if (keep) {
    if (*keep && (*keep)->device != p->call.device_id) {
      lik_cuda_staged_free(*keep);
      *keep = NULL;
    }
    if (!*keep) {
      *keep = (lik_cuda_staged *)calloc(1, sizeof(lik_cuda_staged));
      if (!*keep) return lik_fail(LIK_ERR_ALLOC, "PLAID build on the GPU: out of memory");
      (*keep)->device = p->call.device_id;
    }
    S = *keep;
  }
  const cudaStream_t st = (cudaStream_t)p->call.stream;
  lik_status s = compress_host(dev, st, p, S, keep != NULL, same);
  if (s) { /* nothing may still read or write the buffers; nothing is known to be there */
    (void)cudaStreamSynchronize(st);
    (void)cudaGetLastError();
    S->x_host = NULL;
    S->c_host = NULL;
  }
  if (!keep) staged_release(S);
  return s;
}
