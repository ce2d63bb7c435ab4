//===- TrainOptions.cpp - The training pipeline's options and schedule ----===//
//
// Parsing of the option specs of stepc and step-bench (`--optimizer=adamw,
// lr=3e-4`, `--shard=zero3,bucket=4MiB`, ...) into the structs of Train.h,
// each error naming the flag and what is expected, and the learning-rate
// schedule those options describe. No MLIR.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Train.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace step {

//===----------------------------------------------------------------------===//
// Option parsing
//===----------------------------------------------------------------------===//

namespace {
/// Splits "kind,key=value,..." into the kind and the key/value pairs.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>>
splitSpec(const std::string &spec, const std::string &what) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ',');)
    parts.push_back(part);
  if (parts.empty() || parts[0].empty() ||
      parts[0].find('=') != std::string::npos)
    throw std::invalid_argument(
        what + " '" + spec + "' must start with a kind, e.g. " +
        (what == "--optimizer" ? "adamw,lr=3e-4" : "cosine,warmup=100"));
  std::vector<std::pair<std::string, std::string>> kv;
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument(what + ": '" + parts[i] +
                                  "' is not key=value");
    kv.emplace_back(parts[i].substr(0, eq), parts[i].substr(eq + 1));
  }
  return {parts[0], kv};
}

double toDouble(const std::string &what, const std::string &key,
                const std::string &value) {
  try {
    size_t used = 0;
    double v = std::stod(value, &used);
    if (used == value.size())
      return v;
  } catch (const std::exception &) {
  }
  throw std::invalid_argument(what + ": " + key + "=" + value +
                              " is not a number");
}

int64_t toCount(const std::string &what, const std::string &key,
                const std::string &value) {
  double v = toDouble(what, key, value);
  if (v < 0 || v != static_cast<double>(static_cast<int64_t>(v)))
    throw std::invalid_argument(what + ": " + key + "=" + value +
                                " must be a non-negative integer");
  return static_cast<int64_t>(v);
}
/// A byte count: digits with an optional K/M/G/T (x1000) or KiB/MiB/GiB/TiB
/// (x1024) suffix (2GiB, 1.5e9, 25MiB); positive.
double parseBytes(const std::string &what, const std::string &text) {
  static const std::pair<const char *, double> units[] = {
      {"KiB", 1024.0},       {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024}, {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"K", 1e3},  {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1}};
  std::string number = text;
  double scale = 1;
  for (const auto &[suffix, factor] : units) {
    llvm::StringRef ref(text);
    if (ref.ends_with(suffix) && ref.size() > std::strlen(suffix)) {
      number = text.substr(0, text.size() - std::strlen(suffix));
      scale = factor;
      break;
    }
  }
  double v = toDouble(what, "bytes", number) * scale;
  if (!(v >= 1) || v > 9e18)
    throw std::invalid_argument(what + ": " + text +
                                " is not a positive byte count (e.g. "
                                "2GiB, 1.5e9)");
  return v;
}
} // namespace

OptimizerOptions OptimizerOptions::parse(const std::string &spec) {
  const std::string what = "--optimizer";
  auto [kind, kv] = splitSpec(spec, what);
  OptimizerOptions o;
  if (kind == "sgd")
    o.kind = Kind::Sgd;
  else if (kind == "adamw")
    o.kind = Kind::Adamw;
  else if (kind == "lamb")
    o.kind = Kind::Lamb;
  else
    throw std::invalid_argument(what + ": unknown optimizer '" + kind +
                                "', expected sgd, adamw or lamb");
  for (auto &[key, value] : kv) {
    if (key == "nesterov" || key == "wd_vectors") {
      if (value != "true" && value != "false" && value != "1" && value != "0")
        throw std::invalid_argument(what + ": " + key + "=" + value +
                                    " must be true or false");
      (key == "nesterov" ? o.nesterov : o.decayVectors) =
          value == "true" || value == "1";
      continue;
    }
    double v = toDouble(what, key, value);
    if (key == "lr")
      o.lr = v;
    else if (key == "beta1")
      o.beta1 = v;
    else if (key == "beta2")
      o.beta2 = v;
    else if (key == "eps")
      o.eps = v;
    else if (key == "wd" || key == "weight_decay")
      o.weightDecay = v;
    else if (key == "momentum")
      o.momentum = v;
    else if (key == "dampening")
      o.dampening = v;
    else
      throw std::invalid_argument(
          what + ": unknown key '" + key +
          "', expected lr, beta1, beta2, eps, wd, momentum, dampening, "
          "nesterov or wd_vectors");
  }
  return o;
}

