// Streams and graphs (graph.hpp) with the device quantizer as the captured work: replay equals
// eager, an exec update moves the work to new buffers, and the detection the gate's graph_stream
// check relies on works: work issued to the legacy stream while a blocking stream captures makes
// the capture fail; with a non-blocking stream it leaves an empty graph and changed outputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/graph.hpp"
#include "attest/kernels/gpu/quantize.hpp"
#include "gpu_test_util.hpp"

namespace attest::gpu {
namespace {

struct QuantJob {
  Scheme s = parse_scheme("int8:per_block=64:round=half:smooth=fp32");
  std::int64_t T = 200, C = 64;
  DeviceBuffer x{static_cast<std::size_t>(T * C) * 4}, codes{static_cast<std::size_t>(T * C)},
      scales{quantize_scales_bytes(s, 1, T, C)}, ws{quantize_workspace_bytes(s, 1, T, C)};

  explicit QuantJob(float base) {
    std::vector<float> h(static_cast<std::size_t>(T * C));
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = base + static_cast<float>(static_cast<int>(i % 97) - 48) * 0.37f;
    x.upload(h.data(), x.bytes());
    synchronize();  // the graphs run on non-blocking streams, not ordered after this copy
  }
  void enqueue(void* stream) const {
    QuantizeArgs a;
    a.x = x.as<float>();
    a.T = T, a.C = C;
    a.stride[0] = T * C, a.stride[1] = T * C, a.stride[2] = C, a.stride[3] = 1;
    a.codes = codes.data();
    a.scales = scales.data();
    a.workspace = ws.data();
    quantize_device(s, a, stream);
  }
  std::vector<std::uint8_t> result() const {
    std::vector<std::uint8_t> r(codes.bytes() + scales.bytes());
    codes.download(r.data(), codes.bytes());
    scales.download(r.data() + codes.bytes(), scales.bytes());
    return r;
  }
};

TEST(DeviceGraph, ReplayEqualsEager) {
  ATTEST_REQUIRE_GPU();
  QuantJob job(0.5f);
  Stream s;
  job.enqueue(s.get());
  s.synchronize();
  const auto eager = job.result();
  Graph g = Graph::capture(s, [&](void* st) { job.enqueue(st); });
  EXPECT_GE(g.nodes(), 2u);  // mean, prepare, rows kernels
  for (int i = 0; i < 3; ++i) {
    job.codes.fill_bytes(0xA5);
    job.scales.fill_bytes(0xA5);
    synchronize();  // memsets on the legacy stream are asynchronous
    g.launch(s);
    s.synchronize();
    EXPECT_EQ(job.result(), eager) << "replay " << i;
  }
}

TEST(DeviceGraph, ExecUpdateMovesTheWorkToNewBuffers) {
  ATTEST_REQUIRE_GPU();
  QuantJob a(0.5f), b(-3.0f);
  Stream s;
  b.enqueue(s.get());
  s.synchronize();
  const auto eb = b.result();
  Graph ga = Graph::capture(s, [&](void* st) { a.enqueue(st); });
  Graph gb = Graph::capture(s, [&](void* st) { b.enqueue(st); });
  ASSERT_EQ(ga.update_from(gb), "");
  a.codes.fill_bytes(0x5A);
  b.codes.fill_bytes(0x5A);
  b.scales.fill_bytes(0x5A);
  synchronize();
  const auto a_before = a.result();
  ga.launch(s);
  s.synchronize();
  EXPECT_EQ(b.result(), eb);
  EXPECT_EQ(a.result(), a_before);
}

TEST(DeviceGraph, EscapedWorkIsDetected) {
  ATTEST_REQUIRE_GPU();
  // The enqueue ignores the stream it is given: work that would escape the capture.
  {
    // Capturing a blocking stream: legacy-stream work would have to depend on it, which the
    // runtime refuses (cudaErrorStreamCaptureImplicit), so the capture fails.
    QuantJob job(1.0f);
    Stream blocking(false);
    EXPECT_THROW((void)Graph::capture(blocking, [&](void*) { job.enqueue(nullptr); }, CaptureMode::global), Error);
    synchronize();
    job.enqueue(blocking.get());  // the stream is usable again afterwards
    blocking.synchronize();
  }
  {
    // Capturing a non-blocking stream: the legacy-stream work may run eagerly; then the graph is
    // empty and the outputs changed during the capture, which is what graph_stream looks at.
    QuantJob job(1.0f);
    job.codes.fill_bytes(0x11);
    synchronize();
    const auto before = job.result();
    Stream s;
    try {
      Graph g = Graph::capture(s, [&](void*) { job.enqueue(nullptr); }, CaptureMode::global);
      synchronize();
      EXPECT_EQ(g.nodes(), 0u);
      EXPECT_NE(job.result(), before);
    } catch (const Error&) {
      synchronize();  // refused outright: detected as well
    }
  }
}

}  // namespace
}  // namespace attest::gpu
