//===- Tensor.cpp - Host tensors and element types ------------------------===//
//
// dtype helpers and HostTensor. Element conversions here are the slow,
// per-element reference used by tests and tools; kernels have their own loops.
//
//===----------------------------------------------------------------------===//
#include "runtime/Tensor.h"

#include "runtime/cpu/KernelUtil.h"

#include "runtime/Half.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace step::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::I1:
    return 1;
  }
  throw Error("dtypeSize: invalid dtype " +
              std::to_string(static_cast<int>(t)));
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::I1:
    return "i1";
  }
  return "<invalid dtype>";
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

bool isInteger(DType t) { return t == DType::I32 || t == DType::I64; }

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string typeStr(DType dtype, const Shape &shape) {
  return std::string(dtypeName(dtype)) + " " + shapeToString(shape);
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  // Reject what would otherwise become a huge or negative allocation.
  int64_t n = 1;
  for (int64_t d : shape_) {
    if (d < 0)
      throw Error("HostTensor: negative dimension in shape " +
                  shapeToString(shape_));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d)
      throw Error("HostTensor: shape " + shapeToString(shape_) +
                  " has too many elements");
    n *= d;
  }
  bytes_.assign(static_cast<size_t>(n) * dtypeSize(dtype_), 0);
}

namespace {
template <typename T> bool storageMatches(DType t);
template <> bool storageMatches<float>(DType t) { return t == DType::F32; }
template <> bool storageMatches<uint16_t>(DType t) {
  return t == DType::F16 || t == DType::BF16;
}
template <> bool storageMatches<int32_t>(DType t) { return t == DType::I32; }
template <> bool storageMatches<int64_t>(DType t) { return t == DType::I64; }
template <> bool storageMatches<uint8_t>(DType t) { return t == DType::I1; }

template <typename T> const char *storageName();
template <> const char *storageName<float>() { return "float"; }
template <> const char *storageName<uint16_t>() { return "uint16_t"; }
template <> const char *storageName<int32_t>() { return "int32_t"; }
template <> const char *storageName<int64_t>() { return "int64_t"; }
template <> const char *storageName<uint8_t>() { return "uint8_t"; }
} // namespace

template <typename T> T *HostTensor::data() {
  if (!storageMatches<T>(dtype_))
    throw Error(std::string("HostTensor::data: ") + storageName<T>() +
                " view of a " + dtypeName(dtype_) + " tensor");
  return reinterpret_cast<T *>(bytes_.data());
}

template <typename T> const T *HostTensor::data() const {
  return const_cast<HostTensor *>(this)->data<T>();
}

template float *HostTensor::data<float>();
template uint16_t *HostTensor::data<uint16_t>();
template int32_t *HostTensor::data<int32_t>();
template int64_t *HostTensor::data<int64_t>();
template uint8_t *HostTensor::data<uint8_t>();
template const float *HostTensor::data<float>() const;
template const uint16_t *HostTensor::data<uint16_t>() const;
template const int32_t *HostTensor::data<int32_t>() const;
template const int64_t *HostTensor::data<int64_t>() const;
template const uint8_t *HostTensor::data<uint8_t>() const;

static void checkIndex(const HostTensor &t, int64_t i, const char *fn) {
  if (i < 0 || i >= t.numel())
    throw Error(std::string("HostTensor::") + fn + ": index " +
                std::to_string(i) + " out of range for shape " +
                shapeToString(t.shape()));
}

double HostTensor::getAsDouble(int64_t i) const {
  checkIndex(*this, i, "getAsDouble");
  const uint8_t *p = bytes_.data() + i * dtypeSize(dtype_);
  switch (dtype_) {
  case DType::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return dtype_ == DType::F16 ? halfToFloat(v) : bf16ToFloat(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<double>(v);
  }
  case DType::I1:
    return *p ? 1.0 : 0.0;
  }
  return 0;
}


void HostTensor::setFromDouble(int64_t i, double v) {
  checkIndex(*this, i, "setFromDouble");
  uint8_t *p = bytes_.data() + i * dtypeSize(dtype_);
  switch (dtype_) {
  case DType::F32: {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
    return;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t h = dtype_ == DType::F16 ? doubleToHalf(v) : doubleToBF16(v);
    std::memcpy(p, &h, 2);
    return;
  }
  case DType::I32: {
    int32_t x = cpu::detail::saturatingTrunc<int32_t>(v);
    std::memcpy(p, &x, 4);
    return;
  }
  case DType::I64: {
    int64_t x = cpu::detail::saturatingTrunc<int64_t>(v);
    std::memcpy(p, &x, 8);
    return;
  }
  case DType::I1:
    *p = v != 0 ? 1 : 0; // NaN != 0 is true, as torch's bool conversion
    return;
  }
}

bool HostTensor::bitwiseEqual(const HostTensor &other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         bytes_ == other.bytes_;
}

} // namespace step::rt
