#pragma once
/// The conformance engine on tensors where they live (docs/python.md "Device-resident cases",
/// docs/gate.md "Complete accuracy"): a kernel's output, host or device memory, read in place
/// through attest::TensorRef and judged against the FP64 reference on every row.
///
///   judge        accuracy on every output element: the FP64 reference (gpu.ref64 on the
///                caller's device buffers, or the CPU reference for host tensors) reduced into
///                error sums per (batch, head, block of `rows` query rows); the noise-floor budget
///                from the recipe emulator and its floor twin on the planned blocks (all of them
///                when the emulated work fits, else a seeded sample) -- the gate's rule on those
///                rows, and, when they are a sample, the block rule on every block (below; with
///                every block emulated the gate's rule alone decides). Bitwise on the planned blocks.
///   CallLog      determinism / call_path (outputs bit for bit) and the input guard
///                (fingerprints of the inputs around every call) over repeated calls.
///   generate     the case's Philox inputs, written into the caller's buffers.
///
/// How a block is emulated. Element-wise cast recipes (bf16 / fp16 / f32 operands): each block as
/// a sub-problem of its own (its rows of one head, the keys they see), gathered from the caller's
/// buffers; a cast quantizes element by element, so that is exactly the whole problem's rows.
/// Every other recipe (Sage INT8 per block / warp / thread with K smoothing, FP8 per tensor /
/// channel / token, MX): its scales and means span rows, heads or the whole tensor, so judge()
/// first copies the whole q, k, v to the host as float32 (engine::gather; device buffers too) and
/// quantizes them once there (ref::prepare), then emulates the planned and confirmation blocks'
/// rows against those operands (ref::emulate_rows): bit for bit those rows of ref::emulate on the
/// whole problem. The FP64 reference of a block stays the FP64 attention of the unquantized
/// inputs. Host memory per element of q / k / v (an element of q is one (b, s, h, d)): kept, the
/// quantized operands (q: 4 bytes, 1 for INT8, plus 4 under K smoothing for the LSE
/// correction's copy of q; k: 4, 1 for INT8; v: 4; scales and MX exponents besides); while
/// they are built, 9 more (the float32 copies of the inputs, the quantizers' working copies and
/// codes) and 4 per element of q under K smoothing: prepare_host_bytes(), an upper bound
/// (measured peaks 0.7-0.8x of it). A Sage INT8 b1h40s75600d128 problem (387M elements per
/// operand) needs about 15 GiB, a bf16 one nothing; above SampleArgs::max_host_bytes (32 GiB)
/// the case is refused with the figure. q, k and v are quantized concurrently, each quantizer
/// serial: about 0.7 s for b1h8s16384d128 Sage on 2 cores (sample.timing_s.prepare), a time
/// max_macs does not count.
///
/// Where a block is emulated. Device tensors in a GPU build, where gpu.emu takes the recipe: on the
/// device by gpu.emu (bitwise equal to ref::emulate), the whole q, k, v gathered and quantized once
/// on the host by its host stage (cast recipes too, unless the problem has more than 2^26 elements
/// and that whole-problem stage would cost more than the host emulator on the planned blocks), the planned and confirmation blocks launched as its work items
/// (emulator and floor twin, rounded and not); otherwise (host tensors, a recipe gpu.emu does not
/// take, SampleArgs::device_emulator false) on the host as above. sample.emulator names which.
///
/// The block rule (the sample's budget applied to every block): for each block, rel_l2 =
/// |t - r|_2 / |r|_2 must stay within alpha * budget + beta * floor + eps, where budget / floor
/// are the largest rel_l2 over the emulated blocks (emulator vs FP64; floor twin vs emulator,
/// before output rounding) and alpha / beta / eps the tolerance row's rel_l2 bound. rel_l2 is
/// scale-free, so a block's own magnitude never enters its bound. max_rel = max|t - r| / max|r|
/// is reported per block against the same construction (max_abs's alpha / beta) without
/// deciding: the gate's max_abs bound decides on the emulated rows. A NaN/Inf where the
/// reference is finite mistrusts the verdict, whichever block it is in.
///
/// A kernel that declares ftz (JudgeRequest::flush_below, the subnormal check's device oracles):
/// the same rules with every reference flushed as the kernel flushes, so that the check of a
/// long problem needs no host pass over every row; a zero output counts as flushed up to
/// 2 (T + 1) flush_below (flushed inputs, products and partial sums) and fails on its own beyond.
///
/// The Python binding (python/csrc) and the C++ callers use these functions; no verdict is
/// computed anywhere else.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/conformance/case.hpp"
#include "attest/conformance/tolerance.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/tensor.hpp"
#include "attest/core/tensor_ref.hpp"
#include "attest/datasets/distributions.hpp"

