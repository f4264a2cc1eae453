#pragma once
/// The kernel registry: every kernel under test (CPU implementations, mutants, device kernels,
/// plugins) is a `Kernel` with a name, a backend, the recipes it implements, its capabilities,
/// `supports(problem, recipe)` (refusal with a reason — UNSUPPORTED is a verdict, never a silent
/// fallback), `run` and, for a GPU kernel, an optional device side (`device()`, device_entry.hpp).
/// Adding a kernel is one file with ATTEST_REGISTER_KERNELS plus one CMake line. kernels/ never
/// includes reference/ (independent implementations cannot share a bug).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"

namespace attest::kernels {

class DeviceEntry;  // device_entry.hpp

/// Thrown by run() when the kernel faulted: a sticky device error, a crashed worker, a hang past
/// a timeout, out of memory. The conformance runner turns it into Verdict::fault for that case
/// and check (never an ordinary error): what ran in the same device context afterwards is suspect.
class KernelFault : public Error {
 public:
  using Error::Error;
};

/// Thrown by run() when the kernel refused the problem at call time although supports() admitted
/// it (e.g. torch's "No available kernel"). The conformance runner remembers the first refusal of
/// a case: one failed `refusal` row, every other check of the case UNSUPPORTED pointing at it.
class KernelRefused : public Error {
 public:
  using Error::Error;
};

struct Capabilities {
  std::vector<std::int64_t> head_dims;  ///< supported head_dim values; empty = any
  std::int64_t head_dim_multiple = 1;   ///< head_dim must be a multiple of this (e.g. a 32-channel rotation)
  /// Non-empty: why the kernel cannot run on this host at all (e.g. no GPU device); every case is
  /// then UNSUPPORTED with it, and a gate that selects the kernel fails once naming it (never
  /// PASSED with nothing judged), not once per check.
  std::string unavailable;
  std::vector<Mask> masks{Mask::none, Mask::causal_tl, Mask::causal_br};
  std::vector<Layout> layouts{Layout::bshd, Layout::bhsd, Layout::packed_qkv, Layout::strided};
  bool gqa = true;             ///< heads_kv < heads_q
  bool cross = true;           ///< seqlen_kv != seqlen_q
  bool ragged = true;          ///< cu_seqlens
  bool head_dim_v = true;      ///< head_dim_v != head_dim
  bool lse = true;             ///< writes the float32 LSE
  bool graph_capturable = false;
  bool deterministic = true;   ///< same bits run to run
  bool bitwise = false;        ///< promises bits == recipe emulator
  /// Declares that subnormal outputs (|x| < FLT_MIN) are flushed to zero: the subnormal check
  /// then judges against references flushed the same way and reports the declaration.
  bool ftz = false;
  /// Every input/output tensor's non-innermost strides and start offset must be a multiple of
  /// this many elements (hardware that needs e.g. 16-byte rows: 8 bf16 elements); 1 = any.
  std::int64_t row_align = 1;
  bool causal_cross = true;    ///< causal masks with seqlen_q != seqlen_kv
  /// supports() states declared limits (a plugin's ATTEST_PLUGIN_DECLARE_SUPPORTS_LIMITS, Python's
  /// `supports=`): what it refuses is outside the declaration (UNSUPPORTED with its reason), not a
  /// failed refusal. Off for every built-in kernel: their limits are capabilities().
  bool supports_declares = false;
  /// key -> why: failures of that check are a known, written-up defect the user accepts
  /// knowingly; the gate reports them as `accepted` (with the reason), never as passed. The key
  /// is a check name, or `check@field%n` to accept it only where that problem size (seqlen_q,
  /// seqlen_kv, head_dim, head_dim_v; any sequence of a ragged batch) is not a multiple of n: a
  /// tail-tile defect accepted there stays a failure on every other shape.
  std::vector<std::pair<std::string, std::string>> accepted;
  /// A mutant (a kernel with a bug planted on purpose, kernels/*/mutants): it joins a gate, bench
  /// or synth run only when the kernel selection names mutants alone (`--kernel 'mutant.*'`,
  /// Registry::selects_planted_bugs), never through a profile's globs.
  bool planted_bug = false;
};

/// One call's buffers. Inputs hold float32 values in logical order (q [B,S,H,D], k [B,T,Hkv,D],
/// v [B,T,Hkv,Dv]; ragged: [1,total,...] with the problem's cu_seqlens) with the strides of the
/// problem's layout; the kernel applies its recipe's quantization itself. `out` is float32
/// [B,S,H,Dv] (ragged [1,total_q,H,Dv]) holding the recipe's output-format values, possibly
/// strided and prefilled with poison: the kernel must write every element. `lse` is float32
/// [B,H,S] (ragged [1,H,total_q]), natural log, or nullptr when not requested.
struct Args {
  const Problem& problem;
  const Recipe& recipe;
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const Tensor& out;
  const Tensor* lse = nullptr;
  std::string_view config;  ///< tuning config / call path (one of Kernel::configs()); "" = default
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Unique name, e.g. "cpu.tiled.bf16", "gpu.emu.sage_int8_fp8_perblock", "mutant.scale_off".
  [[nodiscard]] virtual std::string name() const = 0;
  /// "cpu", "cuda", "hip", "plugin".
  [[nodiscard]] virtual std::string backend() const = 0;
  /// The recipes it implements (named recipe labels or full strings).
  [[nodiscard]] virtual std::vector<std::string> recipes() const = 0;
  [[nodiscard]] virtual Capabilities capabilities() const = 0;
  /// Tuning configs / call paths whose outputs must be bitwise equal (call-path parity).
  [[nodiscard]] virtual std::vector<std::string> configs() const { return {""}; }
  /// Ok, or the reason this problem/recipe is refused. The default checks recipes() and
  /// capabilities(); override to add kernel-specific limits (call the default first).
  [[nodiscard]] virtual Status supports(const Problem& p, const Recipe& r) const;
  /// Runs one forward pass. Throws attest::Error on a refused problem (callers ask supports()),
  /// KernelRefused when it refuses an admitted problem at call time, KernelFault when it faulted.
  virtual void run(const Args& args) = 0;
  /// The device side (device_entry.hpp): one pass enqueued on device buffers, for the device
  /// checks (graph_*, device_*) and `attest bench`'s device timing; nullptr for a host kernel.
  /// The kernel owns it; it lives as long as the kernel.
  [[nodiscard]] virtual const DeviceEntry* device() const { return nullptr; }
};

/// What a kernel's declarations admit: a valid problem, a recipe in recipes(), inside
/// capabilities(). Kernel::supports' default; the gate fails a kernel whose supports() refuses
/// a case this admits (coverage, docs/gate.md): a limit must be declared, not found by refusal.
Status declared_support(const Kernel& k, const Problem& p, const Recipe& r);
/// Whether the `accepted` key covers a failure of `check` on problem p (see Capabilities::accepted).
bool accept_covers(std::string_view key, std::string_view check, const Problem& p);
/// Throws attest::Error naming the defect when an `accepted` key is malformed (unknown field,
/// a modulus that is not an integer >= 2).
void validate_accept_key(std::string_view key);
/// What a kernel declares beyond the defaults, one short item each ("ftz", "row_align=8",
/// "causal_cross=false", "masks=none,causal_tl", "bitwise", ...): the reports print them beside
/// the verdicts they explain.
std::vector<std::string> declared_properties(const Capabilities& c);
/// Whether one call's tensors keep Capabilities::row_align (every non-innermost stride and start
/// offset a multiple of it): Ok, or the reason naming the first tensor that does not.
Status aligned_rows(const Capabilities& c, const Args& a);

/// The one registry.
class Registry {
 public:
  static Registry& instance();
  void add(std::unique_ptr<Kernel> k);  ///< throws attest::Error on a duplicate name
  [[nodiscard]] const std::vector<std::unique_ptr<Kernel>>& all() const { return kernels_; }
  [[nodiscard]] Kernel* find(std::string_view name) const;  ///< nullptr when absent
  /// Kernels whose name matches a shell glob (fnmatch), in registration order.
  [[nodiscard]] std::vector<Kernel*> match(std::string_view glob) const;
  /// Whether a kernel selection (a glob; "" = none) admits mutants (Capabilities::planted_bug):
  /// only one that names mutants alone does, i.e. matches at least one kernel and no kernel
  /// without a planted bug ("mutant.*" does; "", "*" and "cpu.*" do not).
  [[nodiscard]] bool selects_planted_bugs(std::string_view glob) const;

