// GCC 12 reports false -W(maybe-)uninitialized inside avx512fintrin.h (the intrinsics' deliberately
// undefined __Y operands) when Eigen's AVX-512 kernels are inlined (GCC bug 105593, fixed in
// GCC 13). Silenced before the intrinsics header is first included.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "attest/reference/attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

// The OpenMP loop below already uses every core; Eigen must not start threads of its own.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>

#include "attest/core/enum_names.hpp"

namespace attest::ref {
namespace {

constexpr std::array<std::pair<Precision, std::string_view>, 3> kPrecisions{{
    {Precision::fp32, "fp32"}, {Precision::fp64, "fp64"}, {Precision::mp50, "mp50"}}};
constexpr std::array<std::pair<Algorithm, std::string_view>, 2> kAlgorithms{{
    {Algorithm::direct, "direct"}, {Algorithm::online, "online"}}};

template <class T>
constexpr bool kUseEigen = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
bool is_nan(const T& x) {
  using std::isnan;
  return isnan(x);
}

template <class T>
bool is_finite(const T& x) {
  using std::isfinite;
  return isfinite(x);
}

template <class T>
T exp_t(const T& x) {
  using std::exp;
  return T(exp(x));
}

template <class T>
T log_t(const T& x) {
  using std::log;
  return T(log(x));
}

template <class T>
T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

// Maximum that propagates NaN from either argument (std::max would drop it depending on order).
template <class T>
const T& nan_max(const T& a, const T& b) {
  if (is_nan(a)) return a;
  return (b > a || is_nan(b)) ? b : a;
}

// An input converted to T and repacked as [heads][tokens][width], tokens = dim0 * dim1 (batch
// folded into tokens; ragged tensors have dim0 == 1). Rows of one head are contiguous, so a tile of
// consecutive tokens is a row-major [n x width] matrix whatever the source strides were: the
// arithmetic never sees the layout.
// Buffers that Eigen reads or writes start at Eigen's largest alignment. Eigen peels scalar
// iterations until an aligned address and vectorises the rest (with FMA); on a heap address that
// varies from run to run, so would the rounding (seen: tiny problems differing bitwise between
// threads). A fixed base alignment makes the split, and the bits, the same every run.
template <class T>
using AlignedVector = std::vector<T, Eigen::aligned_allocator<T>>;

template <class T>
struct Packed {
  std::int64_t heads = 0, tokens = 0, width = 0;
  AlignedVector<T> data;
  [[nodiscard]] const T* row(std::int64_t head, std::int64_t token) const {
    return data.data() + (head * tokens + token) * width;
  }
};

template <class T>
Packed<T> pack(const Tensor& t) {
  Packed<T> p;
  const std::int64_t n1 = t.dim(1);
  p.heads = t.dim(2);
  p.tokens = t.dim(0) * n1;
  p.width = t.dim(3);
  p.data.resize(static_cast<std::size_t>(p.heads * p.tokens * p.width));
  auto fill = [&](auto view) {
    const std::int64_t rows = p.heads * p.tokens;
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t h = r / p.tokens, tok = r % p.tokens, b = tok / n1, n = tok % n1;
      T* dst = p.data.data() + r * p.width;
      for (std::int64_t w = 0; w < p.width; ++w) dst[w] = T(static_cast<double>(view(b, n, h, w)));
    }
  };
  if (t.dtype() == DType::f64) fill(t.view<double, 4>());
  else fill(t.view<float, 4>());
  return p;
}

struct WorkItem {
  std::int64_t b, h, i0, i1;  // batch element, query head, query rows [i0, i1) within b
};

// Where a batch element's rows live in the packed tensors and in the result.
struct Geometry {
  const Problem* p;
  std::int64_t total_q;  // ragged: last cu_seqlens_q entry
  [[nodiscard]] std::int64_t q_token(std::int64_t b) const { return p->ragged() ? p->cu_seqlens_q[static_cast<std::size_t>(b)] : b * p->seqlen_q; }
  [[nodiscard]] std::int64_t kv_token(std::int64_t b) const { return p->ragged() ? p->cu_seqlens_kv[static_cast<std::size_t>(b)] : b * p->seqlen_kv; }
  [[nodiscard]] std::int64_t lse_index(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return p->ragged() ? h * total_q + q_token(b) + i : (b * p->heads_q + h) * p->seqlen_q + i;
  }
  [[nodiscard]] std::int64_t visible(std::int64_t b, std::int64_t i) const {
    return std::clamp<std::int64_t>(p->visible_keys(b, i), 0, p->len_kv(b));
  }
};

// out = acc / l and lse = m + log(l); l == 0 (no visible key, or all visible logits -inf) gives
// out 0 (NaN kept) and lse -inf. A NaN l falls through to the division and stays NaN.
template <class T>
void finish_row(const T* acc, const T& m, const T& l, std::int64_t dv, T* out, T& lse) {
  if (l == T(0)) {
    for (std::int64_t d = 0; d < dv; ++d) out[d] = is_nan(acc[d]) ? acc[d] : T(0);
    lse = neg_inf<T>();
    return;
  }
  for (std::int64_t d = 0; d < dv; ++d) out[d] = acc[d] / l;
  lse = m + log_t(l);
}

template <class T>
struct Inputs {
  Packed<T> q, k, v;
  std::vector<char> v_finite;  // per packed V row: every element finite
  T scale;
};

template <class T>
void direct_items(const Problem& p, const Geometry& geo, const Inputs<T>& in, const std::vector<WorkItem>& items,
                  AttentionResult<T>& res) {
  const std::int64_t D = p.head_dim, Dv = p.head_dim_v, H = p.heads_q, group = p.group();
  const auto n_items = static_cast<std::int64_t>(items.size());
#pragma omp parallel
  {
    std::vector<T> logits(static_cast<std::size_t>(p.seqlen_kv)), acc(static_cast<std::size_t>(Dv));
#pragma omp for schedule(dynamic)
    for (std::int64_t it = 0; it < n_items; ++it) {
      const WorkItem w = items[static_cast<std::size_t>(it)];
      const std::int64_t g = w.h / group, kv0 = geo.kv_token(w.b);
      for (std::int64_t i = w.i0; i < w.i1; ++i) {
        const std::int64_t qt = geo.q_token(w.b) + i, hi = geo.visible(w.b, i);
        const T* qr = in.q.row(w.h, qt);
        T m = neg_inf<T>();
        for (std::int64_t j = 0; j < hi; ++j) {
          const T* kr = in.k.row(g, kv0 + j);
          T dot = qr[0] * kr[0];
          for (std::int64_t d = 1; d < D; ++d) dot += qr[d] * kr[d];
          logits[static_cast<std::size_t>(j)] = in.scale * dot;
          m = nan_max(m, logits[static_cast<std::size_t>(j)]);
        }
        const T shift = m == neg_inf<T>() ? T(0) : m;
        T l(0);
        std::fill(acc.begin(), acc.end(), T(0));
        for (std::int64_t j = 0; j < hi; ++j) {
          const T pj = exp_t(T(logits[static_cast<std::size_t>(j)] - shift));
          l += pj;
          const T* vr = in.v.row(g, kv0 + j);
          for (std::int64_t d = 0; d < Dv; ++d) acc[static_cast<std::size_t>(d)] += pj * vr[d];
        }
        finish_row(acc.data(), m, l, Dv, res.out.data() + (qt * H + w.h) * Dv,
                   res.lse[static_cast<std::size_t>(geo.lse_index(w.b, w.h, i))]);
      }
    }
  }
}

// S[rows x nc] = Q[rows x D] * K[nc x D]^T, all row-major and contiguous.
template <class T>
void tile_logits(const T* q, const T* k, T* s, std::int64_t rows, std::int64_t nc, std::int64_t D) {
  if constexpr (kUseEigen<T>) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<Mat>(s, rows, nc).noalias() =
        Eigen::Map<const Mat>(q, rows, D) * Eigen::Map<const Mat>(k, nc, D).transpose();
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < nc; ++c) {
        const T* qr = q + r * D;
        const T* kr = k + c * D;
        T dot = qr[0] * kr[0];
        for (std::int64_t d = 1; d < D; ++d) dot += qr[d] * kr[d];
        s[r * nc + c] = dot;
      }
  }
}

