//===- SharedSegments.cpp - One copy of the code tensors share ------------===//
//
// See SharedSegments.h.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/SharedSegments.h"

#include "compiler/codegen/EmitUtil.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>

namespace step::codegen::detail {

namespace {

bool wordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// `code` with every identifier in<d+>, out<d+>, vx<d+> and vy<d+> renamed,
/// each prefix numbered in order of first use (in7 in5 in7 -> sin0 sin1
/// sin0; out -> sout; vx and vy keep their prefix: the kernel's own
/// in<k>/out<k> stay visible beside the renamed pointers). `pointers` gets
/// the original in<k>, then out<k>, in their new order. No other generated
/// name has these forms.
std::string canonicalize(const std::string &code,
                         std::vector<std::string> &pointers) {
  static const char *const prefixes[] = {"in", "out", "vx", "vy"};
  std::map<std::string, std::map<std::string, std::string>> renamed;
  std::vector<std::string> ins, outs;
  std::string out;
  out.reserve(code.size());
  for (size_t i = 0; i < code.size();) {
    if (!wordChar(code[i]) || (i > 0 && wordChar(code[i - 1]))) {
      out += code[i++];
      continue;
    }
    size_t j = i;
    while (j < code.size() && wordChar(code[j]))
      ++j;
    std::string id = code.substr(i, j - i);
    i = j;
    const char *prefix = nullptr;
    for (const char *p : prefixes) {
      size_t n = std::strlen(p);
      if (id.size() > n && id.compare(0, n, p) == 0 &&
          std::all_of(id.begin() + n, id.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
          }))
        prefix = p;
    }
    if (!prefix) {
      out += id;
      continue;
    }
    bool in = std::strcmp(prefix, "in") == 0,
         outPtr = std::strcmp(prefix, "out") == 0;
    std::string to = in ? "sin" : outPtr ? "sout" : prefix;
    auto &names = renamed[prefix];
    auto [it, fresh] = names.emplace(id, to + std::to_string(names.size()));
    if (fresh && in)
      ins.push_back(id);
    if (fresh && outPtr)
      outs.push_back(id);
    out += it->second;
  }
  pointers = ins;
  pointers.insert(pointers.end(), outs.begin(), outs.end());
  return out;
}

/// The declaration of kernel parameter `param` ("in3", "out0") of `op`,
/// as `const T *as` / `T *as`.
std::string paramDecl(mlir::Operation *op, const std::string &param,
                      const std::string &as) {
  bool in = param.rfind("in", 0) == 0;
  unsigned k = static_cast<unsigned>(std::stoul(param.substr(in ? 2 : 3)));
  mlir::Value v = in ? op->getOperand(k) : op->getResult(k);
  return std::string(in ? "const " : "") + cType(elemOf(v.getType())) + " *" +
         as;
}

/// `code` with each placeholder `${vars[i].name}` replaced by values[i]
/// (nothing else: generated code may hold any text).
std::string fill(std::string code, const std::vector<SegmentVar> &vars,
                 const std::vector<std::string> &values) {
  for (size_t v = 0; v < vars.size(); ++v) {
    std::string from = "${" + vars[v].name + "}";
    for (size_t at = code.find(from); at != std::string::npos;
         at = code.find(from, at + values[v].size()))
      code.replace(at, from.size(), values[v]);
  }
  return code;
}

/// Whether `code` holds the identifier `id` as a whole word.
bool mentions(const std::string &code, const std::string &id) {
  for (size_t at = code.find(id); at != std::string::npos;
       at = code.find(id, at + 1))
    if ((at == 0 || !wordChar(code[at - 1])) &&
        (at + id.size() == code.size() || !wordChar(code[at + id.size()])))
      return true;
  return false;
}

/// A segment's renamed code.
struct Renamed {
  std::string head, loop;
  std::vector<std::string> args; ///< the kernel pointers sin<m>, sout<m> are
};

} // namespace

