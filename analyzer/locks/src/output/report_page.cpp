#include "lockscope/locks/report_page.hpp"

#include "lockscope/locks/permit_text.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/event_text.hpp"
#include "output/report_assets.hpp"
#include "output/append_format.hpp"

namespace lockscope::locks {

namespace {

std::string utc_time(std::int64_t us) {
  const std::time_t s = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:06} UTC", buf, us % 1'000'000);
}

// A block's element id: its position among the blocks drawn.
std::string block_id(std::size_t i) { return fmt::format("lock-{}", i); }

// The SVG definitions the marks refer to: the waits' hatching, the notifications'
// arrow head and the clip that keeps marks off the lane labels.
void append_defs(std::string& out, const swimlane_geometry& g) {
  append_format(out,
                "<defs><pattern id=\"ls-hatch\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
                "patternTransform=\"rotate(45)\"><rect class=\"hatch-bg\" width=\"6\" height=\"6\"/>"
                "<line class=\"hatch-line\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\"/></pattern>"
                "<marker id=\"ls-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
                "markerHeight=\"7\" orient=\"auto-start-reverse\"><path class=\"arrow-head\" d=\"M0,0L10,5L0,10z\"/>"
                "</marker><clipPath id=\"ls-clip\" clipPathUnits=\"userSpaceOnUse\"><rect x=\"{:.1f}\" y=\"-10\" "
                "width=\"{:.1f}\" height=\"100000\"/></clipPath></defs>",
                g.left, g.width);
}

void append_axis(std::string& out, const swimlane_geometry& g, double y) {
  const std::int64_t span = std::max<std::int64_t>(1, g.end_us - g.start_us);
  const std::int64_t step = axis_step(span, 10);
  for (std::int64_t t = 0; t <= span; t += step) {
    const double x = g.left + static_cast<double>(t) / static_cast<double>(span) * g.width;
    append_format(out, "<line class=\"tick\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", x, y - 6, x,
                  y);
    append_format(out, "<text class=\"tick-label\" x=\"{:.1f}\" y=\"{:.1f}\">+", x + 2, y - 8);
    append_xml_escaped(out, axis_label(t, step));
    out += "</text>";
  }
}

std::string duration_cell(std::int64_t us, bool at_least = false) {
  return us < 0 ? std::string("-") : (at_least ? "≥" : "") + format_duration(us);
}

void append_cell(std::string& out, std::string_view text, double sort_value, std::string_view cls = {}) {
  append_format(out, "<td data-v=\"{}\"{}{}{}>", sort_value, cls.empty() ? "" : " class=\"", cls,
                cls.empty() ? "" : "\"");
  append_xml_escaped(out, text);
  out += "</td>";
}

// A cell with a small bar: `share` of the column's largest value.
void append_bar_cell(std::string& out, std::string_view text, double sort_value, double share) {
  append_format(out, "<td class=\"num\" data-v=\"{}\"><span class=\"bar\" style=\"width:{:.0f}%\"></span>", sort_value,
                std::clamp(share, 0.0, 1.0) * 100);
  append_xml_escaped(out, text);
  out += "</td>";
}

// Text inside an element (a <template>): only & and < need escaping, and the text is
// UTF-8 already (JSONL lines, our SVG markup).
void append_text_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else out += c;
  }
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

}  // namespace

