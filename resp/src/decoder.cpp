#include "lockscope/resp/decoder.hpp"

#include <algorithm>
#include <cstring>

#include "lockscope/resp/error.hpp"
#include "number.hpp"

namespace lockscope::resp {

namespace {

bool is_format_byte(char c) noexcept {
  return c != ':' && c != '\r' && c != '\n' && static_cast<unsigned char>(c) > 0x20 &&
         static_cast<unsigned char>(c) < 0x7f;
}

}  // namespace

decoder::decoder(const decoder_options& options) : options_(options) {
  // A few levels up front (lock traffic nests two deep); deeper messages grow it once,
  // and the capacity stays. Reserving max_depth (4 KiB) made every idle connection of
  // the analyzer cost two of them.
  stack_.reserve(std::min<std::size_t>(static_cast<std::size_t>(options_.limits.max_depth) + 1, 8));
}

void decoder::reset() noexcept {
  stack_.clear();
  line_.clear();
  line_pending_ = false;
  state_ = state::header;
  paused_ = false;
  bulk_length_ = bulk_done_ = 0;
  crlf_seen_ = 0;
  top_attribute_pending_ = false;
  consumed_ = 0;
  error_.clear();
  error_offset_ = 0;
}

bool decoder::at_message_boundary() const noexcept {
  return !error_ && stack_.empty() && state_ == state::header && !line_pending_ &&
         !top_attribute_pending_;
}

bool decoder::fail(errc e, std::uint64_t at) noexcept {
  error_ = make_error_code(e);
  error_offset_ = at;
  return false;
}

std::size_t decoder::feed(std::string_view bytes, handler& h) {
  if (error_) return 0;
  paused_ = false;
  base_ = consumed_;
  std::size_t pos = 0;
  while (pos < bytes.size() && !paused_ && !error_) {
    switch (state_) {
      case state::header: {
        if (!line_pending_ && try_fast_header(bytes, pos, h)) break;
        std::string_view line;
        std::uint64_t line_offset = 0;
        if (!take_line(bytes, pos, line, line_offset)) break;
        parse_line(line, line_offset, h);
        line_.clear();
        break;
      }
      case state::bulk_body:
        read_bulk_body(bytes, pos, h);
        break;
      case state::bulk_crlf:
        read_bulk_crlf(bytes, pos, h);
        break;
    }
  }
  consumed_ = base_ + pos;
  return pos;
}

namespace {

// 1 to 18 digits followed by CRLF, starting at p[i] (18 digits cannot overflow).
// Returns the index just past the LF, or 0 when the text is anything else.
inline std::size_t small_decimal_line(const char* p, std::size_t avail, std::size_t i,
                                      std::uint64_t& out) noexcept {
  const std::size_t first = i;
  std::uint64_t v = 0;
  while (i < avail && static_cast<unsigned char>(p[i] - '0') <= 9) {
    v = v * 10 + static_cast<unsigned char>(p[i] - '0');
    ++i;
  }
  if (i == first || i - first > 18 || i + 1 >= avail || p[i] != '\r' || p[i + 1] != '\n') return 0;
  out = v;
  return i + 2;
}

// p[0] and p[1] are CR LF (one 16-bit compare).
inline bool is_crlf(const char* p) noexcept {
  static constexpr char crlf[2] = {'\r', '\n'};
  std::uint16_t have;
  std::uint16_t want;
  std::memcpy(&have, p, 2);
  std::memcpy(&want, crlf, 2);
  return have == want;
}

}  // namespace

// The headers that dominate real traffic ($n, *n, :n) when the whole line is in this
// feed: parsed in place, skipping take_line, parse_line and the bulk state machine;
// a bulk string whose body and CRLF are also here is emitted at once. Anything else,
// including every malformed line, returns false untouched and takes the general path,
// which therefore stays the only place errors are reported.
bool decoder::try_fast_header(std::string_view bytes, std::size_t& pos, handler& h) {
  const char* p = bytes.data() + pos;
  // At the top level of a request stream only '*' is unambiguous: any other first byte
  // may begin an inline command (parse_line tells them apart the same way).
  if (stack_.empty() ? options_.allow_inline && p[0] != '*' : stack_.back().kind == type::bulk_string) return false;
  // Look no further than take_line would before reporting line_too_long.
  const std::size_t avail = std::min(bytes.size() - pos, options_.limits.max_line_length + 2);
  if (avail < 4) return false;
  switch (p[0]) {
    case '$': {
      if (p[1] == '-') {
        // "$-1": RESP2's null, as open_bulk makes it (a lock acquired answers it).
        if (avail < 5 || p[2] != '1' || p[3] != '\r' || p[4] != '\n') return false;
        node n;
        n.type = type::null;
        n.flags = node_flags::null_bulk;
        n.depth = depth();
        pos += 5;
        scalar_completed(n);
        h.on_node(n);
        return true;
      }
      std::uint64_t length = 0;
      const std::size_t body = small_decimal_line(p, avail, 1, length);
      if (body == 0 || length > options_.limits.max_bulk_length) return false;
      if (bytes.size() - pos - body < length + 2) {  // the body spans feeds
        pos += body;
        start_bulk(type::bulk_string, length);
        return true;
      }
      const std::size_t end = body + static_cast<std::size_t>(length);
      if (p[end] != '\r' || p[end + 1] != '\n') return false;
      node n;
      n.type = type::bulk_string;
      n.depth = depth();
      n.length = length;
      n.value = std::string_view(p + body, static_cast<std::size_t>(length));
      pos += end + 2;
      scalar_completed(n);
      h.on_node(n);
      return true;
    }
    case '*': {
      if (stack_.empty() && h.wants_bulk_arrays() && !top_attribute_pending_ && try_bulk_array(bytes, pos, h)) {
        return true;
      }
      std::uint64_t count = 0;
      const std::size_t end = small_decimal_line(p, avail, 1, count);
      if (end == 0 || count > options_.limits.max_aggregate_elements) return false;
      if (count != 0 && stack_.size() >= options_.limits.max_depth) return false;
      node n;
      n.type = type::array;
      n.depth = depth();
      n.length = count;
      pos += end;
      if (count == 0) value_completed(n);
      else stack_.push_back(frame{type::array, false, count, 0, false});
      h.on_node(n);
      return true;
    }
    case ':': {
      const bool negative = p[1] == '-';
      std::uint64_t magnitude = 0;
      const std::size_t end = small_decimal_line(p, avail, negative ? 2 : 1, magnitude);
      if (end == 0) return false;
      node n;
      n.type = type::integer;
      n.depth = depth();
      n.value = std::string_view(p + 1, end - 3);
      n.length = n.value.size();
      n.integer = negative ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude);
      pos += end;
      scalar_completed(n);
      h.on_node(n);
      return true;
    }
    default:
      return false;
  }
}

