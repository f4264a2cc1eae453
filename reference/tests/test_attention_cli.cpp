// `attest reference` end to end: layouts, precisions, and bad input (exit 2, nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "attention_test_util.hpp"
#include "attest/core/output_files.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/attention.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::ref {
namespace {

namespace fs = std::filesystem;

class ReferenceCli : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void save(const std::string& name, const Tensor& t) const {
    OutputFiles out;
    datasets::write_npy(out, path(name), t);
    out.commit();
  }

  // Exit status of `attest reference ARGS`; stderr is kept in err_.
  int run(const std::string& args) {
    const auto r = attest::testing::run_cli("reference " + args, attest::testing::Stderr::apart);
    err_ = r.err;
    return r.code;
  }

  attest::testing::TempDir dir_{"reference_cli"};
  std::string err_;
};

const std::int64_t B = 2, H = 4, Hk = 2, S = 33, T = 45, D = 8, Dv = 6;

TEST_F(ReferenceCli, BshdAndBhsdFilesGiveTheLibrarysBits) {
  const Tensor q = test::normal({B, S, H, D}, 1, DType::f32), k = test::normal({B, T, Hk, D}, 2, DType::f32);
  const Tensor v = test::normal({B, T, Hk, Dv}, 3, DType::f32);
  save("q.npy", q);
  save("k.npy", k);
  save("v.npy", v);
  save("qt.npy", q.permute({0, 2, 1, 3}).contiguous());
  save("kt.npy", k.permute({0, 2, 1, 3}).contiguous());
  save("vt.npy", v.permute({0, 2, 1, 3}).contiguous());
  ASSERT_EQ(run("--q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                " --mask causal_br --out " + path("o.npy") + " --lse " + path("l.npy")), 0) << err_;
  ASSERT_EQ(run("--layout bhsd --q " + path("qt.npy") + " --k " + path("kt.npy") + " --v " + path("vt.npy") +
                " --mask causal_br --algorithm direct --out " + path("ot.npy") + " --lse " + path("lt.npy")), 0) << err_;

  const Problem p = test::make_problem(B, H, Hk, S, T, D, Dv, Mask::causal_br);
  const AttentionOutput online = attention(p, q, k, v, Precision::fp64, Algorithm::online);
  const AttentionOutput direct = attention(p, q, k, v, Precision::fp64, Algorithm::direct);
  const Tensor o = datasets::read_npy(path("o.npy")), ot = datasets::read_npy(path("ot.npy"));
  EXPECT_EQ(o.dtype(), DType::f64);
  EXPECT_EQ(ot.shape(), (Shape{B, H, S, Dv}));
  EXPECT_TRUE(test::bitwise_equal(o, online.out));
  EXPECT_TRUE(test::bitwise_equal(datasets::read_npy(path("l.npy")), online.lse));
  EXPECT_TRUE(test::bitwise_equal(ot.permute({0, 2, 1, 3}), direct.out));
  EXPECT_TRUE(test::bitwise_equal(datasets::read_npy(path("lt.npy")), direct.lse));
}

TEST_F(ReferenceCli, Fp32PrecisionWritesFloat32OutputAndFloat64Lse) {
  const Tensor q = test::normal({1, S, 2, D}, 4), k = test::normal({1, T, 2, D}, 5), v = test::normal({1, T, 2, D}, 6);
  save("q.npy", q);
  save("k.npy", k);
  save("v.npy", v);
  ASSERT_EQ(run("--q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                " --precision fp32 --scale 0.25 --out " + path("o.npy") + " --lse " + path("l.npy")), 0) << err_;
  Problem p = test::make_problem(1, 2, 2, S, T, D, D, Mask::none, 0.25);
  const AttentionOutput want = attention(p, q, k, v, Precision::fp32);
  EXPECT_TRUE(test::bitwise_equal(datasets::read_npy(path("o.npy")), want.out));
  const Tensor lse = datasets::read_npy(path("l.npy"));
  EXPECT_EQ(lse.dtype(), DType::f64);
  EXPECT_EQ(test::values(lse), test::values(want.lse));
}

TEST_F(ReferenceCli, BadInputExitsTwoWithOneLineAndWritesNothing) {
  save("q.npy", test::normal({1, S, H, D}, 7));
  save("k.npy", test::normal({1, T, Hk, D}, 8));
  save("v.npy", test::normal({1, T, Hk, Dv}, 9));
  save("k_badd.npy", test::normal({1, T, Hk, D + 1}, 8));
  save("k_h3.npy", test::normal({1, T, 3, D}, 8));
  save("v_h3.npy", test::normal({1, T, 3, Dv}, 9));
  save("k_i32.npy", Tensor(DType::i32, {1, T, Hk, D}));
  save("k_rank3.npy", test::normal({T, Hk, D}, 8));
  {
    std::ifstream in(path("k.npy"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(path("k_trunc.npy"), std::ios::binary) << bytes.substr(0, bytes.size() - 8);
  }
  const std::string qv = " --q " + path("q.npy") + " --v " + path("v.npy");
  const std::string outs = " --out " + path("o.npy") + " --lse " + path("l.npy");
  struct Bad {
    std::string args, needle;
  };
  const Bad bad[] = {
      {qv + " --k " + path("k_badd.npy") + outs, "k has shape"},
      {" --q " + path("q.npy") + " --k " + path("k_h3.npy") + " --v " + path("v_h3.npy") + outs, "not a multiple"},
      {qv + " --k " + path("k_i32.npy") + outs, "dtype i32"},
      {qv + " --k " + path("k_rank3.npy") + outs, "rank 4"},
      {qv + " --k " + path("k_trunc.npy") + outs, "k_trunc.npy"},
      {qv + " --k " + path("missing.npy") + outs, "missing.npy"},
      {qv + " --k " + path("k.npy") + " --mask causal" + outs, "valid: none, causal_tl, causal_br"},
      {qv + " --k " + path("k.npy") + " --precision fp16" + outs, "valid: fp32, fp64, mp50"},
      {qv + " --k " + path("k.npy") + " --layout packed_qkv" + outs, "valid: bshd, bhsd"},
      {qv + " --k " + path("k.npy") + " --scale -1" + outs, "softmax_scale"},
  };
  for (const Bad& b : bad) {
    EXPECT_EQ(run(b.args), 2) << b.args;
    EXPECT_NE(err_.find(b.needle), std::string::npos) << err_;
    EXPECT_EQ(std::count(err_.begin(), err_.end(), '\n'), 1) << err_;
    EXPECT_FALSE(fs::exists(path("o.npy"))) << b.args;
    EXPECT_FALSE(fs::exists(path("l.npy"))) << b.args;
  }
  EXPECT_EQ(run(qv + " --k " + path("k.npy") + outs), 0) << err_;
  EXPECT_TRUE(fs::exists(path("o.npy")) && fs::exists(path("l.npy")));
}

TEST_F(ReferenceCli, HelpNamesEveryOption) {
  const auto help = attest::testing::run_cli("reference --help", attest::testing::Stderr::apart);
  ASSERT_EQ(help.code, 0) << help.err;
  for (const char* opt : {"--q", "--k", "--v", "--out", "--lse", "--scale", "--mask", "--layout", "--precision", "--algorithm"})
    EXPECT_NE(help.out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace attest::ref