std::vector<summary_row> summary_rows(const lock_timeline& timeline, const std::vector<swimlane_block>& blocks) {
  std::map<std::string, std::size_t, std::less<>> drawn;
  for (std::size_t i = 0; i < blocks.size(); ++i) drawn.emplace(block_key(blocks[i].name, blocks[i].db), i);
  std::vector<summary_row> rows;
  std::vector<std::pair<std::string, std::string>> name_server;  // per row
  std::map<std::string, int, std::less<>> locks_of_name;  // a name on several servers says which
  timeline.for_each_lock([&](std::string_view lock, const lock_stats& s) {
    auto key = block_key(lock, s.db);
    if (drawn.find(key) == drawn.end()) return;
    summary_row r;
    r.block_key = std::move(key);
    r.stats = s;
    r.stats.server = {};  // the views are the timeline's
    r.stats.hold_us = {};
    r.stats.wait_us = {};
    name_server.emplace_back(std::string(lock), std::string(s.server));
    ++locks_of_name[std::string(lock)];
    rows.push_back(std::move(r));
  });
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, server] = name_server[i];
    rows[i].title =
        lock_title(name, server, rows[i].stats.db, locks_of_name[name] > 1 && !server.empty(), rows[i].stats.db != 0);
  }
  return rows;
}

namespace {

// The page's header: the capture's figures, each anomaly kind linked to where it is
// first drawn, and how many locks are drawn.
std::string page_facts(const page_info& info, const std::vector<swimlane_block>& blocks) {
  // Where each anomaly kind is first drawn: the header links there.
  struct first_seen {
    std::int64_t ts = -1;
    std::size_t block = 0;
    std::uint32_t event = 0;
  };
  first_seen firsts[anomaly_kind_count];
  for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
    for (const auto& m : blocks[bi].marks) {
      if (m.kind != mark_kind::anomaly) continue;
      auto& f = firsts[static_cast<std::size_t>(blocks[bi].events[m.event].anomaly)];
      if (f.ts < 0 || m.t0_us < f.ts) f = {m.t0_us, bi, m.event};
    }
  }

  std::string head;
  head += "<h1>lockscope: lock timelines</h1><dl class=\"facts\"><dt>capture</dt><dd>";
  for (std::size_t i = 0; i < info.files.size(); ++i) {
    if (i) head += ", ";
    head += "<code>";
    append_xml_escaped(head, info.files[i]);
    head += "</code>";
  }
  append_format(head, "</dd><dt>span</dt><dd>{} → {} ({})</dd>", utc_time(info.start_us), utc_time(info.end_us),
                format_duration(info.end_us - info.start_us));
  append_format(head,
                "<dt>packets</dt><dd>{}</dd><dt>flows</dt><dd>{} ({} RESP)</dd><dt>exchanges</dt><dd>{}</dd>"
                "<dt>decode gaps</dt><dd>{}</dd><dt>decode errors</dt><dd>{}</dd><dt>kernel drops</dt><dd>",
                info.capture.packets, info.capture.flows, info.capture.resp_flows,
                info.capture.exchanges + info.capture.pushes, info.capture.gaps, info.capture.decode_errors);
  append_xml_escaped(head, info.kernel_drops);
  head += "</dd><dt>anomalies</dt><dd class=\"anomaly-counts\">";
  bool any = false;
  for (std::size_t k = 1; k < anomaly_kind_count; ++k) {
    if (info.anomalies[k] == 0) continue;
    any = true;
    const auto name = to_string(static_cast<anomaly_kind>(k));
    const auto& f = firsts[k];
    if (f.ts >= 0) {
      append_format(head,
                    "<a class=\"anomaly-link\" href=\"#{}\" data-anomaly=\"{}\" data-block=\"{}\" data-i=\"{}\" "
                    "data-t=\"{}\">{} × {}</a> ",
                    block_id(f.block), name, block_id(f.block), f.event, f.ts - info.start_us, name,
                    info.anomalies[k]);
    } else {
      append_format(head,
                    "<span class=\"anomaly-link undrawn\" data-anomaly=\"{}\" title=\"in a lock not drawn\">{} × {}"
                    "</span> ",
                    name, name, info.anomalies[k]);
    }
  }
  if (!any) head += "none";
  head += "</dd></dl>";
  const std::size_t left_out = info.blocks_total > blocks.size() ? info.blocks_total - blocks.size() : 0;
  append_format(head, "<p class=\"left-out\" data-drawn=\"{}\" data-left-out=\"{}\">{} lock{} drawn", blocks.size(),
                left_out, blocks.size(), blocks.size() == 1 ? "" : "s");
  if (left_out > 0) {
    append_format(head, "; {} less active lock{} left out (the {} with the most contention and anomalies, then "
                        "events, are drawn: <code>--html-max-locks N</code>)",
                  left_out, left_out == 1 ? "" : "s", info.max_blocks);
  }
  head += ".</p>";
  return head;
}

