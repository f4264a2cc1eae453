#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"

namespace attest::datasets {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// q.k in FP64 for query token i of batch element b, q head h, key token j (non-ragged bshd).
double dot_qk(const Qkv& t, const Problem& p, std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t j) {
  const auto q = t.q.view<float, 4>();
  const auto k = t.k.view<float, 4>();
  const std::int64_t hk = h / p.group();
  double acc = 0;
  for (std::int64_t d = 0; d < p.head_dim; ++d) acc += static_cast<double>(q(b, i, h, d)) * static_cast<double>(k(b, j, hk, d));
  return acc;
}

class EveryDistribution : public ::testing::TestWithParam<Distribution> {};

TEST_P(EveryDistribution, ElementAloneEqualsElementInTensor) {
  // GQA, cross attention and Dv != D: every index path of sample() is exercised.
  const Problem p = parse_problem("b2h4k2s37t45d16v8");
  const Qkv t = generate_qkv(p, GetParam(), 77);
  ASSERT_EQ(t.q.shape(), (Shape{2, 37, 4, 16}));
  ASSERT_EQ(t.k.shape(), (Shape{2, 45, 2, 16}));
  ASSERT_EQ(t.v.shape(), (Shape{2, 45, 2, 8}));
  const std::pair<Role, const Tensor*> roles[] = {{Role::q, &t.q}, {Role::k, &t.k}, {Role::v, &t.v}};
  for (const auto& [role, tensor] : roles) {
    const auto v = tensor->view<float, 4>();
    // Reverse order, one element at a time.
    for (std::int64_t b = v.shape[0]; b-- > 0;)
      for (std::int64_t s = v.shape[1]; s-- > 0;)
        for (std::int64_t h = v.shape[2]; h-- > 0;)
          for (std::int64_t d = v.shape[3]; d-- > 0;)
            ASSERT_EQ(bits(sample(GetParam(), role, 77, p, b, s, h, d)), bits(v(b, s, h, d)))
                << distribution_name(GetParam()) << " role " << static_cast<int>(role) << " at " << b << "," << s << "," << h << "," << d;
  }
}

TEST_P(EveryDistribution, RaggedPacksTheSameValuesAsPadded) {
  // Lengths q 5, 20, 7 and kv 30, 0, 11: the index uses the max length, so the packed tensor
  // holds exactly the padded problem's values at (b, s).
  const Problem rag = parse_problem("b3h2s20t30d8:cu_q=0,5,25,32:cu_kv=0,30,30,41");
  const Problem pad = parse_problem("b3h2s20t30d8");
  const Qkv r = generate_qkv(rag, GetParam(), 5);
  ASSERT_EQ(r.q.shape(), (Shape{1, 32, 2, 8}));
  ASSERT_EQ(r.k.shape(), (Shape{1, 41, 2, 8}));
  const auto q = r.q.view<float, 4>();
  const auto k = r.k.view<float, 4>();
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < 8; ++d) {
        for (std::int64_t s = 0; s < rag.len_q(b); ++s)
          ASSERT_EQ(bits(q(0, rag.cu_seqlens_q[b] + s, h, d)), bits(sample(GetParam(), Role::q, 5, pad, b, s, h, d)));
        for (std::int64_t s = 0; s < rag.len_kv(b); ++s) {
          // latesink and maxstair depend on the length of the batch element by design.
          const Problem& ref = (GetParam() == Distribution::latesink || GetParam() == Distribution::maxstair) ? rag : pad;
          ASSERT_EQ(bits(k(0, rag.cu_seqlens_kv[b] + s, h, d)), bits(sample(GetParam(), Role::k, 5, ref, b, s, h, d)));
        }
      }
}

