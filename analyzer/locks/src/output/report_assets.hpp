// The report's page template, styles and script (analyzer/locks/report/), compiled in
// by report/embed.cmake.
#pragma once

#include <string_view>

namespace lockscope::locks::report_assets {

extern const std::string_view page_html;     // {{TITLE}} {{CSS}} {{JS}} {{BODY}}
extern const std::string_view page_css;      // the page's layout
extern const std::string_view swimlane_css;  // the marks' look: the HTML page and the SVG
extern const std::string_view page_js;

}  // namespace lockscope::locks::report_assets
