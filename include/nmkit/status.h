// Errors and results: every public call validates its inputs once, at the boundary, and returns a
// Result carrying a one-line message that names the file, tensor, index and value (design.md 10.1).
// No exception or abort leaves the library for bad input; NMKIT_ASSERT guards internal invariants.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace nmkit {

// A failure with a human-readable, single-line message.
class Error {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }

  // Prefixes context ("file.safetensors: ") so callers can add where without reformatting what.
  Error with_context(const std::string& context) const { return Error(context + message_); }

 private:
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

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(state_); }

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
  const Error& error() const { return error_; }

 private:
  Error error_{""};
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace nmkit

// Propagates a failed Result/Status from the enclosing function.
#define NMKIT_TRY(expr)                                   \
  do {                                                    \
    auto&& nmkit_try_result_ = (expr);                    \
    if (!nmkit_try_result_.ok()) return nmkit_try_result_.error(); \
  } while (0)

// Always-on check of an internal invariant (never of user input, which gets an Error instead).
#define NMKIT_ASSERT(cond)                                                                   \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "nmkit: internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
