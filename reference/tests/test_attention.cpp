// Reference attention: closed forms, exact integer fills, an independent long-double computation,
// structural identities (GQA, layouts, ragged batches: bitwise) and rounding bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "attention_test_util.hpp"
#include "attest/reference/attention.hpp"

namespace attest::ref {
namespace {

using test::at;
using test::make_problem;
using test::normal;
using test::values;

constexpr double kU64 = 0x1p-53;  // unit roundoff of double
constexpr double kU32 = 0x1p-24;  // unit roundoff of float
constexpr double kInf = std::numeric_limits<double>::infinity();

const Precision kPrecisions[] = {Precision::fp32, Precision::fp64, Precision::mp50};
const Algorithm kAlgorithms[] = {Algorithm::direct, Algorithm::online};

std::string label(Precision p, Algorithm a) {
  return std::string(precision_name(p)) + "/" + std::string(algorithm_name(a));
}

TEST(ReferenceAttention, NamesRoundTripAndUnknownNamesListValid) {
  for (Precision p : kPrecisions) EXPECT_EQ(parse_precision(precision_name(p)), p);
  for (Algorithm a : kAlgorithms) EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
  try {
    (void)parse_precision("fp16");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: fp32, fp64, mp50"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)parse_algorithm("flash"), Error);
}

// q = 0 makes every logit 0, so every visible key has weight exactly 1 and the output is the mean
// of the visible V rows. Integer V keeps the sum exact; the division then rounds once, so the
// result must be bitwise fl(sum / n) in every precision. lse = log(n).
TEST(ReferenceAttention, ConstantLogitsGiveTheMeanOfVisibleValues) {
  for (Mask mask : {Mask::none, Mask::causal_tl, Mask::causal_br}) {
    const Problem p = make_problem(2, 2, 1, 20, 300, 8, 5, mask);
    const Tensor q(DType::f64, {2, 20, 2, 8});
    const Tensor k = normal({2, 300, 1, 8}, 1);
    const Tensor v = test::integers({2, 300, 1, 5}, 2, -8, 8);
    for (Precision prec : kPrecisions)
      for (Algorithm alg : kAlgorithms) {
        const AttentionOutput r = attention(p, q, k, v, prec, alg);
        for (std::int64_t b = 0; b < 2; ++b)
          for (std::int64_t i = 0; i < 20; ++i)
            for (std::int64_t h = 0; h < 2; ++h) {
              const std::int64_t n = mask == Mask::none ? 300 : mask == Mask::causal_tl ? i + 1 : i + 1 + 300 - 20;
              for (std::int64_t d = 0; d < 5; ++d) {
                std::int64_t sum = 0;
                for (std::int64_t j = 0; j < n; ++j) sum += static_cast<std::int64_t>(at(v, b, j, 0, d));
                const double want = prec == Precision::fp32
                                        ? static_cast<double>(static_cast<float>(sum) / static_cast<float>(n))
                                        : static_cast<double>(sum) / static_cast<double>(n);
                ASSERT_EQ(at(r.out, b, i, h, d), want) << label(prec, alg) << " b" << b << " i" << i << " d" << d;
              }
              const double u = prec == Precision::fp32 ? kU32 : kU64;
              EXPECT_NEAR(at(r.lse, b, h, i), std::log(static_cast<double>(n)), 4 * u * std::log(300.0))
                  << label(prec, alg);
            }
      }
  }
}

// One key whose logit exceeds every other by more than 745 takes all the weight: the others'
// exp(s_j - m) underflow to exactly 0 in float and double (and are below half an ulp after
// rounding mp50 to double), so out == that key's V row bitwise and lse == its logit.
TEST(ReferenceAttention, DominantKeyGivesItsValue) {
  const std::int64_t S = 6, T = 200, D = 16, star = 137;
  const Problem p = make_problem(1, 1, 1, S, T, D, D, Mask::none, 1.0);
  Tensor q = normal({1, S, 1, D}, 3);
  Tensor k = normal({1, T, 1, D}, 4);
  const Tensor v = normal({1, T, 1, D}, 5);
  // All query rows share direction e_0 (q[.,0] = 1, rest 0): logit_j = k[j,0], exactly.
  for (std::int64_t i = 0; i < S; ++i)
    for (std::int64_t d = 0; d < D; ++d) test::set(q, 0, i, 0, d, d == 0 ? 1.0 : 0.0);
  for (std::int64_t j = 0; j < T; ++j) test::set(k, 0, j, 0, 0, j == star ? 2000.0 : std::round(at(k, 0, j, 0, 0)));
  for (Precision prec : kPrecisions)
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput r = attention(p, q, k, v, prec, alg);
      for (std::int64_t i = 0; i < S; ++i) {
        for (std::int64_t d = 0; d < D; ++d) {
          const double want = prec == Precision::fp32 ? static_cast<double>(static_cast<float>(at(v, 0, star, 0, d)))
                                                      : at(v, 0, star, 0, d);
          ASSERT_EQ(at(r.out, 0, i, 0, d), want) << label(prec, alg);
        }
        EXPECT_EQ(at(r.lse, 0, 0, i), 2000.0) << label(prec, alg);
      }
    }
}

// exact_int fill: q_i = 1000 e_{c(i)}, k_j in {0,1}^D, scale 1, so every logit is exactly 0 or
// 1000. A row's weights are then exactly 1 on its maximal keys and exactly 0 elsewhere
// (exp(-1000) underflows in float and double; in mp50 it is ~1e-434 and vanishes when rounding to
// double, because integer/n is never within 1e-400 of a rounding tie). With integer V:
// out = fl(sum over maximal keys / count) and lse = max + log(count). Small tiles put several
// running-max changes (rescale by exactly 0) inside one row.
TEST(ReferenceAttention, ExactIntegerFillIsExactInEveryPrecision) {
  const std::int64_t B = 1, H = 4, Hk = 2, S = 37, T = 91, D = 6, Dv = 3;
  for (Mask mask : {Mask::none, Mask::causal_tl, Mask::causal_br}) {
    const Problem p = make_problem(B, H, Hk, S, T, D, Dv, mask, 1.0);
    Tensor q(DType::f64, {B, S, H, D});
    for (std::int64_t i = 0; i < S; ++i)
      for (std::int64_t h = 0; h < H; ++h) test::set(q, 0, i, h, (i + 3 * h) % D, 1000.0);
    // Sparse bits (1 in 8): many rows meet their first maximal key only after several tiles.
    Tensor k = test::integers({B, T, Hk, D}, 6, 0, 7);
    for (std::int64_t j = 0; j < T; ++j)
      for (std::int64_t g = 0; g < Hk; ++g)
        for (std::int64_t d = 0; d < D; ++d) test::set(k, 0, j, g, d, at(k, 0, j, g, d) == 0.0 ? 1.0 : 0.0);
    const Tensor v = test::integers({B, T, Hk, Dv}, 7, -50, 50);
    for (Precision prec : kPrecisions)
      for (Algorithm alg : kAlgorithms) {
        const AttentionOutput r = attention(p, q, k, v, prec, alg);
        for (std::int64_t i = 0; i < S; ++i)
          for (std::int64_t h = 0; h < H; ++h) {
            const std::int64_t g = h / (H / Hk), c = (i + 3 * h) % D;
            const std::int64_t hi = mask == Mask::none ? T : mask == Mask::causal_tl ? i + 1 : i + 1 + T - S;
            std::int64_t hits = 0;
            for (std::int64_t j = 0; j < hi; ++j) hits += at(k, 0, j, g, c) == 1.0;
            const bool any = hits > 0;
            const std::int64_t n = any ? hits : hi;
            for (std::int64_t d = 0; d < Dv; ++d) {
              std::int64_t sum = 0;
              for (std::int64_t j = 0; j < hi; ++j)
                if (!any || at(k, 0, j, g, c) == 1.0) sum += static_cast<std::int64_t>(at(v, 0, j, g, d));
              const double want = prec == Precision::fp32
                                      ? static_cast<double>(static_cast<float>(sum) / static_cast<float>(n))
                                      : static_cast<double>(sum) / static_cast<double>(n);
              ASSERT_EQ(at(r.out, 0, i, h, d), want) << label(prec, alg) << " i" << i << " h" << h;
            }
            const double lse = (any ? 1000.0 : 0.0) + std::log(static_cast<double>(n));
            EXPECT_NEAR(at(r.lse, 0, h, i), lse, (prec == Precision::fp32 ? 4 * kU32 : 4 * kU64) * 1024)
                << label(prec, alg);
          }
      }
    // Small tiles: many tiles per row, running max jumps from 0 to 1000 mid-row.
    const AttentionResult<double> small = attention_typed<double>(p, q, k, v, Algorithm::online, Tiling{5, 7});
    const AttentionOutput full = attention(p, q, k, v, Precision::fp64, Algorithm::direct);
    const std::vector<double> ref = values(full.out);
    for (std::size_t e = 0; e < ref.size(); ++e) ASSERT_EQ(small.out[e], ref[e]) << "element " << e;
  }
}

// Both causal alignments with S != T (and GQA, Dv != D) against the long-double computation
// whose mask matrix is built from the definitions.
TEST(ReferenceAttention, CausalAlignmentsMatchHandBuiltMask) {
  for (auto [S, T] : {std::pair<std::int64_t, std::int64_t>{48, 80}, {80, 48}, {33, 33}})
    for (Mask mask : {Mask::causal_tl, Mask::causal_br}) {
      const Problem p = make_problem(2, 4, 2, S, T, 16, 12, mask);
      const Tensor q = normal({2, S, 4, 16}, 10), k = normal({2, T, 2, 16}, 11), v = normal({2, T, 2, 12}, 12);
      const test::HandResult hand = test::hand_attention(p, q, k, v);
      for (Algorithm alg : kAlgorithms) {
        const AttentionResult<double> r = attention_typed<double>(p, q, k, v, alg, Tiling{16, 16});
        EXPECT_LE(test::max_abs_diff(r.out, hand.out), test::rounding_bound(T, 16, kU64))
            << "S" << S << " T" << T << " " << mask_name(mask) << " " << algorithm_name(alg);
        for (std::size_t e = 0; e < hand.lse.size(); ++e) {
          if (std::isinf(hand.lse[e])) {
            EXPECT_EQ(r.lse[e], hand.lse[e]);
          } else {
            EXPECT_NEAR(r.lse[e], hand.lse[e], test::rounding_bound(T, 16, kU64) * (1 + std::abs(hand.lse[e])));
          }
        }
      }
    }
}

// GQA: head h reads KV head h / (H/Hkv). Repeating the KV heads explicitly and running MHA must
// give the same bits (same arithmetic on the same numbers).
TEST(ReferenceAttention, GqaEqualsExplicitlyRepeatedHeadsBitwise) {
  const std::int64_t B = 2, H = 6, Hk = 2, S = 50, T = 140, D = 16;
  const Problem gqa = make_problem(B, H, Hk, S, T, D, D, Mask::causal_br);
  const Problem mha = make_problem(B, H, H, S, T, D, D, Mask::causal_br);
  const Tensor q = normal({B, S, H, D}, 20), k = normal({B, T, Hk, D}, 21), v = normal({B, T, Hk, D}, 22);
  Tensor kr(DType::f64, {B, T, H, D}), vr(DType::f64, {B, T, H, D});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < T; ++j)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          test::set(kr, b, j, h, d, at(k, b, j, h / (H / Hk), d));
          test::set(vr, b, j, h, d, at(v, b, j, h / (H / Hk), d));
        }
  for (Precision prec : {Precision::fp32, Precision::fp64})
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput a = attention(gqa, q, k, v, prec, alg), m = attention(mha, q, kr, vr, prec, alg);
      EXPECT_TRUE(test::bitwise_equal(a.out, m.out)) << label(prec, alg);
      EXPECT_TRUE(test::bitwise_equal(a.lse, m.lse)) << label(prec, alg);
    }
}

