// Graph checks (issue 5 item 6), on the device side of a GPU kernel preceded by the
// device quantizer of Q, both captured into one graph on a non-default stream:
//   graph_replay  N replays (outputs poisoned before each) give the eager run's bits
//   graph_inputs  new inputs written into the captured buffers: the replay follows them (a
//                 replay that reuses values copied at capture time is stale)
//   graph_update  an instantiated graph updated with another capture's buffer addresses
//                 (hipGraphExecUpdate) computes into the new buffers and leaves the old ones alone
//   graph_stream  capture in global mode on a non-blocking and on a blocking stream succeeds (a
//                 synchronous API during capture, or legacy-stream work while a blocking stream
//                 captures, invalidates it), nothing runs while capturing (outputs keep their
//                 poison: work sent to the legacy stream would have run) and the graph holds the
//                 launches
// CPU builds (ATTEST_GPU=none) and kernels without a device side: unsupported (DeviceCheck).
#include "device_common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr int kReplays = 3;
constexpr std::uint32_t kPoison = 0x7FC0DEADu;

// A global-mode capture is invalidated by any device call from another thread: the graph
// checks run alone.
class GraphCheck : public DeviceCheck {
 public:
  bool runs_alone() const final { return true; }
};

#if defined(ATTEST_GPU_BACKEND)
// One replay of `g` on `s` with the call's outputs poisoned first; waits and downloads.
DeviceResult poisoned_replay(DeviceCall& call, const gpu::Graph& g, const gpu::Stream& s) {
  call.fill_outputs(kPoison);
  g.launch(s);
  s.synchronize();
  return call.download();
}
#endif

class GraphReplay final : public GraphCheck {
 public:
  std::string_view name() const override { return "graph_replay"; }
  std::string_view summary() const override { return "quantize + attention captured in a graph: N replays == eager, bitwise"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    DeviceCall call(ctx, kPoison, ctx.inputs());
    gpu::Stream s;
    const DeviceResult eager = run_eager(call, s);
    gpu::Graph g = gpu::Graph::capture(s, [&](void* st) { call.enqueue(st); });
    nlohmann::json fig{{"replays", kReplays}, {"graph_nodes", g.nodes()}, {"q_scheme", to_string(call.q_scheme())}};
    for (int i = 0; i < kReplays; ++i) {
      if (auto d = device_diff(poisoned_replay(call, g, s), eager, fmt::format("replay {}", i + 1)); !d.empty())
        return failed(d, fig);
    }
    return passed(fig);
  }
#endif
};

class GraphInputs final : public GraphCheck {
 public:
  std::string_view name() const override { return "graph_inputs"; }
  std::string_view summary() const override { return "new inputs written into captured buffers: the replay follows them (no stale replay)"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    const datasets::Qkv x2 = other_inputs(ctx);
    DeviceCall call(ctx, kPoison, ctx.inputs());
    gpu::Stream s;
    const DeviceResult e1 = run_eager(call, s);
    gpu::Graph g = gpu::Graph::capture(s, [&](void* st) { call.enqueue(st); });
    call.upload(x2);
    const DeviceResult replayed = poisoned_replay(call, g, s);
    call.fill_outputs(kPoison);
    const DeviceResult e2 = run_eager(call, s);
    nlohmann::json fig{{"graph_nodes", g.nodes()}, {"new_inputs_seed", ctx.the_case().seed + 1000}};
    if (device_diff(e2, e1, "").empty())
      return mistrusted("the second input set gives the first one's outputs: a stale replay would not show", fig);
    if (auto d = device_diff(replayed, e2, "replay after new inputs"); !d.empty()) {
      fig["stale"] = device_diff(replayed, e1, "").empty();
      return failed(d + (fig["stale"].get<bool>() ? " (the replay returned the captured inputs' outputs: stale)" : ""), fig);
    }
    return passed(fig);
  }
#endif
};

class GraphUpdate final : public GraphCheck {
 public:
  std::string_view name() const override { return "graph_update"; }
  std::string_view summary() const override { return "graph exec update with new buffer addresses computes into the new buffers only"; }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    const datasets::Qkv x2 = other_inputs(ctx);
    DeviceCall a(ctx, kPoison, ctx.inputs()), b(ctx, kPoison, x2);
    gpu::Stream s;
    const DeviceResult eb = run_eager(b, s);
    gpu::Graph ga = gpu::Graph::capture(s, [&](void* st) { a.enqueue(st); });
    gpu::Graph gb = gpu::Graph::capture(s, [&](void* st) { b.enqueue(st); });
    nlohmann::json fig{{"graph_nodes", ga.nodes()}};
    if (auto why = ga.update_from(gb); !why.empty()) return failed("graph exec update refused: " + why, fig);
    a.fill_outputs(kPoison);
    b.fill_outputs(kPoison);
    const DeviceResult a_before = a.download();
    ga.launch(s);
    s.synchronize();
    if (auto d = device_diff(b.download(), eb, "updated graph, new buffers"); !d.empty()) return failed(d, fig);
    if (auto d = device_diff(a.download(), a_before, "updated graph wrote its old buffers:"); !d.empty()) return failed(d, fig);
    return passed(fig);
  }
#endif
};

class GraphStream final : public GraphCheck {
 public:
  std::string_view name() const override { return "graph_stream"; }
  std::string_view summary() const override {
    return "global-mode capture on a non-default stream: nothing escapes to the legacy stream or runs eagerly";
  }
#if defined(ATTEST_GPU_BACKEND)
  Outcome run_device(Context& ctx) const override {
    DeviceCall call(ctx, kPoison, ctx.inputs());
    gpu::synchronize();
    const DeviceResult poisoned = call.download();
    gpu::Stream s(true);
    gpu::Graph g;
    try {
      g = gpu::Graph::capture(s, [&](void* st) { call.enqueue(st); }, gpu::CaptureMode::global);
    } catch (const Error& e) {
      return failed(std::string("global-mode capture on a non-blocking stream failed (work on the legacy stream or a "
                                "synchronous call during capture?): ") + e.what());
    }
    nlohmann::json fig{{"graph_nodes", g.nodes()}, {"legacy_stream_idle", gpu::legacy_stream_idle()}};
    if (auto d = device_diff(call.download(), poisoned, "outputs changed during capture (work ran outside the graph):");
        !d.empty())
      return failed(d, fig);
    if (g.nodes() < 2) return failed(fmt::format("the graph holds {} nodes; quantize + attention need at least 2", g.nodes()), fig);
    // A blocking stream as well: work on the legacy stream would have to depend on it, which
    // the runtime refuses during capture, so an escape fails this capture outright.
    {
      gpu::Stream blocking(false);
      try {
        (void)gpu::Graph::capture(blocking, [&](void* st) { call.enqueue(st); }, gpu::CaptureMode::global);
      } catch (const Error& e) {
        return failed(std::string("global-mode capture on a blocking stream failed (work on the legacy stream?): ") + e.what(), fig);
      }
    }
    g.launch(s);
    s.synchronize();
    if (auto d = device_diff(call.download(), poisoned, ""); d.empty())
      return failed("replaying the captured graph wrote nothing", fig);
    return passed(fig);
  }
#endif
};

}  // namespace
std::unique_ptr<Check> make_graph_replay() { return std::make_unique<GraphReplay>(); }
std::unique_ptr<Check> make_graph_inputs() { return std::make_unique<GraphInputs>(); }
std::unique_ptr<Check> make_graph_update() { return std::make_unique<GraphUpdate>(); }
std::unique_ptr<Check> make_graph_stream() { return std::make_unique<GraphStream>(); }
}  // namespace attest::conformance::checks
