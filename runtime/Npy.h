//===- Npy.h - .npy file reader and writer ----------------------*- C++ -*-===//
//
// Tensors cross the tool boundary (step-interp, step-run, parity tests) as
// numpy .npy files. Supported: format versions 1.0 (written when the header
// fits, as numpy does), 2.0 and 3.0 (read); C order only; little-endian data.
//
// dtype mapping (descr <-> DType):
//   '<f4' f32   '<f2' f16   '<i4' i32   '<i8' i64   '|b1' i1
//   '<u2' bf16: numpy has no bfloat16, so bf16 tensors are stored as their raw
//               16-bit patterns in a uint16 array, and every '<u2' file is
//               read back as bf16. Convert in Python with
//               torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).
// Anything else (other descrs, big-endian, fortran_order True, bad magic, a
// truncated file, data size not matching the shape) throws rt::Error naming
// the file, what was expected and what was found.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_RUNTIME_NPY_H
#define STEP_RUNTIME_NPY_H

#include "runtime/Tensor.h"

#include <string>

namespace step::rt {

/// Reads a whole .npy file (parseNpy of its bytes).
HostTensor readNpy(const std::string &path);

/// Parses the bytes of a .npy file; `what` names their source in errors.
/// Every size field is checked against the bytes present before anything
/// is allocated, so no input makes the reader reserve more memory than the
/// input's own size (tests/fuzz/fuzz-npy.cpp holds it to that).
HostTensor parseNpy(const std::string &bytes, const std::string &what);

/// Writes `t` as a version 1.0 .npy file (2.0 if the header needs it). The
/// file is written to "<path>.tmp.<pid>" and renamed into place, so readers
/// never see a partial file and a failed write leaves no file behind.
void writeNpy(const std::string &path, const HostTensor &t);
/// The bytes writeNpy writes (`path` names the file in errors).
std::string npyBytes(const HostTensor &t, const std::string &path);

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename, so a reader never sees a half-written file and an existing file
/// survives a failed write. Throws Error prefixed with `what`. Durable:
/// the file is fsync'ed before the rename and its folder after, so the new
/// contents survive a power loss too, not only a crash of the process.
void writeFileAtomic(const std::string &path, const std::string &bytes,
                     const std::string &what = "write", bool durable = false);
/// fsync of a folder (its entries: names created, renamed, removed).
void syncFolder(const std::string &dir, const std::string &what);

} // namespace step::rt

#endif // STEP_RUNTIME_NPY_H
