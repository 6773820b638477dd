#include "tools/nmkit/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/core.h>

namespace nmkit::cli {
namespace {

std::atomic<size_t> g_failed_bytes{0};
std::string g_activity;  // the CLI's main thread sets it (MemoryActivity)

// A "Key:   123 kB" line of /proc/meminfo, in bytes; nullopt when absent.
std::optional<uint64_t> meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    uint64_t kb = 0;
    if (fields >> kb) return kb * 1024;
  }
  return std::nullopt;
}

// Fields of /proc/self/statm (in pages): 0 the address space (VmSize), 5 data + stack (VmData).
uint64_t statm_bytes(int field) {
  std::ifstream in("/proc/self/statm");
  uint64_t value = 0;
  for (int i = 0; i <= field && (in >> value); ++i) {
  }
  return value * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t left_under(uint64_t limit, uint64_t used) { return limit > used ? limit - used : 0; }

// cgroup v2: memory.max less what the group holds, page cache excepted (the kernel reclaims it).
std::optional<uint64_t> cgroup_left() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, group;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) group = line.substr(3);
  }
  if (group.empty()) return std::nullopt;
  const std::string dir = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
  std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
  uint64_t max = 0, current = 0;
  if (!(max_file >> max) || !(current_file >> current)) return std::nullopt;  // "max": no limit
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0, cache = 0;
  while (stat >> key >> value) {
    if (key == "file") cache = value;
  }
  return left_under(max, current > cache ? current - cache : 0);
}

}  // namespace

std::string decimal_bytes(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

MemoryBudget available_memory() {
  MemoryBudget budget;
  const auto consider = [&budget](uint64_t bytes, const char* limit) {
    if (bytes < budget.bytes) budget = {bytes, limit};
  };
  if (auto available = meminfo_bytes("MemAvailable")) {
    consider(*available + meminfo_bytes("SwapFree").value_or(0), "free memory and swap");
  }
  rlimit as{}, data{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    consider(left_under(as.rlim_cur, statm_bytes(0)), "ulimit -v");
  }
  if (::getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY) {
    consider(left_under(data.rlim_cur, statm_bytes(5)), "ulimit -d");
  }
  if (auto left = cgroup_left()) consider(*left, "the cgroup's memory.max");
  return budget;
}

uint64_t model_bytes_at_least(const LlamaParams& p, const ModelOptions& o, int64_t n_ctx) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); };
  const uint64_t d = u(p.n_embd), hd = u(p.head_dim()), q = u(p.n_head) * hd, kv = u(p.n_head_kv) * hd;
  const uint64_t linear = u(p.n_layer) * (d * q * 2 + d * kv * 2 + d * u(p.n_ff) * 3);
  const double weight_bytes = o.weights == DType::F32 ? 4.0 : o.weights == DType::BF16 ? 2.0 : 1.0;
  const double kept = o.pattern ? static_cast<double>(o.pattern->keep) / o.pattern->group : 1.0;
  double bytes = static_cast<double>(linear) * weight_bytes * kept;
  if (o.keep_dense_weights) bytes += static_cast<double>(linear) * 4.0;
  const uint64_t vocab = u(p.n_vocab) * d;
  bytes += static_cast<double>(vocab) * (4.0 + weight_bytes);  // f32 embedding, the head
  bytes += 2.0 * static_cast<double>(u(p.n_layer) * u(n_ctx) * kv) * 4.0;  // K and V, f32
  return static_cast<uint64_t>(bytes);
}

Status check_memory(const std::string& what, uint64_t bytes, const std::string& for_what) {
  const MemoryBudget budget = available_memory();
  if (bytes <= budget.bytes) return ok_status();
  return Error(fmt::format("{}: needs at least {} ({}), {} available ({})", what, decimal_bytes(bytes), for_what,
                           decimal_bytes(budget.bytes), budget.limit));
}

MemoryActivity::MemoryActivity(std::string what) : previous_(std::move(g_activity)) { g_activity = std::move(what); }

MemoryActivity::~MemoryActivity() {
  // Unwinding from std::bad_alloc keeps the innermost activity for main's message.
  if (std::uncaught_exceptions() == 0) g_activity = std::move(previous_);
}

void record_failed_allocation(size_t bytes) noexcept { g_failed_bytes.store(bytes, std::memory_order_relaxed); }

std::string out_of_memory_message() {
  const size_t bytes = g_failed_bytes.load(std::memory_order_relaxed);
  std::string text = bytes > 0 ? fmt::format("cannot allocate {} ({} bytes)", decimal_bytes(bytes), bytes) : "cannot allocate memory";
  if (!g_activity.empty()) text += " while " + g_activity;
  const MemoryBudget budget = available_memory();
  text += ": out of memory";
  if (!budget.limit.empty()) text += fmt::format(" ({} available: {})", decimal_bytes(budget.bytes), budget.limit);
  return text;
}

}  // namespace nmkit::cli
