#pragma once
/// Device copies of host tensors, for kernels whose run() takes host tensors (gpu.ref64, device
/// plugin kernels): one device allocation per distinct host allocation, so views of one
/// allocation stay views on the device and guard zones around out/lse travel with it. Plain C++
/// on top of device.hpp (no device headers).
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/gpu/device.hpp"

namespace attest::gpu {

class HostMirror {
 public:
  /// Device address of t's first element; the whole storage behind t is uploaded the first time
  /// that allocation is seen.
  std::byte* address(const Tensor& t) {
    const auto st = t.storage();
    auto it = buffers_.find(st.data());
    if (it == buffers_.end()) {
      DeviceBuffer buf(st.size());
      buf.upload(st.data(), st.size());
      it = buffers_.emplace(st.data(), std::move(buf)).first;
    }
    return it->second.as<std::byte>() + (t.raw() - st.data());
  }
  /// Copies the storage behind t (seen by address() before) back from the device; call it after
  /// the kernel has finished.
  void download(const Tensor& t) const {
    const auto st = t.storage();
    buffers_.at(st.data()).download(st.data(), st.size());
  }
  /// A ragged problem's cu_seqlens_q and cu_seqlens_kv on the device (one allocation); nullptrs
  /// when the problem is not ragged. Once per mirror: a second call frees the first's buffer.
  std::pair<const std::int64_t*, const std::int64_t*> cu_seqlens(const Problem& p) {
    if (!p.ragged()) return {nullptr, nullptr};
    std::vector<std::int64_t> host(p.cu_seqlens_q);
    host.insert(host.end(), p.cu_seqlens_kv.begin(), p.cu_seqlens_kv.end());
    cu_ = DeviceBuffer(host.size() * sizeof(std::int64_t));
    cu_.upload(host.data(), cu_.bytes());
    return {cu_.as<std::int64_t>(), cu_.as<std::int64_t>() + p.cu_seqlens_q.size()};
  }

 private:
  std::map<const std::byte*, DeviceBuffer> buffers_;
  DeviceBuffer cu_;
};

}  // namespace attest::gpu
