// Device-side memory checks (issue 5 item 6), the device twins of poison, canary and churn: the
// GPU kernel's device side preceded by the device quantizer of Q, on device buffers.
//   device_poison  outputs prefilled with two NaN patterns in two runs: an element holding its
//                  run's pattern both times was never written
//   device_canary  4 KiB guard zones before and after every device buffer keep their pattern;
//                  the inputs stay byte-identical
//   device_churn   buffers at byte offsets 4, 12, 68 from the allocation's alignment, allocated
//                  after other allocations were made and freed, give the baseline's bits
// CPU builds (ATTEST_GPU=none) and kernels without a device side: unsupported (DeviceCheck).
#include "device_common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr std::uint32_t kFillA = 0x7FC0DEADu;
constexpr std::uint32_t kFillB = 0xFFB5A4B3u;  // no byte in common with kFillA (codes are bytes)

#if defined(ATTEST_GPU_BACKEND)
// Elements (4-byte words, or bytes for codes) of `a` holding fill A and of `b` holding fill B.
std::pair<std::size_t, std::size_t> unwritten(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, bool words) {
  std::size_t n = 0, first = 0;
  const std::size_t step = words ? 4 : 1;
  for (std::size_t i = 0; i + step <= a.size(); i += step) {
    bool both = false;
    if (words) {
      std::uint32_t x, y;
      std::memcpy(&x, a.data() + i, 4);
      std::memcpy(&y, b.data() + i, 4);
      both = x == kFillA && y == kFillB;
    } else {
      // A byte of the code arrays is unwritten when it holds its run's fill byte both times
      // (fill bytes by position: little-endian bytes of the pattern).
      both = a[i] == static_cast<std::uint8_t>(kFillA >> (8 * (i % 4))) && b[i] == static_cast<std::uint8_t>(kFillB >> (8 * (i % 4)));
    }
    if (both && n++ == 0) first = i / step;
  }
  return {n, first};
}
#endif

class DevicePoison final : public DeviceCheck {
 public:
  std::string_view name() const override { return "device_poison"; }
  std::string_view summary() const override { return "every device output element is written (NaN-prefilled twice)"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    DeviceCall call(ctx, kFillA, ctx.inputs());
    gpu::Stream s;
    const DeviceResult a = run_eager(call, s);
    call.fill_outputs(kFillB);
    const DeviceResult b = run_eager(call, s);
    nlohmann::json fig;
    const std::tuple<const char*, const std::vector<std::uint8_t>*, const std::vector<std::uint8_t>*, bool> parts[] = {
        {"out", &a.out, &b.out, true}, {"lse", &a.lse, &b.lse, true}, {"Q codes", &a.codes, &b.codes, false},
        {"Q scales", &a.scales, &b.scales, false}};
    for (const auto& [what, x, y, words] : parts) {
      const auto [n, first] = unwritten(*x, *y, words);
      fig[what] = {{"bytes", x->size()}, {"unwritten", n}};
      if (n > 0) return failed(fmt::format("{} {} elements never written on the device; first at element {}", n, what, first), fig);
    }
    return passed(fig);
  }
#endif
};

class DeviceCanary final : public DeviceCheck {
 public:
  std::string_view name() const override { return "device_canary"; }
  std::string_view summary() const override { return "4 KiB guard zones around every device buffer stay intact; inputs unchanged"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    constexpr std::size_t kGuard = 4096;
    DeviceCall call(ctx, kFillA, ctx.inputs(), kGuard);
    const auto before = call.whole();
    gpu::Stream s;
    (void)run_eager(call, s);
    const auto after = call.whole();
    nlohmann::json fig{{"guard_bytes", kGuard}};
    for (std::size_t i = 0; i < before.size(); ++i) {
      const auto& [name, x] = before[i];
      const auto& y = after[i].second;
      const std::size_t lead = call.lead_of(name), bytes = call.bytes_of(name);
      const bool input = name == "q" || name == "k" || name == "v";
      for (std::size_t j = 0; j < x.size(); ++j) {
        const bool guard = j < lead || j >= lead + bytes;
        if ((guard || input) && x[j] != y[j])
          return failed(fmt::format("{} {} changed: byte {} ({}) 0x{:02x} -> 0x{:02x}", name, guard ? "guard zone" : "input",
                                    j, guard ? (j < lead ? "before the data" : "after the data") : "inside the data", x[j], y[j]),
                        fig);
      }
    }
    return passed(fig);
  }
#endif
};

class DeviceChurn final : public DeviceCheck {
 public:
  std::string_view name() const override { return "device_churn"; }
  std::string_view summary() const override { return "device buffers at other offsets and after allocator churn give the same bits"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    if (Outcome o; needs_determinism(ctx, o)) return o;
    gpu::Stream s;
    DeviceResult base;
    {
      const DeviceCall call(ctx, kFillA, ctx.inputs());
      base = run_eager(call, s);
    }
    nlohmann::json fig{{"offsets_bytes", {4, 12, 68}}};
    for (std::size_t off : {std::size_t{4}, std::size_t{12}, std::size_t{68}}) {
      // Churn: allocations of odd sizes made and partly freed, so the call's buffers land at
      // other addresses than the baseline's.
      std::vector<gpu::DeviceBuffer> churn;
      for (std::size_t kb : {1024u, 3u, 17u, 257u, 4099u}) churn.emplace_back(kb * 1024 + off);
      churn.erase(churn.begin() + 1);
      churn.erase(churn.begin() + 2);
      DeviceCall call(ctx, kFillB, ctx.inputs(), 0, off);
      if (auto d = device_diff(run_eager(call, s), base, fmt::format("offset {} bytes after churn", off)); !d.empty())
        return failed(d, fig);
    }
    return passed(fig);
  }
#endif
};

}  // namespace
std::unique_ptr<Check> make_device_poison() { return std::make_unique<DevicePoison>(); }
std::unique_ptr<Check> make_device_canary() { return std::make_unique<DeviceCanary>(); }
std::unique_ptr<Check> make_device_churn() { return std::make_unique<DeviceChurn>(); }
}  // namespace attest::conformance::checks
