// Generic text display of what comes from the wire: safe names, short owner ids and
// durations. Below the stages: any stage may show a name or a duration (the recognizer
// in its warnings, the outputs everywhere) without depending on an output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockscope::locks {

// A name from the wire as the text outputs show it: each control byte (C0, DEL), each
// byte that is not UTF-8, and both bytes of a C1 control written as UTF-8 become '?', so
// that no escape sequence reaches a terminal and the length stays. The view is valid
// until the next call on the same thread.
std::string_view printable(std::string_view s);

// `80e6bb0b-…:12` → `80e6…:12`; other long values are cut to 8 characters + `…`.
std::string short_owner(std::string_view owner);

// "850µs", "12.3ms", "2.900s"; "-" when negative (not known).
std::string format_duration(std::int64_t us);

}  // namespace lockscope::locks
