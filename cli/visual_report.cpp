#include "visual_report.hpp"

#include "lockscope/live/diagnostics.hpp"
#include "capture_edges.hpp"
#include "capture_options.hpp"
#include "output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "lockscope/locks/block_ranking.hpp"
#include "lockscope/ingest/counted.hpp"
#include "lockscope/locks/display_text.hpp"
#include "lockscope/locks/lock_globs.hpp"
#include "lockscope/locks/report_page.hpp"
#include "lockscope/locks/swimlane.hpp"
#include "lockscope/locks/swimlane_svg.hpp"

namespace lockscope::cli {

namespace {

std::string block_title(const std::string& key) {
  const auto nul = key.find('\0');
  const std::string db = key.substr(nul + 1);
  return db == "0" ? key.substr(0, nul) : key.substr(0, nul) + " db " + db;
}

}  // namespace

int no_lock_matched(const std::vector<std::string>& lock_globs, std::uint64_t matching_locks) {
  if (lock_globs.empty() || matching_locks > 0) return 0;
  std::string names;
  for (const std::string& g : lock_globs) names += (names.empty() ? "" : ",") + g;
  live::print_diagnostic("lockscope analyze: --lock {}: no lock of {} in the capture\n", names,
                   lock_globs.size() == 1 ? "that name" : "those names");
  return 2;
}

int run_visual_report(const std::vector<std::string>& files, const locks::analysis_options& analysis,
                      const visual_report_options& options) {
  const char* format = options.svg ? "svg" : "html";
  if (options.svg && options.lock_globs.size() != 1) {
    live::print_diagnostic("lockscope analyze: --format svg needs one --lock NAME (the lock to draw)\n");
    return 2;
  }
  std::function<bool(std::string_view)> selected;
  if (!options.lock_globs.empty()) {
    selected = [&](std::string_view lock) {
      for (const auto& g : options.lock_globs) {
        if (locks::glob_match(g, lock)) return true;
      }
      return false;
    };
  }
  const auto shown = [&](std::string text) {
    return options.spooled_stdin != nullptr ? options.spooled_stdin->shown_as_stdin(std::move(text)) : text;
  };
  auto warn = [&](const std::string& w) { live::print_diagnostic("lockscope analyze: warning: {}\n", shown(w)); };
  auto error = [&](const std::string& e) { live::print_diagnostic("lockscope analyze: error: {}\n", shown(e)); };
  try {
    // Created first, so that a path that cannot be written stops the run before two passes.
    output_file out(options.output == "-" ? std::string() : options.output);
    // Pass 1: which locks to draw.
    locks::block_ranking ranking(options.svg ? 0 : options.max_locks, options.svg ? options.lock_globs.front() : "");
    std::uint64_t forgotten = 0;  // rows given up at --max-locks: neither ranked nor counted
    const auto first = locks::analyze_files_into(
        files, analysis, ranking, selected,
        [&](const locks::lock_timeline& t) {
          ranking.add_stats(t, selected);
          forgotten = t.forgotten().locks;
        },
        warn, error);
    if (first.failed_files > 0) return 1;
    if (const int status = report_port_miss("analyze", files, analysis.capture, first.capture); status != 0) {
      return status;
    }
    // (Every lock is analysed; the ranking counts those --lock takes.)
    if (const int status = no_lock_matched(options.lock_globs, options.lock_globs.empty() ? first.locks + forgotten : ranking.blocks());
        status != 0) {
      return status;
    }
    std::vector<std::string> keys;
    if (options.svg) {
      keys = ranking.matching();
      if (keys.size() != 1) {
        const bool more = keys.size() > locks::block_ranking::max_matches;
        std::string names;
        for (std::size_t i = 0; i < keys.size() && i < locks::block_ranking::max_matches; ++i) {
          names += (i ? ", " : "") + std::string(locks::printable(block_title(keys[i])));  // names from the wire
        }
        if (keys.empty()) {
          live::print_diagnostic("lockscope analyze: --lock {}: no lock of that name in the capture\n",
                     options.lock_globs.front());
        } else {
          live::print_diagnostic("lockscope analyze: --lock {} matches {}{} locks ({}{}): name one\n",
                     options.lock_globs.front(), more ? "more than " : "",
                     more ? locks::block_ranking::max_matches : keys.size(), names, more ? ", …" : "");
        }
        return 2;
      }
    } else {
      keys = ranking.top();
    }

    // Pass 2: the swimlanes of those locks only.
    locks::swimlane_builder builder({}, keys);
    builder.set_capture_start(std::max<std::int64_t>(0, first.first_packet_us));
    locks::page_info info;
    const auto second = locks::analyze_files_into(
        files, analysis, builder, [&](std::string_view lock) { return builder.selects(lock); },
        [&](const locks::lock_timeline& t) { info.rows = locks::summary_rows(t, builder.blocks()); }, {}, {});
    if (second.failed_files > 0 || second.capture.packets != first.capture.packets) {
      live::print_diagnostic("lockscope analyze: the capture files changed while the report was being made\n");
      return 1;
    }
    builder.finish(first.last_packet_us);

    info.files = files;
    for (std::string& f : info.files) f = shown(f);
    info.start_us = std::max<std::int64_t>(0, first.first_packet_us);
    info.end_us = std::max(info.start_us + 1, first.last_packet_us);
    info.capture = first.capture;
    if (first.recorded_drops) info.kernel_drops = file_drops_text(first.recorded_drops);
    std::copy(ranking.anomalies(), ranking.anomalies() + locks::anomaly_kind_count, info.anomalies);
    info.blocks_total = ranking.blocks();
    info.max_blocks = options.max_locks;
    locks::swimlane_geometry geometry;
    geometry.start_us = info.start_us;
    geometry.end_us = info.end_us;
    geometry.fine_limit = options.detail;

    std::size_t bytes = 0;
    auto write = [&](std::string_view s) {
      bytes += s.size();
      out.write(s);
    };
    if (options.svg) locks::write_svg_page(info, builder.blocks().front(), geometry, write);
    else locks::write_html_page(info, builder.blocks(), geometry, write);
    out.commit();
    const bool to_stdout = out.is_stdout();
    live::print_diagnostic(
               "lockscope analyze: {}, {}, {}; {} ({} drawn, {} left out); {} {}{}{}\n",
               ingest::counted(first.capture.packets, "packet"), ingest::counted(first.capture.flows, "flow"),
               ingest::counted(first.capture.exchanges + first.capture.pushes, "exchange"),
               ingest::counted(ranking.blocks(), "lock"), keys.size(), ranking.blocks() - keys.size(), format,
               ingest::counted(bytes, "byte"),
               to_stdout ? "" : " written to ", to_stdout ? "" : options.output);
    if (forgotten > 0) {
      warn(fmt::format("{} idle locks were forgotten at --max-locks {}: the {} ranks, counts and draws only the "
                       "others (--max-locks 0 keeps every lock)",
                       forgotten, analysis.timeline.max_locks, format));
    }
  } catch (const ingest::capture_error& e) {
    live::print_diagnostic("lockscope analyze: {}\n", shown(e.what()));
    return 2;
  } catch (const output_error& e) {
    live::print_diagnostic("lockscope analyze: {}\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace lockscope::cli