// acc[rows x Dv] += P[rows x nc] * V[nc x Dv]. Masked weights are exactly 0 and V is finite
// here, so masked keys add exact zeros.
template <class T>
void tile_accumulate(const T* pm, const T* v, T* acc, std::int64_t rows, std::int64_t nc, std::int64_t Dv) {
  if constexpr (kUseEigen<T>) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<Mat>(acc, rows, Dv).noalias() += Eigen::Map<const Mat>(pm, rows, nc) * Eigen::Map<const Mat>(v, nc, Dv);
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < nc; ++c) {
        const T& pr = pm[r * nc + c];
        for (std::int64_t d = 0; d < Dv; ++d) acc[r * Dv + d] += pr * v[c * Dv + d];
      }
  }
}

template <class T>
void online_items(const Problem& p, const Geometry& geo, const Inputs<T>& in, const std::vector<WorkItem>& items,
                  const Tiling& tiling, AttentionResult<T>& res) {
  const std::int64_t D = p.head_dim, Dv = p.head_dim_v, H = p.heads_q, group = p.group();
  const std::int64_t Br = tiling.block_rows, Bc = tiling.block_cols;
  const auto n_items = static_cast<std::int64_t>(items.size());
#pragma omp parallel
  {
    AlignedVector<T> s(static_cast<std::size_t>(Br * Bc)), acc(static_cast<std::size_t>(Br * Dv));
    std::vector<T> m(static_cast<std::size_t>(Br)), l(static_cast<std::size_t>(Br));
    std::vector<std::int64_t> hi(static_cast<std::size_t>(Br));
#pragma omp for schedule(dynamic)
    for (std::int64_t it = 0; it < n_items; ++it) {
      const WorkItem w = items[static_cast<std::size_t>(it)];
      const std::int64_t g = w.h / group, kv0 = geo.kv_token(w.b), q0 = geo.q_token(w.b) + w.i0;
      const std::int64_t rows = w.i1 - w.i0;
      std::int64_t hmax = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        hi[static_cast<std::size_t>(r)] = geo.visible(w.b, w.i0 + r);
        hmax = std::max(hmax, hi[static_cast<std::size_t>(r)]);
      }
      std::fill(m.begin(), m.end(), neg_inf<T>());
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      for (std::int64_t j0 = 0; j0 < hmax; j0 += Bc) {
        const std::int64_t nc = std::min(Bc, hmax - j0);
        tile_logits(in.q.row(w.h, q0), in.k.row(g, kv0 + j0), s.data(), rows, nc, D);
        for (std::int64_t r = 0; r < rows; ++r) {
          T* sr = s.data() + r * nc;
          const std::int64_t vis = std::clamp<std::int64_t>(hi[static_cast<std::size_t>(r)] - j0, 0, nc);
          for (std::int64_t c = 0; c < vis; ++c) sr[c] = in.scale * sr[c];
          T mt = neg_inf<T>();
          if constexpr (kUseEigen<T>) {
            // Vectorised NaN-propagating max (the scalar nan_max loop was 5% of the run time).
            if (vis > 0) mt = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(sr, vis).template maxCoeff<Eigen::PropagateNaN>();
          } else {
            for (std::int64_t c = 0; c < vis; ++c) mt = nan_max(mt, sr[c]);
          }
          T& mr = m[static_cast<std::size_t>(r)];
          const T m_new = nan_max(mr, mt);
          const T shift = m_new == neg_inf<T>() ? T(0) : m_new;
          // alpha == 1 exactly while the running max is unchanged; exp(-inf) == 0 on the first
          // visible tile, which clears nothing because l and acc are still 0.
          const T alpha = exp_t(T(mr - shift));
          T sum(0);
          for (std::int64_t c = 0; c < vis; ++c) {
            sr[c] = exp_t(T(sr[c] - shift));
            sum += sr[c];
          }
          for (std::int64_t c = vis; c < nc; ++c) sr[c] = T(0);
          T& lr = l[static_cast<std::size_t>(r)];
          if (alpha != T(1)) {
            lr *= alpha;
            T* ar = acc.data() + r * Dv;
            for (std::int64_t d = 0; d < Dv; ++d) ar[d] *= alpha;
          }
          lr += sum;
          mr = m_new;
        }
        const auto* vf = in.v_finite.data() + g * in.v.tokens + kv0 + j0;
        if (std::all_of(vf, vf + nc, [](char f) { return f != 0; })) {
          tile_accumulate(s.data(), in.v.row(g, kv0 + j0), acc.data(), rows, nc, Dv);
        } else {
          // A non-finite V row must reach exactly the rows that see it: skip masked keys
          // instead of multiplying them by 0.
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t vis = std::clamp<std::int64_t>(hi[static_cast<std::size_t>(r)] - j0, 0, nc);
            T* ar = acc.data() + r * Dv;
            for (std::int64_t c = 0; c < vis; ++c) {
              const T& pr = s[static_cast<std::size_t>(r * nc + c)];
              const T* vr = in.v.row(g, kv0 + j0 + c);
              for (std::int64_t d = 0; d < Dv; ++d) ar[d] += pr * vr[d];
            }
          }
        }
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t i = w.i0 + r;
        finish_row(acc.data() + r * Dv, m[static_cast<std::size_t>(r)], l[static_cast<std::size_t>(r)], Dv,
                   res.out.data() + ((q0 + r) * H + w.h) * Dv,
                   res.lse[static_cast<std::size_t>(geo.lse_index(w.b, w.h, i))]);
      }
    }
  }
}