std::vector<std::string> shareSegments(mlir::Operation *op,
                                       const std::vector<SegmentCode> &segs,
                                       const std::string &by,
                                       std::string &after) {
  const char kSplit = '\x01'; // no identifier holds it
  std::vector<Renamed> renamed(segs.size());
  std::map<std::string, std::vector<size_t>> users;
  for (size_t u = 0; u < segs.size(); ++u) {
    const SegmentCode &sc = segs[u];
    Renamed &r = renamed[u];
    std::string both = canonicalize(sc.head + kSplit + sc.loop, r.args);
    size_t at = both.find(kSplit);
    r.head = both.substr(0, at);
    r.loop = both.substr(at + 1);
    std::string key;
    for (const std::string &a : r.args)
      key += paramDecl(op, a, "") + "\n";
    for (const SegmentVar &v : sc.vars)
      key += v.type + " " + v.name + "\n";
    users[key + both].push_back(u);
  }
  std::vector<std::string> leaves(segs.size());
  for (size_t u = 0; u < segs.size(); ++u) {
    std::vector<std::string> literals;
    for (const SegmentVar &v : segs[u].vars)
      literals.push_back(v.literal);
    leaves[u] = segs[u].comment + "{\n" +
                fill(segs[u].head + segs[u].loop, segs[u].vars, literals) +
                "}\n";
  }
  // Codes in order of their first segment (deterministic text).
  std::vector<std::vector<size_t>> shared;
  for (auto &[key, us] : users)
    if (us.size() > 1)
      shared.push_back(us);
  std::sort(shared.begin(), shared.end());
  for (size_t c = 0; c < shared.size(); ++c) {
    const std::vector<size_t> &us = shared[c];
    const Renamed &first = renamed[us.front()];
    const std::vector<SegmentVar> &vars = segs[us.front()].vars;
    size_t nin = 0;
    for (const std::string &a : first.args)
      nin += a.rfind("in", 0) == 0;
    std::vector<std::string> names;
    for (size_t a = 0; a < first.args.size(); ++a)
      names.push_back(std::string(a < nin ? "sin" : "sout") +
                      std::to_string(a < nin ? a : a - nin));
    // Per pointer: whether the head reads it (bound before the head), and
    // whether every segment of the code passes the same one (a step, a
    // learning rate, a clip coefficient: bound once, without a switch).
    std::vector<bool> inHead(names.size()), alike(names.size());
    for (size_t a = 0; a < names.size(); ++a) {
      inHead[a] = mentions(first.head, names[a]);
      alike[a] = llvm::all_of(us, [&](size_t u) {
        return renamed[u].args[a] == first.args[a];
      });
    }
    // The pointers the head reads (head) or the others and the numbers
    // (!head), bound by a switch on seg.
    auto bindings = [&](bool head) {
      std::string decls, cases;
      bool any = !head && !vars.empty();
      for (size_t a = 0; a < names.size(); ++a) {
        if (inHead[a] != head)
          continue;
        if (alike[a]) {
          decls += "  " + paramDecl(op, first.args[a], "const " + names[a]) +
                   " = " + first.args[a] + ";\n";
        } else {
          decls += "  " + paramDecl(op, first.args[a], names[a]) + ";\n";
          any = true;
        }
      }
      if (!head)
        for (const SegmentVar &v : vars)
          decls += "  " + v.type + " " + v.name + ";\n";
      if (!any)
        return decls;
      for (size_t k = 0; k < us.size(); ++k) {
        cases += k + 1 < us.size() ? "  case " + std::to_string(us[k]) + ":"
                                   : std::string("  default:");
        for (size_t a = 0; a < names.size(); ++a)
          if (inHead[a] == head && !alike[a])
            cases += " " + names[a] + " = " + renamed[us[k]].args[a] + ";";
        if (!head)
          for (const SegmentVar &v : segs[us[k]].vars)
            cases += " " + v.name + " = " + v.literal + ";";
        cases += " break;\n";
      }
      return decls + "  switch (seg) {\n" + cases + "  }\n";
    };
    std::string segments;
    for (size_t u : us)
      segments += (segments.empty() ? "" : ", ") + std::to_string(u);
    std::vector<std::string> asLocals;
    for (const SegmentVar &v : vars)
      asLocals.push_back(v.name);
    std::string code = bindings(true) + first.head + bindings(false) +
                       fill(first.loop, vars, asLocals);
    after += by + (c ? "else " : "") + "if (code == " + std::to_string(c) +
             ") { // tensors " + segments + "\n" + indent(code, by) + by +
             "}\n";
    for (size_t u : us)
      leaves[u] = segs[u].comment + "code = " + std::to_string(c) +
                  ", seg = " + std::to_string(u) + ";\n";
  }
  return leaves;
}

std::string dispatchSegments(const std::vector<int64_t> &starts,
                             const std::vector<std::string> &leaves,
                             const std::string &var, const std::string &by) {
  std::function<std::string(size_t, size_t, const std::string &)> tree =
      [&](size_t lo, size_t hi, const std::string &in) -> std::string {
    if (hi - lo == 1)
      return indent(leaves[lo], in);
    size_t mid = (lo + hi) / 2;
    return in + "if (" + var + " < " + std::to_string(starts[mid]) + "u) {\n" +
           tree(lo, mid, in + "  ") + in + "} else {\n" +
           tree(mid, hi, in + "  ") + in + "}\n";
  };
  return leaves.empty() ? std::string() : tree(0, leaves.size(), by);
}

} // namespace step::codegen::detail