// Exact attention (mask none) is invariant under any permutation of the K/V tokens; rounding is
// not, so the two results agree to rounding_bound (see attention_test_util.hpp).
TEST(ReferenceAttention, KvPermutationChangesOnlyRounding) {
  const std::int64_t S = 64, T = 700, D = 32;
  const Problem p = make_problem(1, 2, 2, S, T, D, D);
  const Tensor q = normal({1, S, 2, D}, 30, DType::f32), k = normal({1, T, 2, D}, 31, DType::f32);
  const Tensor v = normal({1, T, 2, D}, 32, DType::f32);
  Tensor kp(DType::f32, {1, T, 2, D}), vp(DType::f32, {1, T, 2, D});
  for (std::int64_t j = 0; j < T; ++j)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t src = (j * 337 + 11) % T;  // 337 is coprime with 700: a permutation
        test::set(kp, 0, j, h, d, at(k, 0, src, h, d));
        test::set(vp, 0, j, h, d, at(v, 0, src, h, d));
      }
  for (Precision prec : {Precision::fp32, Precision::fp64}) {
    const double u = prec == Precision::fp32 ? kU32 : kU64;
    const AttentionOutput a = attention(p, q, k, v, prec), b = attention(p, q, kp, vp, prec);
    const double err = test::rel_l2(values(b.out), values(a.out));
    EXPECT_LE(err, test::rounding_bound(T, D, u)) << precision_name(prec);
    EXPECT_GT(err, 0.0) << "a reordering should move some bits (else the test checks nothing)";
    const auto la = values(a.lse), lb = values(b.lse);
    EXPECT_LE(test::max_abs_diff(la, lb), test::rounding_bound(T, D, u) * (1 + test::max_abs(la)));
  }
}

