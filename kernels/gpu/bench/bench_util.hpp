#pragma once
// Shared by the bench_gpu_* programs (plain C++ over gpu/device.hpp): the main() wrapper and the
// event timing of single calls.
#include <algorithm>
#include <exception>
#include <iostream>
#include <vector>

#include "attest/kernels/gpu/device.hpp"

namespace attest::gpu::bench {

/// Returns run(argc, argv); an exception prints "<name>: <what>" on stderr and gives exit code 2.
inline int guarded_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
}

/// Milliseconds of `iters` calls of f, each between two events on the default stream, sorted
/// ascending; one untimed warm-up call first.
template <class F>
std::vector<double> sorted_ms(int iters, F&& f) {
  f();  // warm-up
  synchronize();
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    timer.start();
    f();
    ms.push_back(timer.stop_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

}  // namespace attest::gpu::bench
