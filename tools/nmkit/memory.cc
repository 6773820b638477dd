#include "tools/nmkit/memory.h"

#include "core/system_memory.h"

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

}  // namespace

uint64_t model_bytes_at_least(const LlamaParams& p, const ModelOptions& o, int64_t n_ctx) {
  const auto kv = static_cast<uint64_t>(std::max<int64_t>(p.n_head_kv * p.head_dim(), 0));
  const auto kv_cache = 2 * static_cast<uint64_t>(std::max<int64_t>(p.n_layer, 0)) *
                        static_cast<uint64_t>(std::max<int64_t>(n_ctx, 0)) * kv * 4;  // K and V, f32
  return LlamaModel::estimate_bytes(p, o) + kv_cache;
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