// causal_br with S > T: query i sees keys j <= i + T - S, none for i < S - T.
TEST(ReferenceAttention, FullyMaskedRowsGiveZeroAndMinusInfinity) {
  const std::int64_t S = 30, T = 12, D = 8;
  const Problem p = make_problem(1, 2, 1, S, T, D, D, Mask::causal_br);
  const Tensor q = normal({1, S, 2, D}, 40), k = normal({1, T, 1, D}, 41), v = normal({1, T, 1, D}, 42);
  for (Precision prec : kPrecisions)
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput r = attention(p, q, k, v, prec, alg);
      for (std::int64_t i = 0; i < S; ++i)
        for (std::int64_t h = 0; h < 2; ++h) {
          const bool masked = i < S - T;
          EXPECT_EQ(at(r.lse, 0, h, i) == -kInf, masked) << label(prec, alg) << " row " << i;
          for (std::int64_t d = 0; d < D; ++d) {
            if (masked) {
              EXPECT_EQ(at(r.out, 0, i, h, d), 0.0);
              EXPECT_FALSE(std::signbit(at(r.out, 0, i, h, d)));
            } else {
              EXPECT_TRUE(std::isfinite(at(r.out, 0, i, h, d)));
            }
          }
        }
    }
}

// The tiled online recurrence and the materialised row agree to rounding (mp50: see
// test_attention_mp50.cpp).
TEST(ReferenceAttention, OnlineAgreesWithDirect) {
  struct Case {
    Problem p;
    Tiling tiles;
  };
  const Case cases[] = {
      {parse_problem("b1h2s64d32:dtype=f64"), {}},
      {parse_problem("b2h4k1s100t333d16v24:mask=causal_br:dtype=f64"), {32, 64}},
      {parse_problem("b1h3s200t77d8:mask=causal_tl:dtype=f64"), {7, 5}},
      {parse_problem("b1h1s129t257d64:scale=0.3:dtype=f64"), {}},
  };
  for (const Case& c : cases) {
    const Problem& p = c.p;
    const Tensor q = normal({p.batch, p.seqlen_q, p.heads_q, p.head_dim}, 50, DType::f32, 2.0);
    const Tensor k = normal({p.batch, p.seqlen_kv, p.heads_kv, p.head_dim}, 51, DType::f32);
    const Tensor v = normal({p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v}, 52, DType::f32);
    const auto d64 = attention_typed<double>(p, q, k, v, Algorithm::direct);
    const auto o64 = attention_typed<double>(p, q, k, v, Algorithm::online, c.tiles);
    const auto d32 = attention_typed<float>(p, q, k, v, Algorithm::direct);
    const auto o32 = attention_typed<float>(p, q, k, v, Algorithm::online, c.tiles);
    const std::vector<double> d32v(d32.out.begin(), d32.out.end()), o32v(o32.out.begin(), o32.out.end());
    EXPECT_LE(test::rel_l2(o64.out, d64.out), test::rounding_bound(p.seqlen_kv, p.head_dim, kU64)) << to_string(p);
    EXPECT_LE(test::rel_l2(o32v, d32v), test::rounding_bound(p.seqlen_kv, p.head_dim, kU32)) << to_string(p);
    EXPECT_LE(test::max_abs_diff(o64.lse, d64.lse),
              test::rounding_bound(p.seqlen_kv, p.head_dim, kU64) * (1 + test::max_abs(d64.lse)));
  }
}

