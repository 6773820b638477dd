// Shared pieces of the nmkit subcommands: one-line errors, a progress line that only a terminal sees,
// name selection by regex and plain-text tables (outputs are written through include/nmkit/files.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/status.h"

namespace re2 {
class RE2;
}

namespace nmkit::cli {

// Prints "nmkit: MESSAGE" as exactly one line on stderr (embedded newlines become "; ") and returns
// the exit code for bad input, 1. Library messages already name the file, tensor and value.
int report_error(const Error& error);
int report_error(std::string_view message);

// "\r[i/n] label name" on stderr while a long job runs. Only when stderr is a terminal: piped or
// redirected stderr (CI logs, tests) stays quiet, so an error is the only thing a script sees there.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(size_t i, size_t n, std::string_view name);
  void clear();  // erases the line (also done by the destructor)
  // update() as a per-tensor progress callback for the library's checkpoint jobs; empty (no calls at
  // all) when the line is not shown.
  std::function<void(size_t i, size_t n, const std::string& name)> tensor_callback();
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_ = false;
  bool shown_ = false;
};

// What prune, slide and demo leave alone unless told otherwise: embeddings, norms and the output head.
inline constexpr const char* kDefaultExclude = "embed|norm|lm_head|wte|wpe";

// Tensor selection: a name is selected when `include` is found in it (an empty include selects
// everything) and `exclude` is not (an empty exclude excludes nothing). RE2 syntax (no
// backreferences or lookaround): matching takes time linear in the name and no recursion, so a
// hostile header's 100 MB name cannot overflow the stack (issue 13, C2; std::regex did).
class NameFilter {
 public:
  static Result<NameFilter> make(const std::string& include, const std::string& exclude);
  bool selected(const std::string& name) const;
  // A tensor known by several names (a model linear: its GGUF and its Hugging Face name): selected
  // when `include` is found in one of them and `exclude` in none.
  bool selected(const std::vector<std::string>& names) const;
  // For the library's checkpoint transforms (include/nmkit/checkpoint_transform.h).
  std::function<bool(std::string_view name)> predicate() const;

 private:
  NameFilter() = default;
  std::shared_ptr<const re2::RE2> include_;  // null: no filter
  std::shared_ptr<const re2::RE2> exclude_;
};

// A plain-text table; columns after the first are right-aligned (numbers).
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> cells);
  void add_rule();  // a dashed line before a total row
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a rule
};

// Lets freed large blocks stay in the heap for the next one. Pruning a checkpoint allocates each
// compressed weight's parts (tens of MiB for an LLM layer) and frees them once written; glibc serves
// such blocks with mmap and returns them with munmap, so each weight paid a page fault per 4 KiB
// again. Process-wide, hence the CLI's call and not the library's.
void keep_freed_blocks_in_heap();

// Items of a comma-separated option value ("1,4,16"), empty items dropped.
std::vector<std::string> split_list(const std::string& text);
// A comma-separated list of positive integers into `out`; on a bad item prints
// "nmkit: FLAG 'ITEM' is not a positive integer" and returns false.
bool parse_positive_list(const std::string& text, const char* flag, std::vector<int64_t>& out);

// "1.50 MiB", "384 B".
std::string human_bytes(double bytes);
// "22.7M", "1.2k", "512".
std::string human_count(double count);
// Shortest round-trip-ish rendering for tables: 4 significant digits.
std::string short_float(double value);

}  // namespace nmkit::cli
