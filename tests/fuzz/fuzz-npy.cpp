//===- fuzz-npy.cpp - libFuzzer target for the .npy reader ----------------===//
//
// Bytes -> rt::parseNpy, the parser under rt::readNpy (runtime/Npy.h). An
// rt::Error is the expected answer to bad input; a crash, a sanitizer
// report, another exception or an allocation larger than the input asks
// for are bugs. A tensor the reader accepts must survive the writer: its
// bytes, written as numpy would and read back, give the same tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  step::rt::HostTensor t;
  try {
    t = step::rt::parseNpy(bytes, "fuzz.npy");
  } catch (const step::rt::Error &) {
    return 0; // refused with a message: what bad input should get
  }
  // Accepted: the writer's bytes of the same tensor must read back equal.
  // Only small tensors, to keep the run fast (the reader has already held
  // the large ones to the input's size).
  if (t.byteSize() > (1u << 16))
    return 0;
  step::rt::HostTensor back =
      step::rt::parseNpy(step::rt::npyBytes(t, "round trip"), "round trip");
  if (!back.bitwiseEqual(t)) {
    std::fprintf(stderr, "fuzz-npy: %s %s does not survive writeNpy\n",
                 step::rt::dtypeName(t.dtype()),
                 step::rt::shapeToString(t.shape()).c_str());
    std::abort();
  }
  return 0;
}
