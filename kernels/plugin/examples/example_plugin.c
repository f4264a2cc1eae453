/* An example attest plugin in plain C: online-softmax attention (FlashAttention's algorithm,
 * 64-key tiles) for the f32 recipe, written independently of attest's kernels and reference.
 * Two kernels:
 *   online_f32  every operation rounded to float32 (the arithmetic of an FP32 kernel)
 *   online_f64  every operation in double, out and lse rounded once to float32
 * Built with -DATTEST_EXAMPLE_FAULTY=1 it becomes the plugin "faulty", whose one kernel forgets
 * the last KV tile of every row that spans more than one tile (the bug a gate must catch).
 *
 * Per row (b, i, h), g = h / (heads_q / heads_kv), visible keys [0, hi) (attest/plugin.h):
 *   s_j = scale * dot(q_i, k_j);  per tile: m' = max(m, max_j s_j), c = exp(m - m'),
 *   l = c l + sum_j exp(s_j - m'),  acc = c acc + sum_j exp(s_j - m') v_j;
 *   out = acc / l, lse = m + log(l); no visible key (or every logit -inf): out 0, lse -inf;
 *   a NaN logit makes the row NaN (max propagates NaN), a NaN in v only the output.
 * FP32 rounding through double: each float operation is computed in double and rounded to
 * float. For +, -, *, / of floats that equals the float operation exactly (double has
 * 53 >= 2*24 + 2 bits, so the double rounding is innocuous); exp and log are then float32
 * roundings of the double functions, as good as expf/logf. */
#include <math.h>
#include <stdio.h>

#include "attest/plugin.h"

#ifndef ATTEST_EXAMPLE_FAULTY
#define ATTEST_EXAMPLE_FAULTY 0
#endif

enum { TILE_KV = 64, MAX_HEAD_DIM_V = 512 };

typedef struct example_kernel {
  int fp64;           /* 0: round every operation to float32 */
  int drop_last_tile; /* the planted bug of the faulty build */
} example_kernel;

static double rnd(const example_kernel* k, double x) { return k->fp64 ? x : (double)(float)x; }

/* Max that propagates NaN: once m is NaN it stays NaN (every comparison with NaN is false). */
static double nan_max(double m, double s) { return (s > m || isnan(s)) ? s : m; }

/* Element (d = 0) of token i of batch element b, head h, in a rank-4 [B|1, tokens, H, D] tensor. */
static float* row_ptr(const attest_plugin_tensor* t, const int64_t* cu, int64_t b, int64_t i, int64_t h) {
  const int64_t bb = cu != NULL ? 0 : b;
  const int64_t ii = cu != NULL ? cu[b] + i : i;
  return (float*)t->data + bb * t->strides[0] + ii * t->strides[1] + h * t->strides[2];
}

static int check_tensor(const attest_plugin_tensor* t, const char* what, int rank, char* msg, size_t size) {
  if (t->dtype != ATTEST_PLUGIN_DTYPE_F32 || t->rank != rank) {
    snprintf(msg, size, "%s: expected a float32 tensor of rank %d, got dtype %u rank %d", what, rank, (unsigned)t->dtype,
             (int)t->rank);
    return 1;
  }
  return 0;
}

static int64_t visible_keys(const attest_plugin_problem* p, int64_t s, int64_t t, int64_t i) {
  int64_t hi = t;
  if (p->mask == ATTEST_PLUGIN_MASK_CAUSAL_TL && i + 1 < hi) hi = i + 1;
  if (p->mask == ATTEST_PLUGIN_MASK_CAUSAL_BR && i + 1 + t - s < hi) hi = i + 1 + t - s;
  return hi < 0 ? 0 : hi;
}