// A whole `*N` array of bulk strings at the top level, as the general path would accept
// it node by node: every header within max_line_length, every length within the limits,
// every body followed by CRLF, all within this feed. Anything else (a split frame, a
// null, a nested value, any malformed byte) is declined untouched, and the general path
// decodes it or reports the error. Only headers are read: bodies are skipped over.
bool decoder::try_bulk_array(std::string_view bytes, std::size_t& pos, handler& h) {
  const char* const p = bytes.data() + pos;
  const char* const end = bytes.data() + bytes.size();
  const std::size_t max_header = options_.limits.max_line_length + 2;
  std::uint64_t count = 0;
  const std::size_t first = small_decimal_line(p, std::min(bytes.size() - pos, max_header), 1, count);
  if (first == 0 || count == 0 || count > max_bulk_array_elements || count > options_.limits.max_aggregate_elements ||
      options_.limits.max_depth == 0) {
    return false;
  }
  if (array_elements_.size() < count) array_elements_.resize(static_cast<std::size_t>(count));
  std::string_view* const elements = array_elements_.data();
  const std::uint64_t max_bulk = options_.limits.max_bulk_length;
  const char* q = p + first;
  // Headers of one or two digits (most of them) are read without the digit loop's bound
  // checks, where those could not fail: the room check below leaves at least 6 bytes, and
  // the count's line took 4 of the line limit ("$d\r" fits in that), "$dd\r" needs 5.
  const bool two_digit_headers_fit = max_header >= 5;
  for (std::size_t k = 0; k < count; ++k) {
    // "$<digits>\r\n<body>\r\n", as small_decimal_line and the bulk reader accept it:
    // 1 to 18 digits, the header's LF within the line limit, the body and its CRLF here.
    const std::size_t room = static_cast<std::size_t>(end - q);
    if (room < 6 || q[0] != '$') return false;
    std::uint64_t length = static_cast<unsigned char>(q[1] - '0');
    if (length > 9) return false;
    const char* d = q + 2;
    const unsigned second = static_cast<unsigned char>(q[2] - '0');
    if (second > 9) {
      // one digit: q[2] must be the CR
    } else if (static_cast<unsigned char>(q[3] - '0') > 9 && two_digit_headers_fit) {
      length = length * 10 + second;
      d = q + 3;
    } else {
      const char* const stop = q + std::min(room, max_header) - 1;  // where the CR may be at most - 1
      while (d < stop && static_cast<unsigned char>(*d - '0') <= 9) {
        length = length * 10 + static_cast<unsigned char>(*d - '0');
        ++d;
      }
      if (d >= stop || d - q > 19) return false;
    }
    if (!is_crlf(d)) return false;
    const char* const body = d + 2;
    if (length > max_bulk || static_cast<std::uint64_t>(end - body) < length + 2) return false;
    const char* const after = body + length;
    if (!is_crlf(after)) return false;
    elements[k] = std::string_view(body, static_cast<std::size_t>(length));
    q = after + 2;
  }
  const std::size_t size = static_cast<std::size_t>(q - p);
  if (!h.on_bulk_array(std::string_view(p, size), std::span<const std::string_view>(elements, count))) return false;
  pos += size;
  return true;
}

