#include "attest/core/dtype.hpp"

#include <array>
#include <string>

#include "attest/core/status.hpp"

namespace attest {
namespace {
struct Info {
  DType type;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<Info, 13> kInfo{{
    {DType::f64, "f64", 8},
    {DType::f32, "f32", 4},
    {DType::f16, "f16", 2},
    {DType::bf16, "bf16", 2},
    {DType::fp8_e4m3fn, "fp8_e4m3fn", 1},
    {DType::fp8_e5m2, "fp8_e5m2", 1},
    {DType::i8, "i8", 1},
    {DType::u8, "u8", 1},
    {DType::i16, "i16", 2},
    {DType::u16, "u16", 2},
    {DType::i32, "i32", 4},
    {DType::i64, "i64", 8},
    {DType::b8, "b8", 1},
}};
const Info& info(DType t) { return kInfo[static_cast<std::size_t>(t)]; }
}  // namespace

std::size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

DType parse_dtype(std::string_view name) {
  std::string valid;
  for (const auto& i : kInfo) {
    if (i.name == name) return i.type;
    valid += valid.empty() ? "" : ", ";
    valid += i.name;
  }
  throw Error("unknown dtype '" + std::string(name) + "' (valid: " + valid + ")");
}

}  // namespace attest
