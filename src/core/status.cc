// Error messages: one line, names made printable and short, fields in a fixed order (status.h).
#include "nmkit/status.h"

#include <algorithm>
#include <cstdio>

namespace nmkit {
namespace {

// 200 bytes shows any real tensor name whole (the longest in common checkpoints are ~80) and keeps
// an error line readable when a hostile header holds a megabyte name.
constexpr size_t kMaxNameBytes = 200;

}  // namespace

std::string display_name(std::string_view name) {
  std::string out;
  out.reserve(std::min(name.size(), kMaxNameBytes) + 3);
  for (size_t i = 0; i < name.size(); ++i) {
    if (out.size() >= kMaxNameBytes) {
      // Do not end inside a UTF-8 sequence: drop continuation bytes and their lead byte.
      while (!out.empty() && (static_cast<uint8_t>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && static_cast<uint8_t>(out.back()) >= 0xC0) out.pop_back();
      out += "...";
      break;
    }
    const auto c = static_cast<uint8_t>(name[i]);
    if (c < 0x20 || c == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string quote_name(std::string_view name) {
  // Appended piecewise: `"'" + std::string&&` trips GCC 12's -Wrestrict false positive.
  std::string out(1, '\'');
  out += display_name(name);
  out += '\'';
  return out;
}

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Unspecified: return "unspecified";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::InvalidFile: return "invalid file";
    case ErrorCode::InvalidValue: return "invalid value";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::NotFound: return "not found";
    case ErrorCode::Io: return "i/o";
    case ErrorCode::SameFile: return "same file";
    case ErrorCode::Limit: return "limit";
  }
  return "unknown";
}

Error::Error(std::string message) : what_(std::move(message)) { format(); }

Error::Error(ErrorCode code, std::string what) : code_(code), what_(std::move(what)) { format(); }

Error Error::with_file(std::string file) const {
  Error e = *this;
  e.file_ = std::move(file);
  e.format();
  return e;
}

Error Error::with_tensor(std::string tensor) const {
  Error e = *this;
  e.tensor_ = std::move(tensor);
  e.format();
  return e;
}

Error Error::with_operand(std::string operand) const {
  Error e = *this;
  e.operand_ = std::move(operand);
  e.format();
  return e;
}

Error Error::with_row(int64_t row) const {
  Error e = *this;
  e.row_ = row;
  e.format();
  return e;
}

Error Error::with_column(int64_t column) const {
  Error e = *this;
  e.column_ = column;
  e.format();
  return e;
}

Error Error::with_value(std::string value) const {
  Error e = *this;
  e.value_ = std::move(value);
  e.format();
  return e;
}

Error Error::with_context(const std::string& context) const {
  Error e = *this;
  e.context_ = context + e.context_;
  e.format();
  return e;
}

Error Error::in_file(const std::string& file) const {
  if (file_ || message_.rfind(file + ":", 0) == 0) return *this;
  return with_file(file);
}

void Error::format() {
  std::string out = context_;
  if (file_) {
    out += *file_;
    out += ": ";
  }
  if (tensor_) {
    out += "tensor ";
    out += quote_name(*tensor_);
    out += ": ";
  }
  std::string where = operand_.value_or("");
  if (row_) {
    where += where.empty() ? "row " : " at row ";
    where += std::to_string(*row_);
  }
  if (column_) {
    where += where.empty() ? "column " : row_ ? ", column " : " at column ";
    where += std::to_string(*column_);
  }
  if (!where.empty()) {
    out += where;
    if (!what_.empty()) out += ' ';
  }
  out += what_;
  if (value_) {
    out += ' ';
    out += *value_;
  }
  message_ = std::move(out);
}

}  // namespace nmkit