namespace attest::conformance::engine {

struct SampleArgs {
  std::int64_t rows = 64;               ///< query rows per block
  double max_macs = 8589934592.0;       ///< 2^33 multiply-adds of emulated work (about ten seconds on 16 cores)
  std::string causal = "top_left";      ///< the callable's causal convention: top_left or bottom_right
  int threads = 0;                      ///< OpenMP threads of the emulator (0: the caller's setting)
  /// Host memory a quantized recipe's whole-problem preparation may take (prepare_host_bytes());
  /// above it the case is refused. 32 GiB: a b1h40s75600d128 Sage problem needs about 15 GiB.
  double max_host_bytes = 32.0 * 1024 * 1024 * 1024;
  /// Device tensors: the blocks emulated by gpu.emu on the device where it takes the recipe (false,
  /// or the environment's ATTEST_ENGINE_EMULATOR=host: the host emulator, for A/B).
  bool device_emulator = true;
};

/// One planned block: rows [r0, r1) of (batch b, head h), keys [0, kend).
struct Slice {
  std::int64_t b = 0, h = 0, r0 = 0, r1 = 0, kend = 0;
};

struct Plan {
  std::vector<Slice> slices;  ///< the emulated blocks, sorted by (b, h, r0)
  bool complete = false;      ///< every block emulated
  std::int64_t rows = 0;
  double macs_total = 0, macs_sampled = 0;
  std::int64_t kv_tiles = 0, kv_tiles_covered = 0;
};

/// Why the engine does not take this recipe / problem (empty: it does). recipe_refusal: a field
/// the emulator does not model (exp2=hw is taken: emulated with exp2=cr, bitwise UNSUPPORTED).
std::string recipe_refusal(const Recipe& r);
/// Peak host bytes of a quantized recipe's preparation (0 for element-wise casts), an upper
/// bound: the quantized operands (ref::prepared_bytes) + 9 per element of q, k and v (their
/// float32 copies, and the quantizers' working copies and codes, all operands being quantized
/// at once; freed once quantized) + 4 per element of q under K smoothing.
double prepare_host_bytes(const Problem& p, const Recipe& r);
std::string plan_refusal(const Problem& p, const std::string& causal);
/// The emulated blocks: all when the work fits `max_macs`, else (0,0) block 0, the last block of
/// (B-1, H-1) and std::mt19937_64(seed)-drawn blocks within the budget. Throws attest::Error
/// with the refusal.
Plan plan_blocks(const Problem& p, const SampleArgs& a, std::uint64_t seed, std::int64_t tile_kv);
nlohmann::json plan_json(const Plan& plan, const Problem& p, std::uint64_t seed, const SampleArgs& a);
/// Why judge() would refuse this case (the recipe, the emulator on this problem, the host memory
/// of a quantized recipe's preparation above SampleArgs::max_host_bytes, or the plan's reason);
/// empty: it takes it.
std::string refusal(const Case& c, const SampleArgs& a);

/// `q`, `k`, `v`: the generated float32 inputs [B,S,H,D] (before the kernel's cast; device or
/// host, all alike); `out`: the kernel's output, logical [B,S,H,Dv], f32 / bf16 / f16.
struct JudgeRequest {
  Case c;
  std::vector<std::string> checks{"accuracy"};  ///< accuracy, bitwise
  SampleArgs sample;
  const ToleranceTable* tolerances = nullptr;   ///< nullptr: the built-in table
  TensorRef q, k, v, out;
  std::int64_t scratch_bytes = std::int64_t{512} << 20;  ///< device FP64 reference chunk (heads per chunk follow)
  /// The kernel declares ftz: references (FP64 of every row, and the emulator and its floor twin
  /// on the planned blocks) have their |x| < flush_below outputs flushed to zero (sign kept), as
  /// the kernel's; the kernel's own |x| < flush_below count as zero too (ftz allows a flushed or
  /// a kept subnormal). A kernel that flushes does so in its inputs, products and partial sums
  /// too, so a zero output may stand for a normal FP64 value, but never for one of at least
  /// 2 (T + 1) flush_below (T keys each losing < flush_below): such a zero fails; below that
  /// bound a zero counts as flushed, its reference zeroed with it (ErrSums::add's zero_below). Rows whose flushed reference is all zero pass when the kernel's are zero too. The
  /// blocks' figures count ref_nonzero / zero_where_ref_nonzero (before the flush) and
  /// flushed_normal (zeros where FP64 >= 2 flush_below, reported); blocks.ftz_zero_rule the bound
  /// and the largest FP64 value of a zero output. 0: no flushing (the figures as without it).
  double flush_below = 0;
};

struct Report {
  std::vector<Result> results;
  nlohmann::json sample;  ///< plan, coverage, timings
  int exit_code = 0;
};

/// Every requested check UNSUPPORTED with `why`.
Report refuse_all(const Case& c, const std::vector<std::string>& checks, const std::string& why);
Report judge(const JudgeRequest& req);

/// The checks over repeated calls of one case (determinism, call_path, input_guard), recorded as
/// the calls happen and judged at the end. On the device every comparison and fingerprint is
/// launched on the caller's stream (after the kernel that wrote the output, before anything that
/// reuses its memory) and read back once by finish(): no host synchronisation per call, so the
/// harness costs a few device passes over the tensors per call. Host tensors are compared at once.
class CallLog {
 public:
  /// `stream`: the caller's CUDA/HIP stream (nullptr: the legacy default stream).
  CallLog(bool device, void* stream, int slots = 512);
  ~CallLog();
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;
  /// `b` against `a` bit for bit, under `check` (determinism or call_path) for the call `what`.
  /// An output sharing memory with `a` is recorded as UNSUPPORTED (a reused buffer proves nothing).
  void compare(const std::string& check, const std::string& what, const TensorRef& a, const TensorRef& b);
  /// Fingerprints of the inputs after call `what`; the first set is the "before" of every later one.
  void fingerprint(const std::string& what, const std::vector<std::pair<std::string, TensorRef>>& inputs);
  /// One row per check recorded (determinism, call_path in order of first use; input_guard when
  /// fingerprints followed the first set): the first failing call names the row.
  std::vector<Result> finish(const Case& c);

