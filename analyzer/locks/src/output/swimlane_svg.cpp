#include "lockscope/locks/swimlane_svg.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "lockscope/ingest/message.hpp"
#include "lockscope/locks/display_text.hpp"
#include "output/append_format.hpp"

namespace lockscope::locks {

void append_xml_escaped(std::string& out, std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&': out += "&amp;"; continue;
      case '<': out += "&lt;"; continue;
      case '>': out += "&gt;"; continue;
      case '"': out += "&quot;"; continue;
      case '\'': out += "&#39;"; continue;
      default: break;
    }
    if (u < 0x20) {
      // XML 1.0 has no other control characters (the JSONL has \u00XX).
      if (c == '\t' || c == '\n' || c == '\r') out += fmt::format("&#{};", static_cast<int>(u));
      else out += "\xEF\xBF\xBD";
    } else if (u < 0x80) {
      out += c;
    } else if (const std::size_t n = ingest::utf8_sequence(s, i); n > 0) {
      out.append(s, i, n);
      i += n - 1;
    } else {
      // Not UTF-8: the character U+00XX, as the JSONL's \u00XX reads.
      out += static_cast<char>(0xc0 | (u >> 6));
      out += static_cast<char>(0x80 | (u & 0x3f));
    }
  }
}

std::int64_t axis_step(std::int64_t span_us, int ticks) noexcept {
  const double raw = std::max(1.0, static_cast<double>(span_us) / std::max(1, ticks));
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(nice * p));
}

