//===- fuzz-artifact.cpp - libFuzzer target for the .step reader ----------===//
//
// Bytes -> rt::parseArtifact (runtime/Artifact.h), then what a Session does
// with an accepted artifact before its first step: the plan's checks and a
// Session on the CPU backend (argument buffers allocated, params, state and
// inputs sorted out, results matched to what they replace). It also holds
// the writer to the reader: an accepted artifact, written again by
// rt::artifactBytes, must read back with the same plan and sections.
//
// An rt::Error is the expected answer to bad input; a crash, a sanitizer
// report, another exception, a hang, or an allocation a size field asks
// for beyond the input's own size are bugs.
//
// A checksum guards every artifact, so random mutations of a file would
// almost never get past it. The custom mutator below therefore takes an
// input apart (manifest, payload), mutates one part with libFuzzer's own
// mutator and writes the header sizes and the checksum anew; one mutation
// in eight is left raw, so the header checks keep being exercised.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/Session.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using step::rt::Artifact;

constexpr size_t kHeaderBytes = 32; // magic, version, reserved, two sizes
/// Sessions are built only when their argument buffers fit in this: a
/// valid artifact may ask for tensors of any size, so holding it to the
/// input's size would refuse real models.
constexpr int64_t kSessionBytes = int64_t(64) << 20;

uint64_t getU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}
void putU64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

[[noreturn]] void bug(const std::string &what) {
  std::fprintf(stderr, "fuzz-artifact: %s\n", what.c_str());
  std::abort();
}

/// An accepted artifact written again must read back the same. Compared
/// as text: JSON has no infinities, so a number too large for a double
/// reads as inf and is written as null, on both sides alike.
void checkRoundTrip(const Artifact &a) {
  Artifact b = step::rt::parseArtifact(step::rt::artifactBytes(a), "rewrite");
  if (step::rt::toJson(a.plan).dump() != step::rt::toJson(b.plan).dump())
    bug("the plan changed when written and read again");
  if (a.sections != b.sections || a.buckets.size() != b.buckets.size())
    bug("the sections changed when written and read again");
}

int64_t argumentBytes(const Artifact &a) {
  int64_t total = 0;
  for (int64_t id : a.plan.arguments)
    total += a.plan.buffers[id].bytes();
  return total;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Artifact a;
  try {
    a = step::rt::parseArtifact(
        std::string(reinterpret_cast<const char *>(data), size), "fuzz.step");
  } catch (const step::rt::Error &) {
    return 0; // refused with a message: what bad input should get
  }
  checkRoundTrip(a);
  if (argumentBytes(a) > kSessionBytes)
    return 0;
  try {
    step::SessionOptions options;
    options.backend = step::Backend::Cpu;
    // Never MPI inside the fuzzer: a sharded artifact must then be refused
    // for its world size, with a message.
    options.communicator = &step::rt::selfCommunicator();
    step::Session session(std::move(a), options);
    (void)session.paramNames();
  } catch (const step::rt::Error &) {
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  uint64_t manifest = size >= kHeaderBytes + 8 ? getU64(data + 16) : 0;
  uint64_t payload = size >= kHeaderBytes + 8 ? getU64(data + 24) : 0;
  bool framed = size >= kHeaderBytes + 8 && manifest <= size &&
                payload <= size &&
                kHeaderBytes + manifest + payload + 8 == size;
  if (!framed || seed % 8 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);

  // Mutate the manifest (three times in four) or the payload in place,
  // moving what follows it, then frame the result again.
  bool inManifest = seed % 4 != 1 || payload == 0;
  size_t at = kHeaderBytes + (inManifest ? 0 : manifest);
  size_t part = inManifest ? manifest : payload;
  size_t tail = size - at - part - 8; // bytes between the part and checksum
  size_t room = maxSize - (size - part);
  if (maxSize < size - part)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string after(reinterpret_cast<const char *>(data + at + part), tail);
  size_t newPart = LLVMFuzzerMutate(data + at, part, room);
  std::memcpy(data + at + newPart, after.data(), tail);
  size_t newSize = at + newPart + tail + 8;
  putU64(data + (inManifest ? 16 : 24), newPart);
  putU64(data + newSize - 8, step::rt::fnv1a64(data, newSize - 8));
  return newSize;
}
