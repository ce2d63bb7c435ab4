//===- emu_io.h - Host side of the CUDA emulation harnesses -----*- C++ -*-===//
//
// What the harnesses of tests/e2e/cuda_emulation*.py share around a
// generated kernel: element conversions, inputs read from float64 files
// and outputs written as float32 files (numpy's tofile/fromfile), outputs
// poisoned before a launch, and the block orders a launch tries.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_TESTS_E2E_EMU_EMU_IO_H
#define STEP_TESTS_E2E_EMU_EMU_IO_H

#include "cuda_emu.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

static inline float toF(float x) { return x; }
static inline float toF(__nv_bfloat16 x) { return __bfloat162float(x); }
static inline void put(double x, float &e) { e = float(x); }
static inline void put(double x, __nv_bfloat16 &e) {
  e = __float2bfloat16(float(x));
}
static inline float toF(__half x) { return __half2float(x); }
static inline void put(double x, __half &e) { e = __float2half_rn(float(x)); }
static inline void put(double x, long long &e) { e = (long long)x; }
static inline void put(double x, int &e) { e = (int)x; }
// An i1 (step.check_finite's result); NaN (the poison) as 0xab, neither
// 0 nor 1.
static inline float toF(unsigned char x) { return float(x); }
static inline void put(double x, unsigned char &e) {
  e = x != x ? (unsigned char)0xab : (unsigned char)x;
}

/// `n` float64 values of `path`, converted to T.
template <class T> std::vector<T> readRaw(const char *path, size_t n) {
  std::vector<double> f(n);
  FILE *h = std::fopen(path, "rb");
  if (!h || std::fread(f.data(), 8, n, h) != n) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  std::fclose(h);
  std::vector<T> e(n);
  for (size_t i = 0; i < n; ++i)
    put(f[i], e[i]);
  return e;
}

/// `e` as float32 values into `path`.
template <class T>
void writeRaw(const std::string &path, const std::vector<T> &e) {
  std::vector<float> f(e.size());
  for (size_t i = 0; i < e.size(); ++i)
    f[i] = toF(e[i]);
  FILE *h = std::fopen(path.c_str(), "wb");
  std::fwrite(f.data(), 4, f.size(), h);
  std::fclose(h);
}

template <class T> void poison(std::vector<T> &v, double x = NAN) {
  for (T &e : v)
    put(x, e);
}

/// The block orders a kernel is run in: with `exact`, its grid of `grid`
/// blocks in increasing, decreasing and shuffled order (a kernel whose last
/// block combines the others' partials must give the same bits in each);
/// else grids of 1, 2 and 5 blocks (a grid-stride kernel takes any grid).
inline std::vector<std::vector<unsigned>> emuOrders(bool exact,
                                                    unsigned grid) {
  std::vector<std::vector<unsigned>> orders;
  if (exact) {
    std::vector<unsigned> o(grid);
    std::iota(o.begin(), o.end(), 0u);
    orders.push_back(o);
    std::reverse(o.begin(), o.end());
    orders.push_back(o);
    std::shuffle(o.begin(), o.end(), std::mt19937(7));
    orders.push_back(o);
  } else {
    for (unsigned g : {1u, 2u, 5u}) {
      std::vector<unsigned> o(g);
      std::iota(o.begin(), o.end(), 0u);
      orders.push_back(o);
    }
  }
  return orders;
}

#endif