// FP32 against FP64 on the same float inputs: rounding_bound with u = 2^-24 (the double result's
// own error is 2^-29 times smaller).
TEST(ReferenceAttention, Fp32WithinRoundingBoundOfFp64) {
  for (Mask mask : {Mask::none, Mask::causal_br}) {
    const std::int64_t S = 256, T = 1024, D = 64;
    const Problem p = make_problem(1, 2, 2, S, T, D, D, mask);
    const Tensor q = normal({1, S, 2, D}, 60, DType::f32), k = normal({1, T, 2, D}, 61, DType::f32);
    const Tensor v = normal({1, T, 2, D}, 62, DType::f32);
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput r32 = attention(p, q, k, v, Precision::fp32, alg);
      const AttentionOutput r64 = attention(p, q, k, v, Precision::fp64, alg);
      EXPECT_EQ(r32.out.dtype(), DType::f32);
      const double err = test::rel_l2(values(r32.out), values(r64.out));
      EXPECT_LE(err, test::rounding_bound(T, D, kU32)) << mask_name(mask) << " " << algorithm_name(alg);
      const auto l64 = values(r64.lse);
      EXPECT_LE(test::max_abs_diff(values(r32.lse), l64), test::rounding_bound(T, D, kU32) * (1 + test::max_abs(l64)));
    }
  }
}

