#pragma once
/// Checks: small named units in one registry (like libvmaf's feature extractors). A check takes
/// a Context (one kernel, recipe, problem, distribution and seed, with lazily computed inputs,
/// FP64 reference, recipe emulation and baseline kernel run shared by every check of that
/// group) and returns an Outcome. Adding a check is one file in src/checks plus one line in
/// src/check_registry.cpp.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "attest/conformance/case.hpp"
#include "attest/conformance/tolerance.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"

namespace attest::conformance {

/// Thrown inside a check to end it with a verdict other than passed/failed (invalid input,
/// an oracle that threw, a kernel that threw).
class VerdictError : public std::runtime_error {
 public:
  VerdictError(Verdict v, const std::string& what) : std::runtime_error(what), verdict(v) {}
  Verdict verdict;
};

/// A kernel's result: float32 out [B,S,H,Dv] and lse [B,H,S] (ragged: [1,total_q,H,Dv] and
/// [1,H,total_q]) in whatever strides the run used; lse is empty when the kernel has none.
struct KernelOutput {
  Tensor out, lse;
};

/// Storage of one tensor of a call, in attest's logical [B,S,H,D] frame, chosen per tensor
/// (the layout check's independent-layout variants). Every stride and offset is a multiple of the
/// head-row length (D, or D + pad), so rows stay aligned wherever D is.
enum class Storage : std::uint8_t {
  natural,     ///< the problem's layout (bshd for packed_qkv problems)
  transposed,  ///< the other storage order than the problem's bshd/bhsd (torch's q.transpose(1, 2))
  row_slice,   ///< KV-cache style: tokens [x, x+S) of a [B, Tcap, H, D] buffer, x > 0
  head_slice,  ///< heads [x, x+H) of a [B, S, Hcap, D] buffer, x > 0
  padded,      ///< bshd with each head row padded by `pad` elements (the old strided layout)
};
std::string_view storage_name(Storage s);
/// One Storage per tensor of a call.
struct TensorStorage {
  Storage q = Storage::natural, k = Storage::natural, v = Storage::natural, out = Storage::natural;
};

/// How one kernel call is set up. Every buffer is a fresh allocation.
struct RunSetup {
  std::string config;                 ///< one of Kernel::configs(); "" = default
  std::optional<Layout> layout;       ///< override of the problem's layout (inputs and out)
  /// Per-tensor storage (independent layouts): the kernel sees the problem as layout=strided and
  /// reads every tensor's own strides; `pad` is the padded kind's pad. Excludes `layout`.
  std::optional<TensorStorage> storage;
  std::int64_t pad = 3;               ///< per-head-row pad used for Layout::strided overrides
  std::int64_t offset = 0;            ///< elements before the first element of every buffer
  std::int64_t slack = 0;             ///< elements of guard zone after the last element
  std::uint32_t fill = 0x7FC0DEADu;   ///< bit pattern prefilled into out, lse and guard zones
};

/// Builds float32 tensors in `layout` (offset elements in, `slack` after) holding the logical
/// values of q, k, v; packed_qkv shares one buffer. Throws attest::Error when the layout cannot
/// hold the problem (packed_qkv needs S == T, equal ragged lengths and D == Dv).
struct LayoutInputs {
  Tensor q, k, v;
};
LayoutInputs make_inputs(const Problem& p, const datasets::Qkv& logical, Layout layout, std::int64_t pad,
                         std::int64_t offset, std::int64_t slack);
/// Output buffers in `layout`, every storage element set to `fill` bits.
KernelOutput make_outputs(const Problem& p, Layout layout, std::int64_t pad, std::int64_t offset,
                          std::int64_t slack, std::uint32_t fill, bool with_lse);
/// Inputs with per-tensor storage: each of q, k, v through its own Storage relative to p's layout
/// (p is the case problem; the kernel is then called with p.layout = strided, pad 0).
LayoutInputs make_inputs(const Problem& p, const datasets::Qkv& logical, const TensorStorage& storage,
                         std::int64_t pad, std::int64_t offset, std::int64_t slack);
/// out through `storage.out` (lse dense [B,H,S]), every storage element set to `fill` bits.
KernelOutput make_outputs(const Problem& p, const TensorStorage& storage, std::int64_t pad, std::int64_t offset,
                          std::int64_t slack, std::uint32_t fill, bool with_lse);
/// The problem a per-tensor-storage call hands the kernel: p with layout strided, pad 0.
Problem explicit_strides(const Problem& p);
/// Copies logical values (f32, rank <= 4, any strides) from src into dst (same shape).
void copy_values(const Tensor& src, const Tensor& dst);
/// Tokens [lo, hi) of dimension 1 of a [B,S,H,D] f32 tensor (any strides), as a contiguous f32
/// tensor: the K/V shards of the split-KV check and of the Python merge study.
Tensor token_slice(const Tensor& t, std::int64_t lo, std::int64_t hi);
/// A contiguous copy of a float32 LSE with every finite element moved one ulp toward `toward`:
/// what one float32 ulp of stored partial LSEs moves an LSE merge (the split-KV floor).
Tensor bump_ulp(const Tensor& lse, float toward);

struct CheckOptions {
  int determinism_runs = 5;  ///< reruns compared bitwise with the baseline
  /// The case's group has a `refusal` row: a refusal inside the declarations (supports() or at
  /// call time) is judged there once and the other checks are UNSUPPORTED pointing at it.
  /// Without one (a selection that leaves refusal out), every check fails with the refusal, so
  /// that a kernel refusing what it declares can never pass silently.
  bool refusal_row = false;
  /// The kernel computes on the device (the Python gate with device="cuda"): accuracy (and
  /// bitwise, subnormal) take their FP64 reference, floor and comparisons from the device engine
  /// (engine::judge_on_device: gpu.ref64 on every row, the emulator on planned blocks) instead of
  /// the host oracles of the whole problem; cases the engine does not take stay on the host.
  /// Needs a library built with a GPU backend (run_gate throws attest::Error otherwise).
  bool device_oracles = false;
  /// Emulated work per device-judged case (engine::SampleArgs::max_macs): the budget and floor
  /// come from the emulator on that many multiply-adds of planned blocks (all of them below it).
  double device_sample_macs = 1073741824.0;  // 2^30: about 1.3 s of emulator and floor twin on 16 cores
  /// OpenMP threads of that emulation (0: the processors divided among the gate's jobs).
  int device_threads = 0;
};

/// Shared state of one (kernel, recipe, problem, dist, seed) group. Not thread-safe: one
/// group is worked on by one thread.
class Context {
 public:
  Context(const Case& c, kernels::Kernel& kernel, const ToleranceTable& tolerances, CheckOptions options = {});

