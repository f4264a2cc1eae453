#pragma once
/// Streams and graphs for host code (plain C++, no device headers; implemented in graph.hip over
/// runtime.hpp's hip* subset): what the conformance graph checks need to capture a device
/// kernel's launches, replay them, update an instantiated graph with new buffer addresses and
/// prove that a capture on a non-default stream leaked nothing to the legacy stream.
#include <cstddef>
#include <functional>
#include <string>

namespace attest::gpu {

/// A stream of the current device (move-only). `non_blocking`: does not synchronise with the
/// legacy default stream (hipStreamNonBlocking).
class Stream {
 public:
  explicit Stream(bool non_blocking = true);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] void* get() const { return s_; }  ///< the hipStream_t
  void synchronize() const;

 private:
  void* s_ = nullptr;
};

/// Stream capture modes (cudaStreamCaptureMode / hipStreamCaptureMode). `global`: while the
/// capture runs, any thread's use of the legacy stream or of a potentially unsafe API (a
/// synchronous copy, a malloc) is an error that invalidates the capture, so a kernel that does
/// not keep its work on the stream it was given cannot be captured silently wrong.
enum class CaptureMode { global, thread_local_, relaxed };

/// A captured and instantiated graph (move-only).
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Captures what `enqueue(stream)` issues on `s` and instantiates it. Throws attest::Error
  /// naming the runtime error when the capture fails or is invalidated (e.g. work issued to the
  /// legacy stream under CaptureMode::global); the stream is left out of capture mode.
  static Graph capture(const Stream& s, const std::function<void(void* stream)>& enqueue,
                       CaptureMode mode = CaptureMode::global);
  /// Enqueues one replay on `s`.
  void launch(const Stream& s) const;
  /// Nodes of the captured graph (kernels, copies, memsets).
  [[nodiscard]] std::size_t nodes() const;
  /// Updates this instantiated graph in place with the parameters (e.g. buffer addresses) of
  /// `other`'s graph of the same topology (hipGraphExecUpdate). Empty on success, else why not.
  std::string update_from(const Graph& other);

 private:
  void* graph_ = nullptr;  // hipGraph_t
  void* exec_ = nullptr;   // hipGraphExec_t
};

/// Asynchronous byte fill and device-to-device copy on `s` (capturable).
void memset_async(void* p, int value, std::size_t bytes, const Stream& s);
void memcpy_async(void* dst, const void* src, std::size_t bytes, const Stream& s);
/// True when the legacy default stream has no pending work (hipStreamQuery(0) == success).
bool legacy_stream_idle();

}  // namespace attest::gpu