ScheduleOptions ScheduleOptions::parse(const std::string &spec) {
  const std::string what = "--schedule";
  auto [kind, kv] = splitSpec(spec, what);
  ScheduleOptions s;
  if (kind == "constant")
    s.kind = Kind::Constant;
  else if (kind == "cosine")
    s.kind = Kind::Cosine;
  else if (kind == "linear")
    s.kind = Kind::Linear;
  else
    throw std::invalid_argument(what + ": unknown schedule '" + kind +
                                "', expected constant, cosine or linear");
  for (auto &[key, value] : kv) {
    if (key == "warmup")
      s.warmup = toCount(what, key, value);
    else if (key == "total")
      s.total = toCount(what, key, value);
    else if (key == "min_ratio")
      s.minRatio = toDouble(what, key, value);
    else
      throw std::invalid_argument(what + ": unknown key '" + key +
                                  "', expected warmup, total or min_ratio");
  }
  if (s.kind != Kind::Constant && s.total <= s.warmup)
    throw std::invalid_argument(what + ": " + kind + " needs total (" +
                                std::to_string(s.total) + ") > warmup (" +
                                std::to_string(s.warmup) + ")");
  return s;
}

AmpOptions AmpOptions::parse(const std::string &dtype,
                             const std::string &keep,
                             const std::string &lossScale) {
  AmpOptions a;
  if (!dtype.empty() && dtype != "bf16" && dtype != "fp16")
    throw std::invalid_argument("--amp: unknown type '" + dtype +
                                "', expected bf16 or fp16");
  a.dtype = dtype;
  std::stringstream names(keep);
  for (std::string name; std::getline(names, name, ',');)
    if (!name.empty())
      a.keepF32.push_back(name);
  const std::string what = "--loss-scale";
  auto [kind, kv] = splitSpec(lossScale.empty() ? "auto" : lossScale, what);
  if (kind != "auto" && kind != "none" && kind != "dynamic")
    throw std::invalid_argument(what + ": unknown kind '" + kind +
                                "', expected auto, none or dynamic");
  a.lossScale = kind;
  for (auto &[key, value] : kv) {
    if (key == "init")
      a.initScale = toDouble(what, key, value);
    else if (key == "growth")
      a.growthFactor = toDouble(what, key, value);
    else if (key == "backoff")
      a.backoffFactor = toDouble(what, key, value);
    else if (key == "interval")
      a.growthInterval = toCount(what, key, value);
    else
      throw std::invalid_argument(
          what + ": unknown key '" + key +
          "', expected init, growth, backoff or interval");
  }
  return a;
}

RematOptions RematOptions::parse(const std::string &mode,
                                 const std::string &budget) {
  RematOptions r;
  if (mode != "" && mode != "none" && mode != "auto" && mode != "max")
    throw std::invalid_argument("--remat: unknown mode '" + mode +
                                "', expected none, auto or max");
  r.mode = mode.empty() ? "none" : mode;
  if (budget.empty())
    return r;
  if (r.mode != "none")
    throw std::invalid_argument("--remat=" + r.mode +
                                " and --remat-budget exclude each other: a "
                                "budget is its own mode");
  double v = parseBytes("--remat-budget", budget);
  r.mode = "budget";
  r.budget = static_cast<int64_t>(v);
  return r;
}