// Varlen: each batch element of a ragged problem is computed exactly as if it were alone (row
// blocks restart at each element's row 0), so the bits match separate runs.
TEST(ReferenceAttention, RaggedBatchEqualsSeparateRunsBitwise) {
  // Element 1 spans two default row blocks (256 + 44) and has fully-masked rows (S > T).
  const std::vector<std::int64_t> lq{37, 300, 0, 1}, lk{50, 140, 9, 300};
  Problem p = parse_problem("b4h2k1s300d16v8:mask=causal_br:dtype=f64");
  p.cu_seqlens_q = {0};
  p.cu_seqlens_kv = {0};
  for (std::size_t b = 0; b < lq.size(); ++b) {
    p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + lq[b]);
    p.cu_seqlens_kv.push_back(p.cu_seqlens_kv.back() + lk[b]);
  }
  const std::int64_t tq = p.cu_seqlens_q.back(), tk = p.cu_seqlens_kv.back();
  const Tensor q = normal({1, tq, 2, 16}, 70), k = normal({1, tk, 1, 16}, 71), v = normal({1, tk, 1, 8}, 72);
  for (Precision prec : {Precision::fp32, Precision::fp64})
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput all = attention(p, q, k, v, prec, alg);
      ASSERT_EQ(all.out.shape(), (Shape{1, tq, 2, 8}));
      ASSERT_EQ(all.lse.shape(), (Shape{1, 2, tq}));
      for (std::size_t b = 0; b < lq.size(); ++b) {
        if (lq[b] == 0) continue;
        const Problem one = make_problem(1, 2, 1, lq[b], lk[b], 16, 8, Mask::causal_br);
        const std::int64_t q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_kv[b];
        Tensor qb(DType::f64, {1, lq[b], 2, 16}), kb(DType::f64, {1, lk[b], 1, 16}), vb(DType::f64, {1, lk[b], 1, 8});
        for (std::int64_t i = 0; i < lq[b]; ++i)
          for (std::int64_t h = 0; h < 2; ++h)
            for (std::int64_t d = 0; d < 16; ++d) test::set(qb, 0, i, h, d, at(q, 0, q0 + i, h, d));
        for (std::int64_t j = 0; j < lk[b]; ++j) {
          for (std::int64_t d = 0; d < 16; ++d) test::set(kb, 0, j, 0, d, at(k, 0, k0 + j, 0, d));
          for (std::int64_t d = 0; d < 8; ++d) test::set(vb, 0, j, 0, d, at(v, 0, k0 + j, 0, d));
        }
        const AttentionOutput sep = attention(one, qb, kb, vb, prec, alg);
        for (std::int64_t i = 0; i < lq[b]; ++i)
          for (std::int64_t h = 0; h < 2; ++h) {
            const double a = at(all.lse, 0, h, q0 + i), s = at(sep.lse, 0, h, i);
            ASSERT_EQ(std::memcmp(&a, &s, sizeof a), 0) << label(prec, alg) << " b" << b << " i" << i;
            for (std::int64_t d = 0; d < 8; ++d) {
              const double x = at(all.out, 0, q0 + i, h, d), y = at(sep.out, 0, i, h, d);
              ASSERT_EQ(std::memcmp(&x, &y, sizeof x), 0) << label(prec, alg) << " b" << b << " i" << i;
            }
          }
      }
    }
}