 private:
  std::vector<std::unique_ptr<Kernel>> kernels_;
};

/// Static registration helper; use ATTEST_REGISTER_KERNELS.
struct Registrar {
  explicit Registrar(const std::function<std::vector<std::unique_ptr<Kernel>>()>& make);
};

}  // namespace attest::kernels

#define ATTEST_KERNELS_CAT2(a, b) a##b
#define ATTEST_KERNELS_CAT(a, b) ATTEST_KERNELS_CAT2(a, b)
/// ATTEST_REGISTER_KERNELS([] { std::vector<std::unique_ptr<Kernel>> v; ...; return v; });
/// Kernel sources are compiled into OBJECT libraries so the registrar is never dropped by the linker.
#define ATTEST_REGISTER_KERNELS(factory) \
  static const ::attest::kernels::Registrar ATTEST_KERNELS_CAT(attest_registrar_, __LINE__){factory}
/// ATTEST_REGISTER_KERNEL(MyKernel): registers one default-constructed kernel of that type.
#define ATTEST_REGISTER_KERNEL(type)                                    \
  ATTEST_REGISTER_KERNELS([] {                                          \
    std::vector<std::unique_ptr<::attest::kernels::Kernel>> attest_v;   \
    attest_v.push_back(std::make_unique<type>());                       \
    return attest_v;                                                    \
  })
