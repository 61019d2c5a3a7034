// The timeline's tables of connections, scopes and lock sides: appended to, indexed on
// every operation, never erased from, and holding elements that other code keeps
// references to while more are appended. std::deque keeps references too, but its
// operator[] costs about ten instructions (libstdc++ offsets from its first block);
// here an index is a shift and a mask into fixed-size blocks. Private to
// lock_timeline.cpp.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace lockscope::locks::timeline_detail {

template <class T, std::size_t BlockBits = 6>
class stable_vector {
  static constexpr std::size_t block_size = std::size_t{1} << BlockBits;
  static constexpr std::size_t mask = block_size - 1;

 public:
  stable_vector() = default;
  stable_vector(const stable_vector&) = delete;
  stable_vector& operator=(const stable_vector&) = delete;
  stable_vector(stable_vector&& o) noexcept : blocks_(std::move(o.blocks_)), size_(std::exchange(o.size_, 0)) {}
  stable_vector& operator=(stable_vector&& o) noexcept {
    if (this != &o) {
      destroy();
      blocks_ = std::move(o.blocks_);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~stable_vector() { destroy(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return blocks_[i >> BlockBits][i & mask]; }
  const T& operator[](std::size_t i) const noexcept { return blocks_[i >> BlockBits][i & mask]; }

  // Constructs the element at the end; no element moves, so references stay valid.
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if ((size_ >> BlockBits) == blocks_.size()) blocks_.push_back(allocate_block());
    T* at = &blocks_[size_ >> BlockBits][size_ & mask];
    ::new (static_cast<void*>(at)) T(std::forward<Args>(args)...);
    ++size_;
    return *at;
  }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void push_back(const T& v) { emplace_back(v); }

  template <class V, class Owner>
  class basic_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    basic_iterator() = default;
    basic_iterator(Owner* v, std::size_t i) : v_(v), i_(i) {}
    reference operator*() const noexcept { return (*v_)[i_]; }
    pointer operator->() const noexcept { return &(*v_)[i_]; }
    basic_iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    basic_iterator operator++(int) noexcept {
      basic_iterator was = *this;
      ++i_;
      return was;
    }
    bool operator==(const basic_iterator& o) const noexcept { return i_ == o.i_; }

   private:
    Owner* v_ = nullptr;
    std::size_t i_ = 0;
  };
  using iterator = basic_iterator<T, stable_vector>;
  using const_iterator = basic_iterator<const T, const stable_vector>;
  iterator begin() noexcept { return {this, 0}; }
  iterator end() noexcept { return {this, size_}; }
  const_iterator begin() const noexcept { return {this, 0}; }
  const_iterator end() const noexcept { return {this, size_}; }

 private:
  struct block_deleter {
    void operator()(T* p) const noexcept { ::operator delete(static_cast<void*>(p), std::align_val_t{alignof(T)}); }
  };
  using block = std::unique_ptr<T[], block_deleter>;
  static block allocate_block() {
    return block(static_cast<T*>(::operator new(sizeof(T) * block_size, std::align_val_t{alignof(T)})));
  }
  void destroy() noexcept {
    for (std::size_t i = 0; i < size_; ++i) (*this)[i].~T();
    size_ = 0;
    blocks_.clear();
  }

  std::vector<block> blocks_;
  std::size_t size_ = 0;
};

}  // namespace lockscope::locks::timeline_detail