// The summary table of the drawn locks (sortable and filtered by the page's script).
std::string summary_table_html(const page_info& info, const std::vector<swimlane_block>& blocks) {
  std::map<std::string, std::size_t, std::less<>> block_index;
  for (std::size_t i = 0; i < blocks.size(); ++i) block_index.emplace(block_key(blocks[i].name, blocks[i].db), i);

  std::string table;
  table +=
      "<div class=\"table-tools\"><input id=\"filter\" type=\"search\" placeholder=\"filter by lock name\" "
      "aria-label=\"filter by lock name\"></div><table id=\"summary\"><thead><tr>"
      "<th data-type=\"text\">lock</th><th>acq</th><th>contended</th><th>hold p50</th><th>hold p99</th>"
      "<th>hold max</th><th>wait p50</th><th>wait p99</th><th>wait max</th><th>renewals</th><th>expiries</th>"
      "<th>anomalies</th></tr></thead><tbody>";
  std::int64_t max_wait_p99 = 1;
  for (const auto& r : info.rows) max_wait_p99 = std::max(max_wait_p99, r.stats.wait.p99);
  for (const auto& r : info.rows) {
    const auto& s = r.stats;
    const auto bi = block_index.find(r.block_key);
    if (bi == block_index.end()) continue;
    append_format(table, "<tr data-block=\"{}\" data-lock=\"", block_id(bi->second));
    append_xml_escaped(table, blocks[bi->second].name);
    table += "\"><td class=\"name\" data-v=\"";
    append_xml_escaped(table, r.title);
    table += "\">";
    append_xml_escaped(table, r.title);
    // A semaphore or latch: its permits beside its name.
    if (const std::string permits = permit_summary(s); !permits.empty()) {
      table += " <span class=\"permits\">(";
      append_xml_escaped(table, permits);
      table += ")</span>";
    }
    table += "</td>";
    append_cell(table, std::to_string(s.acquisitions), static_cast<double>(s.acquisitions), "num");
    const double contended =
        s.acquisitions ? static_cast<double>(s.contended_acquisitions) / static_cast<double>(s.acquisitions) : 0;
    append_bar_cell(table, fmt::format("{:.1f}%", contended * 100), contended, contended);
    append_cell(table, duration_cell(s.hold.p50, s.hold.at_least), static_cast<double>(s.hold.p50), "num");
    append_cell(table, duration_cell(s.hold.p99, s.hold.at_least), static_cast<double>(s.hold.p99), "num");
    append_cell(table, duration_cell(s.hold.max, s.hold.at_least), static_cast<double>(s.hold.max), "num");
    append_cell(table, duration_cell(s.wait.p50, s.wait.at_least), static_cast<double>(s.wait.p50), "num");
    append_bar_cell(table, duration_cell(s.wait.p99, s.wait.at_least), static_cast<double>(s.wait.p99),
                    static_cast<double>(std::max<std::int64_t>(0, s.wait.p99)) / static_cast<double>(max_wait_p99));
    append_cell(table, duration_cell(s.wait.max, s.wait.at_least), static_cast<double>(s.wait.max), "num");
    append_cell(table, std::to_string(s.renewals), static_cast<double>(s.renewals), "num");
    append_cell(table, std::to_string(s.expiries), static_cast<double>(s.expiries), "num");
    std::string kinds;
    for (std::size_t k = 1; k < anomaly_kind_count; ++k) {
      if (s.anomalies[k] == 0) continue;
      if (!kinds.empty()) kinds += ", ";
      kinds += fmt::format("{} {}", to_string(static_cast<anomaly_kind>(k)), s.anomalies[k]);
    }
    append_cell(table, kinds.empty() ? "-" : kinds, static_cast<double>(s.anomaly_total()));
    table += "</tr>";
  }
  table += "</tbody></table>";
  return table;
}

