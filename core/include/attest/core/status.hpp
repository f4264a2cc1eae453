#pragma once
/// Errors and statuses shared by every layer.
///
/// `attest::Error` is thrown for bad input or usage (malformed file, unknown name, mismatched
/// shape): the CLI prints its one-line message and exits 2. `Status` answers "can this be done?"
/// without throwing, e.g. a kernel's `supports(problem, recipe)`.
#include <stdexcept>
#include <string>
#include <utility>

namespace attest {

/// Bad input or usage. The message names the thing and the defect, in one line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Outcome of a capability query: ok, or a human reason why not.
class Status {
 public:
  static Status ok() { return Status(); }
  static Status unsupported(std::string reason) { return Status(std::move(reason)); }

  [[nodiscard]] bool is_ok() const { return reason_.empty(); }
  explicit operator bool() const { return is_ok(); }
  [[nodiscard]] const std::string& reason() const { return reason_; }

 private:
  Status() = default;
  explicit Status(std::string reason) : reason_(std::move(reason)) {
    if (reason_.empty()) reason_ = "unsupported";
  }
  std::string reason_;
};

}  // namespace attest
