#include "gantt_svg.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dash_attn::model {
namespace {

constexpr double kChartWidth = 960;  // pixels for the longest makespan
constexpr double kLeft = 70;         // room for the worker labels
constexpr double kRow = 18;
constexpr double kLane = 7;          // overlapped mode: the writer lane
constexpr double kTitle = 22;
constexpr double kPanelGap = 14;

// Head colours, light enough for black labels.
constexpr const char* kHeadColors[] = {"#8fb8de", "#9fd49f", "#c7a6e0", "#f0c987", "#8fd3cf", "#e5a3b5"};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

std::string gantt_svg(const std::vector<GanttPanel>& panels) {
  double longest = 0;
  bool any_lane = false;
  for (const GanttPanel& p : panels) {
    longest = std::max(longest, p.sim->makespan);
    for (const auto& timeline : p.sim->timelines)
      for (const Segment& s : timeline) any_lane = any_lane || s.on_writer;
  }
  const double scale = longest > 0 ? kChartWidth / longest : 1.0;
  const double row = kRow + (any_lane ? kLane : 0);
  double height = 30;  // legend
  for (const GanttPanel& p : panels) height += kTitle + row * p.sim->timelines.size() + kPanelGap;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(kLeft + kChartWidth + 20) << "\" height=\""
      << fmt(height) << "\" font-family=\"sans-serif\" font-size=\"10\">\n"
      << "<defs><pattern id=\"wait\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#999999\" stroke-width=\"2\"/></pattern></defs>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  double y = 4;
  for (const GanttPanel& p : panels) {
    svg << "<text x=\"4\" y=\"" << fmt(y + 14) << "\" font-size=\"12\" font-weight=\"bold\">" << p.title << "</text>\n";
    y += kTitle;
    for (std::size_t w = 0; w < p.sim->timelines.size(); ++w) {
      svg << "<text x=\"4\" y=\"" << fmt(y + kRow - 5) << "\">worker " << w << "</text>\n";
      for (const Segment& s : p.sim->timelines[w]) {
        const double x = kLeft + s.start * scale, width = std::max(0.5, (s.end - s.start) * scale);
        const bool lane = s.on_writer;
        const double top = lane ? y + kRow : y + 1, h = lane ? kLane - 1 : kRow - 2;
        const TraceChain& chain = p.trace->chains[s.chain];
        std::string fill;
        switch (s.kind) {
          case SegmentKind::kCompute: fill = kHeadColors[(chain.batch * 7 + chain.head_q) % 6]; break;
          case SegmentKind::kReduce:
          case SegmentKind::kDkvReduce: fill = "#f28e2b"; break;
          case SegmentKind::kPrologue:
          case SegmentKind::kEpilogue: fill = "#555555"; break;
          default: fill = "url(#wait)"; break;
        }
        svg << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(top) << "\" width=\"" << fmt(width) << "\" height=\"" << fmt(h)
            << "\" fill=\"" << fill << "\" stroke=\"white\" stroke-width=\"0.5\"/>\n";
        if (s.kind == SegmentKind::kCompute && width >= 26) {
          svg << "<text x=\"" << fmt(x + width / 2) << "\" y=\"" << fmt(top + h - 5) << "\" text-anchor=\"middle\">"
              << chain.kv << "," << chain.steps[s.step].q << "</text>\n";
        }
      }
      y += row;
    }
    svg << "<text x=\"" << fmt(kLeft + p.sim->makespan * scale + 3) << "\" y=\"" << fmt(y - 4) << "\">"
        << fmt(p.sim->makespan) << "</text>\n";
    y += kPanelGap;
  }
  const char* legend[][2] = {{"#8fb8de", "compute kv,q (colour: head)"},
                             {"#f28e2b", "dQ add"},
                             {"url(#wait)", "wait (rank or buffer)"},
                             {"#555555", "prologue/epilogue"}};
  double x = kLeft;
  for (const auto& entry : legend) {
    svg << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"14\" height=\"10\" fill=\"" << entry[0] << "\"/>"
        << "<text x=\"" << fmt(x + 18) << "\" y=\"" << fmt(y + 9) << "\">" << entry[1] << "</text>\n";
    x += 190;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace dash_attn::model