// Finds the next '\n'. A line split across feeds is collected in line_, and only the
// newly fed bytes are searched, so no byte is scanned twice.
bool decoder::take_line(std::string_view bytes, std::size_t& pos, std::string_view& line,
                        std::uint64_t& line_offset) {
  const char* start = bytes.data() + pos;
  const std::size_t avail = bytes.size() - pos;
  const std::size_t max_line = options_.limits.max_line_length;
  const void* nl = std::memchr(start, '\n', avail);
  if (!line_pending_) {
    if (nl != nullptr) {
      const std::size_t len = static_cast<const char*>(nl) - start;
      if (len > max_line + 1) return fail(errc::line_too_long, base_ + pos + max_line + 1);
      line = std::string_view(start, len);
      line_offset = base_ + pos;
      pos += len + 1;
      return true;
    }
    if (avail > max_line + 1) return fail(errc::line_too_long, base_ + pos + max_line + 1);
    line_start_ = base_ + pos;
    line_.assign(start, avail);
    line_pending_ = true;
    pos += avail;
    return false;
  }
  const std::size_t len = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - start)
                                        : avail;
  if (line_.size() + len > max_line + 1) {
    return fail(errc::line_too_long, line_start_ + max_line + 1);
  }
  line_.append(start, len);
  if (nl == nullptr) {
    pos += avail;
    return false;
  }
  pos += len + 1;
  line_pending_ = false;
  line = line_;
  line_offset = line_start_;
  return true;
}

