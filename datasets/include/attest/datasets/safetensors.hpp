#pragma once
/// safetensors files (https://github.com/huggingface/safetensors, format of version 0.4+):
///   8 bytes  little-endian u64 N, the header length
///   N bytes  a JSON object: {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
///            ..., "__metadata__": {"key": "value", ...}}, padded with spaces
///   rest     the data section; [b, e) are byte offsets into it, little-endian, C order.
/// dtypes: F64 F32 F16 BF16 F8_E4M3 F8_E5M2 I8 U8 I16 U16 I32 I64 BOOL (DType f64, f32, f16, bf16,
/// fp8_e4m3fn, fp8_e5m2, i8, u8, i16, u16, i32, i64, b8).
///
/// Reading treats the file as untrusted and validates, before allocating anything sized by it:
/// the header length (>= 2, <= 100,000,000 as the reference implementation, inside the file),
/// the JSON (well formed, UTF-8, an object, no duplicate key, nesting no deeper than the format
/// needs), every entry (exactly dtype, shape, data_offsets; dtype known; extents non-negative
/// integers whose byte count does not overflow; 0 <= begin <= end <= data size;
/// end - begin == prod(shape) * itemsize), the offsets together (no two tensors overlap, and as
/// the format requires no byte of the data section is left unindexed: no gap, nothing after the
/// last tensor), `__metadata__` (an object of strings), and BOOL bytes (0 or 1).
/// Every defect is an attest::Error "FILE: defect" naming the tensor where there is one.
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/tensor.hpp"

namespace attest::datasets {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct Safetensors {
  std::vector<NamedTensor> tensors;  ///< in data-offset order when read
  std::map<std::string, std::string> metadata;

  /// nullptr when absent.
  [[nodiscard]] const Tensor* find(std::string_view name) const;
};

/// Largest header accepted (the reference implementation's MAX_HEADER_SIZE).
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

/// "F32", "BF16", "F8_E4M3", ... ; throws attest::Error for a dtype the format lacks.
std::string_view safetensors_dtype_name(DType t);
/// Inverse of safetensors_dtype_name; nullopt for names not listed above.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

/// Reads and validates a file; throws attest::Error "FILE: defect".
Safetensors read_safetensors(const std::filesystem::path& path);
/// The same parser on bytes in memory (fuzz targets, tests); `name` stands for FILE in errors.
Safetensors decode_safetensors(std::span<const std::byte> bytes, const std::string& name);

/// File bytes: tensors in the given order, contiguous, header padded with spaces to a multiple of
/// 8 bytes (as the reference implementation writes). Strided tensors are made contiguous.
/// Throws attest::Error on an empty or duplicate name, a name "__metadata__", or a dtype
/// without a safetensors name.
std::string encode_safetensors(const std::vector<NamedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
/// Stages encode_safetensors(...) for `path` in `out` (written when `out.commit()` runs).
void write_safetensors(OutputFiles& out, const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace attest::datasets
