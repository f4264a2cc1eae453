// gpu.emu's upload (emu_prepare.hpp): the host stage's operand arrays to the device, outputs
// and scratch allocated. Plain C++ in attest_gpu, so code that links attest_gpu without the
// gpu_emu kernel group (the conformance engine) can upload what emu_host_stage() prepares.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "attest/kernels/gpu/emu_prepare.hpp"

namespace attest::gpu {
namespace {

template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer d(std::max<std::size_t>(1, v.size() * sizeof(T)));
  if (!v.empty()) d.upload(v.data(), v.size() * sizeof(T));
  return d;
}

}  // namespace

EmuHostStage& emu_host_stage() {
  static EmuHostStage stage;
  return stage;
}

EmuRun emu_upload(const EmuHost& hs) {
  using std::int64_t;
  EmuRun run;
  run.params = hs.params;
  run.batches = hs.batches;
  EmuParams& ep = run.params;
  const bool int8 = ep.logits == EmuLogits::int8, mxqk = ep.logits == EmuLogits::mx, mxv = !hs.vexp.empty() || hs.params.vexp != nullptr,
             smooth = !hs.km.empty();
  const int64_t H = ep.heads_q, Dv = ep.head_dim_v;
  const auto &qval = hs.qval, &kval = hs.kval, &vval = hs.vval, &qts = hs.qts, &kts = hs.kts, &vcs = hs.vcs, &km = hs.km,
       &qraw = hs.qraw;
  const auto &qi = hs.qi, &ki = hs.ki;
  const auto &qexp = hs.qexp, &kexp = hs.kexp, &vexp = hs.vexp;
  const auto& batches = hs.batches;
  const auto& items = hs.items;
  // Device buffers (kept alive by the EmuRun; the device pointers survive the moves).
  auto keep = [&](DeviceBuffer b) {
    run.buffers.push_back(std::move(b));
    return run.buffers.back().data();
  };
  // The device pointer typed by the host vector's element type: a mismatch with EmuParams' field
  // is a compile error, not a reinterpretation.
  auto put = [&](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    return static_cast<const T*>(keep(to_device(v)));
  };
  ep.batches = put(batches);
  ep.items = put(items);
  ep.qv = put(qval);
  ep.kv = put(kval);
  ep.vv = put(vval);
  if (int8) {
    ep.qi = put(qi);
    ep.ki = put(ki);
  }
  ep.qts = put(qts);
  ep.kts = put(kts);
  ep.vcs = put(vcs);
  if (mxqk) {
    ep.qexp = put(qexp);
    ep.kexp = put(kexp);
  }
  if (mxv) ep.vexp = put(vexp);
  if (smooth) {
    ep.km = put(km);
    ep.qraw = put(qraw);
  }
  const int64_t out_n = ep.total_rows * H * Dv, lse_n = H * ep.total_rows;
  ep.out = static_cast<float*>(keep(DeviceBuffer(static_cast<std::size_t>(std::max<int64_t>(1, out_n)) * 4)));
  ep.lse = static_cast<float*>(keep(DeviceBuffer(static_cast<std::size_t>(std::max<int64_t>(1, lse_n)) * 4)));
  DeviceBuffer flag(sizeof(unsigned));
  flag.fill_bytes(0);
  ep.undecided = static_cast<unsigned*>(keep(std::move(flag)));
  ep.scratch = static_cast<float*>(keep(DeviceBuffer(static_cast<std::size_t>(std::max<int64_t>(1, emu_scratch_floats(ep))) * 4)));
  return run;
}

}  // namespace attest::gpu
