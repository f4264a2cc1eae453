#pragma once
/// NumPy .npy files (format versions 1.0, 2.0, 3.0 read; 1.0 written, 2.0 when the header needs
/// more than 65535 bytes). Little-endian hosts only.
///
/// dtypes: f64 '<f8', f32 '<f4', f16 '<f2' (raw IEEE binary16 in DType::f16 storage), i8 '|i1',
/// u8 '|u1', i16 '<i2', u16 '<u2', i32 '<i4', i64 '<i8', bool '|b1' (DType::b8, bytes 0 or 1).
/// bf16 and fp8 have no npy descr and are refused when writing.
///
/// Reading validates, in this order, before allocating anything sized by the file: the magic,
/// the version, that the header fits inside the file, the header dict (exactly the keys descr,
/// fortran_order, shape, with numpy's whitespace and trailing comma tolerated), the descr
/// (big-endian, complex, structured and object descrs are refused by name), the shape (no
/// negative extent, no overflow of the byte count), and that the data is exactly
/// prod(shape) * itemsize bytes (truncated data and trailing bytes are both errors).
/// Every defect is an attest::Error "FILE: defect".
///
/// fortran_order True is read without a copy as a permuted (column-major) view: the result has
/// the file's shape and Fortran strides, so `is_contiguous()` is false for rank >= 2 with more
/// than one element per dim; call `.contiguous()` if C order is needed.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "attest/core/output_files.hpp"
#include "attest/core/tensor.hpp"

namespace attest::datasets {

/// Reads an .npy file; throws attest::Error "FILE: defect" on any malformation.
attest::Tensor read_npy(const std::filesystem::path& path);
/// The same parser on bytes in memory (fuzz targets, tests); `name` stands for FILE in errors.
attest::Tensor decode_npy(std::span<const std::byte> bytes, const std::string& name);

/// NPY bytes of `t` (C order; a strided input is made contiguous first). Throws attest::Error
/// for dtypes without an npy descr (bf16, fp8).
std::string encode_npy(const attest::Tensor& t);

/// Stages encode_npy(t) for `path` in `out` (written when `out.commit()` runs).
void write_npy(attest::OutputFiles& out, const std::filesystem::path& path, const attest::Tensor& t);

}  // namespace attest::datasets
