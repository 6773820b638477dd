// nmkit.SparseLinear: a linear layer on nmkit's CPU kernels (include/nmkit/linear.h), built from a
// dense weight the way the model builds its block linears (pack_linear, include/nmkit/model.h).
#include <chrono>
#include <memory>
#include <vector>


#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace nmkit::python {
namespace {

struct PyLinear {
  std::unique_ptr<SparseLinear> linear;
  std::string format;
  std::string dtype;
};

}  // namespace

void bind_linear(nb::module_& m) {
  nb::class_<PyLinear>(m, "SparseLinear",
                       "Y = X W^T (+ bias) on nmkit's CPU kernels, with W packed once as dense, sparse24, nm or "
                       "slid (docs/design.md 4, 5 and 8).")
      .def(
          "__init__",
          [](PyLinear* self, nb::handle w, const std::string& format, std::optional<std::string> dtype,
             std::optional<std::string> pattern, nb::handle bias) {
            const ArrayIn weight = array_in(w, "w", kFloatDTypes, 2);
            const LinearFormat f = unwrap(parse_linear_format(format));
            // slid runs INT8 whatever the dtype (SparseLinear::slid); the default elsewhere is f32.
            const std::string d = dtype ? *dtype : (f == LinearFormat::Slid ? "int8" : "f32");
            const DType weights = unwrap(parse_weight_dtype(d));
            if (f == LinearFormat::Slid && weights != DType::I8) {
              raise_argument("SparseLinear: format slid runs int8, not dtype " + d);
            }
            std::optional<Pattern> p;
            if (pattern) p = parse_pattern(*pattern);
            else if (f == LinearFormat::Sparse24) p = Pattern{2, 4};
            SparseLinear linear =
                unwrap(LongCall().run([&] { return pack_linear(weight.view, weights, f, p, "w"); }));
            if (!bias.is_none()) {
              const ArrayIn b = array_in(bias, "bias", kFloatDTypes, 1);
              check(linear.set_bias(b.view));
            }
            new (self) PyLinear{std::make_unique<SparseLinear>(std::move(linear)), format, d};
          },
          nb::arg("w"), nb::arg("format") = "dense", nb::arg("dtype") = nb::none(), nb::arg("pattern") = nb::none(),
          nb::arg("bias") = nb::none(),
          R"(Packs the dense(-masked) weight ``w`` [rows, K] (float32/float16/bfloat16, numpy or torch).

format: "dense", "sparse24" (w 2:4-compliant), "nm" (needs ``pattern``, groups up to 16) or "slid"
(SlideSparse; needs ``pattern`` keep:2N, runs int8). dtype: "f32", "bf16" (weights rounded to
bfloat16, activations too) or "int8" (per-row weights, per-token activations); default f32
(int8 for slid). ``bias``: [rows], optional.)")
      .def(
          "__call__",
          [](const PyLinear& self, nb::handle x) {
            const ArrayIn in = array_in(x, "x", kFloatDTypes, 2);
            Tensor y = Tensor::empty(DType::F32, {in.view.rows(), self.linear->rows()});
            check(LongCall().run([&] { return self.linear->apply(in.view, y.as<float>()); }));
            return array_out(std::move(y), in.framework);
          },
          nb::arg("x"),
          R"(Y [M, rows] float32 = x [M, K] W^T (+ bias); x float32/float16/bfloat16, read in place. Numpy
in, numpy out; torch in, torch out. A NaN or infinity in x raises nmkit.Error naming row and column.)")
      .def_prop_ro("rows", [](const PyLinear& l) { return l.linear->rows(); }, "Output features.")
      .def_prop_ro("K", [](const PyLinear& l) { return l.linear->K(); }, "Input features (of the unslid weight).")
      .def_prop_ro("format", [](const PyLinear& l) { return l.format; }, "dense, sparse24, nm or slid.")
      .def_prop_ro("dtype", [](const PyLinear& l) { return l.dtype; }, "f32, bf16 or int8.")
      .def_prop_ro("pattern", [](const PyLinear& l) { return l.linear->pattern().str(); })
      .def_prop_ro("tier", [](const PyLinear& l) { return std::string(tier_name(l.linear->tier())); },
                   "The ISA tier of the kernels: scalar, avx2 or avx512 (NMKIT_ISA forces one).")
      .def(
          "kernel_name", [](const PyLinear& l, int64_t tokens) { return l.linear->kernel_name(tokens); },
          nb::arg("m") = 1,
          "The form and kernel a call of m tokens runs, e.g. \"avx512 sparse24 f32\".")
      .def(
          "bytes_streamed", [](const PyLinear& l, int64_t tokens) { return l.linear->bytes_streamed(tokens); },
          nb::arg("m") = 1, "Bytes of weight one call of m tokens streams.")
      .def(
          "byte_ratio", [](const PyLinear& l, int64_t tokens) { return l.linear->byte_ratio(tokens); },
          nb::arg("m") = 1,
          "Dense bytes of the same weight over bytes_streamed(m): the memory-bound ceiling on speedup.")
      .def(
          "mac_ratio", [](const PyLinear& l) { return l.linear->mac_ratio(); },
          "Dense multiply-adds over the sparse form's (2 for 2:4).")
      .def(
          "_time_apply",
          [](const PyLinear& self, nb::handle x, int repeats) {
            // The C++ call alone, timed in C++ (bench/python_overhead.py compares lin(x) with it).
            const ArrayIn in = array_in(x, "x", kFloatDTypes, 2);
            std::vector<float> y(static_cast<size_t>(in.view.rows() * self.linear->rows()));
            std::vector<double> seconds;
            for (int i = 0; i < repeats; ++i) {
              const auto t0 = std::chrono::steady_clock::now();
              check(self.linear->apply(in.view, y.data()));
              seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            return seconds;
          },
          nb::arg("x"), nb::arg("repeats"), "Seconds of each of `repeats` C++ calls apply(x) (a benchmark hook).")
      .def("__repr__", [](const PyLinear& l) {
        return "SparseLinear(rows=" + std::to_string(l.linear->rows()) + ", K=" + std::to_string(l.linear->K()) +
               ", format=" + l.format + ", dtype=" + l.dtype + ", kernel=" + l.linear->kernel_name() + ")";
      });
}

}  // namespace nmkit::python