void decoder::parse_line(std::string_view line, std::uint64_t at, handler& h) {
  if (options_.allow_inline && stack_.empty() && !top_attribute_pending_ &&
      (line.empty() || line.front() != '*')) {
    parse_inline(line, at, h);
    return;
  }
  // A typed line is "<type><content>\r"; the '\n' was cut off by take_line.
  if (line.empty()) {
    fail(errc::unknown_type, at);
    return;
  }
  const char prefix = line.front();
  // Inside a streamed string `$?` only `;n` chunks may follow. A bad type byte is
  // blamed before a missing CR: it is the first wrong byte of the line.
  const bool in_streamed_string = !stack_.empty() && stack_.back().kind == type::bulk_string;
  if (in_streamed_string && prefix != ';') {
    fail(errc::invalid_stream_chunk, at);
    return;
  }
  if (!in_streamed_string && std::string_view("+-:_,#($!=*%~|>.").find(prefix) == std::string_view::npos) {
    fail(errc::unknown_type, at);
    return;
  }
  if (line.back() != '\r') {
    fail(errc::missing_crlf, at + line.size());
    return;
  }
  const std::string_view content = line.substr(1, line.size() - 2);
  const std::uint64_t content_at = at + 1;

  if (in_streamed_string) {
    const parsed_length parsed = parse_length(content, /*allow_null=*/false);
    if (parsed.error != errc{}) {
      fail(parsed.error == errc::invalid_length ? errc::invalid_stream_chunk : parsed.error, content_at);
      return;
    }
    const std::uint64_t length = parsed.value;
    if (length > options_.limits.max_bulk_length) {
      fail(errc::bulk_too_long, content_at);
      return;
    }
    if (length == 0) {
      node n;
      n.type = type::streamed_string_part;
      n.depth = depth();
      stack_.pop_back();
      value_completed(n);
      h.on_node(n);
      return;
    }
    start_bulk(type::streamed_string_part, length);
    return;
  }

  switch (prefix) {
    case '+':
    case '-': {
      if (std::memchr(content.data(), '\r', content.size()) != nullptr) {
        const auto* cr = static_cast<const char*>(std::memchr(content.data(), '\r', content.size()));
        fail(errc::invalid_simple_string, content_at + (cr - content.data()));
        return;
      }
      node n;
      n.type = prefix == '+' ? type::simple_string : type::simple_error;
      n.value = content;
      n.length = content.size();
      emit_leaf(n, at, h);
      return;
    }
    case ':': {
      node n;
      if (auto e = parse_int64(content, n.integer); e != errc{}) {
        fail(e, content_at);
        return;
      }
      n.type = type::integer;
      n.value = content;
      n.length = content.size();
      emit_leaf(n, at, h);
      return;
    }
    case '_': {
      if (!content.empty()) {
        fail(errc::invalid_null, content_at);
        return;
      }
      node n;
      n.type = type::null;
      emit_leaf(n, at, h);
      return;
    }
    case ',': {
      if (!is_valid_double(content)) {
        fail(errc::invalid_double, content_at);
        return;
      }
      node n;
      n.type = type::double_;
      n.value = content;
      n.length = content.size();
      emit_leaf(n, at, h);
      return;
    }
    case '#': {
      if (content != "t" && content != "f") {
        fail(errc::invalid_boolean, content_at);
        return;
      }
      node n;
      n.type = type::boolean;
      n.value = content;
      n.length = 1;
      emit_leaf(n, at, h);
      return;
    }
    case '(': {
      if (!is_valid_big_number(content)) {
        fail(errc::invalid_big_number, content_at);
        return;
      }
      node n;
      n.type = type::big_number;
      n.value = content;
      n.length = content.size();
      emit_leaf(n, at, h);
      return;
    }
    case '$':
      open_bulk(type::bulk_string, content, at, h);
      return;
    case '!':
      open_bulk(type::bulk_error, content, at, h);
      return;
    case '=':
      open_bulk(type::verbatim_string, content, at, h);
      return;
    case '*':
      open_aggregate(type::array, content, at, h);
      return;
    case '%':
      open_aggregate(type::map, content, at, h);
      return;
    case '~':
      open_aggregate(type::set, content, at, h);
      return;
    case '|':
      open_aggregate(type::attribute, content, at, h);
      return;
    case '>':
      open_aggregate(type::push, content, at, h);
      return;
    case '.': {
      // Not after a map key, nor after an attribute that still awaits its value.
      if (!content.empty() || stack_.empty() || !stack_.back().streamed || stack_.back().attribute_pending ||
          (stack_.back().kind == type::map && stack_.back().seen % 2 != 0)) {
        fail(errc::unexpected_stream_end, at);
        return;
      }
      node n;
      n.type = type::stream_end;
      n.depth = depth();
      stack_.pop_back();
      value_completed(n);
      h.on_node(n);
      return;
    }
    default:
      fail(errc::unknown_type, at);
      return;
  }
}

