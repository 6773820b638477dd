// Errors and results: every public call validates its inputs once, at the boundary, and returns a
// Result carrying a one-line message that names the file, tensor, index and value (docs/design.md 10.1).
// No exception or abort leaves the library for bad input; NMKIT_ASSERT guards internal invariants
// (value() of a failed Result and error() of a successful one are such invariants: they abort with a
// message instead of throwing std::bad_variant_access).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

// Always-on check of an internal invariant (never of user input, which gets an Error instead).
#define NMKIT_ASSERT(cond)                                                                   \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "nmkit: internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace nmkit {

// How a name from a file (tensor, metadata key) or from the user appears in a message or a table:
// control characters, DEL and newlines escaped as \xNN, cut to at most 200 bytes with "..." (never
// inside a UTF-8 sequence), so a hostile 10 MB name or one holding escape sequences gives one short
// line (issue 13, M3/M4). quote_name adds single quotes; an empty name shows as ''.
std::string display_name(std::string_view name);
std::string quote_name(std::string_view name);
// The same escaping and cutting for any text, at most max_bytes (plus "..."): display_name is
// printable_line(name, 200).
std::string printable_line(std::string_view text, size_t max_bytes);

// What went wrong, for callers that branch on it (the message is for people).
enum class ErrorCode {
  Unspecified,      // built from a message only
  InvalidArgument,  // an option or parameter out of range (bad pattern, unknown dtype name, ...)
  InvalidFile,      // malformed or inconsistent file contents (header, record, stored weight)
  InvalidValue,     // a value the operation cannot take (NaN, Inf, negative norm)
  Unsupported,      // well-formed but not handled (dtype, format, shape rank)
  NotFound,         // a file or tensor that is not there
  Io,               // the operating system refused (open, map, write, rename)
  SameFile,         // an output that is one of the inputs
  Limit,            // a size or count above what nmkit accepts (header, nesting, name length)
  Cancelled,        // a progress callback stopped the job by throwing (invoke_callback)
};
std::string_view error_code_name(ErrorCode code);

// A failure with a one-line message. Either given whole (Error("...")), or built from a code, what
// happened, and the optional file, tensor, operand, row, column and value it concerns; the message
// is then formatted here, always in the same order:
//   "FILE: tensor 'NAME': OPERAND at row R, column C: WHAT: VALUE"
// (parts that are not set are left out; names pass through quote_name).
class Error {
 public:
  explicit Error(std::string message);
  Error(ErrorCode code, std::string what);

  // Builders: each returns a copy with the field set (chainable on temporaries).
  Error with_file(std::string file) const;
  Error with_tensor(std::string tensor) const;
  Error with_operand(std::string operand) const;  // which input of the call: "gradient", "act_norms"
  Error with_row(int64_t row) const;
  Error with_column(int64_t column) const;
  Error with_value(std::string value) const;
  // Prefixes context ("--pattern: ") so callers can add where without reformatting what.
  Error with_context(const std::string& context) const;
  // Sets the file unless one is set (a message given whole is prefixed "FILE: " unless it starts so).
  Error in_file(const std::string& file) const;
  // The same error with `code` unless it has one already: a module's boundary classifies what its
  // internals left Unspecified (SafetensorsFile::open: a bad header is InvalidFile).
  Error classified(ErrorCode code) const;

  const std::string& message() const { return message_; }
  ErrorCode code() const { return code_; }
  const std::optional<std::string>& file() const { return details().file; }
  const std::optional<std::string>& tensor() const { return details().tensor; }
  const std::optional<std::string>& operand() const { return details().operand; }
  const std::optional<int64_t>& row() const { return details().row; }
  const std::optional<int64_t>& column() const { return details().column; }
  const std::optional<std::string>& value() const { return details().value; }

 private:
  // The fields behind the message, shared between copies: an Error stays two words and a string,
  // so Result<T> is barely larger than T (and GCC 12 warns less about variants of it).
  struct Details {
    std::string context, what;
    std::optional<std::string> file, tensor, operand;
    std::optional<int64_t> row, column;
    std::optional<std::string> value;
  };
  const Details& details() const;
  Error with(void (*set)(Details&, const void*), const void* arg) const;
  void format();

  ErrorCode code_ = ErrorCode::Unspecified;
  std::shared_ptr<const Details> details_;
  std::string message_;
};

// Either a value or an Error. Result<void> (alias Status) carries only success or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // On an error these are a bug in the caller, caught by NMKIT_ASSERT (a one-line message and
  // abort, never an exception: nothing in nmkit throws). Check ok() first.
  T& value() & {
    NMKIT_ASSERT(ok());
    return *std::get_if<0>(&state_);
  }
  const T& value() const& {
    NMKIT_ASSERT(ok());
    return *std::get_if<0>(&state_);
  }
  T&& value() && {
    NMKIT_ASSERT(ok());
    return std::move(*std::get_if<0>(&state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // On success this is a bug in the caller, caught like value() on an error.
  const Error& error() const {
    NMKIT_ASSERT(!ok());
    return *std::get_if<1>(&state_);
  }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    NMKIT_ASSERT(!ok_);
    return error_;
  }

 private:
  Error error_{""};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

// Calls a caller's callback (progress of a long job) when it is set. An exception it throws is how
// a caller stops the job (Python's Ctrl-C, python/src/bindings.h): it becomes an Error (Cancelled)
// naming `what`, so that no exception crosses the library (docs/design.md 10.1) and the job ends as
// on any error, with nothing written.
template <class F, class... Args>
Status invoke_callback(const F& callback, std::string_view what, Args&&... args) noexcept {
  if (!callback) return ok_status();
  try {
    callback(std::forward<Args>(args)...);
    return ok_status();
  } catch (...) {
    return Error(ErrorCode::Cancelled, std::string(what) + " stopped the job");
  }
}

}  // namespace nmkit

// Propagates a failed Result/Status from the enclosing function.
#define NMKIT_TRY(expr)                                   \
  do {                                                    \
    auto&& nmkit_try_result_ = (expr);                    \
    if (!nmkit_try_result_.ok()) return nmkit_try_result_.error(); \
  } while (0)

