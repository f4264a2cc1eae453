#pragma once
/// Storage element types of tensors (what bytes in memory mean), not quantization formats:
/// the bit-level formats (fp8, fp6, fp4, e8m0, ...) live in reference/formats.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attest {

enum class DType : std::uint8_t {
  f64, f32, f16, bf16,
  fp8_e4m3fn, fp8_e5m2,  // raw 8-bit codes as stored by frameworks (safetensors F8_*)
  i8, u8, i16, u16, i32, i64, b8,
};

/// Bytes per element.
std::size_t dtype_size(DType t);
/// Canonical lower-case name: "f64", "bf16", "fp8_e4m3fn", "u16", ...
std::string_view dtype_name(DType t);
/// Inverse of dtype_name; throws attest::Error listing the valid names.
DType parse_dtype(std::string_view name);
/// True for f64, f32, f16, bf16.
bool dtype_is_float(DType t);

/// Compile-time mapping from C++ element types to DType.
template <class T> struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<std::int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<std::uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace attest