bool decoder::check_value_position(type kind, std::uint64_t at) {
  if (kind == type::push && !stack_.empty()) return fail(errc::push_not_top_level, at);
  return true;
}

void decoder::emit_leaf(node& n, std::uint64_t at, handler& h) {
  if (!check_value_position(n.type, at)) return;
  n.depth = depth();
  value_completed(n);
  h.on_node(n);
}

void decoder::open_aggregate(type kind, std::string_view content, std::uint64_t at, handler& h) {
  const std::uint64_t content_at = at + 1;
  if (!check_value_position(kind, at)) return;
  node n;
  n.type = kind;
  n.depth = depth();
  if (content == "?" && (kind == type::array || kind == type::map || kind == type::set)) {
    if (!push_frame(kind, /*streamed=*/true, 0, at)) return;
    n.flags = node_flags::streamed;
    n.length = unknown_length;
    h.on_node(n);
    return;
  }
  const parsed_length parsed = parse_length(content, /*allow_null=*/kind == type::array);
  if (parsed.error != errc{}) {
    fail(parsed.error, content_at);
    return;
  }
  const std::uint64_t count = parsed.value;
  if (parsed.is_null) {
    n.type = type::null;
    n.flags = node_flags::null_array;
    n.length = 0;
    value_completed(n);
    h.on_node(n);
    return;
  }
  if (count > options_.limits.max_aggregate_elements) {
    fail(errc::too_many_elements, content_at);
    return;
  }
  n.length = count;
  if (count == 0) {
    if (kind == type::attribute) {
      // An empty attribute annotates the next value; it completes nothing.
      mark_attribute_done();
    } else {
      value_completed(n);
    }
    h.on_node(n);
    return;
  }
  const bool paired = kind == type::map || kind == type::attribute;
  if (!push_frame(kind, /*streamed=*/false, paired ? count * 2 : count, at)) return;
  h.on_node(n);
}

void decoder::open_bulk(type kind, std::string_view content, std::uint64_t at, handler& h) {
  const std::uint64_t content_at = at + 1;
  if (kind == type::bulk_string && content == "?") {
    if (!push_frame(type::bulk_string, /*streamed=*/true, 0, at)) return;
    node n;
    n.type = type::bulk_string;
    n.depth = depth() - 1;
    n.flags = node_flags::streamed;
    n.length = unknown_length;
    h.on_node(n);
    return;
  }
  const parsed_length parsed = parse_length(content, /*allow_null=*/kind == type::bulk_string);
  if (parsed.error != errc{}) {
    fail(parsed.error, content_at);
    return;
  }
  const std::uint64_t length = parsed.value;
  if (parsed.is_null) {
    node n;
    n.type = type::null;
    n.flags = node_flags::null_bulk;
    emit_leaf(n, at, h);
    return;
  }
  if (length > options_.limits.max_bulk_length) {
    fail(errc::bulk_too_long, content_at);
    return;
  }
  if (kind == type::verbatim_string && length < 4) {
    fail(errc::invalid_verbatim, content_at);
    return;
  }
  start_bulk(kind, length);
}

void decoder::start_bulk(type kind, std::uint64_t length) {
  bulk_type_ = kind;
  bulk_depth_ = depth();
  bulk_length_ = length;
  bulk_done_ = 0;
  crlf_seen_ = 0;
  state_ = state::bulk_body;
}

bool decoder::push_frame(type kind, bool streamed, std::uint64_t remaining, std::uint64_t at) {
  if (stack_.size() >= options_.limits.max_depth) return fail(errc::nesting_too_deep, at);
  stack_.push_back(frame{kind, streamed, remaining, 0, false});
  return true;
}