// NaN rules (attention.hpp): a NaN logit poisons its whole row and lse; a NaN V element poisons
// that output element; masked keys and other heads never see it.
TEST(ReferenceAttention, NanPropagatesExactlyToTheRowsThatSeeIt) {
  const std::int64_t S = 40, T = 40, D = 8, H = 2;
  const Problem p = make_problem(1, H, 1, S, T, D, D, Mask::causal_tl);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  enum Where { in_q, in_k, in_v };
  for (Where where : {in_q, in_k, in_v}) {
    Tensor q = normal({1, S, H, D}, 80), k = normal({1, T, 1, D}, 81), v = normal({1, T, 1, D}, 82);
    if (where == in_q) test::set(q, 0, 5, 1, 3, nan);
    if (where == in_k) test::set(k, 0, 20, 0, 1, nan);
    if (where == in_v) test::set(v, 0, 20, 0, 2, nan);
    for (Precision prec : kPrecisions)
      for (Algorithm alg : kAlgorithms) {
        const AttentionResult<double> small = attention_typed<double>(p, q, k, v, alg, Tiling{16, 16});
        const AttentionOutput r = attention(p, q, k, v, prec, alg);
        for (std::int64_t i = 0; i < S; ++i)
          for (std::int64_t h = 0; h < H; ++h) {
            const bool row_nan = (where == in_q && i == 5 && h == 1) || (where == in_k && i >= 20);
            EXPECT_EQ(std::isnan(at(r.lse, 0, h, i)), row_nan) << label(prec, alg) << " i" << i << " h" << h;
            EXPECT_EQ(std::isnan(small.lse[static_cast<std::size_t>(h * S + i)]), row_nan);
            for (std::int64_t d = 0; d < D; ++d) {
              const bool want = row_nan || (where == in_v && i >= 20 && d == 2);
              EXPECT_EQ(std::isnan(at(r.out, 0, i, h, d)), want) << label(prec, alg) << " i" << i << " d" << d;
              EXPECT_EQ(std::isnan(small.out[static_cast<std::size_t>((i * H + h) * D + d)]), want);
            }
          }
      }
  }
}

// The arithmetic never sees strides: bhsd (permuted view), a padded strided tensor and f32 data
// given as f64 all give the same bits as contiguous bshd.
TEST(ReferenceAttention, LayoutsAndInputDtypeDoNotChangeBits) {
  const std::int64_t B = 2, H = 4, Hk = 2, S = 70, T = 130, D = 16;
  const Problem p = make_problem(B, H, Hk, S, T, D, D, Mask::causal_tl);
  const Tensor q = normal({B, S, H, D}, 90, DType::f32), k = normal({B, T, Hk, D}, 91, DType::f32);
  const Tensor v = normal({B, T, Hk, D}, 92, DType::f32);
  auto bhsd = [](const Tensor& t) {  // same data stored [B,H,S,D], viewed in logical order
    const Tensor phys = t.permute({0, 2, 1, 3}).contiguous();
    return phys.permute({0, 2, 1, 3});
  };
  auto padded = [](const Tensor& t) {  // bshd with 5 spare elements after each head row, offset 3
    const Shape& s = t.shape();
    const std::int64_t row = s[3] + 5;
    Tensor out = Tensor::strided(t.dtype(), s, {s[1] * s[2] * row, s[2] * row, row, 1}, 3, s[0] * s[1] * s[2] * row + 3);
    for (std::int64_t a = 0; a < s[0]; ++a)
      for (std::int64_t b = 0; b < s[1]; ++b)
        for (std::int64_t c = 0; c < s[2]; ++c)
          for (std::int64_t d = 0; d < s[3]; ++d) test::set(out, a, b, c, d, at(t, a, b, c, d));
    return out;
  };
  auto as_f64 = [](const Tensor& t) {
    Tensor out(DType::f64, t.shape());
    const auto vals = values(t);
    std::copy(vals.begin(), vals.end(), out.data<double>());
    return out;
  };
  for (Precision prec : {Precision::fp32, Precision::fp64})
    for (Algorithm alg : kAlgorithms) {
      const AttentionOutput base = attention(p, q, k, v, prec, alg);
      const AttentionOutput perm = attention(p, bhsd(q), bhsd(k), bhsd(v), prec, alg);
      const AttentionOutput pad = attention(p, padded(q), padded(k), padded(v), prec, alg);
      const AttentionOutput wide = attention(p, as_f64(q), as_f64(k), as_f64(v), prec, alg);
      for (const AttentionOutput* o : {&perm, &pad, &wide}) {
        EXPECT_TRUE(test::bitwise_equal(o->out, base.out)) << label(prec, alg);
        EXPECT_TRUE(test::bitwise_equal(o->lse, base.lse)) << label(prec, alg);
      }
    }
}