TEST_P(EveryDistribution, RepeatableAcrossRunsAndThreadCountsSeedSensitive) {
  const Problem p = parse_problem("b1h3s300d64");
  // At least 2 threads against 1, whatever this machine has (on a 1-core machine or with
  // OMP_NUM_THREADS=1, max threads against 1 compared one thread with itself).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(std::max(2, threads));
  const Qkv a = generate_qkv(p, GetParam(), 1);
  omp_set_num_threads(1);
  const Qkv b = generate_qkv(p, GetParam(), 1);
  omp_set_num_threads(threads);
  EXPECT_TRUE(same_bytes(a.q, b.q) && same_bytes(a.k, b.k) && same_bytes(a.v, b.v));
  const Qkv c = generate_qkv(p, GetParam(), 2);
  EXPECT_FALSE(same_bytes(a.q, c.q));
  EXPECT_FALSE(same_bytes(a.k, c.k));
  EXPECT_FALSE(same_bytes(a.v, c.v));
}

TEST_P(EveryDistribution, NameRoundTrips) { EXPECT_EQ(parse_distribution(distribution_name(GetParam())), GetParam()); }

INSTANTIATE_TEST_SUITE_P(All, EveryDistribution, ::testing::ValuesIn(all_distributions().begin(), all_distributions().end()),
                         [](const ::testing::TestParamInfo<Distribution>& i) { return std::string(distribution_name(i.param)); });

TEST(Distributions, UnknownNameListsValidOnes) {
  try {
    parse_distribution("gaussian");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'gaussian'"), std::string::npos) << m;
    for (Distribution d : all_distributions()) EXPECT_NE(m.find(distribution_name(d)), std::string::npos) << m;
  }
  EXPECT_EQ(all_distributions().size(), 10u);
}

TEST(Distributions, InvalidProblemThrows) {
  Problem p;
  p.heads_q = 3;
  p.heads_kv = 2;
  EXPECT_THROW(generate_qkv(p, Distribution::normal, 0), Error);
}

// Moments and CDF values of n samples against closed forms. Every tolerance is 5 standard
// errors of the estimator (SE = sqrt(Var(estimator) / n) from the distribution's own
// moments), so a correct generator fails with probability ~6e-7 per check, and the seed is fixed.
struct Moments {
  double mean = 0, var = 0, m4 = 0;
};
Moments moments(const std::vector<double>& x) {
  Moments m;
  const auto n = static_cast<double>(x.size());
  for (double v : x) m.mean += v;
  m.mean /= n;
  for (double v : x) {
    const double c = v - m.mean;
    m.var += c * c;
    m.m4 += c * c * c * c;
  }
  m.var /= n;
  m.m4 /= n;
  return m;
}
std::vector<double> flat(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  const float* p = t.data<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  return v;
}
double fraction_below(const std::vector<double>& x, double t) {
  return static_cast<double>(std::count_if(x.begin(), x.end(), [t](double v) { return v < t; })) / static_cast<double>(x.size());
}

TEST(Distributions, NormalMatchesClosedForms) {
  const Qkv t = generate_qkv(parse_problem("b1h1s7813d128"), Distribution::normal, 2024);  // 1,000,064 samples
  const auto x = flat(t.q);
  const double n = static_cast<double>(x.size());
  const Moments m = moments(x);
  EXPECT_NEAR(m.mean, 0.0, 5 * std::sqrt(1.0 / n));          // Var(mean) = 1/n
  EXPECT_NEAR(m.var, 1.0, 5 * std::sqrt(2.0 / n));           // Var(s^2) = (mu4 - 1)/n = 2/n
  EXPECT_NEAR(m.m4, 3.0, 5 * std::sqrt((105.0 - 9.0) / n));  // Var(m4) = (mu8 - mu4^2)/n
  for (double z : {-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0}) {
    const double phi = 0.5 * std::erfc(-z / std::sqrt(2.0));
    EXPECT_NEAR(fraction_below(x, z), phi, 5 * std::sqrt(phi * (1 - phi) / n)) << "P(Z < " << z << ")";
  }
}