// The time axis over the swimlanes, its zoom buttons, and the SVG definitions the
// blocks refer to.
// What each mark means, in the marks' colours (swimlane.css: the same variables, so the
// palette and dark mode follow). Not the marks' classes: the page's script and its tests
// take every .m for a mark of the timeline.
std::string legend_html() {
  struct item {
    const char* swatch;  // SVG inside a 30x16 box
    const char* label;
  };
#define LS_HOLD "fill:var(--c)"
#define LS_TICK "fill:var(--fg)"
#define LS_RED "fill:var(--anomaly)"
  static constexpr item items[] = {
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="3" width="28" height="10"/><rect class="c1" style=")~" LS_HOLD
       R"~(" x="16" y="3" width="13" height="10"/>)~",
       "hold (a colour per owner)"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="3" width="28" height="10"/><rect style=")~" LS_TICK
       R"~(;fill-opacity:0.35" x="8" y="5" width="14" height="6"/>)~",
       "reentrant hold (inset: each level)"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(;fill-opacity:0.28" x="1" y="5" width="28" height="6"/>)~",
       "lease (light: until it would run out)"},
      {R"~(<rect class="c0" style="fill:url(#ls-hatch);stroke:var(--c);stroke-width:1" x="1" y="4" width="28" height="8"/>)~",
       "wait (hatched)"},
      {R"~(<rect class="c0" style="fill:url(#ls-hatch);stroke:var(--c);stroke-width:1" x="1" y="4" width="28" height="8"/>)~"
       R"~(<circle style=")~" LS_TICK R"~(" cx="10" cy="7" r="2.5"/><circle style=")~" LS_TICK R"~(" cx="21" cy="7" r="2.5"/>)~",
       "attempt while waiting"},
      {R"~(<circle style="fill:none;stroke:var(--fg);stroke-width:1" cx="15" cy="7" r="2.5"/>)~",
       "cluster redirect (MOVED/ASK)"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="12" width="28" height="2"/>)~",
       "subscribed to the lock's channel"},
      {R"~(<line style="stroke:var(--line);stroke-width:1.2" x1="3" y1="2" x2="25" y2="13" marker-end="url(#ls-arrow)"/>)~",
       "notification (release → waiter)"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="3" width="13" height="10"/><rect style=")~" LS_TICK
       R"~(" x="14" y="0" width="2" height="16"/>)~",
       "renewal"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="3" width="13" height="10"/><rect style="fill:var(--line)" )~"
       R"~(x="14" y="1" width="2" height="14"/>)~",
       "release"},
      {R"~(<rect style=")~" LS_RED R"~(" x="9" y="0" width="2" height="16"/><rect style=")~" LS_RED
       R"~(" x="19" y="1" width="2" height="14"/>)~",
       "refused renewal / release"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(;fill-opacity:0.28" x="1" y="5" width="13" height="6"/><rect style=")~" LS_RED
       R"~(;fill-opacity:0.55" x="13" y="0" width="3" height="16"/>)~",
       "expiry (the lease ran out)"},
      {R"~(<rect class="c0" style="fill:none;stroke:var(--c);stroke-width:2" x="2" y="3" width="26" height="10"/>)~",
       "RedLock / MultiLock hold (one owner, several keys)"},
      {R"~(<rect style="fill:var(--anomaly-band)" x="0" y="0" width="30" height="16"/><rect style=")~" LS_RED
       R"~(;fill-opacity:0.35;stroke:var(--anomaly);stroke-width:1.5;stroke-dasharray:3 2" x="11" y="1" width="8" )~"
       R"~(height="14"/>)~",
       "anomaly (red, dashed; a band across the lanes)"},
      {R"~(<rect class="c0" style=")~" LS_HOLD R"~(" x="1" y="3" width="9" height="10"/><rect style="fill:var(--muted)" )~"
       R"~(x="12" y="4" width="17" height="8"/>)~",
       "zoomed out: how busy each slice was"},
  };
