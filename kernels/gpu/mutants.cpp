// GPU mutants (test builds only): gpu.ref64 with one planted bug each in its device side
// (Kernel::device(), device_entry.hpp), the path the sm90 gate's graph_* and device_* checks drive.
// Each wraps gpu.ref64's own device side (a correct enqueue) with the bug around it. Kernel::run
// is gpu.ref64's own (correct) host path, so the host-tensor checks see a correct kernel: what
// catches these bugs is the device checks (and compute-sanitizer), which is what they test.
//   mutant.gpu.stale_replay   Q is copied into a packed workspace only when the stream is not
//                             capturing ("already packed during warm-up"): a replay reads the Q of
//                             the last eager call            -> graph_inputs
//   mutant.gpu.legacy_stream  the attention launch goes to the legacy default stream instead of the
//                             stream it was given: it escapes the capture and runs eagerly
//                                                           -> graph_stream, graph_replay, graph_inputs
//   mutant.gpu.oob_write      the output is zeroed first with a byte count one element too long
//                                                           -> device_canary (memcheck without guards)
//   mutant.gpu.race           the epilogue copy (workspace -> out) runs on a side stream that waits
//                             for an event recorded before the attention launch instead of after
//                             it: the copy races with the kernel and returns an earlier call's output
//                                                           -> graph_inputs, graph_replay, device_churn
// Only a non-bitwise registration: gpu.ref64 (FP64) has no bitwise contract with the f32 emulator,
// so a bitwise claim would be "caught" by the bitwise check whatever the bug.
// Plain host C++ against the runtime API header (no device code): CUDA builds (the CUDA toolkit's
// include directory comes with attest_gpu), HIP builds through the same names with the hip prefix.
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define ATTEST_MUT_RT(x) cuda##x
#else
#include <hip/hip_runtime_api.h>
#define ATTEST_MUT_RT(x) hip##x
#endif

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attest/kernels/device_entry.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::gpu {
namespace {

using RtStream = ATTEST_MUT_RT(Stream_t);
using RtEvent = ATTEST_MUT_RT(Event_t);

void rt(ATTEST_MUT_RT(Error_t) e, const char* what) {
  if (e != ATTEST_MUT_RT(Success)) throw Error(std::string("mutant.gpu: ") + what + ": " + ATTEST_MUT_RT(GetErrorString)(e));
}

enum class GpuBug { stale_replay, legacy_stream, oob_write, race };

// gpu.ref64's kernel, found at call time: the registry is filled during static initialisation,
// in no defined order across files.
kernels::Kernel& ref() {
  kernels::Kernel* k = kernels::Registry::instance().find("gpu.ref64");
  if (k == nullptr) throw Error("mutant.gpu: gpu.ref64 is not registered in this build");
  return *k;
}

class MutantEntry final : public kernels::DeviceEntry {
 public:
  explicit MutantEntry(GpuBug bug) : bug_(bug) {}

  // Called by the checks' DeviceCall before any capture, so the race mutant's side stream and
  // events are made here (outside a capture) rather than in enqueue.
  std::size_t workspace_bytes(const Problem& p, const Recipe&) const override {
    const auto [tq, tk] = tokens(p);
    (void)tk;
    if (bug_ == GpuBug::stale_replay) return static_cast<std::size_t>(batches(p) * tq * p.heads_q * p.head_dim) * 4;
    if (bug_ == GpuBug::race) {
      std::call_once(once_, [this] {
        rt(ATTEST_MUT_RT(StreamCreateWithFlags)(&side_, ATTEST_MUT_RT(StreamNonBlocking)), "side stream");
        rt(ATTEST_MUT_RT(EventCreateWithFlags)(&fork_, ATTEST_MUT_RT(EventDisableTiming)), "event");
        rt(ATTEST_MUT_RT(EventCreateWithFlags)(&join_, ATTEST_MUT_RT(EventDisableTiming)), "event");
      });
      return out_bytes(p);
    }
    return 0;
  }

  void enqueue(const Problem& p, const Recipe& r, const kernels::DeviceIo& io, void* stream) const override {
    const kernels::DeviceEntry* ref64_device = ref().device();
    if (ref64_device == nullptr) throw Error("mutant.gpu: gpu.ref64 has no device side in this build");
    const kernels::DeviceEntry& ref64 = *ref64_device;
    const auto [tq, tk] = tokens(p);
    (void)tk;
    auto s = static_cast<RtStream>(stream);
    kernels::DeviceIo a = io;
    a.workspace = nullptr;  // gpu.ref64's device side needs none; the workspace is the mutant's
    const std::size_t ob = out_bytes(p);
    switch (bug_) {
      case GpuBug::stale_replay: {
        // The planted bug: the packed copy of Q is refreshed on eager calls only.
        ATTEST_MUT_RT(StreamCaptureStatus) st{};
        rt(ATTEST_MUT_RT(StreamIsCapturing)(s, &st), "capture status");
        const std::size_t qb = static_cast<std::size_t>(batches(p) * tq * p.heads_q * p.head_dim) * 4;
        if (st == ATTEST_MUT_RT(StreamCaptureStatusNone))
          rt(ATTEST_MUT_RT(MemcpyAsync)(io.workspace, io.q, qb, ATTEST_MUT_RT(MemcpyDeviceToDevice), s), "pack Q");
        a.q = static_cast<const float*>(io.workspace);
        ref64.enqueue(p, r, a, stream);
        return;
      }
      case GpuBug::legacy_stream:
        ref64.enqueue(p, r, a, nullptr);  // the planted bug: not `stream`
        return;
      case GpuBug::oob_write:
        // The planted bug: (n + 1) elements zeroed, one past the output's end.
        rt(ATTEST_MUT_RT(MemsetAsync)(io.out, 0, ob + 4, s), "zero out");
        ref64.enqueue(p, r, a, stream);
        return;
      case GpuBug::race: {
        a.out = static_cast<float*>(io.workspace);
        // The planted bug: the fork event is recorded before the attention launch, so the copy
        // on the side stream waits for the quantizer only and races with the kernel.
        rt(ATTEST_MUT_RT(EventRecord)(fork_, s), "record");
        ref64.enqueue(p, r, a, stream);
        rt(ATTEST_MUT_RT(StreamWaitEvent)(side_, fork_, 0), "wait");
        rt(ATTEST_MUT_RT(MemcpyAsync)(io.out, io.workspace, ob, ATTEST_MUT_RT(MemcpyDeviceToDevice), side_), "copy out");
        rt(ATTEST_MUT_RT(EventRecord)(join_, side_), "record");
        rt(ATTEST_MUT_RT(StreamWaitEvent)(s, join_, 0), "join");
        return;
      }
    }
  }

 private:
  static std::int64_t batches(const Problem& p) { return p.ragged() ? 1 : p.batch; }
  static std::pair<std::int64_t, std::int64_t> tokens(const Problem& p) {
    return p.ragged() ? std::pair{p.cu_seqlens_q.back(), p.cu_seqlens_kv.back()} : std::pair{p.seqlen_q, p.seqlen_kv};
  }
  static std::size_t out_bytes(const Problem& p) {
    return static_cast<std::size_t>(batches(p) * tokens(p).first * p.heads_q * p.head_dim_v) * 4;
  }

  GpuBug bug_;
  mutable std::once_flag once_;
  mutable RtStream side_ = nullptr;
  mutable RtEvent fork_ = nullptr, join_ = nullptr;
};

// The registry side: gpu.ref64's host path and declarations under the mutant's name, with the
// mutant's device side.
class MutantKernel final : public kernels::Kernel {
 public:
  MutantKernel(std::string name, GpuBug bug) : name_(std::move(name)), device_(bug) {}
  std::string name() const override { return name_; }
  std::string backend() const override { return ref().backend(); }
  std::vector<std::string> recipes() const override { return ref().recipes(); }
  kernels::Capabilities capabilities() const override {
    auto c = ref().capabilities();  // bitwise = false
    c.planted_bug = true;
    return c;
  }
  Status supports(const Problem& p, const Recipe& r) const override { return ref().supports(p, r); }
  void run(const kernels::Args& a) override { ref().run(a); }
  const kernels::DeviceEntry* device() const override { return &device_; }

 private:
  std::string name_;
  MutantEntry device_;
};

struct Decl {
  GpuBug bug;
  const char* name;
};
constexpr Decl kGpuMutants[] = {
    {GpuBug::stale_replay, "stale_replay"},
    {GpuBug::legacy_stream, "legacy_stream"},
    {GpuBug::oob_write, "oob_write"},
    {GpuBug::race, "race"},
};

ATTEST_REGISTER_KERNELS([] {
  std::vector<std::unique_ptr<kernels::Kernel>> v;
  for (const Decl& d : kGpuMutants) v.push_back(std::make_unique<MutantKernel>(std::string("mutant.gpu.") + d.name, d.bug));
  return v;
});

}  // namespace
}  // namespace attest::gpu
