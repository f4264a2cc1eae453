#include <gtest/gtest.h>

#include <random>

#include "attest/core/problem.hpp"

namespace attest {
namespace {

Problem random_problem(std::mt19937_64& rng) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  Problem p;
  p.heads_kv = pick(1, 8);
  p.heads_q = p.heads_kv * pick(1, 4);
  p.head_dim = pick(1, 256);
  p.head_dim_v = pick(0, 1) ? p.head_dim : pick(1, 256);
  p.mask = static_cast<Mask>(pick(0, 2));
  p.dtype = static_cast<DType>(pick(0, 3));
  if (pick(0, 2) == 0) p.softmax_scale = std::uniform_real_distribution<double>(1e-6, 10.0)(rng);
  p.layout = static_cast<Layout>(pick(0, 3));
  if (p.layout == Layout::packed_qkv) p.head_dim_v = p.head_dim;
  if (p.layout == Layout::strided) p.pad = pick(0, 16);
  p.batch = pick(1, 5);
  if (pick(0, 3) == 0) {
    p.cu_seqlens_q = {0};
    p.cu_seqlens_kv = {0};
    p.seqlen_q = p.seqlen_kv = 0;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const auto lq = pick(0, 300), lk = pick(0, 300);
      p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + lq);
      p.cu_seqlens_kv.push_back(p.cu_seqlens_kv.back() + lk);
      p.seqlen_q = std::max(p.seqlen_q, lq);
      p.seqlen_kv = std::max(p.seqlen_kv, lk);
    }
    p.seqlen_q = std::max<std::int64_t>(p.seqlen_q, 1);
    p.seqlen_kv = std::max<std::int64_t>(p.seqlen_kv, 1);
    if (!p.validate()) p.cu_seqlens_q.clear(), p.cu_seqlens_kv.clear();
  } else {
    p.seqlen_q = pick(1, 20000);
    p.seqlen_kv = pick(0, 1) ? p.seqlen_q : pick(1, 20000);
  }
  return p;
}

TEST(Problem, StringRoundTripsOverRandomProblems) {
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 5000; ++i) {
    const Problem p = random_problem(rng);
    ASSERT_TRUE(p.validate()) << p.validate().reason();
    const std::string s = to_string(p);
    EXPECT_EQ(parse_problem(s), p) << s;
    EXPECT_EQ(to_string(parse_problem(s)), s);
  }
}

TEST(Problem, PrintsOnlyNonDefaults) {
  Problem p;
  p.batch = 2, p.heads_q = 24, p.heads_kv = 8, p.seqlen_q = 4096, p.seqlen_kv = 4096, p.head_dim = p.head_dim_v = 128;
  EXPECT_EQ(to_string(p), "b2h24k8s4096d128");
  p.mask = Mask::causal_br;
  p.seqlen_kv = 1000;
  EXPECT_EQ(to_string(p), "b2h24k8s4096t1000d128:mask=causal_br");
  p.softmax_scale = 0.1;
  EXPECT_EQ(to_string(p), "b2h24k8s4096t1000d128:mask=causal_br:scale=0.1");
  // Defaults spelled out parse to the same problem.
  EXPECT_EQ(parse_problem("b2h24k8s4096t1000d128v128:mask=causal_br:layout=bshd:scale=0.1"), p);
}

TEST(Problem, RejectsMalformedStrings) {
  EXPECT_THROW(parse_problem("b2h3k2s4d8"), Error);          // 3 % 2 != 0
  EXPECT_THROW(parse_problem("b2h4s4x3d8"), Error);          // unknown dim
  EXPECT_THROW(parse_problem("b2h4s4d8:mask=diag"), Error);  // unknown mask
  EXPECT_THROW(parse_problem("b2h4s4d8:mask"), Error);       // no value
  EXPECT_THROW(parse_problem("b2h4sxd8"), Error);            // bad integer
  EXPECT_THROW(parse_problem("b2h4s4s5d8"), Error);          // repeated
  EXPECT_THROW(parse_problem("b2h4s4d8:cu_q=0,3,4"), Error); // cu_kv missing
  try {
    parse_problem("b1h4s4d8:layout=bsdh");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: bshd, bhsd, packed_qkv, strided"), std::string::npos) << e.what();
  }
}

TEST(Problem, CausalAlignmentClosedForms) {
  // S=3 queries, T=5 keys. Top-left: row i sees keys 0..i. Bottom-right: row i sees 0..i+2.
  Problem p = parse_problem("b1h1s3t5d4:mask=causal_tl");
  EXPECT_EQ(p.visible_keys(0, 0), 1);
  EXPECT_EQ(p.visible_keys(0, 2), 3);
  p.mask = Mask::causal_br;
  EXPECT_EQ(p.visible_keys(0, 0), 3);
  EXPECT_EQ(p.visible_keys(0, 2), 5);
  // S=5, T=3 bottom-right: the first two rows see nothing (fully masked).
  p = parse_problem("b1h1s5t3d4:mask=causal_br");
  EXPECT_LE(p.visible_keys(0, 0), 0);
  EXPECT_LE(p.visible_keys(0, 1), 0);
  EXPECT_EQ(p.visible_keys(0, 2), 1);
  EXPECT_EQ(p.visible_keys(0, 4), 3);
}

TEST(Problem, FlopsCountVisiblePairs) {
  // Non-causal: 4*B*H*S*T*D when D == Dv.
  EXPECT_DOUBLE_EQ(parse_problem("b2h3s5t7d8").flops(), 4.0 * 2 * 3 * 5 * 7 * 8);
  // Causal square S=T=4: 1+2+3+4 = 10 pairs.
  EXPECT_DOUBLE_EQ(parse_problem("b1h1s4d8:mask=causal_tl").flops(), 4.0 * 10 * 8);
}

TEST(Problem, RaggedLengths) {
  const Problem p = parse_problem("b3h2s5t6d8:cu_q=0,2,7,7:cu_kv=0,6,9,10");
  EXPECT_EQ(p.len_q(0), 2);
  EXPECT_EQ(p.len_q(1), 5);
  EXPECT_EQ(p.len_q(2), 0);
  EXPECT_EQ(p.len_kv(2), 1);
  EXPECT_THROW(parse_problem("b3h2s4t6d8:cu_q=0,2,7,7:cu_kv=0,6,9,10"), Error);  // s is not the max
}

}  // namespace
}  // namespace attest