std::string axis_label(std::int64_t t_us, std::int64_t step_us) {
  // The unit follows the step: µs below 100 µs, ms below 100 ms, s above.
  auto fixed = [](double v, std::int64_t step_in_unit_times_1000) {
    int decimals = 0;
    for (std::int64_t s = step_in_unit_times_1000; decimals < 3 && s % 1000 != 0; s *= 10) ++decimals;
    return fmt::format("{:.{}f}", v, decimals);
  };
  if (step_us < 100) return fmt::format("{}µs", t_us);
  if (step_us < 100'000) return fixed(static_cast<double>(t_us) / 1e3, step_us) + "ms";
  return fixed(static_cast<double>(t_us) / 1e6, step_us / 1000) + "s";
}

int owner_colour(std::string_view owner) noexcept {
  std::uint32_t h = 2166136261u;  // FNV-1a: the same owner gets the same colour in every report
  for (char c : owner) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<int>(h % owner_colours);
}

namespace {

struct mark_writer {
  const swimlane_block& b;
  const swimlane_geometry& g;
  std::string& out;
  const std::vector<int>& colours;  // per lane
  double x(std::int64_t t) const {
    const double span = static_cast<double>(std::max<std::int64_t>(1, g.end_us - g.start_us));
    return g.left + static_cast<double>(t - g.start_us) / span * g.width;
  }
  double lane_y(std::uint16_t lane) const { return g.top + lane * (g.lane_height + g.lane_gap); }
  void attrs(const swimlane_mark& m) {
    const auto& ev = b.events[m.event];
    out += " data-lock=\"";
    append_xml_escaped(out, b.name);
    out += "\" data-owner=\"";
    append_xml_escaped(out, b.owner(ev));
    out += "\" data-event=\"";
    out += to_string(ev.event);
    out += '"';
    if (ev.event == lock_event_kind::anomaly) {
      out += " data-anomaly=\"";
      out += to_string(ev.anomaly);
      out += '"';
    }
    append_format(out, " data-i=\"{}\" data-t0=\"{}\" data-t1=\"{}\"", m.event, m.t0_us - g.start_us,
                  m.t1_us - g.start_us);
  }
  void rect(const swimlane_mark& m, std::string_view cls, double y, double h, double min_w) {
    const double x0 = x(m.t0_us);
    const double w = std::max(min_w, x(m.t1_us) - x0);
    append_format(out, "<rect class=\"m {} c{}{}{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"", cls,
                  colours[m.lane], m.open ? " open" : "", m.before_capture ? " before" : "", x0, y, w, h);
    append_format(out, " data-w=\"{}\"", min_w);
    attrs(m);
    out += "/>";
  }
  void write(const swimlane_mark& m, double block_height) {
    const double y = lane_y(m.lane), h = g.lane_height;
    switch (m.kind) {
      case mark_kind::hold: rect(m, "hold", y + 3, h - 6, 1); break;
      case mark_kind::reenter: {
        const double inset = std::min(2.0 * (m.depth - 1), (h - 6) / 2 - 1);
        rect(m, fmt::format("reenter d{}", std::min<int>(m.depth, 9)), y + 3 + inset, h - 6 - 2 * inset, 1);
        break;
      }
      case mark_kind::lease: rect(m, "lease", y + 5, h - 10, 1); break;
      case mark_kind::renewal: rect(m, m.failed ? "renewal failed" : "renewal", y, h, 2); break;
      case mark_kind::release: rect(m, m.failed ? "release failed" : "release", y + 1, h - 2, 2); break;
      case mark_kind::expiry: rect(m, "expiry", y, h, 3); break;
      case mark_kind::gave_up: rect(m, "gave-up", y + 2, h - 4, 3); break;
      case mark_kind::wait: rect(m, "wait", y + 4, h - 10, 1); break;
      case mark_kind::subscription: rect(m, "subscription", y + h - 4, 2, 1); break;
      case mark_kind::anomaly: rect(m, "anomaly", y + 1, h - 2, 4); break;
      case mark_kind::anomaly_band: rect(m, "anomaly-band", 0, block_height, 2); break;
      case mark_kind::group: rect(m, "group", y + 3, h - 6, 2); break;
      case mark_kind::retry:
      case mark_kind::redirect:
        append_format(out, "<circle class=\"m {}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\"", to_string(m.kind), x(m.t0_us),
                      y + h / 2 - 1);
        attrs(m);
        out += "/>";
        break;
      case mark_kind::notification:
        append_format(out,
                      "<line class=\"m notification\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                      "marker-end=\"url(#ls-arrow)\"",
                      x(m.t0_us), lane_y(m.from_lane) + h / 2, x(m.t1_us), y + h / 2);
        attrs(m);
        out += "/>";
        break;
    }
  }
};

// Marks drawn under others come first.
int paint_order(mark_kind k) {
  switch (k) {
    case mark_kind::anomaly_band: return 0;
    case mark_kind::lease: return 1;
    case mark_kind::wait: return 2;
    case mark_kind::subscription: return 2;
    case mark_kind::hold: return 3;
    case mark_kind::group: return 3;
    case mark_kind::reenter: return 4;
    case mark_kind::anomaly: return 7;
    case mark_kind::notification: return 6;
    default: return 5;
  }
}

}  // namespace

block_svg layout_block(const swimlane_block& b, const swimlane_geometry& g) {
  block_svg r;
  const auto lanes = std::max<std::size_t>(1, b.lanes.size());
  r.height = g.top * 2 + static_cast<double>(lanes) * (g.lane_height + g.lane_gap);
  // Each owner its own colour, the same in every block and report, unless another
  // owner of this block has it already: then the next one free. An owner's lanes on
  // several servers share its colour.
  std::vector<int> colours;
  std::vector<bool> used(owner_colours, false);
  std::map<std::string_view, int> colour_of;
  for (const auto& l : b.lanes) {
    auto known = colour_of.find(l.owner);
    if (known != colour_of.end()) {
      colours.push_back(known->second);
      continue;
    }
    int c = owner_colour(l.owner);
    for (int k = 0; k < owner_colours && used[static_cast<std::size_t>(c)]; ++k) {
      c = (c + 1) % owner_colours;
    }
    used[static_cast<std::size_t>(c)] = true;
    if (std::all_of(used.begin(), used.end(), [](bool u) { return u; })) used.assign(owner_colours, false);
    colour_of.emplace(l.owner, c);
    colours.push_back(c);
  }
  mark_writer w{b, g, r.lanes, colours};
  const bool with_server = b.several_servers();
  for (std::size_t i = 0; i < b.lanes.size(); ++i) {
    const auto& l = b.lanes[i];
    const double y = w.lane_y(static_cast<std::uint16_t>(i));
    append_format(r.lanes, "<rect class=\"lane{}\" x=\"0\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>",
                  i % 2 ? " odd" : "", y, g.left + g.width, g.lane_height);
    std::string label = l.group ? "group " : "";
    label += l.owner.empty() ? std::string("(owner unknown)") : short_owner(l.owner);
    if (with_server && !l.group && !l.server.empty()) label += " @" + l.server;
    append_format(r.lanes, "<text class=\"lane-label\" x=\"4\" y=\"{:.1f}\">", y + g.lane_height - 5);
    append_xml_escaped(r.lanes, label);
    r.lanes += "<title>";
    append_xml_escaped(r.lanes, l.owner);
    if (!l.server.empty()) {
      r.lanes += " @ ";
      append_xml_escaped(r.lanes, l.server);
    }
    r.lanes += "</title></text>";
  }
  std::vector<std::uint32_t> order(b.marks.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t c) {
    return paint_order(b.marks[a].kind) < paint_order(b.marks[c].kind);
  });
  mark_writer mw{b, g, r.marks, colours};
  for (auto i : order) mw.write(b.marks[i], r.height);
  if (b.marks.size() > g.fine_limit && g.end_us > g.start_us) {
    // Per lane and slice of time: the share of it held and waited, as shaded cells.
    const std::size_t bins = g.coarse_bins;
    std::vector<double> held(lanes * bins, 0), waited(lanes * bins, 0);
    const double bin_us = static_cast<double>(g.end_us - g.start_us) / static_cast<double>(bins);
    auto add = [&](std::vector<double>& v, const swimlane_mark& m) {
      const double a = static_cast<double>(m.t0_us - g.start_us), z = static_cast<double>(m.t1_us - g.start_us);
      for (auto k = static_cast<std::size_t>(std::clamp(a / bin_us, 0.0, double(bins - 1)));
           k < bins && static_cast<double>(k) * bin_us <= z; ++k) {
        const double lo = std::max(a, static_cast<double>(k) * bin_us);
        const double hi = std::min(z, static_cast<double>(k + 1) * bin_us);
        if (hi > lo) v[m.lane * bins + k] += (hi - lo) / bin_us;
      }
    };
    for (const auto& m : b.marks) {
      if (m.kind == mark_kind::hold) add(held, m);
      else if (m.kind == mark_kind::wait) add(waited, m);
    }
    for (std::size_t l = 0; l < lanes && l < b.lanes.size(); ++l) {
      const double y = w.lane_y(static_cast<std::uint16_t>(l));
      for (std::size_t k = 0; k < bins; ++k) {
        const double t0 = static_cast<double>(k) * bin_us, t1 = t0 + bin_us;
        for (int which = 0; which < 2; ++which) {
          const double share = std::min(1.0, (which == 0 ? held : waited)[l * bins + k]);
          if (share <= 0) continue;
          const double px_per_us = g.width / static_cast<double>(g.end_us - g.start_us);
          append_format(r.coarse,
                        "<rect class=\"m coarse {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
                        "fill-opacity=\"{:.2f}\" data-w=\"1\" data-lock=\"",
                        which == 0 ? "hold" : "wait", g.left + t0 * px_per_us, y + (which == 0 ? 3 : g.lane_height / 2),
                        bin_us * px_per_us, g.lane_height / 2 - 3, 0.25 + 0.75 * share);
          append_xml_escaped(r.coarse, b.name);
          r.coarse += "\" data-owner=\"";
          append_xml_escaped(r.coarse, b.lanes[l].owner);
          append_format(r.coarse, "\" data-event=\"coarse\" data-t0=\"{:.0f}\" data-t1=\"{:.0f}\"/>", t0, t1);
        }
      }
    }
  }
  return r;
}

}  // namespace lockscope::locks