 private:
  struct Impl;
  Impl* impl_;
};

/// Order-free fingerprint of a tensor's bits (elem::checksum_term summed), host or device.
std::uint64_t checksum(const TensorRef& t);

/// The case's inputs into contiguous float32 [B,S,H,D] buffers (device: the Philox streams on
/// the GPU, bit-identical to the CPU generator).
void generate(const Problem& p, datasets::Distribution dist, std::uint64_t seed, const TensorRef& q,
              const TensorRef& k, const TensorRef& v);

/// {backend, devices, device, arch}.
nlohmann::json info();
/// Whether this library was built with a GPU backend (compile time; starts no device runtime).
bool has_device_backend();

/// The gate's oracles on the device (CheckOptions::device_oracles; the Python gate with
/// device="cuda", docs/python.md): a check's host-resident kernel output judged by judge() on
/// device copies of the case's inputs and of that output (one upload of each): the FP64
/// reference of every row by gpu.ref64, comparisons on the device, the emulator and its floor
/// twin on the planned blocks (SampleArgs::max_macs). `check` is accuracy or bitwise. Returns
/// nullopt where the engine does not take the case (refusal(): a recipe the emulator does not
/// model, a quantized recipe above max_host_bytes, ragged problems, a mask clipping rows), with
/// the reason in `why`: the caller then judges on the host.
/// `flush_below`: JudgeRequest's (the subnormal check, for a kernel that declares ftz).
/// Throws attest::Error in a build without a GPU backend.
std::optional<Outcome> judge_on_device(const Case& c, const std::string& check, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& out, const ToleranceTable& tol,
                                       const SampleArgs& sample, std::string& why, double flush_below = 0);

/// Per-block figures of `test` against `ref` (same logical shape [B,S,H,D], host or device):
/// {count, rows_per_block, nonfinite_blocks, whole, worst: {at, rel_l2, max_rel, ...}}, the
/// worst block by rel_l2 (the gate's accuracy rows carry them; the rule there is on every row).
nlohmann::json block_figures(const TensorRef& test, const TensorRef& ref, std::int64_t rows);

/// Tensor copies of a ref's logical block [lo, hi) as contiguous f32.
Tensor gather(const TensorRef& t, const std::int64_t lo[4], const std::int64_t hi[4]);
/// A host Tensor (f64 / f32) as a TensorRef.
TensorRef ref_of(const Tensor& t);

/// Helpers shared with the binding's studies.
Tensor concat_rows(const std::vector<Tensor>& parts);  ///< along dimension 1 of [B,s_i,H,D] (f32 or f64)
Result make_result(const Case& c, const std::string& check, Outcome o, double seconds);

}  // namespace attest::conformance::engine
