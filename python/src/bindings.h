// What every file of the extension module nmkit._nmkit shares (docs/design.md section 15): nmkit
// Errors raised as nmkit.Error, arrays read without copying and results handed back as numpy arrays
// or torch tensors, and long calls run with the GIL released while progress callbacks and Ctrl-C
// still reach Python.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "nmkit/nmkit.h"

namespace nb = nanobind;

namespace nmkit::python {

// --- Errors -------------------------------------------------------------------------------------

// An nmkit Error on its way out of a binding; the module's translator raises it as the nmkit.Error
// subclass of its code (python/nmkit/_errors.py).
struct ErrorException : std::exception {
  explicit ErrorException(Error e) : error(std::move(e)) {}
  const char* what() const noexcept override { return error.message().c_str(); }
  Error error;
};
[[noreturn]] inline void raise(Error error) { throw ErrorException(std::move(error)); }
inline void check(const Status& status) {
  if (!status.ok()) raise(status.error());
}
template <class T>
T unwrap(Result<T>&& result) {
  if (!result.ok()) raise(result.error());
  return std::move(result.value());
}
// An argument the binding itself refuses (a Python-side mistake: unknown option, wrong rank).
[[noreturn]] void raise_argument(const std::string& message);
// nmkit.ErrorCode into `m`, unless a module loaded before bound it (_nmkit and _cuda both call this).
void bind_error_code(nb::module_& m);
void register_error_translator();

// --- Arrays -------------------------------------------------------------------------------------

// Where an input came from, so that results go back the same way.
enum class Framework { Numpy, Torch };

// A Python array read in place: `view` points into its buffer, which `array` keeps alive.
struct ArrayIn {
  nb::ndarray<nb::ro> array;
  TensorView view;
  Framework framework = Framework::Numpy;
};

// The float dtypes a weight, bias or activation may come in.
inline constexpr std::initializer_list<DType> kFloatDTypes = {DType::F32, DType::F16, DType::BF16};

// Reads `object` (anything with the buffer protocol or __dlpack__: numpy arrays, torch CPU tensors)
// without copying. Refused, as nmkit.Error naming `what`: a device other than the CPU, a layout that
// is not C-contiguous, a dtype outside `accepted` (empty: any dtype nmkit knows), a rank other than
// `ndim` (-1: any).
ArrayIn array_in(nb::handle object, const char* what, std::initializer_list<DType> accepted = {},
                 int ndim = -1);
// The framework of `object` (torch when it is a torch.Tensor, numpy otherwise).
Framework framework_of(nb::handle object);

// A result as a Python array that owns `tensor`'s memory (no copy). numpy has no bfloat16 or float8:
// those come back as uint16 / uint8 arrays of their bits; torch gets torch.bfloat16 and
// torch.float8_e4m3fn / float8_e5m2.
nb::object array_out(Tensor tensor, Framework framework);
// A view of memory that `owner` keeps alive (read-only where `read_only`), same dtype rules.
nb::object array_view(const TensorView& view, nb::handle owner, Framework framework, bool read_only);

// --- Long calls ---------------------------------------------------------------------------------

// Runs a long library call with the GIL released. Progress callbacks built by progress() take the
// GIL, call the user's `progress(stage, done, total)` (when one was given) and check for Ctrl-C;
// a Python exception there (KeyboardInterrupt, or one the callback raised) is kept and the callback
// throws, which the library turns into an Error where it calls it (invoke_callback in
// include/nmkit/status.h; the writers' on_tensor likewise): the job stops as on any error, with
// nothing written, and run() raises the kept exception in Python instead of that Error.
class LongCall {
 public:
  explicit LongCall(nb::object progress = nb::none()) : progress_(std::move(progress)) {}

  template <class F>
  auto run(F&& f) -> decltype(f()) {
    std::optional<decltype(f())> result;
    {
      nb::gil_scoped_release release;
      result.emplace(f());
    }
    if (stopped_) throw std::move(*stopped_);  // nb::python_error: restores the Python exception
    return std::move(*result);
  }

  // A callback for the library: notify(stage, i + 1, n) after each step i of n.
  std::function<void(int64_t, int64_t)> progress(const char* stage) {
    return [this, stage](int64_t i, int64_t n) { notify(stage, i + 1, n); };
  }
  // Calls progress(stage, done, total) and checks for Ctrl-C, from inside run().
  void notify(const char* stage, int64_t done, int64_t total);

 private:
  struct Stopped {};
  nb::object progress_;
  std::optional<nb::python_error> stopped_;
};

// --- Names --------------------------------------------------------------------------------------

Pattern parse_pattern(const std::string& text);
DType dtype_of(const nb::dlpack::dtype& dtype, const char* what);

}  // namespace nmkit::python