void expect_input(const char* name, const Tensor& t, const Shape& want, const char* dims) {
  if (t.dtype() != DType::f64 && t.dtype() != DType::f32)
    throw Error("attention: " + std::string(name) + " has dtype " + std::string(dtype_name(t.dtype())) +
                " (expected f32 or f64)");
  if (t.shape() != want)
    throw Error("attention: " + std::string(name) + " has shape " + shape_string(t.shape()) + ", expected " +
                shape_string(want) + " = " + dims);
  if (t.empty()) throw Error("attention: " + std::string(name) + " has no storage");
}

}  // namespace

std::string_view precision_name(Precision p) { return kPrecisions[static_cast<std::size_t>(p)].second; }
Precision parse_precision(std::string_view s) { return parse_enum(s, kPrecisions, "precision"); }
std::string_view algorithm_name(Algorithm a) { return kAlgorithms[static_cast<std::size_t>(a)].second; }
Algorithm parse_algorithm(std::string_view s) { return parse_enum(s, kAlgorithms, "algorithm"); }

void check_attention_inputs(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  if (auto st = p.validate(); !st) throw Error("attention: problem '" + to_string(p) + "': " + st.reason());
  if (p.ragged()) {
    const std::int64_t tq = p.cu_seqlens_q.back(), tk = p.cu_seqlens_kv.back();
    expect_input("q", q, {1, tq, p.heads_q, p.head_dim}, "[1,total_q,H,D]");
    expect_input("k", k, {1, tk, p.heads_kv, p.head_dim}, "[1,total_kv,Hkv,D]");
    expect_input("v", v, {1, tk, p.heads_kv, p.head_dim_v}, "[1,total_kv,Hkv,Dv]");
  } else {
    expect_input("q", q, {p.batch, p.seqlen_q, p.heads_q, p.head_dim}, "[B,S,H,D]");
    expect_input("k", k, {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim}, "[B,T,Hkv,D]");
    expect_input("v", v, {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v}, "[B,T,Hkv,Dv]");
  }
}

