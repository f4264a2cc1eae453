// Streams and graphs behind attest/kernels/gpu/graph.hpp.
#include "attest/kernels/gpu/graph.hpp"

#include <exception>
#include <utility>

#include "runtime.hpp"

namespace attest::gpu {

Stream::Stream(bool non_blocking) {
  hipStream_t s = nullptr;
  if (non_blocking) ATTEST_GPU_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  else ATTEST_GPU_CHECK(hipStreamCreate(&s));
  s_ = s;
}
Stream::~Stream() {
  if (s_ != nullptr) (void)hipStreamDestroy(static_cast<hipStream_t>(s_));
}
Stream::Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
void Stream::synchronize() const { ATTEST_GPU_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(s_))); }

Graph::~Graph() {
  if (exec_ != nullptr) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
}
Graph::Graph(Graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    this->~Graph();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

Graph Graph::capture(const Stream& s, const std::function<void(void*)>& enqueue, CaptureMode mode) {
  const auto st = static_cast<hipStream_t>(s.get());
  const hipStreamCaptureMode m = mode == CaptureMode::global         ? hipStreamCaptureModeGlobal
                                 : mode == CaptureMode::thread_local_ ? hipStreamCaptureModeThreadLocal
                                                                      : hipStreamCaptureModeRelaxed;
  ATTEST_GPU_CHECK(hipStreamBeginCapture(st, m));
  std::string failure;
  try {
    enqueue(st);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  hipGraph_t g = nullptr;
  const hipError_t end = hipStreamEndCapture(st, &g);
  (void)hipGetLastError();  // an invalidated capture leaves a sticky launch error behind
  if (!failure.empty() || end != hipSuccess) {
    if (g != nullptr) (void)hipGraphDestroy(g);
    throw Error("stream capture failed: " + (failure.empty() ? std::string() : failure + "; ") + "end of capture: " +
                hipGetErrorName(end) + " (" + hipGetErrorString(end) + ")");
  }
  Graph out;
  out.graph_ = g;
  hipGraphExec_t e = nullptr;
  ATTEST_GPU_CHECK(hipGraphInstantiate(&e, g, nullptr, nullptr, 0));
  out.exec_ = e;
  return out;
}

void Graph::launch(const Stream& s) const {
  if (exec_ == nullptr) throw Error("Graph::launch: empty graph");
  ATTEST_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), static_cast<hipStream_t>(s.get())));
}

std::size_t Graph::nodes() const {
  if (graph_ == nullptr) return 0;
  size_t n = 0;
  ATTEST_GPU_CHECK(hipGraphGetNodes(static_cast<hipGraph_t>(graph_), nullptr, &n));
  return n;
}

std::string Graph::update_from(const Graph& other) {
  if (exec_ == nullptr || other.graph_ == nullptr) return "empty graph";
  hipGraphExecUpdateResult r{};
  hipGraphNode_t err_node = nullptr;
  const hipError_t e = hipGraphExecUpdate(static_cast<hipGraphExec_t>(exec_), static_cast<hipGraph_t>(other.graph_), &err_node, &r);
  (void)hipGetLastError();
  if (e == hipSuccess && r == hipGraphExecUpdateSuccess) return {};
  return std::string("hipGraphExecUpdate: ") + hipGetErrorName(e) + ", result " + std::to_string(static_cast<int>(r));
}

void memset_async(void* p, int value, std::size_t bytes, const Stream& s) {
  ATTEST_GPU_CHECK(hipMemsetAsync(p, value, bytes, static_cast<hipStream_t>(s.get())));
}
void memcpy_async(void* dst, const void* src, std::size_t bytes, const Stream& s) {
  ATTEST_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, static_cast<hipStream_t>(s.get())));
}
bool legacy_stream_idle() {
  const hipError_t e = hipStreamQuery(nullptr);
  if (e == hipSuccess) return true;
  if (e == hipErrorNotReady) {
    (void)hipGetLastError();
    return false;
  }
  ATTEST_GPU_CHECK(e);
  return false;
}

}  // namespace attest::gpu
