#include "lockscope/resp/encoder.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "lockscope/resp/value.hpp"
#include "number.hpp"

namespace lockscope::resp {

namespace {
std::size_t format_double(char* buffer, std::size_t size, double d) {
  if (std::isnan(d)) {
    std::memcpy(buffer, "nan", 3);
    return 3;
  }
  if (std::isinf(d)) {
    if (d < 0) {
      std::memcpy(buffer, "-inf", 4);
      return 4;
    }
    std::memcpy(buffer, "inf", 3);
    return 3;
  }
  return static_cast<std::size_t>(std::to_chars(buffer, buffer + size, d).ptr - buffer);
}
}  // namespace

argument::argument(double d) noexcept
    : text_(buffer_, format_double(buffer_, sizeof buffer_, d)) {}

void writer::header(char prefix, std::uint64_t n) {
  char buffer[24];
  buffer[0] = prefix;
  char* end = std::to_chars(buffer + 1, buffer + sizeof buffer - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out_.append(buffer, static_cast<std::size_t>(end - buffer));
}

void writer::line(char prefix, std::string_view s) {
  out_.push_back(prefix);
  out_.append(s);
  out_.append("\r\n", 2);
}

void writer::body(char prefix, std::string_view s) {
  header(prefix, s.size());
  out_.append(s);
  out_.append("\r\n", 2);
}

writer& writer::simple_string(std::string_view s) {
  if (s.find_first_of("\r\n") != std::string_view::npos) {
    throw std::invalid_argument("resp::writer::simple_string: CR or LF in a simple string");
  }
  line('+', s);
  return *this;
}

writer& writer::simple_error(std::string_view s) {
  if (s.find_first_of("\r\n") != std::string_view::npos) {
    throw std::invalid_argument("resp::writer::simple_error: CR or LF in a simple error");
  }
  line('-', s);
  return *this;
}

writer& writer::integer(std::int64_t i) {
  char buffer[24];
  line(':', std::string_view(buffer, static_cast<std::size_t>(std::to_chars(buffer, buffer + sizeof buffer, i).ptr - buffer)));
  return *this;
}

writer& writer::bulk_string(std::string_view s) {
  body('$', s);
  return *this;
}

writer& writer::bulk_error(std::string_view s) {
  body('!', s);
  return *this;
}

writer& writer::verbatim_string(std::string_view format, std::string_view text) {
  if (format.size() != 3 || format.find_first_of(":\r\n") != std::string_view::npos) {
    throw std::invalid_argument("resp::writer::verbatim_string: format must be 3 bytes without ':'");
  }
  header('=', text.size() + 4);
  out_.append(format);
  out_.push_back(':');
  out_.append(text);
  out_.append("\r\n", 2);
  return *this;
}

writer& writer::null() {
  out_.append("_\r\n", 3);
  return *this;
}

writer& writer::null_bulk() {
  out_.append("$-1\r\n", 5);
  return *this;
}

writer& writer::null_array() {
  out_.append("*-1\r\n", 5);
  return *this;
}

writer& writer::boolean(bool b) {
  out_.append(b ? "#t\r\n" : "#f\r\n", 4);
  return *this;
}

writer& writer::double_(double d) {
  char buffer[32];
  line(',', std::string_view(buffer, format_double(buffer, sizeof buffer, d)));
  return *this;
}

writer& writer::double_text(std::string_view s) {
  if (!is_valid_double(s)) throw std::invalid_argument("resp::writer::double_text: not a RESP double");
  line(',', s);
  return *this;
}

writer& writer::big_number(std::string_view digits) {
  if (!is_valid_big_number(digits)) throw std::invalid_argument("resp::writer::big_number: not a big number");
  line('(', digits);
  return *this;
}

writer& writer::array(std::uint64_t count) {
  header('*', count);
  return *this;
}
writer& writer::map(std::uint64_t pairs) {
  header('%', pairs);
  return *this;
}
writer& writer::set(std::uint64_t count) {
  header('~', count);
  return *this;
}
writer& writer::attribute(std::uint64_t pairs) {
  header('|', pairs);
  return *this;
}
writer& writer::push(std::uint64_t count) {
  header('>', count);
  return *this;
}

writer& writer::streamed_string_begin() {
  out_.append("$?\r\n", 4);
  return *this;
}

writer& writer::streamed_string_chunk(std::string_view chunk) {
  if (chunk.empty()) throw std::invalid_argument("resp::writer::streamed_string_chunk: empty chunk ends the stream");
  body(';', chunk);
  return *this;
}

writer& writer::streamed_string_end() {
  out_.append(";0\r\n", 4);
  return *this;
}

writer& writer::streamed_aggregate_begin(type kind) {
  switch (kind) {
    case type::array: out_.append("*?\r\n", 4); break;
    case type::set: out_.append("~?\r\n", 4); break;
    case type::map: out_.append("%?\r\n", 4); break;
    default: throw std::invalid_argument("resp::writer::streamed_aggregate_begin: array, set or map only");
  }
  return *this;
}

writer& writer::stream_end() {
  out_.append(".\r\n", 3);
  return *this;
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  writer w(out);
  w.array(args.size());
  for (std::string_view a : args) w.bulk_string(a);
}

void encode(std::string& out, const value& v) {
  writer w(out);
  if (!v.attributes.empty()) {
    w.attribute(v.attributes.size() / 2);
    for (const value& a : v.attributes) encode(out, a);
  }
  const bool streamed = (v.flags & node_flags::streamed) != 0;
  switch (v.type) {
    case type::simple_string: w.simple_string(v.text); return;
    case type::simple_error: w.simple_error(v.text); return;
    case type::integer: w.integer(v.integer); return;
    case type::bulk_string:
      if (streamed) {
        w.streamed_string_begin();
        for (const value& chunk : v.elements) w.streamed_string_chunk(chunk.text);
        w.streamed_string_end();
      } else {
        w.bulk_string(v.text);
      }
      return;
    case type::null:
      if (v.flags & node_flags::null_bulk) w.null_bulk();
      else if (v.flags & node_flags::null_array) w.null_array();
      else w.null();
      return;
    case type::boolean: w.boolean(v.boolean()); return;
    case type::double_: w.double_text(v.text); return;
    case type::big_number: w.big_number(v.text); return;
    case type::bulk_error: w.bulk_error(v.text); return;
    case type::verbatim_string:
      w.verbatim_string(v.verbatim_format(), v.verbatim_text());
      return;
    case type::array:
    case type::set:
    case type::map:
    case type::push:
      if (streamed) {
        w.streamed_aggregate_begin(v.type);
      } else {
        const std::uint64_t n = v.type == type::map ? v.elements.size() / 2 : v.elements.size();
        if (v.type == type::array) w.array(n);
        else if (v.type == type::set) w.set(n);
        else if (v.type == type::map) w.map(n);
        else w.push(n);
      }
      for (const value& e : v.elements) encode(out, e);
      if (streamed) w.stream_end();
      return;
    case type::attribute:
    case type::streamed_string_part:
    case type::stream_end:
      throw std::invalid_argument("resp::encode: attribute, chunk and stream end are not standalone values");
  }
}

}  // namespace lockscope::resp
