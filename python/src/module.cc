// nmkit._nmkit: the extension module behind the Python package nmkit (docs/design.md section 15).
// Each bind_* adds one part of the API; python/nmkit/__init__.py re-exports them.
#include "bindings.h"

namespace nmkit::python {
void bind_ops(nb::module_& m);
void bind_linear(nb::module_& m);
void bind_io(nb::module_& m);
void bind_model(nb::module_& m);
}  // namespace nmkit::python

NB_MODULE(_nmkit, m) {
  using namespace nmkit;
  m.doc() = "nmkit's C++ library (N:M structured sparsity of LLM weights), bound with nanobind.";
  python::bind_error_code(m);
  python::register_error_translator();
  python::bind_ops(m);
  python::bind_linear(m);
  python::bind_io(m);
  python::bind_model(m);
  // The address a binding reads an array at (every call reads through array_in): the tests check it is
  // the array's own data pointer, i.e. that nothing was copied on the way in.
  m.def(
      "_address_of", [](nb::handle x) { return reinterpret_cast<uintptr_t>(python::array_in(x, "x").view.data); },
      nb::arg("x"));
  m.def("thread_count", &thread_count, "Threads nmkit's pool runs (NMKIT_THREADS, else every core).");
}