static int run(void* context, const attest_plugin_run_args* a, char* msg, size_t size) {
  const example_kernel* kn = (const example_kernel*)context;
  const attest_plugin_problem* p = a->problem;
  if (check_tensor(a->q, "q", 4, msg, size) || check_tensor(a->k, "k", 4, msg, size) ||
      check_tensor(a->v, "v", 4, msg, size) || check_tensor(a->out, "out", 4, msg, size) ||
      (a->lse != NULL && check_tensor(a->lse, "lse", 3, msg, size)))
    return 1;
  if (p->head_dim_v > MAX_HEAD_DIM_V) {
    snprintf(msg, size, "head_dim_v %lld > %d", (long long)p->head_dim_v, MAX_HEAD_DIM_V);
    return 1;
  }
  const int64_t group = p->heads_q / p->heads_kv, D = p->head_dim, Dv = p->head_dim_v;
  const double scale = rnd(kn, p->softmax_scale);
  const int64_t qd = a->q->strides[3], kd = a->k->strides[3], vd = a->v->strides[3], od = a->out->strides[3];
  double s[TILE_KV], acc[MAX_HEAD_DIM_V];
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t S = p->cu_seqlens_q != NULL ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b] : p->seqlen_q;
    const int64_t T = p->cu_seqlens_kv != NULL ? p->cu_seqlens_kv[b + 1] - p->cu_seqlens_kv[b] : p->seqlen_kv;
    for (int64_t h = 0; h < p->heads_q; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t hi = visible_keys(p, S, T, i);
        const float* qi = row_ptr(a->q, p->cu_seqlens_q, b, i, h);
        double m = -INFINITY, l = 0;
        for (int64_t d = 0; d < Dv; ++d) acc[d] = 0;
        for (int64_t t0 = 0; t0 < hi; t0 += TILE_KV) {
          const int64_t t1 = t0 + TILE_KV < hi ? t0 + TILE_KV : hi;
          if (kn->drop_last_tile && t0 > 0 && t1 == hi) break; /* the faulty build's bug */
          double m_new = m;
          for (int64_t j = t0; j < t1; ++j) {
            const float* kj = row_ptr(a->k, p->cu_seqlens_kv, b, j, g);
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot = rnd(kn, dot + rnd(kn, (double)qi[d * qd] * kj[d * kd]));
            s[j - t0] = rnd(kn, scale * dot);
            m_new = nan_max(m_new, s[j - t0]);
          }
          if (m_new == -INFINITY) continue; /* every logit so far is -inf: nothing to add yet */
          /* m = -inf gives c = 0 (the empty accumulator); m = m_new = +inf gives NaN, as it must. */
          const double c = rnd(kn, exp(rnd(kn, m - m_new)));
          l = rnd(kn, l * c);
          for (int64_t d = 0; d < Dv; ++d) acc[d] = rnd(kn, acc[d] * c);
          for (int64_t j = t0; j < t1; ++j) {
            const double pj = rnd(kn, exp(rnd(kn, s[j - t0] - m_new)));
            const float* vj = row_ptr(a->v, p->cu_seqlens_kv, b, j, g);
            l = rnd(kn, l + pj);
            for (int64_t d = 0; d < Dv; ++d) acc[d] = rnd(kn, acc[d] + rnd(kn, pj * vj[d * vd]));
          }
          m = m_new;
        }
        float* oi = row_ptr(a->out, p->cu_seqlens_q, b, i, h);
        double lse;
        if (isnan(m)) {
          lse = NAN;
          for (int64_t d = 0; d < Dv; ++d) oi[d * od] = NAN;
        } else if (l == 0) {
          lse = -INFINITY;
          for (int64_t d = 0; d < Dv; ++d) oi[d * od] = 0.0f;
        } else {
          lse = rnd(kn, m + rnd(kn, log(l)));
          for (int64_t d = 0; d < Dv; ++d) oi[d * od] = (float)(acc[d] / l);
        }
        if (a->lse != NULL) {
          const int64_t bb = p->cu_seqlens_q != NULL ? 0 : b, ii = p->cu_seqlens_q != NULL ? p->cu_seqlens_q[b] + i : i;
          float* lp = (float*)a->lse->data;
          lp[bb * a->lse->strides[0] + h * a->lse->strides[1] + ii * a->lse->strides[2]] = (float)lse;
        }
      }
    }
  }
  return 0;
}

/* A kernel-specific limit beyond the declared capabilities: the accumulator lives on the stack. */
static int supports(void* context, const attest_plugin_problem* p, const char* recipe, char* reason, size_t size) {
  (void)context;
  (void)recipe;
  if (p->head_dim_v > MAX_HEAD_DIM_V) {
    snprintf(reason, size, "head_dim_v %lld exceeds this kernel's accumulator (%d)", (long long)p->head_dim_v, MAX_HEAD_DIM_V);
    return 0;
  }
  return 1;
}

static const char* const kRecipes[] = {"f32"};
#define EXAMPLE_MASKS \
  ((1u << ATTEST_PLUGIN_MASK_NONE) | (1u << ATTEST_PLUGIN_MASK_CAUSAL_TL) | (1u << ATTEST_PLUGIN_MASK_CAUSAL_BR))
#define EXAMPLE_LAYOUTS                                                                                   \
  ((1u << ATTEST_PLUGIN_LAYOUT_BSHD) | (1u << ATTEST_PLUGIN_LAYOUT_BHSD) | (1u << ATTEST_PLUGIN_LAYOUT_PACKED_QKV) | \
   (1u << ATTEST_PLUGIN_LAYOUT_STRIDED))
#define EXAMPLE_FLAGS                                                                                                 \
  (ATTEST_PLUGIN_CAP_GQA | ATTEST_PLUGIN_CAP_CROSS | ATTEST_PLUGIN_CAP_RAGGED | ATTEST_PLUGIN_CAP_HEAD_DIM_V |         \
   ATTEST_PLUGIN_CAP_LSE | ATTEST_PLUGIN_CAP_DETERMINISTIC | ATTEST_PLUGIN_CAP_THREAD_SAFE)
#define EXAMPLE_KERNEL(NAME, CONTEXT)                                                                           \
  {                                                                                                            \
    sizeof(attest_plugin_kernel), ATTEST_PLUGIN_MEMORY_HOST, NAME, "cpu", kRecipes, 1, 0, NULL, NULL, 0,        \
        EXAMPLE_MASKS, EXAMPLE_LAYOUTS, 0, EXAMPLE_FLAGS, 0, supports, run, CONTEXT, 0, 0, NULL                  \
  }

#if ATTEST_EXAMPLE_FAULTY
static example_kernel k_drop = {0, 1};
static const attest_plugin_kernel kDrop = EXAMPLE_KERNEL("online_f32_drop_last_tile", &k_drop);
static const attest_plugin_kernel* const kKernels[] = {&kDrop};
#define EXAMPLE_NAME "faulty"
#else
static example_kernel k_f32 = {0, 0}, k_f64 = {1, 0};
static const attest_plugin_kernel kF32 = EXAMPLE_KERNEL("online_f32", &k_f32);
static const attest_plugin_kernel kF64 = EXAMPLE_KERNEL("online_f64", &k_f64);
static const attest_plugin_kernel* const kKernels[] = {&kF32, &kF64};
#define EXAMPLE_NAME "example"
#endif

static const attest_plugin_info kInfo = {sizeof(attest_plugin_info), ATTEST_PLUGIN_ABI_VERSION, EXAMPLE_NAME, "1.0",
                                         kKernels, sizeof kKernels / sizeof kKernels[0], 0};

ATTEST_PLUGIN_EXPORT const attest_plugin_info* attest_plugin_query(uint32_t host_abi_version) {
  return host_abi_version == ATTEST_PLUGIN_ABI_VERSION ? &kInfo : NULL;
}