TEST(Distributions, UniformMatchesClosedForms) {
  const Qkv t = generate_qkv(parse_problem("b1h1s7813d128"), Distribution::uniform, 2024);
  const auto x = flat(t.q);
  const double n = static_cast<double>(x.size());
  const Moments m = moments(x);
  // U(-1,1): mu2 = 1/3, mu4 = 1/5, mu8 = 1/9.
  EXPECT_NEAR(m.mean, 0.0, 5 * std::sqrt((1.0 / 3) / n));
  EXPECT_NEAR(m.var, 1.0 / 3, 5 * std::sqrt((1.0 / 5 - 1.0 / 9) / n));
  EXPECT_NEAR(m.m4, 1.0 / 5, 5 * std::sqrt((1.0 / 9 - 1.0 / 25) / n));
  for (double u : {-0.9, -0.5, 0.0, 0.25, 0.75}) {
    const double cdf = (u + 1) / 2;
    EXPECT_NEAR(fraction_below(x, u), cdf, 5 * std::sqrt(cdf * (1 - cdf) / n)) << "P(U < " << u << ")";
  }
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  EXPECT_GT(*lo, -1.0);
  EXPECT_LT(*hi, 1.0);
}

TEST(Distributions, ExactIntDotProductsAreExact) {
  const Problem p = parse_problem("b1h2s16t16d4096v64");
  const Qkv t = generate_qkv(p, Distribution::exact_int, 9);
  auto check_range = [](const Tensor& x, int bound) {
    const float* v = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(v[i], std::nearbyint(v[i]));
      ASSERT_LE(std::fabs(v[i]), static_cast<float>(bound));
    }
  };
  check_range(t.q, 3);
  check_range(t.k, 3);
  check_range(t.v, 8);
  const auto q = t.q.view<float, 4>();
  const auto k = t.k.view<float, 4>();
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 16; ++i)
      for (std::int64_t j = 0; j < 16; ++j) {
        std::int64_t exact = 0;
        double fwd = 0, rev = 0;
        float f32 = 0;
        for (std::int64_t d = 0; d < 4096; ++d) {
          exact += static_cast<std::int64_t>(q(0, i, h, d)) * static_cast<std::int64_t>(k(0, j, h, d));
          fwd += static_cast<double>(q(0, i, h, d)) * k(0, j, h, d);
          rev += static_cast<double>(q(0, i, h, 4095 - d)) * k(0, j, h, 4095 - d);
          f32 += q(0, i, h, d) * k(0, j, h, d);
        }
        ASSERT_EQ(fwd, static_cast<double>(exact));
        ASSERT_EQ(rev, static_cast<double>(exact));
        ASSERT_EQ(f32, static_cast<float>(exact));
      }
  // Density: P(nonzero) = 1/2 * 6/7 for q and k (bit decides density, then 7 equiprobable values).
  const double frac = static_cast<double>(std::count_if(t.q.data<float>(), t.q.data<float>() + t.q.numel(), [](float v) { return v != 0; })) /
                      static_cast<double>(t.q.numel());
  EXPECT_NEAR(frac, 3.0 / 7, 5 * std::sqrt((3.0 / 7) * (4.0 / 7) / static_cast<double>(t.q.numel())));
}

// Index of the largest FP64 logit over keys [0, n) and the gap to the runner-up.
std::pair<std::int64_t, double> argmax_logit(const Qkv& t, const Problem& p, std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t n) {
  std::int64_t best = -1;
  double top = -INFINITY, second = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) {
    const double l = dot_qk(t, p, b, i, h, j);
    if (l > top) {
      second = top;
      top = l;
      best = j;
    } else {
      second = std::max(second, l);
    }
  }
  return {best, top - second};
}