  [[nodiscard]] const Case& the_case() const { return case_; }
  [[nodiscard]] const Problem& problem() const { return case_.problem; }
  [[nodiscard]] const Recipe& recipe() const { return case_.recipe; }
  [[nodiscard]] kernels::Kernel& kernel() const { return kernel_; }
  [[nodiscard]] const kernels::Capabilities& caps() const { return caps_; }
  [[nodiscard]] const ToleranceTable& tolerances() const { return tol_; }
  [[nodiscard]] const CheckOptions& options() const { return opt_; }
  [[nodiscard]] std::string recipe_label() const;
  /// kernel.supports(problem, recipe), asked once.
  const Status& support();

  /// Logical bshd float32 inputs (VerdictError invalid when the distribution cannot fill them).
  const datasets::Qkv& inputs();
  /// Inputs for another problem with the same distribution and seed.
  [[nodiscard]] datasets::Qkv inputs_for(const Problem& p) const;
  const ref::AttentionOutput& ref64();
  const ref::EmulatorOutput& emu();
  const ref::EmulatorOutput& emu_rev();  ///< the floor twin (ref::floor_twin(): K/V reversed, half tiles)
  /// Emulation of an arbitrary problem/inputs (VerdictError error when the emulator throws);
  /// `floor_twin` runs ref::floor_twin()'s reordering.
  [[nodiscard]] ref::EmulatorOutput emulate(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                            bool floor_twin = false) const;
  /// The kernel on the case problem, default config and layout, poison-prefilled outputs.
  const KernelOutput& baseline();
  /// One kernel call on problem p with inputs `logical` (VerdictError error when it throws).
  KernelOutput run(const Problem& p, const datasets::Qkv& logical, const RunSetup& setup = {}) const;
  /// As above but also returns the storage of the output buffers for guard-zone checks.
  /// kernels::KernelFault -> VerdictError fault; kernels::KernelRefused -> the context remembers
  /// the refusal (the first reason) and every call from then on, this one included, ends in
  /// VerdictError unsupported without calling the kernel again (the refusal check judges it).
  KernelOutput run_on(const Problem& p, const LayoutInputs& in, KernelOutput outputs, const std::string& config) const;
  /// The first call-time refusal (kernels::KernelRefused) of this context, if any.
  [[nodiscard]] const std::optional<std::string>& runtime_refusal() const { return refusal_; }

