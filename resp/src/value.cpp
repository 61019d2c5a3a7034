#include "lockscope/resp/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace lockscope::resp {

namespace {
// Upper bound for capacity reserved from a wire length or count: `*4294967295` or
// `$536870912` must not allocate gigabytes before the data arrives.
constexpr std::uint64_t max_reserve = 1024 * 1024;
}  // namespace

double value::as_double() const {
  if (type != resp::type::double_) throw std::logic_error("resp::value::as_double on a non-double");
  std::string_view s = text;
  bool negative = !s.empty() && s.front() == '-';
  std::string_view body = (!s.empty() && (s.front() == '-' || s.front() == '+')) ? s.substr(1) : s;
  auto lower_equals = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  };
  if (lower_equals(body, "inf") || lower_equals(body, "infinity")) {
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  if (lower_equals(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  double d = 0;
  auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), d);
  if (ec == std::errc::result_out_of_range) return std::strtod(std::string(body).c_str(), nullptr) * (negative ? -1 : 1);
  return negative ? -d : d;
}

std::string_view value::verbatim_format() const {
  return type == resp::type::verbatim_string && text.size() >= 4 ? std::string_view(text).substr(0, 3)
                                                                 : std::string_view();
}

std::string_view value::verbatim_text() const {
  return type == resp::type::verbatim_string && text.size() >= 4 ? std::string_view(text).substr(4)
                                                                 : std::string_view(text);
}

value value::number(std::int64_t i) {
  value v;
  v.type = resp::type::integer;
  v.integer = i;
  v.text = std::to_string(i);
  return v;
}

value value::aggregate(resp::type t, std::vector<value> elements) {
  value v;
  v.type = t;
  v.elements = std::move(elements);
  return v;
}

value value::make(resp::type t, std::string_view text) {
  value v;
  v.type = t;
  v.text = text;
  return v;
}

value& value_builder::new_slot(std::uint32_t depth) {
  value* slot;
  if (frames_.empty()) {
    top_ = value{};
    slot = &top_;
  } else {
    slot = &frames_.back().target->elements.emplace_back();
  }
  if (depth < has_pending_attributes_.size() && has_pending_attributes_[depth]) {
    slot->attributes = std::move(pending_attributes_[depth]);
    pending_attributes_[depth].clear();
    has_pending_attributes_[depth] = false;
  }
  return *slot;
}

void value_builder::value_done() {
  for (;;) {
    if (frames_.empty()) {
      values_.push_back(std::move(top_));
      return;
    }
    frame& f = frames_.back();
    if (f.streamed || --f.remaining != 0) return;
    const frame closed = f;
    frames_.pop_back();
    if (closed.attribute) {
      if (pending_attributes_.size() <= closed.depth) {
        pending_attributes_.resize(closed.depth + 1);
        has_pending_attributes_.resize(closed.depth + 1);
      }
      // Attributes in a row all annotate the value that follows.
      auto& pending = pending_attributes_[closed.depth];
      if (!has_pending_attributes_[closed.depth]) pending.clear();
      pending.insert(pending.end(), std::make_move_iterator(closed.target->elements.begin()),
                     std::make_move_iterator(closed.target->elements.end()));
      has_pending_attributes_[closed.depth] = true;
      return;
    }
  }
}

void value_builder::on_node(const node& n) {
  switch (n.type) {
    case type::stream_end:
      frames_.pop_back();
      value_done();
      return;
    case type::streamed_string_part: {
      value& head = *frames_.back().target;
      if (n.length == 0) {  // the `;0` terminator
        frames_.pop_back();
        value_done();
        return;
      }
      if (n.value_offset == 0) head.elements.push_back(value::make(type::streamed_string_part, {}));
      head.elements.back().text.append(n.value);
      head.text.append(n.value);
      return;
    }
    case type::attribute: {
      if (attribute_store_.size() <= n.depth) attribute_store_.resize(n.depth + 1);
      value& attribute = attribute_store_[n.depth];
      attribute = value{};
      attribute.type = type::attribute;
      if (n.length == 0) {
        if (pending_attributes_.size() <= n.depth) {
          pending_attributes_.resize(n.depth + 1);
          has_pending_attributes_.resize(n.depth + 1);
        }
        if (!has_pending_attributes_[n.depth]) pending_attributes_[n.depth].clear();
        has_pending_attributes_[n.depth] = true;
        return;
      }
      frames_.push_back(frame{&attribute, n.length * 2, false, true, n.depth});
      return;
    }
    default:
      break;
  }

  if (is_bulk(n.type) && !n.has(node_flags::streamed)) {
    if (n.value_offset == 0) {
      bulk_ = &new_slot(n.depth);
      bulk_->type = n.type;
      // The length comes from the peer: reserve no more than a bounded amount up front.
      bulk_->text.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n.length, max_reserve)));
    }
    bulk_->text.append(n.value);
    if (!n.is_partial()) {
      bulk_ = nullptr;
      value_done();
    }
    return;
  }

  value& slot = new_slot(n.depth);
  slot.type = n.type;
  slot.flags = n.flags & (node_flags::streamed | node_flags::null_bulk | node_flags::null_array |
                          node_flags::inline_command);
  if (n.type == type::bulk_string) {  // the head of a streamed string
    frames_.push_back(frame{&slot, 0, true, false, n.depth});
    return;
  }
  if (is_aggregate(n.type)) {
    if (n.has(node_flags::streamed)) {
      frames_.push_back(frame{&slot, 0, true, false, n.depth});
      return;
    }
    const std::uint64_t children = n.type == type::map ? n.length * 2 : n.length;
    if (children > 0) {
      slot.elements.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(children, max_reserve / sizeof(value))));
      frames_.push_back(frame{&slot, children, false, false, n.depth});
      return;
    }
    value_done();
    return;
  }
  slot.text = n.value;
  slot.integer = n.integer;
  value_done();
}

std::vector<value> parse(std::string_view bytes, std::error_code& ec, const decoder_options& options,
                         std::uint64_t* error_offset) {
  decoder d(options);
  value_builder builder;
  d.feed(bytes, builder);
  ec = d.error();
  if (error_offset != nullptr) *error_offset = d.error_offset();
  return std::move(builder.values());
}

}  // namespace lockscope::resp
