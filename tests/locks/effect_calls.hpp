// A script call as the effect reading takes it (recognize/script_effect.hpp), and the
// replies the tests observe, shared by the tests that read scripts by their effect.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recognize/script_effect.hpp"

namespace lockscope::locks {

struct effect_call {
  std::vector<std::string> keys, argv;
  std::vector<std::string_view> key_views() const { return {keys.begin(), keys.end()}; }
  std::vector<std::string_view> argv_views() const { return {argv.begin(), argv.end()}; }
};

inline effect::script_effect effect_of(std::string_view text, const effect_call& c) {
  const auto k = c.key_views();
  const auto a = c.argv_views();
  return effect::analyse_script(text, k, a);
}

inline effect::reply_reading eff_reading(const effect::script_effect& e, const effect::observed_reply& r,
                                         const effect_call& c) {
  const auto k = c.key_views();
  const auto a = c.argv_views();
  return effect::read_reply(e, r, k, a);
}

inline effect::observed_reply eff_integer_reply(std::int64_t v) {
  effect::observed_reply r;
  r.kind = effect::observed_reply::form::integer;
  r.integer = v;
  return r;
}
inline effect::observed_reply eff_nil_reply() {
  effect::observed_reply r;
  r.kind = effect::observed_reply::form::nil;
  return r;
}
inline effect::observed_reply eff_status_reply(std::string_view s) {
  effect::observed_reply r;
  r.kind = effect::observed_reply::form::status;
  r.text = s;
  return r;
}
inline effect::observed_reply eff_text_reply(std::string_view s) {
  effect::observed_reply r;
  r.kind = effect::observed_reply::form::text;
  r.text = s;
  return r;
}
inline effect::observed_reply eff_list_reply(std::int64_t first) {
  effect::observed_reply r;
  r.kind = effect::observed_reply::form::array;
  r.first = effect::observed_reply::form::integer;
  r.first_integer = first;
  return r;
}

}  // namespace lockscope::locks
