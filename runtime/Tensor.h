//===- Tensor.h - Host tensors and element types ----------------*- C++ -*-===//
//
// The runtime's value type: a dense, contiguous, row-major (C order) tensor on
// the host. Shared by the reference interpreter, the CPU backend and the .npy
// reader/writer. No MLIR or LLVM here (DESIGN.md section 2).
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_TENSOR_H
#define STEP_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace step::rt {

/// Every runtime failure (bad input, bad shapes, I/O) is reported as an Error
/// whose message says what, where, expected versus found.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

/// Element types of the step dialect. f16 and bf16 are stored as their 16-bit
/// patterns; i1 is stored as one byte holding 0 or 1.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, I1 };

/// Bytes per element (i1 takes one byte).
size_t dtypeSize(DType t);
/// "f32", "f16", "bf16", "i32", "i64", "i1" (the MLIR spelling).
const char *dtypeName(DType t);
bool isFloat(DType t); // f32, f16, bf16
bool isInteger(DType t); // i32, i64 (not i1)

using Shape = std::vector<int64_t>;
/// Product of the dims (1 for rank 0).
int64_t numElements(const Shape &shape);
/// "[2, 3]" for messages; "[]" for a scalar.
std::string shapeToString(const Shape &shape);
/// "f32 [2, 3]" for messages.
std::string typeStr(DType dtype, const Shape &shape);

/// Owning dense tensor. The buffer is always numElements(shape) *
/// dtypeSize(dtype) bytes, zero-initialised on construction.
class HostTensor {
public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numElements(shape_); }
  size_t byteSize() const { return bytes_.size(); }

  void *raw() { return bytes_.data(); }
  const void *raw() const { return bytes_.data(); }
  /// Typed views; T must match the storage: float (F32), uint16_t (F16/BF16),
  /// int32_t, int64_t, uint8_t (I1). Checked: throws Error on mismatch.
  template <typename T> T *data();
  template <typename T> const T *data() const;

  /// Element i (flat index) converted to double / written from double with the
  /// dtype's rounding (round-to-nearest-even for f16/bf16/f32, truncation
  /// toward zero for integers, != 0 for i1). Slow; for tests and small tools.
  double getAsDouble(int64_t i) const;
  void setFromDouble(int64_t i, double v);

  /// Same dtype, shape and bytes.
  bool bitwiseEqual(const HostTensor &other) const;

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<uint8_t> bytes_;
};

} // namespace step::rt

#endif // STEP_RUNTIME_TENSOR_H