TEST(Distributions, SinkEveryQueryPeaksAtTokenZero) {
  const Problem p = parse_problem("b2h4k2s64t300d64");
  const Qkv t = generate_qkv(p, Distribution::sink, 3);
  double min_gap = INFINITY;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t i = 0; i < 64; ++i) {
        const auto [j, gap] = argmax_logit(t, p, b, i, h, 300);
        ASSERT_EQ(j, 0);
        min_gap = std::min(min_gap, gap * p.scale());
      }
  // Scaled logit gap >= 3 * scale * D * min|q_d| = 3 * 8 = 24: softmax weight of token 0 > 1 - 300 e^-24.
  EXPECT_GE(min_gap, 24.0);
}

TEST(Distributions, LateSinkEveryQueryPeaksAtLastKey) {
  // Dense and ragged: the sink is the last key of each batch element.
  for (const char* s : {"b2h2s40t200d32", "b3h2s40t200d32:cu_q=0,10,50,55:cu_kv=0,7,207,300"}) {
    const Problem p = parse_problem(s);
    const Qkv t = generate_qkv(p, Distribution::latesink, 3);
    const auto q = t.q.view<float, 4>();
    const auto k = t.k.view<float, 4>();
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < p.len_q(b); ++i) {
          const std::int64_t qrow = p.ragged() ? p.cu_seqlens_q[b] + i : i, qb = p.ragged() ? 0 : b;
          std::int64_t best = -1;
          double top = -INFINITY;
          for (std::int64_t j = 0; j < p.len_kv(b); ++j) {
            const std::int64_t krow = p.ragged() ? p.cu_seqlens_kv[b] + j : j;
            double l = 0;
            for (std::int64_t d = 0; d < 32; ++d) l += static_cast<double>(q(qb, qrow, h, d)) * k(qb, krow, h, d);
            if (l > top) {
              top = l;
              best = j;
            }
          }
          ASSERT_EQ(best, p.len_kv(b) - 1) << s << " b=" << b << " i=" << i;
        }
  }
}

TEST(Distributions, MaxStairRowMaxGrowsEveryTokenAndTile) {
  const Problem p = parse_problem("b1h2s16t512d128");
  const Qkv t = generate_qkv(p, Distribution::maxstair, 11);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 16; ++i) {
      std::vector<double> l(512);
      for (std::int64_t j = 0; j < 512; ++j) l[j] = dot_qk(t, p, 0, i, h, j);
      for (std::int64_t j = 1; j < 512; ++j) {
        ASSERT_GT(l[j], l[j - 1]) << "token " << j;
      }
      double prev = -INFINITY;
      for (std::int64_t tile = 0; tile < 512 / 64; ++tile) {
        const double m = *std::max_element(l.begin() + tile * 64, l.begin() + tile * 64 + 64);
        ASSERT_GT(m, prev) << "tile " << tile;
        // Each tile raises the max by about 2 logits (1/32 per token): a real rescale.
        if (tile > 0) {
          EXPECT_GT((m - prev) * p.scale(), 0.5);
        }
        prev = m;
      }
    }
}

TEST(Distributions, UnderflowMostWeightsAreZeroInF32) {
  const Problem p = parse_problem("b1h2s16t1024d64");
  const Qkv t = generate_qkv(p, Distribution::underflow, 12);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 16; ++i) {
      std::vector<float> s(1024);
      for (std::int64_t j = 0; j < 1024; ++j) s[j] = static_cast<float>(dot_qk(t, p, 0, i, h, j) * p.scale());
      const float m = *std::max_element(s.begin(), s.end());
      std::int64_t zero = 0;
      for (float x : s) zero += std::exp(x - m) == 0.0f;
      // Logits ~ U(-1000, 1000): ~95% lie more than 104 below the max.
      EXPECT_GT(zero, 1024 * 8 / 10) << "query " << i;
    }
}

