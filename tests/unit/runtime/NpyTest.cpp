//===- NpyTest.cpp - .npy reader/writer tests -----------------------------===//
//
// Files for the error cases are built byte by byte, so each test states
// exactly what is on disk.
//
//===----------------------------------------------------------------------===//
#include "runtime/Npy.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace step::rt;
using namespace step::rt::test;

namespace {

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "npytest.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string &f : listDir())
      std::remove((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }
  std::vector<std::string> listDir() const {
    std::vector<std::string> out;
    if (DIR *d = opendir(dir_.c_str())) {
      while (dirent *e = readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          out.push_back(e->d_name);
      closedir(d);
    }
    return out;
  }
  void writeBytes(const std::string &name, const std::string &bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  std::string readBytes(const std::string &name) {
    std::ifstream in(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  /// A version-1.0 file: magic, version, 2-byte length, header, data.
  static std::string npyV1(const std::string &header, const std::string &data) {
    std::string s("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(header.size() & 0xff);
    s += static_cast<char>(header.size() >> 8);
    return s + header + data;
  }
  std::string dir_;
};

TEST_F(NpyTest, RoundTripEveryDType) {
  for (DType t : kAllTypes) {
    std::vector<double> v = isFloat(t)     ? std::vector<double>{0, 1, -2, 3, 4.5, -6}
                            : t == DType::I1 ? std::vector<double>{0, 1, 0, 1, 1, 0}
                                             : std::vector<double>{0, 1, -2, 3, 5, -6};
    HostTensor x = make(t, {2, 3}, v);
    std::string p = path(std::string("x_") + dtypeName(t) + ".npy");
    writeNpy(p, x);
    HostTensor y = readNpy(p);
    EXPECT_TRUE(x.bitwiseEqual(y)) << dtypeName(t);
  }
}

TEST_F(NpyTest, RoundTripScalarEmptyAndSpecialValues) {
  HostTensor s = make(DType::F32, {}, {3.25});
  writeNpy(path("s.npy"), s);
  EXPECT_TRUE(readNpy(path("s.npy")).bitwiseEqual(s));
  HostTensor e(DType::I64, {0, 4});
  writeNpy(path("e.npy"), e);
  EXPECT_TRUE(readNpy(path("e.npy")).bitwiseEqual(e));
  HostTensor r = make(DType::F16, {5}, {NAN, INFINITY, -0.0, 65504, 1e-7});
  writeNpy(path("r.npy"), r);
  EXPECT_TRUE(readNpy(path("r.npy")).bitwiseEqual(r));
}

TEST_F(NpyTest, WritesNumpyLayout) {
  writeNpy(path("a.npy"), make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  std::string bytes = readBytes("a.npy");
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  // 10 + 59 + 1 = 70 bytes of preamble and dict: pad to 128 with spaces.
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]), 118); // 128 - 10
  EXPECT_EQ(bytes[9], 0);
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  EXPECT_EQ(bytes.substr(10 + dict.size(), 128 - 11 - dict.size()),
            std::string(128 - 11 - dict.size(), ' '));
  EXPECT_EQ(bytes[127], '\n');
  float first;
  std::memcpy(&first, bytes.data() + 128, 4);
  EXPECT_EQ(first, 1.0f);

  writeNpy(path("v.npy"), HostTensor(DType::BF16, {5}));
  EXPECT_NE(readBytes("v.npy").find("'descr': '<u2'"), std::string::npos);
  EXPECT_NE(readBytes("v.npy").find("'shape': (5,)"), std::string::npos);
  writeNpy(path("b.npy"), HostTensor(DType::I1, {}));
  EXPECT_NE(readBytes("b.npy").find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(readBytes("b.npy").find("'shape': ()"), std::string::npos);
}

TEST_F(NpyTest, ReadsHandWrittenFiles) {
  // Double quotes, no trailing comma, extra spaces: still a valid dict.
  std::string data("\x01\x00\x00\x00\xfe\xff\xff\xff", 8);
  writeBytes("i.npy",
             npyV1("{\"descr\": \"<i4\", \"shape\": (2,) ,"
                   " \"fortran_order\": False}\n",
                   data));
  expectValues(readNpy(path("i.npy")), DType::I32, {2}, {1, -2});

  // Version 2.0 has a 4-byte header length.
  std::string h = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1), }\n";
  std::string v2("\x93NUMPY\x02\x00", 8);
  uint32_t len = static_cast<uint32_t>(h.size());
  v2 += std::string(reinterpret_cast<const char *>(&len), 4);
  v2 += h + std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8);
  writeBytes("v2.npy", v2);
  expectValues(readNpy(path("v2.npy")), DType::I64, {1, 1}, {7});

  // Bool bytes other than 0/1 are True.
  writeBytes("b.npy",
             npyV1("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n",
                   std::string("\x00\x02\x01", 3)));
  HostTensor b = readNpy(path("b.npy"));
  EXPECT_EQ(std::vector<uint8_t>(b.data<uint8_t>(), b.data<uint8_t>() + 3),
            (std::vector<uint8_t>{0, 1, 1}));
}

TEST_F(NpyTest, BadMagic) {
  writeBytes("m.npy", "hello world, not numpy");
  EXPECT_ERROR(readNpy(path("m.npy")),
               {"m.npy", "expected magic", "found 'hello '"});
  writeBytes("short.npy", "\x93NU");
  EXPECT_ERROR(readNpy(path("short.npy")), {"short.npy", "expected magic"});
}

TEST_F(NpyTest, UnknownDescr) {
  writeBytes("d.npy",
             npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n",
                   std::string(8, '\0')));
  EXPECT_ERROR(readNpy(path("d.npy")),
               {"d.npy", "unsupported dtype descr '<f8'", "'<f4'", "'|b1'"});
  writeBytes("be.npy",
             npyV1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n",
                   std::string(4, '\0')));
  EXPECT_ERROR(readNpy(path("be.npy")), {"be.npy", "'>f4'"});
}