 private:
  Case case_;
  kernels::Kernel& kernel_;
  kernels::Capabilities caps_;
  const ToleranceTable& tol_;
  CheckOptions opt_;
  std::optional<Status> support_;
  std::optional<datasets::Qkv> inputs_;
  std::optional<ref::AttentionOutput> ref64_;
  std::optional<ref::EmulatorOutput> emu_, emu_rev_;
  std::optional<KernelOutput> baseline_;
  mutable std::optional<std::string> refusal_;  ///< run_on's first KernelRefused message
  /// run_on's first KernelFault: a faulting case is one fault row; later calls in this Context are
  /// not made (a fault may have broken the device context; the caller restarts what it must).
  mutable std::optional<std::string> fault_;
};

class Check {
 public:
  virtual ~Check() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// One line: what it proves.
  [[nodiscard]] virtual std::string_view summary() const = 0;
  /// False for checks that judge the refusal itself (refusal); the rest are UNSUPPORTED
  /// whenever the kernel refuses the case.
  [[nodiscard]] virtual bool needs_support() const { return true; }
  /// True for checks that capture a device graph: a global-mode capture is invalidated by any
  /// device call from another thread, so the gate runs these alone, after every other case.
  [[nodiscard]] virtual bool runs_alone() const { return false; }
  /// Whether the kernel's declarations (capabilities, configs, device side) promise this check
  /// something to judge. The gate fails a kernel x check that is declared and has cases but no
  /// passing one (coverage, docs/gate.md); a check a kernel does not declare may stay n/a.
  [[nodiscard]] virtual bool declared_by(const kernels::Kernel&) const { return true; }
  [[nodiscard]] virtual Outcome run(Context& ctx) const = 0;
};

/// The registry, in a stable order: the built-in checks, then registered ones.
std::span<const Check* const> all_checks();
/// Adds a check defined outside conformance/src/checks (a test, a downstream tool) after the
/// built-in ones; throws attest::Error on a name already registered. Call it during static
/// initialisation (ATTEST_REGISTER_CHECK), before any all_checks() span is held.
void register_check(std::unique_ptr<Check> check);
/// Static registration helper; use ATTEST_REGISTER_CHECK.
struct CheckRegistrar {
  explicit CheckRegistrar(std::unique_ptr<Check> (*make)());
};
/// nullptr when absent.
const Check* find_check(std::string_view name);
/// Checks whose names match a glob or a comma-separated list of globs; throws attest::Error
/// listing the valid names when nothing matches.
std::vector<const Check*> match_checks(std::string_view globs);

/// Runs one check in a context: asks support, times it, turns exceptions into verdicts and
/// fills the result's descriptor fields.
Result run_check(Context& ctx, const Check& check);

}  // namespace attest::conformance

#define ATTEST_CHECK_CAT2(a, b) a##b
#define ATTEST_CHECK_CAT(a, b) ATTEST_CHECK_CAT2(a, b)
/// ATTEST_REGISTER_CHECK([] -> std::unique_ptr<Check> { return std::make_unique<MyCheck>(); });
/// In a source compiled into the executable (or an OBJECT library), so the linker keeps it.
#define ATTEST_REGISTER_CHECK(make) \
  static const ::attest::conformance::CheckRegistrar ATTEST_CHECK_CAT(attest_check_registrar_, __LINE__){make}
