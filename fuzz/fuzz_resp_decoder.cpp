// libFuzzer target for lockscope::resp::decoder.
//
//   cmake --preset fuzz && cmake --build build/fuzz --target fuzz_resp_decoder
//   build/fuzz/fuzz/fuzz_resp_decoder -max_total_time=60 -dict=fuzz/resp.dict \
//       /tmp/corpus fuzz/corpus/resp_decoder
//
// Input: one control byte (decoder options, chunking seed), then the RESP bytes.
// The bytes are decoded whole, byte by byte, and in pseudo-random chunks with
// pseudo-random pauses, and once more after reset(); then whole and chunked again by
// a handler that takes whole arrays (handler::on_bulk_array) and spells them as nodes.
// Partial bulk pieces are merged into the node they belong to; the resulting node
// streams and the verdicts (error code and offset) must be identical whatever the
// chunking and whichever path delivered them. Every stream is also
// checked against an independent model of RESP framing (depths, ends_message), and
// the whole pass feeds a value_builder whose values must round-trip through encode().
// Any violation prints what was expected and traps. So does any single heap
// allocation above 16 MiB + 64 bytes per input byte: decoded values may cost memory in
// proportion to the input, never to the lengths and counts it merely announces.
#include <sanitizer/allocator_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/encoder.hpp"
#include "lockscope/resp/format.hpp"
#include "lockscope/resp/value.hpp"
#include "lockscope/test/splitmix64.hpp"

