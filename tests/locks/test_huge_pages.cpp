// The timeline's big-table memory (huge_pages.hpp, private to the locks library):
// blocks aligned, zeroed and apart; big arrays grow and keep their contents; and, where
// the kernel offers transparent huge pages, it reports the chunks as eligible. The id
// table, grown in place, keeps every id findable.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <unordered_map>
#include <sstream>
#include <string>
#include <vector>

#include "timeline/huge_pages.hpp"
#include "timeline/text_interner.hpp"

using namespace lockscope::locks::timeline_detail;

namespace {

bool all_zero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

// The smaps entry of the mapping holding `address` ("" when none).
[[maybe_unused]] std::string smaps_entry_of(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::string line, entry;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> from >> dash >> to && dash == '-' && line.find(':') > line.find(' ')) {
      if (inside) return entry;
      inside = from <= a && a < to;
      entry.clear();
    }
    if (inside) entry += line + "\n";
  }
  return inside ? entry : "";
}

}  // namespace

TEST_CASE("huge_arena: blocks are aligned, zeroed and never overlap, and big ones get their own memory",
          "[timeline][memory]") {
  huge_arena arena;
  struct block {
    unsigned char* p;
    std::size_t size;
  };
  std::vector<block> blocks;
  const std::size_t sizes[] = {34, 45'056, 65'536, 1, 700'000, 3'000'000, 4096, 1'048'577};
  for (int round = 0; round < 40; ++round) {
    for (std::size_t size : sizes) {
      const std::size_t align = size % 2 == 0 ? 8 : 4;
      auto* p = static_cast<unsigned char*>(arena.allocate(size, align));
      REQUIRE(p != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
      REQUIRE(all_zero(p, size));
      std::memset(p, static_cast<int>(blocks.size() % 251 + 1), size);
      blocks.push_back({p, size});
    }
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {  // each still holds its own pattern
    const auto expected = static_cast<unsigned char>(i % 251 + 1);
    CHECK(blocks[i].p[0] == expected);
    CHECK(blocks[i].p[blocks[i].size - 1] == expected);
  }
  std::size_t total = 0;
  for (const block& b : blocks) total += b.size;
  CHECK(arena.mapped_bytes() >= total);
}

TEST_CASE("huge_page_allocator: a table grows past the huge-page threshold and back, keeping its entries",
          "[timeline][memory]") {
  std::vector<std::uint64_t, huge_page_allocator<std::uint64_t>> table;
  for (std::uint64_t i = 0; i < 600'000; ++i) table.push_back(i * 2654435761u);  // 4.8 MB
  for (std::uint64_t i = 0; i < 600'000; i += 997) REQUIRE(table[i] == i * 2654435761u);
  table.resize(10);
  table.shrink_to_fit();  // back to the heap
  CHECK(table[9] == std::uint64_t{9} * 2654435761u);
  std::vector<std::uint64_t, huge_page_allocator<std::uint64_t>> copy(table);
  CHECK(copy == table);
}

#ifndef LOCKSCOPE_HUGE_PAGES_FROM_HEAP
namespace {

std::string thp_enabled() {
  std::ifstream enabled_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string enabled;
  std::getline(enabled_file, enabled);
  return enabled;
}

}  // namespace

TEST_CASE("huge_arena: its chunks start on a huge page, and each becomes huge-page memory once filled",
          "[timeline][memory]") {
  huge_arena arena;
  void* first = arena.allocate(1000, 8);  // a small arena stays on the heap
  CHECK(smaps_entry_of(first).find("VmFlags:") != std::string::npos);
  auto* p = static_cast<char*>(arena.allocate(huge_arena::heap_bytes, 8));  // past the heap's share: a chunk begins
  CHECK(reinterpret_cast<std::uintptr_t>(p) % huge_page_bytes == 0);
  auto* next = static_cast<char*>(arena.allocate(1000, 8));  // and later blocks are carved from it
  CHECK(next == p + huge_arena::heap_bytes);
  // Fill the chunk, then begin the next one: the filled chunk is advised (and, where
  // the kernel can, collapsed now), and keeps what was written.
  std::memset(p, 0x5a, huge_arena::heap_bytes + 1000);
  const auto inside = [&](const void* b) { return b >= static_cast<void*>(p) && b < static_cast<void*>(p + huge_page_bytes); };
  int blocks = 0;
  while (inside(arena.allocate(65'536, 8))) REQUIRE(++blocks < 32);  // the next chunk, wherever it is mapped
  CHECK(p[0] == 0x5a);
  CHECK(p[huge_arena::heap_bytes + 999] == 0x5a);
  CHECK(all_zero(p + huge_arena::heap_bytes + 1000, huge_page_bytes - huge_arena::heap_bytes - 1000));
  const std::string enabled = thp_enabled();
  if (enabled.empty() || enabled.find("[never]") != std::string::npos) {
    WARN("transparent huge pages are off here (" << enabled << "): eligibility not checked");
    return;
  }
  const std::string entry = smaps_entry_of(p);
  INFO(entry);
  REQUIRE_FALSE(entry.empty());
  // The kernel's own view: advised (VmFlags "hg") and eligible for huge pages.
  const std::size_t flags = entry.find("VmFlags:");
  REQUIRE(flags != std::string::npos);
  CHECK(entry.find(" hg", flags) != std::string::npos);
  const std::size_t eligible = entry.find("THPeligible:");
  REQUIRE(eligible != std::string::npos);
  CHECK(std::stoi(entry.substr(eligible + 12)) == 1);
}

TEST_CASE("huge_arena: the chunk being carved is resident only as far as it is used", "[timeline][memory]") {
  // Were it a huge page from its first touch, 2 MiB would be resident for the first block.
  huge_arena arena;
  arena.allocate(huge_arena::heap_bytes, 8);  // the heap's share
  auto* p = static_cast<char*>(arena.allocate(45'056, 4));  // a chunk begins: one holder block
  REQUIRE(reinterpret_cast<std::uintptr_t>(p) % huge_page_bytes == 0);
  std::memset(p, 1, 45'056);
  // Resident pages by mincore, not smaps (the kernel may merge the chunk's mapping with
  // a neighbour's).
  std::vector<unsigned char> resident(huge_page_bytes / 4096);
  REQUIRE(::mincore(p, huge_page_bytes, resident.data()) == 0);
  std::size_t pages = 0;
  for (unsigned char r : resident) pages += r & 1;
  CHECK(pages >= 45'056 / 4096);
  CHECK(pages <= huge_arena::populate_bytes / 4096);  // its first populate step at most
}
#endif

TEST_CASE("id_table: grown in place past a million bytes, every id is still found under its hash", "[huge][ids]") {
  // Against a plain map of what was inserted and erased. Besides uniform hashes: a dense
  // band at the end of the hash space (its runs wrap past the last slot), one at the
  // start, and a few thousand ids under one hash (a long run). Either growth (the owners'
  // by a quarter, the locks' by half), each step past 32Ki slots by that much.
  const id_table::growth growth = GENERATE(id_table::growth::by_quarter, id_table::growth::by_half);
  const std::size_t divisor = growth == id_table::growth::by_half ? 2 : 4;
  id_table table(growth);
  std::mt19937 rng(43);
  std::unordered_map<std::uint32_t, std::uint32_t> truth;
  std::size_t capacity = 0, growths = 0;
  std::uint32_t erased_hash = 0;  // id 6's (erased by id 9)
  const auto all_found = [&] {
    for (const auto& [id, h] : truth) {
      const std::uint32_t want = id;
      if (table.find_if(h, [&](std::uint32_t x) { return x == want; }) != id) return false;
    }
    return true;
  };
  for (std::uint32_t id = 0; id < 400'000; ++id) {
    std::uint32_t h = static_cast<std::uint32_t>(rng());
    if (id % 100 == 0) h = 0xffffffffu - static_cast<std::uint32_t>(rng() % (1u << 23));
    if (id % 100 == 1) h = static_cast<std::uint32_t>(rng() % (1u << 23));
    if (id % 100 == 2) h = 0x80000000u;
    table.insert(id, h);
    truth.emplace(id, h);
    if (id == 6) erased_hash = h;
    if (id % 5 == 4) {  // erase one inserted a little earlier, when still there
      const std::uint32_t gone = id - 3;
      if (const auto it = truth.find(gone); it != truth.end()) {
        table.erase(gone, it->second);
        truth.erase(it);
      }
    }
    if (table.capacity() != capacity) {
      if (capacity >= (std::size_t{1} << 15)) REQUIRE(table.capacity() == capacity + capacity / divisor);
      capacity = table.capacity();
      ++growths;
      if (capacity >= (std::size_t{1} << 16)) {
        INFO("capacity " << capacity << " after id " << id);
        REQUIRE(all_found());
      }
    }
  }
  CHECK(capacity * 8 > (std::size_t{1} << 20));  // the mapped, moved kind
  CHECK(growths > (divisor == 4 ? 20u : 15u));
  REQUIRE(all_found());
  // Ids never inserted or erased are not found.
  for (std::uint32_t absent : {400'000u, 400'001u, 4u}) {
    const std::uint32_t h = absent == 4u ? 0x12345678u : static_cast<std::uint32_t>(rng());
    CHECK(table.find_if(h, [&](std::uint32_t x) { return x == absent; }) == no_id);
  }
  CHECK(truth.count(6) == 0);
  CHECK(table.find_if(erased_hash, [&](std::uint32_t x) { return x == 6; }) == no_id);
}

TEST_CASE("id_table: find_if_slot's empty slot is where insert() puts the id, across growth", "[huge][ids]") {
  // A new lock is looked up once: the slot its lookup ended on is where insert_at()
  // places it. Two tables fed the same ids, one through find_if_slot + insert_at and
  // one through insert(), must find every id alike, and hold them in the same places.
  id_table by_slot, by_insert;
  std::mt19937 rng(44);
  std::vector<std::uint32_t> hashes;
  for (std::uint32_t id = 0; id < 100'000; ++id) {
    // Clustered hashes (runs of about a thousand, one wrapping past the last slot) besides
    // uniform ones. Denser clusters make every lookup in them walk the whole run: the
    // test's time grows with the square of their size and proves nothing more.
    std::uint32_t h = static_cast<std::uint32_t>(rng());
    if (id % 97 == 0) h = 0xfffff000u + static_cast<std::uint32_t>(rng() % 64);
    if (id % 101 == 0) h = static_cast<std::uint32_t>(rng() % 16);
    hashes.push_back(h);
    std::size_t empty = id_table::no_slot;
    const std::uint32_t found = by_slot.find_if_slot(h, [&](std::uint32_t x) { return x == id; }, empty);
    REQUIRE(found == no_id);
    REQUIRE((by_slot.capacity() == 0) == (empty == id_table::no_slot));
    if (empty != id_table::no_slot) by_slot.insert_at(empty, id, h);
    else by_slot.insert(id, h);
    by_insert.insert(id, h);
    // The id just placed is found, and a lookup of it answers no slot.
    std::size_t none = 0;
    REQUIRE(by_slot.find_if_slot(h, [&](std::uint32_t x) { return x == id; }, none) == id);
    REQUIRE(none == id_table::no_slot);
  }
  REQUIRE(by_slot.capacity() == by_insert.capacity());
  CHECK(by_slot.capacity() * 8 > (std::size_t{1} << 20));  // grown into the mapped, moved kind
  std::size_t placed_apart = 0, lost = 0;
  for (std::uint32_t id = 0; id < hashes.size(); ++id) {
    // The first id of each probe run with this hash: the same in both, as placed alike.
    placed_apart += by_slot.first_with_hash(hashes[id]) != by_insert.first_with_hash(hashes[id]);
    lost += by_slot.find_if(hashes[id], [&](std::uint32_t x) { return x == id; }) != id;
  }
  CHECK(placed_apart == 0);
  CHECK(lost == 0);
}
