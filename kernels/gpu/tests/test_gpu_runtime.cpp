// The runtime layer: device discovery, buffers, and the FP64 MMA fragment layout.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "gpu_test_util.hpp"

namespace attest::gpu {
namespace {

TEST(GpuRuntime, DeviceInfo) {
  ATTEST_REQUIRE_GPU();
  const DeviceInfo d = device_info(0);
  std::cout << "device 0: " << d.name << " " << d.arch << ", " << d.multiprocessors << " CUs/SMs, warp " << d.warp_size
            << ", " << (d.global_memory >> 20) << " MiB, runtime " << d.runtime_version << ", driver " << d.driver_version
            << ", backend " << backend_name() << "\n";
  EXPECT_TRUE(d.warp_size == 32 || d.warp_size == 64) << d.warp_size;
  EXPECT_GT(d.multiprocessors, 0);
  EXPECT_THROW((void)device_info(device_count()), Error);
}

TEST(GpuRuntime, BufferRoundTripAndFill) {
  ATTEST_REQUIRE_GPU();
  std::vector<double> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5 * static_cast<double>(i) - 7.25;
  DeviceBuffer buf(host.size() * sizeof(double));
  buf.upload(host.data(), buf.bytes());
  std::vector<double> back(host.size(), 0.0);
  buf.download(back.data(), buf.bytes());
  EXPECT_EQ(0, std::memcmp(host.data(), back.data(), buf.bytes()));
  buf.fill_bytes(0xFF);
  std::vector<unsigned char> bytes(buf.bytes(), 0);
  buf.download(bytes.data(), bytes.size());
  for (unsigned char c : bytes) ASSERT_EQ(c, 0xFF);
  EXPECT_THROW(buf.upload(host.data(), buf.bytes() + 1), Error);
}

// mma.sync m16n8k8 f64 on integers: every product and partial sum is exact, so the result must
// equal the naive product exactly; a wrong fragment layout moves values and cannot pass.
TEST(GpuRuntime, MmaF64FragmentLayout) {
  ATTEST_REQUIRE_GPU();
  std::array<double, 128> a{}, c{}, want{};
  std::array<double, 64> b{};
  for (int i = 0; i < 128; ++i) a[static_cast<std::size_t>(i)] = static_cast<double>((i * 7) % 13 - 6);
  for (int i = 0; i < 64; ++i) b[static_cast<std::size_t>(i)] = static_cast<double>((i * 5) % 11 - 5);
  for (int i = 0; i < 128; ++i) c[static_cast<std::size_t>(i)] = static_cast<double>(i % 9);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double s = c[static_cast<std::size_t>(r * 8 + n)];
      for (int k = 0; k < 8; ++k) s += a[static_cast<std::size_t>(r * 8 + k)] * b[static_cast<std::size_t>(k * 8 + n)];
      want[static_cast<std::size_t>(r * 8 + n)] = s;
    }
  if (!detail::mma_16x8x8_selftest(a.data(), b.data(), c.data())) GTEST_SKIP() << "FP64 MMA path not available here";
  for (int i = 0; i < 128; ++i) EXPECT_EQ(c[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)]) << "element " << i;
}

}  // namespace
}  // namespace attest::gpu
