// A trivially copyable value stored at any address. Private to the timeline.
#pragma once

#include <cstring>
#include <type_traits>

namespace lockscope::locks::timeline_detail {

// The timeline packs its rows back to back (a lock row sits at whatever offset its
// predecessor's name leaves), so their fields are often unaligned. A packed struct
// allows that, but any `const T&` bound to a packed field (std::max, push_back, fmt) is
// undefined behaviour; GCC quietly binds a copy and clang does not (its UBSan caught two
// such bindings in CI). This wrapper has alignment 1 by construction and hands out
// values only, so such a binding cannot compile, and loads and stores are single moves.
template <class T>
class unaligned {
  static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>);

 public:
  unaligned() = default;
  unaligned(T value) noexcept { set(value); }  // NOLINT: implicit, as for a T field

  T get() const noexcept {
    T value;
    std::memcpy(&value, bytes_, sizeof value);
    return value;
  }
  void set(T value) noexcept { std::memcpy(bytes_, &value, sizeof value); }
  operator T() const noexcept { return get(); }  // NOLINT: reads like a T field

  unaligned& operator=(T value) noexcept {
    set(value);
    return *this;
  }
  unaligned& operator+=(T delta) noexcept { return *this = static_cast<T>(get() + delta); }
  unaligned& operator-=(T delta) noexcept { return *this = static_cast<T>(get() - delta); }
  unaligned& operator++() noexcept { return *this += T{1}; }
  unaligned& operator--() noexcept { return *this -= T{1}; }
  // No postfix forms: they would return a T copy that looks like the field.

 private:
  unsigned char bytes_[sizeof(T)];
};

}  // namespace lockscope::locks::timeline_detail
