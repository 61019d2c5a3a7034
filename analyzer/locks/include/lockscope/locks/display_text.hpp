// How texts from the wire are shown: below the stages, for any stage that writes a
// name from the wire where a person reads it.
#pragma once

#include <string_view>

namespace lockscope::locks {

// A name from the wire as the text outputs show it: each control byte (C0, DEL), each
// byte that is not UTF-8, and both bytes of a C1 control written as UTF-8 become '?', so
// that no escape sequence reaches a terminal and the length stays. The view is valid
// until the next call on the same thread.
std::string_view printable(std::string_view s);

}  // namespace lockscope::locks