void decoder::mark_attribute_done() noexcept {
  if (stack_.empty()) top_attribute_pending_ = true;
  else stack_.back().attribute_pending = true;
}

// A value at the current level is complete: count it in its parent, close every
// aggregate this completes, and flag the node if it completes a top-level message.
void decoder::value_completed(node& n) noexcept {
  for (;;) {
    if (stack_.empty()) {
      top_attribute_pending_ = false;
      n.flags |= node_flags::ends_message;
      return;
    }
    frame& f = stack_.back();
    ++f.seen;
    f.attribute_pending = false;
    if (f.streamed || --f.remaining != 0) return;
    const bool was_attribute = f.kind == type::attribute;
    stack_.pop_back();
    if (was_attribute) {
      // The annotated value follows at this level and is what completes it.
      mark_attribute_done();
      return;
    }
  }
}

void decoder::read_bulk_body(std::string_view bytes, std::size_t& pos, handler& h) {
  const std::size_t avail = bytes.size() - pos;
  const std::uint64_t remaining = bulk_length_ - bulk_done_;
  const std::size_t take = remaining < avail ? static_cast<std::size_t>(remaining) : avail;
  const char* piece = bytes.data() + pos;

  if (bulk_type_ == type::verbatim_string && bulk_done_ < 4) {
    for (std::size_t i = 0; i < take && bulk_done_ + i < 4; ++i) {
      const std::uint64_t index = bulk_done_ + i;
      const bool ok = index == 3 ? piece[i] == ':' : is_format_byte(piece[i]);
      if (!ok) {
        fail(errc::invalid_verbatim, base_ + pos + i);
        return;
      }
    }
  }

  if (take == remaining) {
    // The body ends in this feed. Deliver it as the final piece only once the CRLF
    // after it is checked, so a node without the partial flag is always valid.
    const std::size_t after = pos + take;
    if (bytes.size() - after >= 2) {
      if (bytes[after] != '\r' || bytes[after + 1] != '\n') {
        fail(errc::missing_crlf, base_ + after + (bytes[after] == '\r' ? 1 : 0));
        return;
      }
      emit_bulk_piece(std::string_view(piece, take), /*last=*/true, h);
      pos = after + 2;
      state_ = state::header;
      return;
    }
    if (take > 0) emit_bulk_piece(std::string_view(piece, take), /*last=*/false, h);
    bulk_done_ += take;
    pos = after;
    crlf_seen_ = 0;
    state_ = state::bulk_crlf;
    return;
  }
  emit_bulk_piece(std::string_view(piece, take), /*last=*/false, h);
  bulk_done_ += take;
  pos += take;
}

void decoder::read_bulk_crlf(std::string_view bytes, std::size_t& pos, handler& h) {
  while (crlf_seen_ < 2 && pos < bytes.size()) {
    const char expected = crlf_seen_ == 0 ? '\r' : '\n';
    if (bytes[pos] != expected) {
      fail(errc::missing_crlf, base_ + pos);
      return;
    }
    ++crlf_seen_;
    ++pos;
  }
  if (crlf_seen_ == 2) {
    state_ = state::header;
    emit_bulk_piece(std::string_view(), /*last=*/true, h);
  }
}

void decoder::emit_bulk_piece(std::string_view piece, bool last, handler& h) {
  node n;
  n.type = bulk_type_;
  n.depth = bulk_depth_;
  n.length = bulk_length_;
  n.value = piece;
  n.value_offset = bulk_done_;
  if (last) {
    // Chunks of a streamed string are counted by their frame, not as values.
    if (bulk_type_ == type::streamed_string_part) {
      ++stack_.back().seen;
    } else {
      value_completed(n);
    }
  } else {
    n.flags = node_flags::partial;
  }
  h.on_node(n);
}