// The same call gives the same bits on any thread and whatever the heap looked like: Eigen
// vectorises from the first aligned address, so unaligned scratch used to move the scalar/FMA
// split (tiny problems differed between threads; found by conformance/dist's tests).
TEST(ReferenceAttention, BitwiseTheSameOnEveryThreadAndHeapLayout) {
  for (const auto& [S, T, D] : {std::array<std::int64_t, 3>{2, 3, 8}, {3, 5, 6}, {2, 2, 16}, {5, 9, 12}}) {
    const Problem p = make_problem(1, 2, 2, S, T, D, D, Mask::none);
    const Tensor q = normal({1, S, 2, D}, 93, DType::f32), k = normal({1, T, 2, D}, 94, DType::f32);
    const Tensor v = normal({1, T, 2, D}, 95, DType::f32);
    for (Precision prec : {Precision::fp32, Precision::fp64})
      for (Algorithm alg : kAlgorithms) {
        const AttentionOutput base = attention(p, q, k, v, prec, alg);
        int differ = 0;
        for (int j = 0; j < 16; ++j) {
          std::thread th([&] {
            std::vector<char> shift(static_cast<std::size_t>(8 * j + 8));  // moves this thread's heap
            const AttentionOutput r = attention(p, q, k, v, prec, alg);
            differ += !test::bitwise_equal(r.out, base.out) || !test::bitwise_equal(r.lse, base.lse);
          });
          th.join();
        }
        EXPECT_EQ(differ, 0) << to_string(p) << " " << label(prec, alg);
      }
  }
}

TEST(ReferenceAttention, BadInputsThrowNamingTheTensorAndShapes) {
  const Problem p = parse_problem("b1h4k2s10t12d8v6:dtype=f64");
  const Tensor q = normal({1, 10, 4, 8}, 1), k = normal({1, 12, 2, 8}, 2), v = normal({1, 12, 2, 6}, 3);
  EXPECT_NO_THROW((void)attention(p, q, k, v, Precision::fp64));
  auto message = [&](const Problem& pp, const Tensor& a, const Tensor& b, const Tensor& c) -> std::string {
    try {
      (void)attention(pp, a, b, c, Precision::fp64);
    } catch (const Error& e) {
      return e.what();
    }
    return "no throw";
  };
  const std::string bad_k = message(p, q, normal({1, 12, 4, 8}, 2), v);
  EXPECT_NE(bad_k.find("k has shape [1, 12, 4, 8], expected [1, 12, 2, 8]"), std::string::npos) << bad_k;
  const std::string bad_v = message(p, q, k, normal({1, 12, 2, 8}, 3));
  EXPECT_NE(bad_v.find("v has shape [1, 12, 2, 8], expected [1, 12, 2, 6]"), std::string::npos) << bad_v;
  const std::string bad_q = message(p, normal({1, 4, 10, 8}, 1), k, v);
  EXPECT_NE(bad_q.find("q has shape [1, 4, 10, 8]"), std::string::npos) << bad_q;
  const std::string bad_dtype = message(p, q, Tensor(DType::i32, {1, 12, 2, 8}), v);
  EXPECT_NE(bad_dtype.find("k has dtype i32"), std::string::npos) << bad_dtype;
  const std::string bad_rank = message(p, q, k, Tensor(DType::f64, {12, 2, 6}));
  EXPECT_NE(bad_rank.find("v has shape [12, 2, 6]"), std::string::npos) << bad_rank;
  Problem not_multiple = p;
  not_multiple.heads_kv = 3;
  const std::string bad_heads = message(not_multiple, q, normal({1, 12, 3, 8}, 2), normal({1, 12, 3, 6}, 3));
  EXPECT_NE(bad_heads.find("not a multiple"), std::string::npos) << bad_heads;
  EXPECT_THROW((void)attention_typed<double>(p, q, k, v, Algorithm::online, Tiling{0, 16}), Error);
}

}  // namespace
}  // namespace attest::ref
