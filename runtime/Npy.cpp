//===- Npy.cpp - .npy file reader and writer ------------------------------===//
//
// The header is a Python dict literal; numpy writes exactly three keys, so a
// small hand-written parser for strings, True/False and int tuples covers
// every file numpy produces without pulling in a Python-literal library.
//
//===----------------------------------------------------------------------===//
#include "runtime/Npy.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <unistd.h>

namespace step::rt {

namespace {

const char kNpyMagic[] = "\x93NUMPY";
const size_t kNpyMagicLen = 6;

struct DescrEntry {
  const char *descr;
  DType dtype;
};
const DescrEntry kDescrs[] = {
    {"<f4", DType::F32}, {"<f2", DType::F16}, {"<u2", DType::BF16},
    {"<i4", DType::I32}, {"<i8", DType::I64}, {"|b1", DType::I1},
};

[[noreturn]] void readFail(const std::string &path, const std::string &msg) {
  throw Error("readNpy: " + path + ": " + msg);
}

std::string printable(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

/// Parser for the header dict, e.g.
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  HeaderParser(const std::string &path, const std::string &text)
      : path_(path), s_(text) {}

  void parse(std::string &descr, bool &fortran, Shape &shape) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    expect('{');
    while (true) {
      skipSpace();
      if (peek() == '}')
        break;
      std::string key = parseString();
      expect(':');
      if (key == "descr") {
        descr = parseString();
        haveDescr = true;
      } else if (key == "fortran_order") {
        fortran = parseBool();
        haveFortran = true;
      } else if (key == "shape") {
        shape = parseTuple();
        haveShape = true;
      } else {
        bad("expected keys 'descr', 'fortran_order' and 'shape', found key '" +
            printable(key) + "'");
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      break;
    }
    if (!haveDescr || !haveFortran || !haveShape)
      bad("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

private:
  [[noreturn]] void bad(const std::string &msg) {
    readFail(path_, "malformed header: " + msg + " (header: " +
                        printable(s_) + ")");
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skipSpace();
    if (peek() != c)
      bad(std::string("expected '") + c + "' at offset " +
          std::to_string(pos_));
    ++pos_;
  }
  std::string parseString() {
    skipSpace();
    char q = peek();
    if (q != '\'' && q != '"')
      bad("expected a quoted string at offset " + std::to_string(pos_));
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos)
      bad("unterminated string at offset " + std::to_string(pos_));
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool parseBool() {
    skipSpace();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    bad("expected True or False at offset " + std::to_string(pos_));
  }
  Shape parseTuple() {
    Shape shape;
    expect('(');
    while (true) {
      skipSpace();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      size_t startPos = pos_;
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10)
          bad("dimension too large at offset " + std::to_string(startPos));
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (pos_ == startPos)
        bad("expected a dimension at offset " + std::to_string(pos_));
      if (peek() == 'L') // Python 2 long literal
        ++pos_;
      shape.push_back(v);
      skipSpace();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        bad("expected ',' or ')' at offset " + std::to_string(pos_));
    }
  }

  const std::string &path_;
  const std::string &s_;
  size_t pos_ = 0;
};

uint32_t readLE(const unsigned char *p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

HostTensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    readFail(path, std::string("cannot open: ") + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad())
    readFail(path, std::string("read failed: ") + std::strerror(errno));
  return parseNpy(bytes, path);
}

HostTensor parseNpy(const std::string &bytes, const std::string &path) {
  const auto *pre = reinterpret_cast<const unsigned char *>(bytes.data());
  size_t size = bytes.size();
  if (size < kNpyMagicLen || std::memcmp(pre, kNpyMagic, kNpyMagicLen) != 0)
    readFail(path, "not a .npy file: expected magic \\x93NUMPY, found '" +
                       printable(bytes.substr(0, kNpyMagicLen)) + "'");
  if (size < 10)
    readFail(path, "truncated: expected a 10-byte preamble, found " +
                       std::to_string(size) + " bytes");
  int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    readFail(path, "unsupported format version: expected 1.0, 2.0 or 3.0, "
                   "found " + std::to_string(major) + "." +
                   std::to_string(minor));
  // Version 1.0 stores the header length in 2 bytes, later versions in 4.
  size_t preamble = major == 1 ? 10 : 12;
  if (size < preamble)
    readFail(path, "truncated: expected a 12-byte preamble for version " +
                       std::to_string(major) + ".0");
  uint32_t headerLen = readLE(pre + 8, major == 1 ? 2 : 4);
  // Compared with what is there before anything is allocated: a length
  // field alone must not make the reader reserve gigabytes.
  if (headerLen > size - preamble)
    readFail(path, "truncated header: expected " + std::to_string(headerLen) +
                       " bytes, found " + std::to_string(size - preamble));
  std::string header = bytes.substr(preamble, headerLen);

  std::string descr;
  bool fortran = false;
  Shape shape;
  HeaderParser(path, header).parse(descr, fortran, shape);
  const DescrEntry *entry = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (descr == e.descr)
      entry = &e;
  if (!entry)
    readFail(path, "unsupported dtype descr '" + printable(descr) +
                       "': expected one of '<f4', '<f2', '<u2' (bf16 bits), "
                       "'<i4', '<i8', '|b1'");
  if (fortran)
    readFail(path, "fortran_order is True: expected C order (save "
                   "np.ascontiguousarray(a))");

  // The data size the shape asks for, checked against the bytes present
  // before the tensor is allocated (a shape can ask for more than memory).
  size_t have = size - preamble - headerLen;
  size_t want = dtypeSize(entry->dtype);
  bool tooLarge = false;
  for (int64_t d : shape) {
    auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && want > std::numeric_limits<size_t>::max() / ud)
      tooLarge = true;
    else
      want *= ud;
  }
  bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  std::string type = std::string(dtypeName(entry->dtype)) + " " +
                     shapeToString(shape);
  if (empty)
    want = 0;
  else if (tooLarge)
    readFail(path, "shape " + shapeToString(shape) + " of " +
                       dtypeName(entry->dtype) +
                       " has more bytes than memory can hold (the file has " +
                       std::to_string(have) + " data bytes)");
  if (have < want)
    readFail(path, "truncated data: expected " + std::to_string(want) +
                       " bytes for " + type + ", found " +
                       std::to_string(have));
  if (have > want)
    readFail(path, "size mismatch: expected " + std::to_string(want) +
                       " data bytes for " + type +
                       ", found extra bytes after them");
  HostTensor t(entry->dtype, shape);
  if (want)
    std::memcpy(t.raw(), bytes.data() + preamble + headerLen, want);
  if (t.dtype() == DType::I1) {
    // numpy treats any nonzero byte as True; keep the 0/1 storage invariant.
    uint8_t *p = t.data<uint8_t>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      p[i] = p[i] != 0;
  }
  return t;
}

std::string npyBytes(const HostTensor &t, const std::string &path) {
  const char *descr = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (e.dtype == t.dtype())
      descr = e.descr;
  if (!descr)
    throw Error("writeNpy: " + path + ": no .npy descr for dtype " +
                dtypeName(t.dtype()));

  // Python's tuple repr: "(2, 3)", "(5,)", "()".
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned;
  // version 2.0 only when the header outgrows version 1.0's 16-bit length.
  auto padded = [&](size_t preamble) {
    std::string h = dict;
    size_t total = preamble + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    return h + '\n';
  };
  size_t preamble = 10;
  int major = 1;
  std::string header = padded(preamble);
  if (header.size() > 65535) {
    preamble = 12;
    major = 2;
    header = padded(preamble);
  }

  std::string pre(kNpyMagic, kNpyMagicLen);
  pre += static_cast<char>(major);
  pre += '\0';
  uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < preamble - 8; ++i)
    pre += static_cast<char>((len >> (8 * i)) & 0xff);

