#include "lockscope/ingest/message.hpp"

#include <charconv>
#include <cstring>

#include "lockscope/resp/format.hpp"

namespace lockscope::ingest {

void message::prefetch(std::size_t max_bytes) const noexcept {
  prefetch_lines(nodes_.data(), std::min(nodes_.size() * sizeof(message_node), max_bytes));
  prefetch_lines(text_.data(), std::min(text_.size(), max_bytes));
}

std::size_t message::clear_and_trim(std::size_t keep) {
  std::size_t freed = 0;
  if (text_.capacity() > keep) {
    freed += text_.capacity();
    std::string().swap(text_);
  }
  if (const std::size_t nodes = nodes_.capacity() * sizeof(message_node); nodes > keep) {
    freed += nodes;
    std::vector<message_node>().swap(nodes_);
  }
  clear();
  return freed;
}

void message::add(const resp::node& n, std::size_t max_text) {
  if (n.type == resp::type::stream_end) return;
  const bool continues = n.type == resp::type::streamed_string_part || (bulk_open_ && resp::is_bulk(n.type));
  if (continues && nodes_.empty()) return;
  if (!continues && nodes_.size() >= max_text / bytes_per_kept_node && !nodes_.empty()) dropping_ = true;
  if (dropping_) {  // everything after the cap, pieces of a dropped bulk included
    truncated_ += n.value.size();
    if (!continues) ++dropped_nodes_;
    // A dropped bulk split over segments is one element, as a kept one is.
    if (n.type != resp::type::streamed_string_part) bulk_open_ = resp::is_bulk(n.type) && n.is_partial();
    return;
  }
  // The common case (a whole node whose text fits) in one pass: per node of every
  // command and reply, so it avoids re-reading the vector's end and the string's size.
  const std::size_t used = text_.size();
  const std::size_t room = used < max_text ? max_text - used : 0;
  const std::size_t kept = n.value.size() < room ? n.value.size() : room;
  truncated_ += n.value.size() - kept;
  if (kept > 0) text_.append(n.value.data(), kept);
  if (continues) {
    // Chunks of a `$?` string, or later pieces of a bulk, join the last node.
    nodes_.back().text_size += static_cast<std::uint32_t>(kept);
    if (n.type != resp::type::streamed_string_part) bulk_open_ = n.is_partial();
    return;
  }
  nodes_.push_back(message_node{n.type, n.flags, n.depth, n.length, n.integer, static_cast<std::uint32_t>(used),
                                static_cast<std::uint32_t>(kept)});
  bulk_open_ = resp::is_bulk(n.type) && n.is_partial();
}

void message::set_single(resp::type t, std::string_view text) {
  clear();
  message_node& m = nodes_.emplace_back();
  m.type = t;
  m.length = text.size();
  text_.assign(text);
  m.text_size = static_cast<std::uint32_t>(text.size());
}

void message::replace_text(std::size_t index, std::string_view text) {
  message_node& m = nodes_[index];
  m.text_offset = static_cast<std::uint32_t>(text_.size());
  m.text_size = static_cast<std::uint32_t>(text.size());
  if (resp::is_bulk(m.type)) m.length = text.size();
  text_.append(text);
}

std::size_t message::skip_subtree(std::size_t index) const noexcept {
  const std::uint32_t depth = nodes_[index].depth;
  std::size_t i = index + 1;
  while (i < nodes_.size() && nodes_[i].depth > depth) ++i;
  return i;
}

std::size_t message::root_after_attributes() const noexcept {
  std::size_t i = 0;
  while (i < nodes_.size() && nodes_[i].type == resp::type::attribute) i = skip_subtree(i);
  return i < nodes_.size() ? i : npos;
}

bool message::arguments(std::vector<std::string_view>& out) const {
  out.clear();
  const std::size_t r = root();
  if (r == npos || nodes_[r].type != resp::type::array) return false;
  for_each_child(r, [&](const message_node& c) {
    // A node's text always lies within text_ (add() keeps it so): no clamping needed.
    out.emplace_back(text_.data() + c.text_offset, c.text_size);
    return true;
  });
  return true;
}

resp::value message::value_at(std::size_t& index) const {
  resp::value v;
  // Attributes annotate the value that follows them at the same depth.
  while (index < nodes_.size() && nodes_[index].type == resp::type::attribute) {
    const std::size_t end = skip_subtree(index);
    ++index;
    while (index < end) v.attributes.push_back(value_at(index));
  }
  if (index >= nodes_.size()) return v;
  const message_node& n = nodes_[index];
  v.type = n.type;
  v.flags = n.flags & (resp::node_flags::streamed | resp::node_flags::null_bulk |
                       resp::node_flags::null_array | resp::node_flags::inline_command);
  v.text.assign(text(n));
  v.integer = n.integer;
  const std::size_t end = skip_subtree(index);
  ++index;
  while (index < end) v.elements.push_back(value_at(index));
  return v;
}

resp::value message::to_value() const {
  std::size_t index = 0;
  return value_at(index);
}


namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void append_escaped_byte(std::string& out, unsigned char c) {
  out += "\\u00";
  out.push_back(hex_digits[c >> 4]);
  out.push_back(hex_digits[c & 0xf]);
}

void append_json_node(std::string& out, const message& m, std::size_t& index);

void append_json_children(std::string& out, const message& m, std::size_t& index, bool as_object) {
  const auto nodes = m.nodes();
  const std::size_t end = m.skip_subtree(index);
  ++index;
  out.push_back(as_object ? '{' : '[');
  bool first = true;
  bool key = true;
  while (index < end) {
    if (nodes[index].type == resp::type::attribute) {
      index = m.skip_subtree(index);
      continue;
    }
    if (as_object) {
      if (key) {
        if (!first) out.push_back(',');
        // Object keys must be strings: write the key's text whatever its type.
        const message_node& k = nodes[index];
        if (resp::is_aggregate(k.type)) {
          std::string nested;
          append_json_node(nested, m, index);
          append_json_string(out, nested);
        } else {
          append_json_string(out, k.type == resp::type::null ? std::string_view("null") : m.text(k));
          index = m.skip_subtree(index);
        }
        out.push_back(':');
      } else {
        append_json_node(out, m, index);
      }
      key = !key;
    } else {
      if (!first) out.push_back(',');
      append_json_node(out, m, index);
    }
    first = false;
  }
  if (as_object && !key) out += "null";  // a map cut short by truncation
  out.push_back(as_object ? '}' : ']');
}

void append_json_node(std::string& out, const message& m, std::size_t& index) {
  const auto nodes = m.nodes();
  while (index < nodes.size() && nodes[index].type == resp::type::attribute) {
    index = m.skip_subtree(index);
  }
  if (index >= nodes.size()) {
    out += "null";
    return;
  }
  const message_node& n = nodes[index];
  switch (n.type) {
    case resp::type::integer: {
      char digits[24];
      const auto r = std::to_chars(digits, digits + sizeof digits, n.integer);
      out.append(digits, r.ptr);
      ++index;
      return;
    }
    case resp::type::null: out += "null"; ++index; return;
    case resp::type::boolean: out += m.text(n) == "t" ? "true" : "false"; ++index; return;
    case resp::type::double_: {
      const std::string_view t = m.text(n);
      // JSON has no inf/nan; also keep forms like "1e5" valid by checking the syntax.
      bool plain = !t.empty();
      for (char c : t) {
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) {
          plain = false;
          break;
        }
      }
      if (plain && t.front() != '+' && t.front() != '.' && t.back() != '.' &&
          !(t.size() > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9') &&
          t.find(".e") == std::string_view::npos && t.find(".E") == std::string_view::npos &&
          !(t.size() > 2 && t[0] == '-' && t[1] == '0' && t[2] >= '0' && t[2] <= '9')) {
        out += t;
      } else {
        append_json_string(out, t);
      }
      ++index;
      return;
    }
    case resp::type::verbatim_string: {
      const std::string_view t = m.text(n);
      append_json_string(out, t.size() >= 4 && t[3] == ':' ? t.substr(4) : t);
      ++index;
      return;
    }
    case resp::type::array:
    case resp::type::set:
    case resp::type::push:
      append_json_children(out, m, index, false);
      return;
    case resp::type::map:
      append_json_children(out, m, index, true);
      return;
    default:
      append_json_string(out, m.text(n));
      index = m.skip_subtree(index);
      return;
  }
}

}  // namespace