namespace {

namespace resp = lockscope::resp;
namespace flags = resp::node_flags;

[[noreturn]] void violation(const char* what, std::uint64_t detail = 0) {
  std::fprintf(stderr, "fuzz_resp_decoder: %s (%llu)\n", what, static_cast<unsigned long long>(detail));
  __builtin_trap();
}

#define EXPECT(condition, detail)                     \
  do {                                                \
    if (!(condition)) violation(#condition, (detail)); \
  } while (0)

// Memory amplification guard, armed only while an input is being decoded.
std::size_t allocation_limit = 0;  // 0: disarmed

void on_allocation(const volatile void*, std::size_t size) {
  if (allocation_limit != 0 && size > allocation_limit) {
    const std::size_t limit = allocation_limit;
    allocation_limit = 0;  // the report below may allocate
    std::fprintf(stderr, "fuzz_resp_decoder: a single allocation of %zu bytes (limit %zu)\n", size, limit);
    __builtin_trap();
  }
}
void on_free(const volatile void*) {}

// A node with its partial pieces merged: what a consumer ends up knowing.
struct record {
  resp::type type{};
  std::uint8_t flags = 0;
  std::uint32_t depth = 0;
  std::uint64_t length = 0;
  std::int64_t integer = 0;
  std::string value;
  bool operator==(const record&) const = default;
};

// The number an integer's wire text spells (sign, then digits), computed apart from
// the decoder's parser. Only called on text the decoder accepted.
std::int64_t spelled_integer(std::string_view text) {
  EXPECT(!text.empty(), 0);
  const bool negative = text.front() == '-';
  if (text.front() == '-' || text.front() == '+') text.remove_prefix(1);
  EXPECT(!text.empty(), 0);
  constexpr std::uint64_t int64_min_magnitude = 1ull << 63;
  std::uint64_t magnitude = 0;
  for (char c : text) {
    EXPECT(c >= '0' && c <= '9', static_cast<unsigned char>(c));
    const auto digit = static_cast<std::uint64_t>(c - '0');
    EXPECT(magnitude <= (int64_min_magnitude - digit) / 10, text.size());
    magnitude = magnitude * 10 + digit;
  }
  EXPECT(negative || magnitude < int64_min_magnitude, text.size());
  return negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
}

// Checks the framing of a merged node stream without using the decoder's own
// bookkeeping: every node must sit at the depth its open aggregates imply, and
// ends_message must be set exactly on the node that completes a top-level value.
class framing_model {
 public:
  void check(const record& r) {
    EXPECT(r.depth == open_.size(), r.depth);
    const bool in_streamed_string = !open_.empty() && open_.back().kind == resp::type::bulk_string;
    EXPECT(in_streamed_string == (r.type == resp::type::streamed_string_part), r.depth);
    const bool streamed = (r.flags & flags::streamed) != 0;
    bool completes = false;
    switch (r.type) {
      case resp::type::streamed_string_part:
        EXPECT(r.value.size() == r.length, r.length);
        if (r.length == 0) {
          open_.pop_back();
          completes = true;
        }
        break;
      case resp::type::stream_end:
        EXPECT(!open_.empty() && open_.back().streamed, r.depth);
        EXPECT(open_.back().kind != resp::type::map || open_.back().seen % 2 == 0, open_.back().seen);
        EXPECT(!open_.back().attribute_pending, r.depth);  // an attribute must annotate something
        open_.pop_back();
        completes = true;
        break;
      case resp::type::bulk_string:
      case resp::type::bulk_error:
      case resp::type::verbatim_string:
        if (streamed) {
          EXPECT(r.type == resp::type::bulk_string && r.length == resp::unknown_length, r.length);
          open_.push_back({r.type, true, 0, 0, false});
        } else {
          EXPECT(r.value.size() == r.length, r.length);
          if (r.type == resp::type::verbatim_string) EXPECT(r.length >= 4 && r.value[3] == ':', r.length);
          completes = true;
        }
        break;
      case resp::type::push:
        EXPECT(open_.empty(), r.depth);
        [[fallthrough]];
      case resp::type::array:
      case resp::type::set:
      case resp::type::map:
      case resp::type::attribute:
        if (streamed) {
          EXPECT(r.type == resp::type::array || r.type == resp::type::set || r.type == resp::type::map,
                 static_cast<unsigned>(r.type));
          EXPECT(r.length == resp::unknown_length, r.length);
          open_.push_back({r.type, true, 0, 0, false});
        } else if (r.length == 0) {
          if (r.type == resp::type::attribute) {
            mark_attribute_pending();  // an empty attribute still annotates what follows
          } else {
            completes = true;
          }
        } else {
          const bool paired = r.type == resp::type::map || r.type == resp::type::attribute;
          open_.push_back({r.type, false, paired ? r.length * 2 : r.length, 0, false});
        }
        break;
      case resp::type::integer:
        EXPECT(spelled_integer(r.value) == r.integer, static_cast<std::uint64_t>(r.integer));
        completes = true;
        break;
      default:
        completes = true;
        break;
    }
    const bool ends = completes && value_completed();
    EXPECT(ends == ((r.flags & flags::ends_message) != 0), r.depth);
    if (ends) ++messages_;
  }

  bool idle() const noexcept { return open_.empty(); }
  std::uint64_t messages() const noexcept { return messages_; }

 private:
  struct open_value {
    resp::type kind;
    bool streamed;
    std::uint64_t remaining;
    std::uint64_t seen;
    bool attribute_pending;  // an attribute at this level awaits its value
  };

  void mark_attribute_pending() noexcept {
    if (!open_.empty()) open_.back().attribute_pending = true;
  }

  // A value finished at the current level; returns true when that ends a message.
  bool value_completed() {
    for (;;) {
      if (open_.empty()) return true;
      open_value& parent = open_.back();
      ++parent.seen;
      parent.attribute_pending = false;
      if (parent.streamed || --parent.remaining != 0) return false;
      const bool was_attribute = parent.kind == resp::type::attribute;
      open_.pop_back();
      if (was_attribute) {
        mark_attribute_pending();  // the annotated value comes next at this level
        return false;
      }
    }
  }

  std::vector<open_value> open_;
  std::uint64_t messages_ = 0;
};

using rng = lockscope::test::splitmix64;  // chunk sizes and pauses

// Merges partial pieces, checks their offsets, runs the framing model, optionally
// pauses the decoder, and forwards the raw nodes to an inner handler.
class recorder final : public resp::handler {
 public:
  explicit recorder(resp::handler* inner = nullptr) : inner_(inner) {}

  // The decoder's fast path: a whole array of bulk strings, recorded as the nodes the
  // general path delivers (so the records must not change).
  bool on_bulk_array(std::string_view frame, std::span<const std::string_view> elements) override {
    EXPECT(!elements.empty() && elements.size() <= resp::max_bulk_array_elements, elements.size());
    EXPECT(frame.size() >= 4 && frame[0] == '*', frame.size());
    resp::node head;
    head.type = resp::type::array;
    head.length = elements.size();
    on_node(head);
    for (std::size_t k = 0; k < elements.size(); ++k) {
      const std::string_view e = elements[k];
      EXPECT(e.data() >= frame.data() && e.data() + e.size() <= frame.data() + frame.size(), k);
      resp::node n;
      n.type = resp::type::bulk_string;
      n.depth = 1;
      n.length = e.size();
      n.value = e;
      if (k + 1 == elements.size()) n.flags = flags::ends_message;
      on_node(n);
    }
    return true;
  }

  void pause_randomly(resp::decoder* d, std::uint64_t seed) {
    decoder_ = d;
    pauses_ = rng(seed);
  }

  void on_node(const resp::node& n) override {
    if (inner_ != nullptr) inner_->on_node(n);
    const bool streamed_head = n.has(flags::streamed);
    if (n.is_partial()) {
      EXPECT(resp::is_bulk(n.type) && !streamed_head, static_cast<unsigned>(n.type));
      EXPECT(!n.ends_message(), n.depth);
      if (!pending_active_) {
        EXPECT(n.value_offset == 0, n.value_offset);
        pending_ = record{n.type, 0, n.depth, n.length, 0, {}};
        pending_active_ = true;
      }
      EXPECT(n.type == pending_.type && n.depth == pending_.depth && n.length == pending_.length, n.length);
      EXPECT(n.value_offset == pending_.value.size(), n.value_offset);
      pending_.value.append(n.value);
      EXPECT(pending_.value.size() <= n.length, pending_.value.size());
    } else {
      record r;
      if (pending_active_) {
        EXPECT(n.type == pending_.type && n.depth == pending_.depth && n.length == pending_.length, n.length);
        EXPECT(n.value_offset == pending_.value.size(), n.value_offset);
        r = std::move(pending_);
        pending_active_ = false;
        r.value.append(n.value);
      } else {
        EXPECT(n.value_offset == 0, n.value_offset);
        r.type = n.type;
        r.depth = n.depth;
        r.length = n.length;
        r.value.assign(n.value);
      }
      r.flags = n.flags;
      r.integer = n.integer;
      model_.check(r);
      records_.push_back(std::move(r));
    }
    if (decoder_ != nullptr && pauses_.next() % 5 == 0) {
      decoder_->pause();
      pause_requested_ = true;
    }
  }

  // True once after each pause() this recorder asked for.
  bool take_pause() noexcept {
    const bool was = pause_requested_;
    pause_requested_ = false;
    return was;
  }
  bool pending_piece() const noexcept { return pending_active_; }
  const std::vector<record>& records() const noexcept { return records_; }
  const framing_model& model() const noexcept { return model_; }

 private:
  resp::handler* inner_;
  resp::decoder* decoder_ = nullptr;
  rng pauses_{0};
  bool pause_requested_ = false;
  record pending_;
  bool pending_active_ = false;
  std::vector<record> records_;
  framing_model model_;
};

struct verdict {
  std::error_code error;
  std::uint64_t offset = 0;
  bool operator==(const verdict&) const = default;
};

verdict finish(const resp::decoder& d, const recorder& r, std::size_t input_size) {
  if (!d.error()) {
    EXPECT(d.offset() == input_size, d.offset());
    if (d.at_message_boundary()) EXPECT(r.model().idle() && !r.pending_piece(), d.offset());
  }
  return {d.error(), d.error_offset()};
}

verdict decode_whole(resp::decoder& d, std::string_view input, recorder& r) {
  const std::size_t consumed = d.feed(input, r);
  if (!d.error()) EXPECT(consumed == input.size(), consumed);
  return finish(d, r, input.size());
}

verdict decode_bytewise(resp::decoder& d, std::string_view input, recorder& r) {
  for (std::size_t i = 0; i < input.size() && !d.error(); ++i) {
    const std::size_t consumed = d.feed(input.substr(i, 1), r);
    if (!d.error()) EXPECT(consumed == 1, i);
  }
  return finish(d, r, input.size());
}

// Random chunk sizes (mostly small, sometimes large) and random pauses: after a
// pause, the rest of the chunk is fed again, as a caller switching modes would.
verdict decode_chunked(resp::decoder& d, std::string_view input, recorder& r, std::uint64_t seed) {
  rng sizes(seed);
  r.pause_randomly(&d, seed ^ 0xA5A5A5A5u);
  std::size_t pos = 0;
  while (pos < input.size() && !d.error()) {
    const std::uint64_t roll = sizes.next();
    const std::size_t chunk = roll % 4 == 0 ? 1 + roll % 4096 : 1 + (roll >> 8) % 17;
    std::string_view piece = input.substr(pos, chunk);
    while (!piece.empty() && !d.error()) {
      const std::size_t consumed = d.feed(piece, r);
      EXPECT(consumed <= piece.size(), consumed);
      const bool paused = r.take_pause();
      if (d.error()) break;
      if (consumed < piece.size()) EXPECT(paused, pos);  // only a pause stops a feed early
      pos += consumed;
      piece.remove_prefix(consumed);
    }
  }
  return finish(d, r, input.size());
}

// Integers keep their wire spelling (":+5", ":007") but encode() writes the number,
// so compare integers by value.
void canonicalize(resp::value& v) {
  if (v.type == resp::type::integer) v.text = std::to_string(v.integer);
  for (resp::value& e : v.elements) canonicalize(e);
  for (resp::value& a : v.attributes) canonicalize(a);
}

void check_values(std::vector<resp::value>& values, const recorder& whole) {
  EXPECT(values.size() == whole.model().messages(), values.size());
  std::string encoded;
  for (resp::value& v : values) {
    // Exercised for crashes only: both formatters must accept any decoded value.
    (void)resp::to_cli(v);
    (void)resp::to_parsed(v, resp::parsed_options{16, true});
    if (v.flags & flags::inline_command) continue;  // an inline command re-encodes as `*`
    encoded.clear();
    resp::encode(encoded, v);
    std::error_code ec;
    std::vector<resp::value> again = resp::parse(encoded, ec);
    EXPECT(!ec, static_cast<std::uint64_t>(ec.value()));
    EXPECT(again.size() == 1, again.size());
    canonicalize(v);
    canonicalize(again.front());
    EXPECT(again.front() == v, encoded.size());
  }
}

// Control byte: bit 0 allow_inline; bits 1-2 max_depth {128, 1, 3, 8}; bits 3-4
// max_bulk_length {512 MiB, 0, 5, 100}; bit 5 max_line_length 12 and at most 3
// aggregate elements; bits 6-7 (with the input size) seed the chunking and pauses.
resp::decoder_options options_from(std::uint8_t control) {
  resp::decoder_options options;
  options.allow_inline = (control & 0x01) != 0;
  static constexpr std::uint32_t depths[] = {128, 1, 3, 8};
  options.limits.max_depth = depths[(control >> 1) & 3];
  static constexpr std::uint64_t bulk_lengths[] = {512ull << 20, 0, 5, 100};
  options.limits.max_bulk_length = bulk_lengths[(control >> 3) & 3];
  if (control & 0x20) {
    options.limits.max_line_length = 12;
    options.limits.max_aggregate_elements = 3;
  }
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(on_allocation, on_free);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  struct armed_guard {
    explicit armed_guard(std::size_t input_size) { allocation_limit = (16u << 20) + 64 * input_size; }
    ~armed_guard() { allocation_limit = 0; }
  } guard(size);
  const std::uint8_t control = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const resp::decoder_options options = options_from(control);
  const std::uint64_t chunk_seed = (static_cast<std::uint64_t>(control >> 6) << 32) ^ size;

  resp::value_builder builder;
  recorder whole(&builder);
  resp::decoder whole_decoder(options);
  const verdict whole_verdict = decode_whole(whole_decoder, input, whole);

  recorder bytewise;
  resp::decoder bytewise_decoder(options);
  const verdict bytewise_verdict = decode_bytewise(bytewise_decoder, input, bytewise);

  recorder chunked;
  resp::decoder chunked_decoder(options);
  const verdict chunked_verdict = decode_chunked(chunked_decoder, input, chunked, chunk_seed);

  // reset() must forget everything: the reused decoder decodes like a new one.
  whole_decoder.reset();
  recorder after_reset;
  const verdict reset_verdict = decode_whole(whole_decoder, input, after_reset);

  recorder whole_arrays;
  whole_arrays.want_bulk_arrays(true);
  resp::decoder whole_arrays_decoder(options);
  const verdict whole_arrays_verdict = decode_whole(whole_arrays_decoder, input, whole_arrays);

  recorder chunked_arrays;
  chunked_arrays.want_bulk_arrays(true);
  resp::decoder chunked_arrays_decoder(options);
  const verdict chunked_arrays_verdict = decode_chunked(chunked_arrays_decoder, input, chunked_arrays, ~chunk_seed);

  EXPECT(whole_verdict == whole_arrays_verdict, whole_arrays_verdict.offset);
  EXPECT(whole_verdict == chunked_arrays_verdict, chunked_arrays_verdict.offset);
  EXPECT(whole.records() == whole_arrays.records(), whole_arrays.records().size());
  EXPECT(whole.records() == chunked_arrays.records(), chunked_arrays.records().size());
  EXPECT(whole_verdict == bytewise_verdict, bytewise_verdict.offset);
  EXPECT(whole_verdict == chunked_verdict, chunked_verdict.offset);
  EXPECT(whole_verdict == reset_verdict, reset_verdict.offset);
  EXPECT(whole.records() == bytewise.records(), bytewise.records().size());
  EXPECT(whole.records() == chunked.records(), chunked.records().size());
  EXPECT(whole.records() == after_reset.records(), after_reset.records().size());
  if (whole_verdict.error) EXPECT(whole_verdict.offset <= input.size(), whole_verdict.offset);

  check_values(builder.values(), whole);
  return 0;
}