#undef LS_HOLD
#undef LS_TICK
#undef LS_RED
  std::string out =
      "<figure class=\"legend\" aria-label=\"legend\" style=\"margin:8px 0\"><figcaption>Legend</figcaption>"
      "<ul style=\"display:flex;flex-wrap:wrap;gap:4px 18px;list-style:none;padding:0;margin:4px 0\">";
  for (const item& i : items) {
    out += "<li style=\"display:flex;align-items:center;gap:6px\"><svg width=\"30\" height=\"16\" "
           "aria-hidden=\"true\" style=\"pointer-events:none\">";
    out += i.swatch;
    out += "</svg>";
    out += i.label;
    out += "</li>";
  }
  out += "</ul></figure>";
  return out;
}

std::string timeline_bar(const page_info& info, const swimlane_geometry& g) {
  std::string out;
  append_format(out,
                "<div id=\"timeline\" data-start-us=\"{}\" data-span-us=\"{}\" data-left=\"{}\" data-width=\"{}\" "
                "data-fine-limit=\"{}\"><div id=\"axis-bar\"><div class=\"zoom\"><button id=\"zoom-out\" "
                "title=\"zoom out (-)\">−</button><button id=\"zoom-in\" title=\"zoom in (+)\">+</button>"
                "<button id=\"zoom-reset\" title=\"whole capture (0)\">whole capture</button> "
                "<span class=\"hint\">wheel over the axis or ctrl+wheel: zoom · drag: pan</span></div>"
                "<svg id=\"axis\" width=\"{:.0f}\" height=\"26\">",
                info.start_us, std::max<std::int64_t>(1, info.end_us - info.start_us), g.left, g.width, g.fine_limit,
                g.left + g.width);
  append_axis(out, g, 24);
  out += "</svg></div><svg class=\"defs\" width=\"0\" height=\"0\" aria-hidden=\"true\">";
  append_defs(out, g);
  out += "</svg>";
  return out;
}

// One block: its title, its swimlanes, its marks kept aside when drawn coarse, and its
// events' JSONL lines.
void append_block_section(std::string& out, const swimlane_block& b, std::size_t i, const swimlane_geometry& g) {
  const block_svg svg = layout_block(b, g);
  append_format(out, "<section class=\"block\" id=\"{}\" data-lock=\"", block_id(i));
  append_xml_escaped(out, b.name);
  // Its size while off screen, where the browser does not lay it out (page.css).
  append_format(out,
                "\" data-db=\"{}\" data-lanes=\"{}\" data-marks=\"{}\"{} style=\"contain-intrinsic-size:auto "
                "{:.0f}px\"><h2>",
                b.db, b.lanes.size(), b.marks.size(), svg.coarse.empty() ? "" : " data-coarse=\"1\"",
                svg.height + 36);
  append_xml_escaped(out, b.name);
  if (b.db != 0) append_format(out, " <small>db {}</small>", b.db);
  if (b.several_servers()) out += " <small>one lane per server and owner</small>";
  if (!svg.coarse.empty()) {
    append_format(out, " <small class=\"coarse-note\">{} marks: drawn coarse (how busy each slice was) until "
                       "zoomed in</small>",
                  b.marks.size());
  }
  if (b.events_dropped > 0) {
    append_format(out, " <small class=\"dropped\">the last {} of {} events are not drawn (at most {} a lock)</small>",
                  b.events_dropped, b.events_seen, b.events.size());
  }
  append_format(out, "</h2><svg class=\"lanes\" width=\"{:.0f}\" height=\"{:.0f}\">", g.left + g.width, svg.height);
  out += svg.lanes;
  out += "<g class=\"marks\" clip-path=\"url(#ls-clip)\">";
  if (svg.coarse.empty()) {
    out += svg.marks;
    out += "</g>";
  } else {
    out += svg.coarse;
    out += "</g><g class=\"fine\" clip-path=\"url(#ls-clip)\"></g>";
  }
  out += "</svg>";
  // Text in inert <template>s, not <script>s: the parser does not stop at each one
  // (5,000 blocks with a <script> each took 4x as long to open).
  if (!svg.coarse.empty()) {
    // The marks, parsed only when zoomed in far enough.
    out += "<template class=\"fine-marks\">";
    append_text_escaped(out, svg.marks);
    out += "</template>";
  }
  // The events' JSONL lines, for the tooltips.
  out += "<template class=\"events\">";
  for (const auto& ev : b.events) {
    append_text_escaped(out, b.json(ev));
    out += '\n';
  }
  out += "</template></section>";
}

}  // namespace