  std::string bytes = pre + header;
  bytes.append(static_cast<const char *>(t.raw()), t.byteSize());
  return bytes;
}

void writeNpy(const std::string &path, const HostTensor &t) {
  writeFileAtomic(path, npyBytes(t, path), "writeNpy");
}

void writeFileAtomic(const std::string &path, const std::string &bytes,
                     const std::string &what, bool durable) {
  // Unique per process and call: two threads may write one path.
  static std::atomic<uint64_t> calls{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(calls++);
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw Error(what + ": " + path + ": cannot create temporary file " + tmp +
                ": " + std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  // Durable: the bytes reach the disk before the name does.
  if (ok && durable)
    ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(what + ": " + path + ": write failed: " +
                std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw Error(what + ": " + path + ": cannot rename " + tmp +
                " into place: " + std::strerror(err));
  }
  if (durable)
    syncFolder(std::filesystem::path(path).parent_path().string(), what);
}

void syncFolder(const std::string &dir, const std::string &what) {
  std::string d = dir.empty() ? "." : dir;
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY);
  int err = 0;
  if (fd < 0 || ::fsync(fd) != 0)
    err = errno;
  if (fd >= 0)
    ::close(fd);
  if (err)
    throw Error(what + ": cannot sync folder " + d + ": " +
                std::strerror(err));
}

} // namespace step::rt