template <class T>
AttentionResult<T> attention_typed(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                   Algorithm algorithm, const Tiling& tiling) {
  check_attention_inputs(p, q, k, v);
  if (tiling.block_rows < 1 || tiling.block_cols < 1)
    throw Error("attention: tile sizes must be >= 1 (got " + std::to_string(tiling.block_rows) + " x " +
                std::to_string(tiling.block_cols) + ")");
  Inputs<T> in{pack<T>(q), pack<T>(k), pack<T>(v), {}, T(p.scale())};
  in.v_finite.resize(static_cast<std::size_t>(in.v.heads * in.v.tokens));
  const auto v_rows = static_cast<std::int64_t>(in.v_finite.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < v_rows; ++r) {
    const T* row = in.v.data.data() + r * in.v.width;
    in.v_finite[static_cast<std::size_t>(r)] =
        std::all_of(row, row + in.v.width, [](const T& x) { return is_finite(x); }) ? 1 : 0;
  }

  const Geometry geo{&p, p.ragged() ? p.cu_seqlens_q.back() : 0};
  AttentionResult<T> res;
  const std::int64_t H = p.heads_q;
  if (p.ragged()) {
    res.out_shape = {1, geo.total_q, H, p.head_dim_v};
    res.lse_shape = {1, H, geo.total_q};
  } else {
    res.out_shape = {p.batch, p.seqlen_q, H, p.head_dim_v};
    res.lse_shape = {p.batch, H, p.seqlen_q};
  }
  res.out.assign(static_cast<std::size_t>(shape_numel(res.out_shape)), T(0));
  res.lse.assign(static_cast<std::size_t>(shape_numel(res.lse_shape)), T(0));

  // Row blocks start at row 0 of each batch element, so a row's tiling (and its bits) does not
  // depend on the other batch elements.
  const std::int64_t Br = algorithm == Algorithm::online ? tiling.block_rows : 16;
  std::vector<WorkItem> items;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i0 = 0; i0 < p.len_q(b); i0 += Br) items.push_back({b, h, i0, std::min(p.len_q(b), i0 + Br)});

  if (algorithm == Algorithm::direct) direct_items(p, geo, in, items, res);
  else online_items(p, geo, in, items, tiling, res);
  return res;
}