// redis-server's inline grammar, as its sdssplitargs: arguments separated by blanks;
// a quote may open anywhere in an argument ("double" with C escapes and \xHH, 'single'
// with \' only), and a closing quote must be followed by a blank or the end of the line.
// An argument stays a view of the line until its first quote, then continues in
// inline_scratch_.
void decoder::parse_inline(std::string_view line, std::uint64_t at, handler& h) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // take_line allows one byte more than the limit so that a typed line can end in CR;
  // an inline line may end in a bare LF instead, so its text is checked here.
  if (line.size() > options_.limits.max_line_length) {
    fail(errc::line_too_long, at + options_.limits.max_line_length + 1);
    return;
  }
  inline_args_.clear();
  inline_scratch_.clear();
  // Reserve the whole line so that appending never moves views already taken into it.
  if (inline_scratch_.capacity() < line.size()) inline_scratch_.reserve(line.size());

  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  auto ends_bare_word = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const std::size_t n = line.size();
  std::size_t i = 0;
  for (;;) {
    while (i < n && is_space(line[i])) ++i;
    if (i >= n) break;
    const std::size_t start = i;
    bool copied = false;
    std::size_t copy_start = 0;
    char quote = 0;
    for (;;) {
      if (quote == 0) {
        if (i >= n || ends_bare_word(line[i])) break;
        const char c = line[i++];
        if (c == '"' || c == '\'') {
          if (!copied) {
            copy_start = inline_scratch_.size();
            inline_scratch_.append(line.substr(start, i - 1 - start));
            copied = true;
          }
          quote = c;
        } else if (copied) {
          inline_scratch_.push_back(c);
        }
        continue;
      }
      if (i >= n) {
        unbalanced_inline(line, at + i, h);
        return;
      }
      char c = line[i];
      if (c == quote) {
        if (i + 1 < n && !is_space(line[i + 1])) {
          unbalanced_inline(line, at + i + 1, h);
          return;
        }
        ++i;
        break;
      }
      if (c == '\\' && quote == '\'' && i + 1 < n && line[i + 1] == '\'') {
        inline_scratch_.push_back('\'');
        i += 2;
        continue;
      }
      if (c == '\\' && quote == '"' && i + 1 < n) {
        const char e = line[i + 1];
        if (e == 'x' && i + 3 < n && hex(line[i + 2]) >= 0 && hex(line[i + 3]) >= 0) {
          inline_scratch_.push_back(static_cast<char>(hex(line[i + 2]) * 16 + hex(line[i + 3])));
          i += 4;
          continue;
        }
        switch (e) {
          case 'n': c = '\n'; break;
          case 'r': c = '\r'; break;
          case 't': c = '\t'; break;
          case 'b': c = '\b'; break;
          case 'a': c = '\a'; break;
          default: c = e; break;
        }
        inline_scratch_.push_back(c);
        i += 2;
        continue;
      }
      inline_scratch_.push_back(c);
      ++i;
    }
    inline_args_.push_back(copied ? std::string_view(inline_scratch_).substr(copy_start)
                                  : line.substr(start, i - start));
  }
  if (inline_args_.empty()) return;  // redis-server ignores blank lines
  emit_inline(node_flags::inline_command, h);
}

void decoder::unbalanced_inline(std::string_view line, std::uint64_t bad_at, handler& h) {
  if (!options_.unbalanced_as_command) {
    fail(errc::unbalanced_quotes, bad_at);
    return;
  }
  inline_args_.clear();
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) inline_args_.push_back(line.substr(start, i - start));
  }
  emit_inline(static_cast<std::uint8_t>(node_flags::inline_command | node_flags::unbalanced_quotes), h);
}

void decoder::emit_inline(std::uint8_t flags, handler& h) {
  node head;
  head.type = type::array;
  head.flags = flags;
  head.length = inline_args_.size();
  h.on_node(head);
  for (std::size_t k = 0; k < inline_args_.size(); ++k) {
    node arg;
    arg.type = type::bulk_string;
    arg.depth = 1;
    arg.value = inline_args_[k];
    arg.length = arg.value.size();
    if (k + 1 == inline_args_.size()) arg.flags = node_flags::ends_message;
    h.on_node(arg);
  }
}

}  // namespace lockscope::resp
