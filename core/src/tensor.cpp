#include "attest/core/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

namespace attest {
namespace {
std::shared_ptr<std::byte[]> allocate(std::size_t bytes) {
  // 64-byte alignment: vector loads and device-copy staging never straddle a cache line.
  const std::size_t n = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  auto* p = static_cast<std::byte*>(::operator new[](n, std::align_val_t{64}));
  std::memset(p, 0, n);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{64}); });
}
}  // namespace

Shape contiguous_strides(const Shape& shape) {
  // The product of the extents with 0 taken as 1 must fit: an empty tensor passes the
  // element-count check whatever its other extents are, yet a permutation of it still needs
  // their strides (found by fuzz_npy). Checked first, so that no order of the extents overflows.
  std::int64_t span = 1;
  for (auto e : shape) {
    if (e < 0) throw Error("negative extent in shape " + shape_string(shape));
    if (__builtin_mul_overflow(span, std::max<std::int64_t>(e, 1), &span))
      throw Error("shape " + shape_string(shape) + " overflows 64-bit strides");
  }
  Shape s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto e : shape) {
    if (e < 0) throw Error("negative extent in shape " + shape_string(shape));
    if (e != 0 && n > std::numeric_limits<std::int64_t>::max() / e)
      throw Error("shape " + shape_string(shape) + " overflows 64-bit element count");
    n *= e;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), strides_(contiguous_strides(shape_)) {
  const auto n = static_cast<std::size_t>(shape_numel(shape_));
  storage_bytes_ = n * dtype_size(dtype_);
  storage_ = allocate(storage_bytes_);
}

Tensor Tensor::strided(DType dtype, Shape shape, Shape strides, std::int64_t offset,
                       std::int64_t storage_elems) {
  if (strides.size() != shape.size()) throw Error("strides rank differs from shape rank");
  if (offset < 0) throw Error("negative tensor offset");
  std::int64_t lo = offset, hi = offset;
  if (shape_numel(shape) > 0) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const std::int64_t span = (shape[d] - 1) * strides[d];
      (span < 0 ? lo : hi) += span;
    }
  }
  if (lo < 0 || (shape_numel(shape) > 0 && hi >= storage_elems))
    throw Error("strided tensor " + shape_string(shape) + " reaches outside its buffer of " +
                std::to_string(storage_elems) + " elements");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  t.storage_bytes_ = static_cast<std::size_t>(storage_elems) * dtype_size(dtype);
  t.storage_ = allocate(t.storage_bytes_);
  return t;
}

std::int64_t Tensor::numel() const { return shape_numel(shape_); }

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::permute(const std::vector<int>& perm) const {
  if (perm.size() != shape_.size()) throw Error("permutation rank differs from tensor rank");
  Tensor t = *this;
  std::vector<bool> seen(perm.size(), false);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const auto p = static_cast<std::size_t>(perm[i]);
    if (p >= perm.size() || seen[p]) throw Error("invalid permutation");
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Tensor Tensor::contiguous() const {
  Tensor out(dtype_, shape_);
  const std::size_t es = dtype_size(dtype_);
  const std::int64_t n = numel();
  Shape idx(shape_.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides_[d];
    std::memcpy(out.storage_.get() + static_cast<std::size_t>(i) * es,
                raw() + off * static_cast<std::int64_t>(es), es);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

double Tensor::get(const Shape& index) const {
  if (index.size() != shape_.size()) throw Error("index rank differs from tensor rank");
  std::int64_t off = 0;
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d]) throw Error("index out of range");
    off += index[d] * strides_[d];
  }
  const std::byte* p = raw() + off * static_cast<std::int64_t>(dtype_size(dtype_));
  auto load = [p](auto tag) { decltype(tag) v; std::memcpy(&v, p, sizeof v); return static_cast<double>(v); };
  switch (dtype_) {
    case DType::f64: return load(double{});
    case DType::f32: return load(float{});
    case DType::i8: return load(std::int8_t{});
    case DType::u8: case DType::b8: return load(std::uint8_t{});
    case DType::i16: return load(std::int16_t{});
    case DType::u16: return load(std::uint16_t{});
    case DType::i32: return load(std::int32_t{});
    case DType::i64: return load(std::int64_t{});
    default: throw Error("Tensor::get does not convert dtype " + std::string(dtype_name(dtype_)));
  }
}

void Tensor::check_type(DType want) const {
  if (storage_ == nullptr) throw Error("access to an empty tensor");
  if (want != dtype_)
    throw Error("tensor of dtype " + std::string(dtype_name(dtype_)) + " accessed as " + std::string(dtype_name(want)));
}

}  // namespace attest
