#include "tools/nmkit/cli_util.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <fmt/core.h>
#include <re2/re2.h>

namespace nmkit::cli {

int report_error(std::string_view message) {
  std::string line;
  line.reserve(message.size());
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '\n' || c == '\r') {
      if (i + 1 < message.size()) line += "; ";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      line += display_name(std::string_view(&c, 1));  // never a raw escape sequence on the terminal
    } else {
      line += c;
    }
  }
  std::fflush(stdout);
  fmt::print(stderr, "nmkit: {}\n", line);
  std::fflush(stderr);
  return 1;
}

int report_error(const Error& error) { return report_error(error.message()); }

Progress::Progress(std::string label) : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { clear(); }

void Progress::update(size_t i, size_t n, std::string_view name) {
  if (!enabled_) return;
  // Truncated so the line never wraps on an 80-column terminal (a wrapped line cannot be erased by \r).
  std::string text = fmt::format("[{}/{}] {} {}", i + 1, n, label_, display_name(name));
  if (text.size() > 79) text.resize(79);
  fmt::print(stderr, "\r{:<79}", text);
  std::fflush(stderr);
  shown_ = true;
}

std::function<void(size_t i, size_t n, const std::string& name)> Progress::tensor_callback() {
  if (!enabled_) return {};
  return [this](size_t i, size_t n, const std::string& name) { update(i, n, name); };
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  fmt::print(stderr, "\r{:79}\r", "");
  std::fflush(stderr);
  shown_ = false;
}

Result<NameFilter> NameFilter::make(const std::string& include, const std::string& exclude) {
  NameFilter filter;
  const auto compile = [](const std::string& text, const char* option) -> Result<std::shared_ptr<const re2::RE2>> {
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_shared<const re2::RE2>(text, options);
    if (!re->ok()) {
      return Error(fmt::format("{} {}: not a valid regular expression ({})", option, display_name(text),
                               display_name(re->error())));
    }
    return re;
  };
  if (!include.empty()) {
    auto re = compile(include, "--include");
    if (!re.ok()) return re.error();
    filter.include_ = std::move(*re);
  }
  if (!exclude.empty()) {
    auto re = compile(exclude, "--exclude");
    if (!re.ok()) return re.error();
    filter.exclude_ = std::move(*re);
  }
  return filter;
}

bool NameFilter::selected(const std::string& name) const { return selected(std::vector<std::string>{name}); }

bool NameFilter::selected(const std::vector<std::string>& names) const {
  const auto found = [&names](const re2::RE2& re) {
    return std::any_of(names.begin(), names.end(), [&re](const std::string& n) { return re2::RE2::PartialMatch(n, re); });
  };
  if (include_ && !found(*include_)) return false;
  return !(exclude_ && found(*exclude_));
}

std::function<bool(std::string_view name)> NameFilter::predicate() const {
  return [filter = *this](std::string_view name) { return filter.selected(std::string(name)); };
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(header_.size());
  // Names come from files: escaped and cut like in error lines (issue 13, M3/M4).
  for (auto& cell : cells) cell = display_name(cell);
  rows_.push_back(std::move(cells));
}

void Table::add_rule() { rows_.emplace_back(); }

std::string Table::render() const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  total = total >= 2 ? total - 2 : 0;

  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) text += "  ";
      text += c == 0 ? fmt::format("{:<{}}", cells[c], width[c]) : fmt::format("{:>{}}", cells[c], width[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };
  line(header_);
  out += std::string(total, '-') + '\n';
  for (const auto& row : rows_) {
    if (row.empty()) {
      out += std::string(total, '-') + '\n';
    } else {
      line(row);
    }
  }
  return out;
}

void keep_freed_blocks_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

std::string human_count(double count) {
  if (std::fabs(count) >= 1e9) return fmt::format("{:.2f}G", count / 1e9);
  if (std::fabs(count) >= 1e6) return fmt::format("{:.2f}M", count / 1e6);
  if (std::fabs(count) >= 1e4) return fmt::format("{:.1f}k", count / 1e3);
  return fmt::format("{:.0f}", count);
}

std::string short_float(double value) { return fmt::format("{:.4g}", value); }

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool parse_positive_list(const std::string& text, const char* flag, std::vector<int64_t>& out) {
  out.clear();
  for (const auto& item : split_list(text)) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (value < 1 || end == nullptr || *end != '\0') {
      std::fprintf(stderr, "nmkit: %s '%s' is not a positive integer\n", flag, item.c_str());
      return false;
    }
    out.push_back(value);
  }
  return true;
}

}  // namespace nmkit::cli
