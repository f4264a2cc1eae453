#pragma once
/// The C++ side of the plugin ABI (attest/plugin.h), shared by every adapter that turns a C
/// kernel description into a registry Kernel: the dlopen()ed plugins (plugin_loader.cpp) and the
/// Python callables of the Python package (python/csrc). One marshalling, so a field added to
/// the ABI is filled the same way for both.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/kernels/kernel.hpp"
#include "attest/plugin.h"

namespace attest::kernels::plugin_abi {

/// Size of the message buffers handed to a kernel's run/supports callbacks.
constexpr std::size_t kMessageBytes = 1024;

/// The first line of a kernel's message, reading at most `size` bytes (the kernel may forget the
/// terminator); "(no message)" when empty.
std::string first_line(const char* buf, std::size_t size);

/// A view of `t` in the ABI's terms (no copy). Throws attest::Error naming `what` when its rank
/// exceeds ATTEST_PLUGIN_MAX_RANK.
attest_plugin_tensor c_tensor(const Tensor& t, const char* what);

/// A Problem in the ABI's terms; owns the string form its `text` field points to.
struct ProblemC {
  attest_plugin_problem c{};
  std::string text;
  explicit ProblemC(const Problem& p);
  ProblemC(const ProblemC&) = delete;
  ProblemC& operator=(const ProblemC&) = delete;
};

/// The Capabilities a description declares through its bit sets, flags, declarations
/// (ATTEST_PLUGIN_DECLARE_*) and row alignment (0 or 1 = any).
Capabilities capabilities(std::span<const std::int64_t> head_dims, std::uint32_t masks, std::uint32_t layouts,
                          std::uint32_t flags, std::uint32_t declares = 0, std::uint32_t row_align = 0,
                          const char* accepts = nullptr);

/// A kernel description copied into a full-size struct: the fields its struct_size covers, the
/// rest zero (a plugin built before a field was appended). struct_size must be at least
/// ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE (the caller checks).
attest_plugin_kernel copy_kernel(const attest_plugin_kernel& k);

/// Throws what a non-zero run() code means: ATTEST_PLUGIN_RUN_REFUSED -> KernelRefused(message),
/// ATTEST_PLUGIN_RUN_FAULT -> KernelFault(message), else attest::Error(`failure` + message).
[[noreturn]] void throw_run_failure(int rc, const std::string& message, const std::string& failure);

/// What the description adds to Kernel::supports (ask that first): its dtype bits (0 = any)
/// and its supports callback (nullptr = none), whose reason becomes the refusal's.
Status supports(attest_plugin_supports_fn fn, void* context, std::uint32_t dtypes, const Problem& p, const Recipe& r);

/// One run's arguments in the ABI's terms; `ra` points into this object (not copyable).
struct RunArgsC {
  explicit RunArgsC(const Args& a);
  RunArgsC(const RunArgsC&) = delete;
  RunArgsC& operator=(const RunArgsC&) = delete;
  ProblemC problem;
  std::string recipe, label, config;
  attest_plugin_tensor q{}, k{}, v{}, out{}, lse{};
  attest_plugin_run_args ra{};
};

/// Calls `run`, under `serial` unless `flags` has ATTEST_PLUGIN_CAP_THREAD_SAFE. Returns the
/// kernel's code; on a non-zero code `message` holds the first line of what it wrote.
int call(attest_plugin_run_fn run, void* context, std::uint32_t flags, std::mutex& serial,
         const attest_plugin_run_args& ra, std::string& message);

}  // namespace attest::kernels::plugin_abi
