// Messages to stderr that cannot fail the command: the live library's print_diagnostic,
// which the CLI's commands share.
#pragma once

#include "lockscope/live/diagnostics.hpp"

namespace lockscope::cli {

using live::print_diagnostic;

}  // namespace lockscope::cli