OffloadOptions OffloadOptions::parse(const std::string &spec) {
  OffloadOptions o;
  const std::string what = "--offload";
  auto [mode, kv] = splitSpec(spec.empty() ? "none" : spec, what);
  if (mode != "none" && mode != "auto" && mode != "all")
    throw std::invalid_argument(what + ": unknown mode '" + mode +
                                "', expected none, auto or all");
  o.mode = mode;
  for (auto &[key, value] : kv) {
    double *target = key == "link"          ? &o.linkBandwidth
                     : key == "flops"       ? &o.deviceFlops
                     : key == "hbm"         ? &o.memoryBandwidth
                     : key == "max_exposed" ? &o.maxExposed
                                            : nullptr;
    if (key == "min_bytes")
      o.minBytes = toCount(what, key, value);
    else if (!target)
      throw std::invalid_argument(what + ": unknown key '" + key +
                                  "', expected link, flops, hbm, "
                                  "max_exposed or min_bytes");
    else
      *target = toDouble(what, key, value);
    if (target && (*target < 0 || (*target == 0 && key != "max_exposed")))
      throw std::invalid_argument(what + ": " + key + " = " + value +
                                  " must be positive");
  }
  return o;
}

ShardOptions ShardOptions::parse(const std::string &spec, int64_t worldSize) {
  ShardOptions o;
  auto [mode, kv] = splitSpec(spec.empty() ? "none" : spec, "--shard");
  for (auto &[key, value] : kv) {
    if (key == "prefetch") {
      if (mode != "zero3")
        throw std::invalid_argument("--shard: prefetch applies to zero3 "
                                    "only (params gathered before use), not "
                                    "to " + mode);
      if (value != "0" && value != "1")
        throw std::invalid_argument("--shard: prefetch = " + value +
                                    " must be 0 or 1");
      o.prefetch = value == "1";
      continue;
    }
    if (key != "bucket")
      throw std::invalid_argument("--shard: unknown key '" + key +
                                  "', expected bucket or prefetch");
    o.bucketBytes = value == "0" ? 0
                                 : static_cast<int64_t>(
                                       parseBytes("--shard: bucket", value));
  }
  o.mode = mode;
  if (mode.rfind("tp:", 0) == 0) {
    o.mode = "tp";
    std::string t = mode.substr(3);
    if (t.empty() || t.size() > 6 ||
        t.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(t) < 1)
      throw std::invalid_argument("--shard: '" + mode +
                                  "' must be tp:T with T >= 1 ranks per "
                                  "tensor-parallel group");
    o.tp = std::stoll(t);
  }
  if (o.mode != "none" && o.mode != "dp" && o.mode != "zero1" &&
      o.mode != "zero2" && o.mode != "zero3" && o.mode != "tp")
    throw std::invalid_argument("--shard: unknown mode '" + mode +
                                "', expected dp, zero1, zero2, zero3 or "
                                "tp:T");
  if (worldSize < 1)
    throw std::invalid_argument("--world-size: " + std::to_string(worldSize) +
                                " must be >= 1");
  if (o.mode == "none" && worldSize != 1)
    throw std::invalid_argument("--world-size=" + std::to_string(worldSize) +
                                " needs --shard=dp|zero1|zero2|zero3|tp:T");
  if (o.mode == "tp" && worldSize % o.tp != 0)
    throw std::invalid_argument(
        "--shard=tp:" + std::to_string(o.tp) + ": --world-size=" +
        std::to_string(worldSize) + " must be a multiple of " +
        std::to_string(o.tp) + " (world-size / T data-parallel groups)");
  o.worldSize = worldSize;
  return o;
}

double learningRate(const TrainOptions &options, int64_t s) {
  const ScheduleOptions &sc = options.schedule;
  double lr = options.optimizer.lr.value_or(1e-3);
  auto sd = static_cast<double>(s);
  if (s < sc.warmup)
    return lr * (sd + 1) / static_cast<double>(sc.warmup);
  if (sc.kind == ScheduleOptions::Kind::Constant)
    return lr;
  double span = static_cast<double>(std::max<int64_t>(1, sc.total - sc.warmup));
  double p = std::min(1.0, (sd - static_cast<double>(sc.warmup)) / span);
  double shape = sc.kind == ScheduleOptions::Kind::Cosine
                     ? 0.5 * (1 + std::cos(M_PI * p))
                     : 1 - p;
  return lr * (sc.minRatio + (1 - sc.minRatio) * shape);
}

} // namespace step