template AttentionResult<float> attention_typed<float>(const Problem&, const Tensor&, const Tensor&, const Tensor&,
                                                       Algorithm, const Tiling&);
template AttentionResult<double> attention_typed<double>(const Problem&, const Tensor&, const Tensor&, const Tensor&,
                                                         Algorithm, const Tiling&);
template AttentionResult<Mp50> attention_typed<Mp50>(const Problem&, const Tensor&, const Tensor&, const Tensor&,
                                                     Algorithm, const Tiling&);

namespace {
template <class Out, class T>
Tensor to_tensor(const Shape& shape, const std::vector<T>& values) {
  Tensor t(dtype_of_v<Out>, shape);
  Out* dst = t.data<Out>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, Mp50>) dst[i] = values[i].template convert_to<Out>();  // round to nearest
    else dst[i] = static_cast<Out>(values[i]);
  }
  return t;
}

template <class Out, class T>
AttentionOutput as_output(const AttentionResult<T>& r) {
  return {to_tensor<Out>(r.out_shape, r.out), to_tensor<Out>(r.lse_shape, r.lse)};
}
}  // namespace

AttentionOutput attention(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, Precision precision,
                          Algorithm algorithm) {
  switch (precision) {
    case Precision::fp32: return as_output<float>(attention_typed<float>(p, q, k, v, algorithm));
    case Precision::fp64: return as_output<double>(attention_typed<double>(p, q, k, v, algorithm));
    case Precision::mp50: return as_output<double>(attention_typed<Mp50>(p, q, k, v, algorithm));
  }
  throw Error("attention: unknown precision");
}

}  // namespace attest::ref
