#pragma once
/// Tensors: an owning, 64-byte aligned byte buffer plus a strided view (shape, strides in
/// elements, offset in elements, dtype). Several Tensors may share one buffer (views).
/// `View<T, N>` is the typed, fixed-rank accessor the numerical code loops over.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attest/core/dtype.hpp"
#include "attest/core/status.hpp"

namespace attest {

using Shape = std::vector<std::int64_t>;

/// Row-major contiguous strides (in elements) for a shape.
Shape contiguous_strides(const Shape& shape);
/// Product of the extents; throws attest::Error on a negative extent or on overflow.
std::int64_t shape_numel(const Shape& shape);
/// "[2, 3, 4]"
std::string shape_string(const Shape& shape);

/// Typed strided accessor of fixed rank N. Index order is the logical order of the owner.
template <class T, int N>
struct View {
  T* data = nullptr;
  std::array<std::int64_t, N> shape{};
  std::array<std::int64_t, N> stride{};

  template <class... I>
  T& operator()(I... idx) const {
    static_assert(sizeof...(I) == N, "wrong number of indices");
    const std::array<std::int64_t, N> ix{static_cast<std::int64_t>(idx)...};
    std::int64_t off = 0;
    for (int d = 0; d < N; ++d) off += ix[d] * stride[d];
    return data[off];
  }
};

class Tensor {
 public:
  Tensor() = default;
  /// Contiguous, zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  /// A tensor over a fresh zero-filled buffer of `storage_elems` elements with explicit strides
  /// and offset (for layout, padding and allocator-churn checks). Validates that every
  /// addressable element lies inside the buffer.
  static Tensor strided(DType dtype, Shape shape, Shape strides, std::int64_t offset,
                        std::int64_t storage_elems);

  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] const Shape& strides() const { return strides_; }
  [[nodiscard]] std::int64_t offset() const { return offset_; }
  [[nodiscard]] int rank() const { return static_cast<int>(shape_.size()); }
  [[nodiscard]] std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  [[nodiscard]] std::int64_t numel() const;
  [[nodiscard]] bool empty() const { return storage_ == nullptr; }
  [[nodiscard]] bool is_contiguous() const;
  /// Bytes of the whole underlying buffer (shared by views).
  [[nodiscard]] std::span<std::byte> storage() const { return {storage_.get(), storage_bytes_}; }

  /// Pointer to the element at index (0, ..., 0). T must match the dtype.
  template <class T>
  [[nodiscard]] T* data() const {
    check_type(dtype_of_v<T>);
    return reinterpret_cast<T*>(storage_.get()) + offset_;
  }
  /// Raw pointer to element (0, ..., 0) for dtypes without a C++ type (f16, bf16, fp8).
  [[nodiscard]] std::byte* raw() const {
    return storage_.get() + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
  }

  template <class T, int N>
  [[nodiscard]] View<T, N> view() const {
    check_type(dtype_of_v<T>);
    if (rank() != N) throw Error("tensor of rank " + std::to_string(rank()) + " viewed as rank " + std::to_string(N));
    View<T, N> v;
    v.data = data<T>();
    for (int d = 0; d < N; ++d) {
      v.shape[d] = shape_[static_cast<std::size_t>(d)];
      v.stride[d] = strides_[static_cast<std::size_t>(d)];
    }
    return v;
  }

  /// A view with dimensions reordered: result dim i is this dim perm[i]. Shares the buffer.
  [[nodiscard]] Tensor permute(const std::vector<int>& perm) const;
  /// A contiguous copy (same dtype, same logical order).
  [[nodiscard]] Tensor contiguous() const;
  /// Element at a multi-index, converted to double (f64, f32, integer types only).
  [[nodiscard]] double get(const Shape& index) const;

 private:
  void check_type(DType want) const;
  DType dtype_ = DType::f32;
  Shape shape_, strides_;
  std::int64_t offset_ = 0;
  std::shared_ptr<std::byte[]> storage_;
  std::size_t storage_bytes_ = 0;
};

}  // namespace attest