TEST(Distributions, OutlierOverflowsE4m3) {
  const Problem p = parse_problem("b1h4s2048d128");
  const Qkv t = generate_qkv(p, Distribution::outlier, 13);
  for (const Tensor* x : {&t.k, &t.v}) {
    std::int64_t big = 0;
    for (std::int64_t i = 0; i < x->numel(); ++i) {
      const float a = std::fabs(x->data<float>()[i]);
      ASSERT_LT(a, 2000.0f);
      big += a > 448.0f;
    }
    // 2^-10 of elements plus k/v[b,0,h,0]; binomial SE sqrt(n p) ~ 32.
    const double expect = static_cast<double>(x->numel()) / 1024 + 4;
    EXPECT_NEAR(static_cast<double>(big), expect, 5 * std::sqrt(expect));
  }
  for (std::int64_t h = 0; h < 4; ++h) EXPECT_GT(std::fabs(t.k.view<float, 4>()(0, 0, h, 0)), 448.0f);
  const float* q = t.q.data<float>();
  EXPECT_LT(*std::max_element(q, q + t.q.numel(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }), 448.0f);
}

TEST(Distributions, ConstantKeyRowsAreIdentical) {
  const Problem p = parse_problem("b2h2s8t100d32");
  const Qkv t = generate_qkv(p, Distribution::constant, 14);
  const auto k = t.k.view<float, 4>();
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t j = 1; j < 100; ++j)
        for (std::int64_t d = 0; d < 32; ++d) ASSERT_EQ(bits(k(b, j, h, d)), bits(k(b, 0, h, d)));
  // Distinct heads and batch elements are not all the same row.
  EXPECT_NE(bits(k(0, 0, 0, 0)), bits(k(0, 0, 1, 0)));
  EXPECT_NE(bits(k(0, 0, 0, 0)), bits(k(1, 0, 0, 0)));
}

TEST(Distributions, DiffusionHasBiasOutlierChannelsTokensAndHeavyTails) {
  const Problem p = parse_problem("b1h2s4096d64");
  const Qkv t = generate_qkv(p, Distribution::diffusion, 15);
  const auto k = t.k.view<float, 4>();
  for (std::int64_t h = 0; h < 2; ++h) {
    std::vector<double> mean(64, 0), rms(64, 0);
    for (std::int64_t s = 0; s < 4096; ++s)
      for (std::int64_t d = 0; d < 64; ++d) mean[d] += k(0, s, h, d) / 4096.0, rms[d] += static_cast<double>(k(0, s, h, d)) * k(0, s, h, d) / 4096.0;
    std::vector<double> sorted = rms;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[32];
    int outlier_channels = 0;
    double mean_abs_bias = 0;
    for (std::int64_t d = 0; d < 64; ++d) {
      outlier_channels += rms[d] > 25 * median;  // 10x gain: rms ratio ~100
      mean_abs_bias += std::fabs(mean[d]) / 64;
    }
    EXPECT_GE(outlier_channels, 1);
    EXPECT_LE(outlier_channels, 2);
    // Bias ~ N(0, 2^2): E|bias| = 2 sqrt(2/pi) = 1.6 (before gains); plain N(0,1) keys would give ~0.01.
    EXPECT_GT(mean_abs_bias, 0.5);
    // Outlier tokens: row rms far above the median row.
    std::vector<double> row(4096, 0);
    for (std::int64_t s = 0; s < 4096; ++s)
      for (std::int64_t d = 0; d < 64; ++d) row[s] += std::fabs(k(0, s, h, d));
    std::vector<double> rs = row;
    std::sort(rs.begin(), rs.end());
    const auto tokens = std::count_if(row.begin(), row.end(), [&](double r) { return r > 4 * rs[2048]; });
    EXPECT_NEAR(static_cast<double>(tokens), 4096.0 / 128, 5 * std::sqrt(4096.0 / 128));  // binomial, p = 1/128
  }
  // V: Student-t(4)/sqrt(2): unit variance, excess kurtosis far above a normal's 0 (infinite in theory).
  const auto x = flat(t.v);
  const Moments m = moments(x);
  EXPECT_NEAR(m.var, 1.0, 0.15);
  EXPECT_GT(m.m4 / (m.var * m.var), 5.0);
}

}  // namespace
}  // namespace attest::datasets