TEST_F(NpyTest, Truncated) {
  writeBytes("t.npy",
             npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n",
                   std::string(8, '\0')));
  EXPECT_ERROR(readNpy(path("t.npy")),
               {"t.npy", "truncated data", "expected 16 bytes", "f32 [4]",
                "found 8"});
  // Header length says 80 bytes but the file ends sooner.
  std::string s("\x93NUMPY\x01\x00\x50\x00{'descr'", 18);
  writeBytes("th.npy", s);
  EXPECT_ERROR(readNpy(path("th.npy")),
               {"th.npy", "truncated header", "expected 80"});
  writeBytes("tp.npy", std::string("\x93NUMPY\x01", 7));
  EXPECT_ERROR(readNpy(path("tp.npy")), {"tp.npy", "truncated"});
}

TEST_F(NpyTest, SizeMismatchExtraBytes) {
  writeBytes("x.npy",
             npyV1("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }\n",
                   std::string(8, '\0')));
  EXPECT_ERROR(readNpy(path("x.npy")),
               {"x.npy", "size mismatch", "expected 4", "i32 [1]"});
}

TEST_F(NpyTest, FortranOrder) {
  writeBytes("f.npy",
             npyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n",
                   std::string(16, '\0')));
  EXPECT_ERROR(readNpy(path("f.npy")),
               {"f.npy", "fortran_order is True", "expected C order"});
}

TEST_F(NpyTest, MalformedHeaderAndVersion) {
  writeBytes("h.npy", npyV1("{'descr': '<f4', 'shape': [2], }\n", ""));
  EXPECT_ERROR(readNpy(path("h.npy")), {"h.npy", "malformed header"});
  writeBytes("k.npy",
             npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                   "'extra': 1}\n",
                   std::string(4, '\0')));
  EXPECT_ERROR(readNpy(path("k.npy")), {"k.npy", "'extra'"});
  std::string v9("\x93NUMPY\x09\x00\x00\x00", 10);
  writeBytes("v9.npy", v9);
  EXPECT_ERROR(readNpy(path("v9.npy")), {"v9.npy", "version", "found 9.0"});
}

