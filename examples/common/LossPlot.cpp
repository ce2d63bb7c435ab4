//===- LossPlot.cpp - Loss curve as CSV and as a standalone SVG -----------===//

#include "examples/common/LossPlot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace examples {

namespace {

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f)
    throw std::runtime_error("cannot write " + path);
}

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about
/// `count` ticks over `range`.
double tickStep(double range, int count) {
  double raw = range / count;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw)
      return m * p;
  return 10 * p;
}

/// Escapes the characters XML gives a meaning to.
std::string xmlEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

} // namespace

void writeLossCsv(const std::string &path, const std::vector<LossPoint> &pts) {
  std::ostringstream os;
  os << "step,lr,loss\n";
  for (const LossPoint &p : pts)
    os << p.step << "," << fmt("%.6g", p.lr) << "," << fmt("%.9g", p.loss)
       << "\n";
  writeFile(path, os.str());
}

void writeLossSvg(const std::string &path, const std::vector<LossPoint> &pts,
                  const std::string &title) {
  // Plot area inside a 640x400 canvas, margins for the labels.
  const double width = 640, height = 400, left = 60, right = 20, top = 40,
               bottom = 50;
  const double plotW = width - left - right, plotH = height - top - bottom;

  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (!pts.empty()) {
    x1 = std::max<double>(1, static_cast<double>(pts.back().step));
    auto [lo, hi] = std::minmax_element(
        pts.begin(), pts.end(),
        [](const LossPoint &a, const LossPoint &b) { return a.loss < b.loss; });
    y0 = std::floor(lo->loss);
    y1 = std::max(y0 + 1, std::ceil(hi->loss));
  }
  auto sx = [&](double x) { return left + (x - x0) / (x1 - x0) * plotW; };
  auto sy = [&](double y) { return top + (y1 - y) / (y1 - y0) * plotH; };

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " "
     << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" "
     << "font-size=\"14\">" << xmlEscape(title) << "</text>\n";

  // Grid lines and tick labels.
  double dy = tickStep(y1 - y0, 5);
  for (double y = y0; y <= y1 + 1e-9; y += dy)
    os << "<line x1=\"" << left << "\" x2=\"" << left + plotW << "\" y1=\""
       << sy(y) << "\" y2=\"" << sy(y) << "\" stroke=\"#ddd\"/>\n"
       << "<text x=\"" << left - 6 << "\" y=\"" << sy(y) + 4
       << "\" text-anchor=\"end\">" << fmt("%g", y) << "</text>\n";
  double dx = tickStep(x1 - x0, 6);
  for (double x = x0; x <= x1 + 1e-9; x += dx)
    os << "<line x1=\"" << sx(x) << "\" x2=\"" << sx(x) << "\" y1=\"" << top
       << "\" y2=\"" << top + plotH << "\" stroke=\"#eee\"/>\n"
       << "<text x=\"" << sx(x) << "\" y=\"" << top + plotH + 16
       << "\" text-anchor=\"middle\">" << fmt("%g", x) << "</text>\n";

  // Axes and their names.
  os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plotW
     << "\" height=\"" << plotH << "\" fill=\"none\" stroke=\"black\"/>\n"
     << "<text x=\"" << left + plotW / 2 << "\" y=\"" << height - 12
     << "\" text-anchor=\"middle\">step</text>\n"
     << "<text x=\"16\" y=\"" << top + plotH / 2
     << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
     << top + plotH / 2 << ")\">training loss</text>\n";

  // The curve.
  os << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
        "points=\"";
  for (const LossPoint &p : pts)
    os << fmt("%.1f", sx(static_cast<double>(p.step))) << ","
       << fmt("%.1f", sy(p.loss)) << " ";
  os << "\"/>\n</svg>\n";
  writeFile(path, os.str());
}

} // namespace examples
