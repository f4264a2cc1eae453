// Graph checks (issue 5 item 6), on the device entry point of a GPU kernel preceded by the
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
// CPU builds (ATTEST_GPU=none) and kernels without a device entry point: unsupported.
#include "device_common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr int kReplays = 3;
constexpr std::uint32_t kPoison = 0x7FC0DEADu;

#if defined(ATTEST_GPU_BACKEND)
// Runs `body`, turning a runtime or capture error into a failed verdict with its message.
template <class F>
Outcome guarded(const char* what, F&& body) {
  try {
    return body();
  } catch (const VerdictError&) {
    throw;
  } catch (const Error& e) {
    return failed(std::string(what) + ": " + e.what());
  }
}
#endif

class GraphReplay final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override { return device_check_declared(k); }
  std::string_view name() const override { return "graph_replay"; }
  bool runs_alone() const override { return true; }
  std::string_view summary() const override { return "quantize + attention captured in a graph: N replays == eager, bitwise"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (!device_check_applies(ctx, o)) return o;
#if defined(ATTEST_GPU_BACKEND)
    return guarded("graph_replay", [&]() -> Outcome {
      DeviceCall call(ctx);
      call.fill_all(kPoison);
      call.upload(ctx.inputs());
      gpu::Stream s;
      const DeviceResult eager = run_eager(call, s);
      gpu::Graph g = gpu::Graph::capture(s, [&](void* st) { call.enqueue(st); });
      nlohmann::json fig{{"replays", kReplays}, {"graph_nodes", g.nodes()}, {"q_scheme", call.q_scheme().text}};
      for (int i = 0; i < kReplays; ++i) {
        call.fill_outputs(kPoison);
        g.launch(s);
        s.synchronize();
        if (auto d = device_diff(call.download(), eager, fmt::format("replay {}", i + 1)); !d.empty()) return failed(d, fig);
      }
      return passed(fig);
    });
#endif
    return o;
  }
};

class GraphInputs final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override { return device_check_declared(k); }
  std::string_view name() const override { return "graph_inputs"; }
  bool runs_alone() const override { return true; }
  std::string_view summary() const override { return "new inputs written into captured buffers: the replay follows them (no stale replay)"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (!device_check_applies(ctx, o)) return o;
#if defined(ATTEST_GPU_BACKEND)
    const datasets::Qkv x2 = other_inputs(ctx);
    return guarded("graph_inputs", [&]() -> Outcome {
      DeviceCall call(ctx);
      call.fill_all(kPoison);
      call.upload(ctx.inputs());
      gpu::Stream s;
      const DeviceResult e1 = run_eager(call, s);
      gpu::Graph g = gpu::Graph::capture(s, [&](void* st) { call.enqueue(st); });
      call.upload(x2);
      call.fill_outputs(kPoison);
      g.launch(s);
      s.synchronize();
      const DeviceResult replayed = call.download();
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
    });
#endif
    return o;
  }
};

class GraphUpdate final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override { return device_check_declared(k); }
  std::string_view name() const override { return "graph_update"; }
  bool runs_alone() const override { return true; }
  std::string_view summary() const override { return "graph exec update with new buffer addresses computes into the new buffers only"; }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (!device_check_applies(ctx, o)) return o;
#if defined(ATTEST_GPU_BACKEND)
    const datasets::Qkv x2 = other_inputs(ctx);
    return guarded("graph_update", [&]() -> Outcome {
      DeviceCall a(ctx), b(ctx);
      a.fill_all(kPoison);
      b.fill_all(kPoison);
      a.upload(ctx.inputs());
      b.upload(x2);
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
    });
#endif
    return o;
  }
};

class GraphStream final : public Check {
 public:
  bool declared_by(const kernels::Kernel& k) const override { return device_check_declared(k); }
  std::string_view name() const override { return "graph_stream"; }
  bool runs_alone() const override { return true; }
  std::string_view summary() const override {
    return "global-mode capture on a non-default stream: nothing escapes to the legacy stream or runs eagerly";
  }
  Outcome run(Context& ctx) const override {
    Outcome o;
    if (!device_check_applies(ctx, o)) return o;
#if defined(ATTEST_GPU_BACKEND)
    return guarded("graph_stream", [&]() -> Outcome {
      DeviceCall call(ctx);
      call.fill_all(kPoison);
      call.upload(ctx.inputs());
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
    });
#endif
    return o;
  }
};

}  // namespace
std::unique_ptr<Check> make_graph_replay() { return std::make_unique<GraphReplay>(); }
std::unique_ptr<Check> make_graph_inputs() { return std::make_unique<GraphInputs>(); }
std::unique_ptr<Check> make_graph_update() { return std::make_unique<GraphUpdate>(); }
std::unique_ptr<Check> make_graph_stream() { return std::make_unique<GraphStream>(); }
}  // namespace attest::conformance::checks
