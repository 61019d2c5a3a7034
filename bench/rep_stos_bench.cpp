// Why the libraries are built with -mmemset-strategy=vector_loop (CMakeLists.txt): GCC's
// generic x86-64 tuning zeroes a struct of a few hundred bytes with `rep stos`, whose
// start-up costs more than the stores themselves at these sizes. The analyzer zeroes
// several such structs per exchange (an exchange, a lock operation, a lock event).
//   build/default/bench/rep_stos_bench
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>

namespace {

struct alignas(16) record {
  std::uint64_t words[18];  // 144 bytes: an exchange
};

[[gnu::noinline]] void zero_rep_stos(record* r) {
  std::uint64_t* p = r->words;
  std::size_t n = 18;
  asm volatile("rep stosq" : "+D"(p), "+c"(n) : "a"(std::uint64_t{0}) : "memory");
}

[[gnu::noinline]] void zero_vector_stores(record* r) {
  for (std::size_t i = 0; i < 18; i += 2) {
    asm volatile("" ::: "memory");  // two words a store, as the vector loop writes them
    r->words[i] = 0;
    r->words[i + 1] = 0;
  }
}

void rep_stos(benchmark::State& state) {
  record r{};
  for (auto _ : state) {
    zero_rep_stos(&r);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(rep_stos);

void vector_stores(benchmark::State& state) {
  record r{};
  for (auto _ : state) {
    zero_vector_stores(&r);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(vector_stores);

}  // namespace

BENCHMARK_MAIN();
