// Running out of memory as an error, not an abort (issue 24, item 2; docs/design.md 10.11): a model
// that cannot fit is refused before loading ("needs N GB, M GB available"), and an allocation that
// fails anyway ends the command with one line naming its size and what the command was doing, exit
// 1, its temporaries removed (main catches std::bad_alloc; the executable's operator new records
// the size, operator_new.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nmkit/model.h"
#include "nmkit/status.h"

namespace nmkit::cli {

// A lower bound of what LlamaModel::build(params, options) and one session of n_ctx tokens hold:
// LlamaModel::estimate_bytes and the f32 KV cache.
uint64_t model_bytes_at_least(const LlamaParams& params, const ModelOptions& options, int64_t n_ctx);

// An Error "WHAT: needs at least N GB (for ...), M GB available (LIMIT)" when `bytes` exceeds
// available_memory() (src/core/system_memory.h).
Status check_memory(const std::string& what, uint64_t bytes, const std::string& for_what);

// What the command is doing, for the out-of-memory line ("tokenizing FILE"); restored on scope exit.
class MemoryActivity {
 public:
  explicit MemoryActivity(std::string what);
  ~MemoryActivity();
  MemoryActivity(const MemoryActivity&) = delete;
  MemoryActivity& operator=(const MemoryActivity&) = delete;

 private:
  std::string previous_;
};

// The size of the last allocation that failed (recorded by operator new; 0 when none was).
void record_failed_allocation(size_t bytes) noexcept;

// "cannot allocate 2.00 GiB (2147483648 bytes) while tokenizing FILE: out of memory (1.42 GiB
// available: ulimit -v)", for main's handler of std::bad_alloc.
std::string out_of_memory_message();

}  // namespace nmkit::cli
