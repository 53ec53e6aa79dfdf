// Embedded-store decisions per second (one hot key; a million distinct keys; 1 and 2 threads),
// bytes of state per idle key, and the per-request pieces around a decision (key building,
// each algorithm's math).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/algorithm.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/store/memory_store.hpp"

namespace {

using namespace floodgate;

limit::Params bucket(std::int64_t capacity, double rate) {
  limit::Params p;
  p.algorithm = config::Algorithm::token_bucket;
  p.capacity = capacity;
  p.per_second = rate;
  return p;
}

// Shared by the threads of one benchmark run.
limit::SystemClock system_clock;
std::unique_ptr<store::MemoryState> shared_state;

std::vector<std::string> make_keys(std::size_t n) {
  std::vector<std::string> keys;
  keys.reserve(n);
  keys::KeyHasher hasher("bench-secret-0123456789abcdef");
  for (std::size_t i = 0; i < n; ++i)
    keys.push_back("rl:api:ip:{" + hasher.hex(std::to_string(i)) + "}");
  return keys;
}

void BM_MemoryStoreHotKey(benchmark::State& state) {
  if (state.thread_index() == 0)
    shared_state = std::make_unique<store::MemoryState>(system_clock, 1'000'000);
  std::vector<store::Item> items{{"rl:api:ip:{hot}", bucket(1'000'000'000, 1e9), 1, true}};
  for (auto _ : state) benchmark::DoNotOptimize(shared_state->acquire(items));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemoryStoreHotKey)->Threads(1)->Threads(2)->UseRealTime();

void BM_MemoryStoreMillionKeys(benchmark::State& state) {
  static const auto keys = make_keys(1'000'000);
  if (state.thread_index() == 0)
    shared_state = std::make_unique<store::MemoryState>(system_clock, 2'000'000);
  std::vector<store::Item> items{{"", bucket(100, 10), 1, true}};
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    items[0].key = keys[i++ % keys.size()];
    benchmark::DoNotOptimize(shared_state->acquire(items));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemoryStoreMillionKeys)->Threads(1)->Threads(2)->UseRealTime();

// Not a speed: the heap held per idle key (one token bucket each), as a counter.
void BM_BytesPerIdleKey(benchmark::State& state) {
  const std::size_t n = 200'000;
  const auto keys = make_keys(n);
  for (auto _ : state) {
    auto before = mallinfo2().uordblks;
    auto st = std::make_unique<store::MemoryState>(system_clock, 10'000'000);
    std::vector<store::Item> items{{"", bucket(100, 1), 1, true}};
    for (const auto& k : keys) {
      items[0].key = k;
      st->acquire(items);
    }
    auto after = mallinfo2().uordblks;
    state.counters["bytes_per_key"] = static_cast<double>(after - before) / static_cast<double>(n);
    state.counters["key_bytes"] = static_cast<double>(keys[0].size());
  }
}
BENCHMARK(BM_BytesPerIdleKey)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_KeyHash(benchmark::State& state) {
  keys::KeyHasher hasher("bench-secret-0123456789abcdef");
  std::string material = "0:0:9:203.0.113.7";
  for (auto _ : state) benchmark::DoNotOptimize(hasher.hex(material));
}
BENCHMARK(BM_KeyHash);

void BM_Evaluate(benchmark::State& state) {
  limit::Params p;
  p.algorithm = static_cast<config::Algorithm>(state.range(0));
  p.capacity = 1'000'000;
  p.per_second = 1000;
  p.window = 60 * limit::kMicrosPerSecond;
  limit::State s;
  limit::Micros now = 1'800'000'000 * limit::kMicrosPerSecond;
  for (auto _ : state) {
    auto e = limit::evaluate(p, s, now, 1);
    // Keep a sliding log short so the loop measures a decision, not a growing vector.
    if (p.algorithm != config::Algorithm::sliding_log || state.iterations() % 64 != 0)
      s = std::move(e.next);
    else
      s = std::monostate{};
    now += 1000;
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel(config::to_string(p.algorithm));
}
BENCHMARK(BM_Evaluate)->DenseRange(0, 5);

}  // namespace

BENCHMARK_MAIN();
