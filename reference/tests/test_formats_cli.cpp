// `attest codec` round trips through the built binary (path from $<TARGET_FILE:attest>): exit
// codes, output dtypes and values, and that nothing is written on error.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/formats.hpp"
#include "attest/testing/run_cli.hpp"
#include "attest/testing/temp_dir.hpp"

namespace attest::ref {
namespace {

namespace fs = std::filesystem;

using CliResult = attest::testing::CliRun;
using attest::testing::run_cli;

class CodecCli : public ::testing::Test {
 protected:
  std::string path(const char* name) const { return (dir_ / name).string(); }
  void write(const char* name, const Tensor& t) const {
    OutputFiles out;
    datasets::write_npy(out, dir_ / name, t);
    out.commit();
  }
  attest::testing::TempDir dir_{"codec_cli"};
};

std::vector<float> sample_inputs() {
  return {0.0f, -0.0f, 1.0f, -1.5f, 464.0f, 248.0f, 1e9f, 0x1p-9f, 0x1.8p-9f, 2.5f,
          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
}

TEST_F(CodecCli, EncodeDecodeRoundTripEveryFormat) {
  const std::vector<float> xs = sample_inputs();
  Tensor in(DType::f32, {3, 4});
  std::copy(xs.begin(), xs.end(), in.data<float>());
  write("in.npy", in);
  for (FormatId f : all_formats()) {
    for (const char* ov : {"ieee", "sat_cuda"}) {
      SCOPED_TRACE(std::string(format_name(f)) + " " + ov);
      const CliResult e = run_cli("codec --format " + std::string(format_name(f)) + " --overflow " + ov + " --round away --encode " +
                        path("in.npy") + " " + path("codes.npy"));
      ASSERT_EQ(e.code, 0) << e.out;
      const Tensor codes = datasets::read_npy(path("codes.npy"));
      ASSERT_EQ(codes.shape(), (Shape{3, 4}));
      const bool wide = format_info(f).bits > 8;
      ASSERT_EQ(codes.dtype(), wide ? DType::u16 : DType::u8);
      std::vector<std::uint16_t> c(xs.size());
      for (std::size_t i = 0; i < xs.size(); ++i) {
        c[i] = wide ? codes.data<std::uint16_t>()[i] : codes.data<std::uint8_t>()[i];
        EXPECT_EQ(c[i], encode(f, xs[i], Rounding::away, parse_overflow(ov))) << i;
      }
      const CliResult d = run_cli("codec --format " + std::string(format_name(f)) + " --decode " + path("codes.npy") + " " +
                        path("dec.npy"));
      ASSERT_EQ(d.code, 0) << d.out;
      const Tensor dec = datasets::read_npy(path("dec.npy"));
      ASSERT_EQ(dec.dtype(), DType::f32);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const float want = decode(f, c[i]);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(dec.data<float>()[i]));
        } else {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(dec.data<float>()[i]), std::bit_cast<std::uint32_t>(want));
        }
      }
    }
  }
}

TEST_F(CodecCli, DoubleInputIsRoundedOnce) {
  Tensor in(DType::f64, {2});
  in.data<double>()[0] = 464.0 + 0x1p-30;  // above the e4m3fn tie: NaN; as float it is the tie
  in.data<double>()[1] = 464.0;
  write("in.npy", in);
  const CliResult e = run_cli("codec --format fp8_e4m3fn --encode " + path("in.npy") + " " + path("codes.npy"));
  ASSERT_EQ(e.code, 0) << e.out;
  const Tensor codes = datasets::read_npy(path("codes.npy"));
  EXPECT_EQ(codes.data<std::uint8_t>()[0], 0x7F);
  EXPECT_EQ(codes.data<std::uint8_t>()[1], 0x7E);
}

TEST_F(CodecCli, ErrorsExitTwoAndWriteNothing) {
  Tensor in(DType::f32, {2});
  write("in.npy", in);
  Tensor big(DType::u16, {1});
  big.data<std::uint16_t>()[0] = 300;
  write("big.npy", big);
  Tensor ints(DType::i32, {1});
  write("ints.npy", ints);

  CliResult r = run_cli("codec --format fp8_e4m3 --encode " + path("in.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("fp8_e4m3fnuz"), std::string::npos) << r.out;  // lists valid names
  r = run_cli("codec --format fp4_e2m1fn --round nearest --encode " + path("in.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("smaller"), std::string::npos) << r.out;
  r = run_cli("codec --format fp4_e2m1fn --overflow clamp --encode " + path("in.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("sat_hip"), std::string::npos) << r.out;
  r = run_cli("codec --format fp8_e4m3fn");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run_cli("codec --format fp8_e4m3fn --decode " + path("big.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("300"), std::string::npos) << r.out;
  r = run_cli("codec --format bf16 --encode " + path("ints.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  r = run_cli("codec --format bf16 --encode " + path("missing.npy") + " " + path("out.npy"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "out.npy"));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 3u);  // in, big, ints: no output and no staging leftovers
}

}  // namespace
}  // namespace attest::ref
