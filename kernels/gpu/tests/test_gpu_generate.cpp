// Device data generation == CPU data generation, bit for bit, for every distribution: the same
// element function (datasets/sample.hpp) compiled for both, with no FMA contraction on either.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "attest/datasets/distributions.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/generate_qkv.hpp"
#include "gpu_test_util.hpp"

namespace attest::gpu {
namespace {

class DeviceGenerate : public ::testing::TestWithParam<datasets::Distribution> {};

TEST_P(DeviceGenerate, BitwiseEqualToCpu) {
  ATTEST_REQUIRE_GPU();
  // GQA + cross + Dv != D + causal_br (maxstair/latesink read len_kv), a ragged batch with an
  // empty kv segment, and a plain d128 shape.
  for (const char* text : {"b2h4k2s33t47d64v48:mask=causal_br",
                           "b3h2s65t100d64:mask=causal_br:cu_q=0,5,70,100:cu_kv=0,30,30,130", "b1h3s200d128"}) {
    const Problem p = parse_problem(text);
    const datasets::Qkv want = datasets::generate_qkv(p, GetParam(), 1234567);
    DeviceBuffer q(want.q.storage().size()), k(want.k.storage().size()), v(want.v.storage().size()), cu;
    q.fill_bytes(0xFF);
    k.fill_bytes(0xFF);
    v.fill_bytes(0xFF);
    const std::int64_t* cu_q = nullptr;
    const std::int64_t* cu_kv = nullptr;
    if (p.ragged()) {
      std::vector<std::int64_t> host(p.cu_seqlens_q);
      host.insert(host.end(), p.cu_seqlens_kv.begin(), p.cu_seqlens_kv.end());
      cu = DeviceBuffer(host.size() * 8);
      cu.upload(host.data(), cu.bytes());
      cu_q = cu.as<std::int64_t>();
      cu_kv = cu_q + p.cu_seqlens_q.size();
    }
    generate_qkv_device(p, GetParam(), 1234567, q.as<float>(), k.as<float>(), v.as<float>(), cu_q, cu_kv);
    synchronize();
    const std::pair<const Tensor*, const DeviceBuffer*> roles[] = {{&want.q, &q}, {&want.k, &k}, {&want.v, &v}};
    for (const auto& [t, buf] : roles) {
      std::vector<std::uint32_t> got(static_cast<std::size_t>(t->numel()));
      buf->download(got.data(), got.size() * 4);
      const auto* ref = reinterpret_cast<const std::uint32_t*>(t->data<float>());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], ref[i]) << datasets::distribution_name(GetParam()) << " " << text << " role "
                                  << (t == &want.q ? "q" : t == &want.k ? "k" : "v") << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, DeviceGenerate, ::testing::ValuesIn(datasets::all_distributions().begin(),
                                                                   datasets::all_distributions().end()),
                         [](const ::testing::TestParamInfo<datasets::Distribution>& pi) {
                           return std::string(datasets::distribution_name(pi.param));
                         });

TEST(DeviceGenerateArgs, RefusesBadInput) {
  ATTEST_REQUIRE_GPU();
  const Problem rag = parse_problem("b2h1s3d8:cu_q=0,3,4:cu_kv=0,1,4");
  EXPECT_THROW(generate_qkv_device(rag, datasets::Distribution::normal, 1, nullptr, nullptr, nullptr), Error);
  const Problem p = parse_problem("b1h1s4d8");
  EXPECT_THROW(generate_qkv_device(p, static_cast<datasets::Distribution>(200), 1, nullptr, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace attest::gpu