void write_html_page(const page_info& info, const std::vector<swimlane_block>& blocks, const swimlane_geometry& g,
                     const std::function<void(std::string_view)>& write) {
  const std::string head = page_facts(info, blocks);
  const std::string table = summary_table_html(info, blocks);
  const std::string page = replace_all(
      replace_all(replace_all(std::string(report_assets::page_html), "{{CSS}}",
                              std::string(report_assets::swimlane_css) + std::string(report_assets::page_css)),
                  "{{JS}}", report_assets::page_js),
      "{{TITLE}}", info.files.empty() ? std::string("lockscope") : "lockscope: " + info.files.front());
  const auto body_at = page.find("{{BODY}}");
  write(std::string_view(page).substr(0, body_at));
  write(head);
  write(table);
  write(legend_html());
  write(timeline_bar(info, g));
  std::string out;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    out.clear();
    append_block_section(out, blocks[i], i, g);
    write(out);
  }
  write("</div>");
  write(std::string_view(page).substr(body_at + 8));
}

void write_svg_page(const page_info& info, const swimlane_block& block, const swimlane_geometry& g,
                    const std::function<void(std::string_view)>& write) {
  swimlane_geometry fine = g;
  fine.fine_limit = static_cast<std::size_t>(-1);  // no script to load them later: every mark now
  const block_svg svg = layout_block(block, fine);
  const double axis_h = 44, legend_h = 22;
  const double width = g.left + g.width + 10, height = axis_h + svg.height + legend_h;
  std::string out;
  append_format(out,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                "class=\"lockscope-svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
                "data-lock=\"",
                width, height, width, height);
  append_xml_escaped(out, block.name);
  append_format(out, "\" data-db=\"{}\" data-start-us=\"{}\">", block.db, info.start_us);
  out += "<style>";
  out += report_assets::swimlane_css;
  out += "</style>";
  append_defs(out, g);
  append_format(out, "<rect class=\"bg\" width=\"{:.0f}\" height=\"{:.0f}\"/><text class=\"title\" x=\"4\" y=\"14\">",
                width, height);
  append_xml_escaped(out, block.name);
  if (block.db != 0) append_format(out, " (db {})", block.db);
  out += " — ";
  append_xml_escaped(out, utc_time(info.start_us));
  out += " + time</text>";
  append_axis(out, g, axis_h - 2);
  append_format(out, "<g transform=\"translate(0,{:.0f})\">", axis_h);
  out += svg.lanes;
  out += "<g class=\"marks\" clip-path=\"url(#ls-clip)\">";
  out += svg.marks;
  out += "</g></g>";
  append_format(out,
                "<text class=\"legend\" x=\"4\" y=\"{:.0f}\">solid: hold (inset: reentrant level) · light: lease · "
                "hatched: wait (dots: attempts) · thin line: subscription · arrow: notification · red: anomaly"
                "</text></svg>\n",
                height - 6);
  write(out);
}

}  // namespace lockscope::locks