namespace {

// Bytes that end a run of characters copied verbatim into a JSON string.
struct json_plain_table {
  bool plain[256];
  constexpr json_plain_table() : plain() {
    for (int c = 0; c < 256; ++c) plain[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
  }
};
constexpr json_plain_table json_plain{};

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  // Lock traffic repeats the same long script in every EVAL: comparing it with the
  // last one escaped is much cheaper than escaping it again.
  struct escaped_cache {
    std::string raw;
    std::string json;
  };
  thread_local escaped_cache cache;
  constexpr std::size_t cache_min = 128;
  constexpr std::size_t cache_max = 64u << 10;
  const bool cacheable = s.size() >= cache_min && s.size() <= cache_max;
  if (cacheable && s.size() == cache.raw.size() && std::memcmp(s.data(), cache.raw.data(), s.size()) == 0) {
    out.append(cache.json);
    return;
  }
  const std::size_t start = out.size();
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    // Copy runs of plain ASCII in one go: the common case for commands and keys.
    std::size_t run = i;
    // Eight bytes at a time while none needs escaping (SWAR: control bytes, '"', '\\'
    // and bytes >= 0x80 flip a high bit).
    constexpr std::uint64_t ones = 0x0101010101010101ull;
    constexpr std::uint64_t highs = 0x8080808080808080ull;
    while (run + 8 <= s.size()) {
      std::uint64_t w;
      std::memcpy(&w, p + run, 8);
      const std::uint64_t control = (w - ones * 0x20) & ~w;
      const std::uint64_t quote = ((w ^ (ones * '"')) - ones) & ~(w ^ (ones * '"'));
      const std::uint64_t backslash = ((w ^ (ones * '\\')) - ones) & ~(w ^ (ones * '\\'));
      if (((control | quote | backslash) & highs) != 0 || (w & highs) != 0) break;
      run += 8;
    }
    while (run < s.size() && json_plain.plain[p[run]]) ++run;
    out.append(s.data() + i, run - i);
    i = run;
    if (i >= s.size()) break;
    const unsigned char c = p[i];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      append_escaped_byte(out, c);
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      append_escaped_byte(out, c);
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  out.push_back('"');
  if (cacheable) {
    cache.raw.assign(s);
    cache.json.assign(out, start, std::string::npos);
  }
}

void append_json(std::string& out, const message& m) {
  std::size_t index = 0;
  append_json_node(out, m, index);
}

std::string to_cli_line(const message& m) {
  const std::string multi = resp::to_cli(m.to_value());
  std::string out;
  out.reserve(multi.size());
  for (std::size_t i = 0; i < multi.size(); ++i) {
    if (multi[i] == '\n') {
      while (i + 1 < multi.size() && multi[i + 1] == ' ') ++i;
      out.push_back(' ');
    } else {
      out.push_back(multi[i]);
    }
  }
  return out;
}

}  // namespace lockscope::ingest
