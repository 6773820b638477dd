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

std::string printable_line(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_bytes) {
      // Do not end inside a UTF-8 sequence: drop continuation bytes and their lead byte.
      while (!out.empty() && (static_cast<uint8_t>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && static_cast<uint8_t>(out.back()) >= 0xC0) out.pop_back();
      out += "...";
      break;
    }
    const auto c = static_cast<uint8_t>(text[i]);
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

std::string display_name(std::string_view name) { return printable_line(name, kMaxNameBytes); }

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
    case ErrorCode::Cancelled: return "cancelled";
  }
  return "unknown";
}

const Error::Details& Error::details() const {
  static const Details none;
  return details_ ? *details_ : none;
}

Error::Error(std::string message) {
  auto d = std::make_shared<Details>();
  d->what = std::move(message);
  details_ = std::move(d);
  format();
}

Error::Error(ErrorCode code, std::string what) : code_(code) {
  auto d = std::make_shared<Details>();
  d->what = std::move(what);
  details_ = std::move(d);
  format();
}

Error Error::with(void (*set)(Details&, const void*), const void* arg) const {
  Error e = *this;
  auto d = std::make_shared<Details>(details());
  set(*d, arg);
  e.details_ = std::move(d);
  e.format();
  return e;
}

Error Error::with_file(std::string file) const {
  return with([](Details& d, const void* a) { d.file = *static_cast<const std::string*>(a); }, &file);
}

Error Error::with_tensor(std::string tensor) const {
  return with([](Details& d, const void* a) { d.tensor = *static_cast<const std::string*>(a); }, &tensor);
}

Error Error::with_operand(std::string operand) const {
  return with([](Details& d, const void* a) { d.operand = *static_cast<const std::string*>(a); }, &operand);
}

Error Error::with_row(int64_t row) const {
  return with([](Details& d, const void* a) { d.row = *static_cast<const int64_t*>(a); }, &row);
}

Error Error::with_column(int64_t column) const {
  return with([](Details& d, const void* a) { d.column = *static_cast<const int64_t*>(a); }, &column);
}

Error Error::with_value(std::string value) const {
  return with([](Details& d, const void* a) { d.value = *static_cast<const std::string*>(a); }, &value);
}

Error Error::with_context(const std::string& context) const {
  return with([](Details& d, const void* a) { d.context = *static_cast<const std::string*>(a) + d.context; },
              &context);
}

Error Error::in_file(const std::string& file) const {
  if (details().file || message_.rfind(file + ":", 0) == 0) return *this;
  return with_file(file);
}

Error Error::classified(ErrorCode code) const {
  Error e = *this;
  if (e.code_ == ErrorCode::Unspecified) e.code_ = code;
  return e;
}

void Error::format() {
  const Details& d = details();
  std::string out = d.context;
  if (d.file) {
    out += *d.file;
    out += ": ";
  }
  if (d.tensor) {
    out += "tensor ";
    out += quote_name(*d.tensor);
    out += ": ";
  }
  std::string where = d.operand.value_or("");
  if (d.row) {
    where += where.empty() ? "row " : " at row ";
    where += std::to_string(*d.row);
  }
  if (d.column) {
    where += where.empty() ? "column " : d.row ? ", column " : " at column ";
    where += std::to_string(*d.column);
  }
  if (!where.empty()) {
    out += where;
    if (!d.what.empty()) out += ' ';
  }
  out += d.what;
  if (d.value) {
    out += ' ';
    out += *d.value;
  }
  message_ = std::move(out);
}

}  // namespace nmkit