// Hardened with tests/fuzz/fuzz-npy: size fields are checked
// against the bytes present before anything is allocated.
TEST_F(NpyTest, SizeFieldsAllocateNothing) {
  // 2^40 f32 elements in an 80-byte file: once a 4 TiB allocation
  // (std::bad_alloc, or a sanitizer abort), now a truncation error.
  std::string huge = npyV1(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }\n",
      std::string(8, '\0'));
  EXPECT_ERROR(parseNpy(huge, "huge.npy"),
               {"huge.npy", "truncated data", "expected 4398046511104 bytes",
                "found 8"});
  // More bytes than size_t holds.
  std::string wide = npyV1("{'descr': '<i8', 'fortran_order': False, "
                           "'shape': (4294967296, 4294967296, 16), }\n",
                           "");
  EXPECT_ERROR(parseNpy(wide, "wide.npy"),
               {"wide.npy", "more bytes than memory can hold"});
  // A version-2.0 header length of 4 GiB in a 16-byte file.
  std::string v2("\x93NUMPY\x02\x00\xf0\xff\xff\xff{'de", 16);
  EXPECT_ERROR(parseNpy(v2, "v2.npy"),
               {"v2.npy", "truncated header", "expected 4294967280",
                "found 4"});
  // An empty dimension needs no data, whatever the others say.
  std::string empty = npyV1("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (0, 9000000000000000000), }\n",
                            "");
  HostTensor none = parseNpy(empty, "empty.npy");
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.shape(), (Shape{0, 9000000000000000000}));
}

TEST_F(NpyTest, ParseIsReadWithoutTheFile) {
  HostTensor t = make(DType::F16, {2, 1}, {1.5, -2});
  writeNpy(path("p.npy"), t);
  EXPECT_TRUE(parseNpy(readBytes("p.npy"), "p.npy").bitwiseEqual(t));
  EXPECT_TRUE(parseNpy(npyBytes(t, "mem"), "mem").bitwiseEqual(t));
  EXPECT_ERROR(parseNpy("\x93NUMPY\x01", "mem"), {"mem", "truncated"});
}

TEST_F(NpyTest, MissingFile) {
  EXPECT_ERROR(readNpy(path("nope.npy")), {"nope.npy", "cannot open"});
}

TEST_F(NpyTest, AtomicWrite) {
  std::string p = path("w.npy");
  writeNpy(p, make(DType::I32, {2}, {1, 2}));
  writeNpy(p, make(DType::I32, {3}, {4, 5, 6})); // replaces the old file
  expectValues(readNpy(p), DType::I32, {3}, {4, 5, 6});
  // Nothing but the final file is left behind (no "<path>.tmp.<pid>").
  EXPECT_EQ(listDir(), (std::vector<std::string>{"w.npy"}));

  std::string bad = path("no_such_dir/w.npy");
  EXPECT_ERROR(writeNpy(bad, make(DType::I32, {1}, {1})),
               {"writeNpy", "no_such_dir/w.npy", "No such file"});
  EXPECT_EQ(listDir(), (std::vector<std::string>{"w.npy"}));

  // Renaming onto a directory fails after the data was written: the
  // temporary file must be removed.
  ASSERT_EQ(mkdir(path("adir").c_str(), 0700), 0);
  std::string tmp = path("adir") + ".tmp." + std::to_string(getpid());
  EXPECT_ERROR(writeNpy(path("adir"), make(DType::I32, {1}, {1})),
               {"writeNpy", "adir", "rename"});
  EXPECT_NE(access(path("adir").c_str(), F_OK), -1);
  EXPECT_EQ(access(tmp.c_str(), F_OK), -1);
  rmdir(path("adir").c_str());
}

} // namespace
