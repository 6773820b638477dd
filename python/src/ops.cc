// Tensor operations: prune, compress/decompress, slide/lift, quantize (docs/design.md sections 2-6).
#include <variant>


#include "bindings.h"

namespace nmkit::python {
namespace {

constexpr std::initializer_list<DType> kPrunable = {DType::F32, DType::F16, DType::BF16};

struct PyPruneResult {
  nb::object weight;
  PruneMetrics metrics;
};

// A compressed weight: the library's Sparse24 or NMPacked, whose parts Python sees as read-only views.
struct Compressed {
  std::variant<Sparse24, NMPacked> packed;
  Framework framework = Framework::Numpy;

  bool is_sparse24() const { return std::holds_alternative<Sparse24>(packed); }
  const Tensor& values() const {
    return is_sparse24() ? std::get<Sparse24>(packed).values : std::get<NMPacked>(packed).values;
  }
  const Tensor& meta() const {
    return is_sparse24() ? std::get<Sparse24>(packed).meta : std::get<NMPacked>(packed).mask;
  }
  int64_t K() const { return is_sparse24() ? std::get<Sparse24>(packed).K : std::get<NMPacked>(packed).K; }
  Pattern pattern() const { return is_sparse24() ? Pattern{2, 4} : std::get<NMPacked>(packed).pattern; }
  size_t memory_bytes() const {
    return is_sparse24() ? std::get<Sparse24>(packed).memory_bytes() : std::get<NMPacked>(packed).memory_bytes();
  }
};

struct PySlid {
  nb::object weight;
  SlideGeometry geometry;
};

QuantType parse_quant_type(const std::string& name) {
  auto type = quant_type_from_name(name);
  if (!type.ok()) raise(type.error());
  return *type;
}

// `lift` as given: None, a pattern ("6:8", geometry from x's K and `align`) or a SlideGeometry.
std::optional<SlideGeometry> lift_geometry(nb::handle lift, int64_t K, int align) {
  if (lift.is_none()) return std::nullopt;
  if (nb::isinstance<SlideGeometry>(lift)) return nb::cast<SlideGeometry>(lift);
  if (!nb::isinstance<nb::str>(lift)) raise_argument("lift: expected a pattern such as \"6:8\" or a SlideGeometry");
  return unwrap(SlideGeometry::make(parse_pattern(nb::cast<std::string>(lift)), K, align));
}

}  // namespace

void bind_ops(nb::module_& m) {
  nb::class_<PruneMetrics>(m, "PruneMetrics",
                           "Pruning metrics of docs/design.md section 3 (the seed's PruneMetrics and nmkit's).")
      .def_ro("pruned_count", &PruneMetrics::pruned_count, "Elements removed by the mask.")
      .def_ro("total_count", &PruneMetrics::total_count, "Real elements (padding never counts).")
      .def_ro("approximation_error", &PruneMetrics::approximation_error, "Mean |w - w_pruned| over all elements.")
      .def_ro("kept_magnitude_mean", &PruneMetrics::kept_magnitude_mean, "Mean |w| of kept elements.")
      .def_ro("pruned_magnitude_mean", &PruneMetrics::pruned_magnitude_mean, "Mean |w| of pruned elements.")
      .def_ro("sparsity_percent", &PruneMetrics::sparsity_percent, "100 * pruned_count / total_count.")
      .def_ro("relative_error", &PruneMetrics::relative_error, "||W - W_pruned||_F / ||W||_F.")
      .def_ro("retained_l1", &PruneMetrics::retained_l1, "sum |kept| / sum |W|.")
      .def("__repr__", [](const PruneMetrics& x) {
        return "PruneMetrics(sparsity_percent=" + std::to_string(x.sparsity_percent) +
               ", relative_error=" + std::to_string(x.relative_error) + ")";
      });

  nb::class_<PyPruneResult>(m, "PruneResult", "What prune() returns: the dense-masked weight and its metrics.")
      .def_ro("weight", &PyPruneResult::weight, "The pruned weight: dtype and shape of the input, zeros in place.")
      .def_ro("metrics", &PyPruneResult::metrics, "PruneMetrics of the mask over the input.");

  m.def(
      "prune",
      [](nb::handle w, const std::string& pattern, const std::string& method, nb::handle grad, nb::handle act_norms,
         const std::string& name) {
        const ArrayIn weight = array_in(w, "w", kPrunable, 2);
        const Pattern p = parse_pattern(pattern);
        const PruneMethod how = unwrap(parse_prune_method(method));
        std::optional<ArrayIn> gradient, norms;
        ScoreInputs inputs;
        if (!grad.is_none()) {
          gradient.emplace(array_in(grad, "grad", kPrunable));
          inputs.gradient = &gradient->view;
        }
        if (!act_norms.is_none()) {
          norms.emplace(array_in(act_norms, "act_norms", kPrunable));
          inputs.act_norms = &norms->view;
        }
        auto result = LongCall().run([&] { return nmkit::prune(weight.view, p, how, inputs, name); });
        PruneResult r = unwrap(std::move(result));
        return PyPruneResult{array_out(std::move(r.pruned), weight.framework), metrics_from(r.sums)};
      },
      nb::arg("w"), nb::arg("pattern"), nb::arg("method") = "magnitude", nb::arg("grad") = nb::none(),
      nb::arg("act_norms") = nb::none(), nb::arg("name") = "w",
      nb::sig("def prune(w: numpy.typing.ArrayLike, pattern: str, method: str = 'magnitude', "
              "grad: numpy.typing.ArrayLike | None = None, act_norms: numpy.typing.ArrayLike | None = None, "
              "name: str = 'w') -> PruneResult"),
      R"(Prunes the 2-D weight ``w`` [rows, K] (float32, float16 or bfloat16) to the N:M ``pattern``
("2:4", "6:8", ...) along K, by the exact rules of docs/design.md section 2.

method: "magnitude" (|w|), "gradient" (|w * grad|, ``grad`` of w's shape) or "wanda"
(|w| * act_norms[k], ``act_norms`` the per-input-feature L2 norms, length K).
Returns a PruneResult: ``weight`` (same dtype, shape and kind as ``w``: numpy or torch) and
``metrics``. A NaN or infinity raises nmkit.Error (a ValueError) naming ``name``, row and column.)");

  nb::class_<Compressed>(m, "Compressed",
                         "A compressed weight (docs/design.md 4): sparse24 (values + 4-bit index nibbles) or nm "
                         "(values + bitmask). Its parts are read-only views that the object keeps alive.")
      .def_prop_ro("format", [](const Compressed& c) { return c.is_sparse24() ? "sparse24" : "nm"; },
                   "\"sparse24\" or \"nm\".")
      .def_prop_ro(
          "values",
          [](nb::handle self) {
            const auto& c = nb::cast<const Compressed&>(self);
            return array_view(c.values().view(), self, c.framework, true);
          },
          "Kept values [rows, K_pad/2] (sparse24) or [rows, groups*keep] (nm), in the weight's dtype.")
      .def_prop_ro(
          "meta",
          [](nb::handle self) {
            const auto& c = nb::cast<const Compressed&>(self);
            return array_view(c.meta().view(), self, c.framework, true);
          },
          "uint8 [rows, ceil(K_pad/8)]: sparse24's index nibbles, or nm's bitmask (LSB first).")
      .def_prop_ro("K", &Compressed::K, "Logical input features of the dense weight.")
      .def_prop_ro("rows", [](const Compressed& c) { return c.values().rows(); }, "Output rows.")
      .def_prop_ro("pattern", [](const Compressed& c) { return c.pattern().str(); }, "\"2:4\" for sparse24.")
      .def_prop_ro("memory_bytes", &Compressed::memory_bytes, "Bytes of values plus metadata.")
      .def("__repr__", [](const Compressed& c) {
        return std::string("Compressed(format=") + (c.is_sparse24() ? "sparse24" : "nm") + ", pattern=" +
               c.pattern().str() + ", rows=" + std::to_string(c.values().rows()) + ", K=" + std::to_string(c.K()) +
               ")";
      });

  m.def(
      "compress",
      [](nb::handle w, const std::string& format, std::optional<std::string> pattern, const std::string& name) {
        const ArrayIn weight = array_in(w, "w", kPrunable, 2);
        Compressed c;
        c.framework = weight.framework;
        if (format == "sparse24") {
          if (pattern && parse_pattern(*pattern) != Pattern{2, 4}) {
            raise_argument("compress: format sparse24 stores 2:4, not " + *pattern);
          }
          c.packed = unwrap(LongCall().run([&] { return compress_sparse24(weight.view, name); }));
        } else if (format == "nm") {
          if (!pattern) raise_argument("compress: format nm needs pattern=\"keep:group\"");
          const Pattern p = parse_pattern(*pattern);
          c.packed = unwrap(LongCall().run([&] { return compress_nm(weight.view, p, name); }));
        } else {
          raise_argument("compress: unknown format '" + format + "' (expected sparse24 or nm)");
        }
        return c;
      },
      nb::arg("w"), nb::arg("format") = "sparse24", nb::arg("pattern") = nb::none(), nb::arg("name") = "w",
      nb::sig("def compress(w: numpy.typing.ArrayLike, format: str = 'sparse24', pattern: str | None = None, "
              "name: str = 'w') -> Compressed"),
      R"(Compresses a dense-masked 2-D weight: format "sparse24" (2:4) or "nm" (any ``pattern``,
e.g. "6:8"). A weight with more non-zeros in a group than the pattern allows raises nmkit.Error
naming ``name``, the row and the group.)");

  m.def(
      "decompress",
      [](const Compressed& c) {
        Tensor dense = c.is_sparse24() ? decompress(std::get<Sparse24>(c.packed))
                                       : decompress(std::get<NMPacked>(c.packed));
        return array_out(std::move(dense), c.framework);
      },
      nb::arg("c"), "The dense-masked weight a Compressed holds (exactly what was compressed).");

  nb::class_<SlideGeometry>(m, "SlideGeometry",
                            "Sizes of the SlideSparse decomposition of keep:2N onto 2:4 windows (docs/design.md 5).")
      .def_static(
          "make",
          [](const std::string& pattern, int64_t K, int align) {
            return unwrap(SlideGeometry::make(parse_pattern(pattern), K, align));
          },
          nb::arg("pattern"), nb::arg("K"), nb::arg("align") = 32, "The geometry of `pattern` for K input features.")
      .def_prop_ro("pattern", [](const SlideGeometry& g) { return g.pattern.str(); })
      .def_ro("align", &SlideGeometry::align)
      .def_ro("K", &SlideGeometry::K)
      .def_prop_ro("N", &SlideGeometry::N)
      .def_prop_ro("windows_per_group", &SlideGeometry::windows_per_group)
      .def_prop_ro("K_pad", &SlideGeometry::K_pad)
      .def_prop_ro("K_prime_raw", &SlideGeometry::K_prime_raw)
      .def_prop_ro("K_prime", &SlideGeometry::K_prime, "Columns of the slid weight and the lifted activations.")
      .def_prop_ro("ideal_speedup", &SlideGeometry::ideal_speedup, "N/(N-1).")
      .def(
          "lift_index_map",
          [](const SlideGeometry& g) {
            const std::vector<int64_t> map = lift_index_map(g);
            Tensor t = Tensor::empty(DType::I64, {static_cast<int64_t>(map.size())});
            std::copy(map.begin(), map.end(), t.as<int64_t>());
            return array_out(std::move(t), Framework::Numpy);
          },
          "Input column feeding each of the K_prime output columns (-1: zero).")
      .def("__repr__", [](const SlideGeometry& g) {
        return "SlideGeometry(pattern=" + g.pattern.str() + ", K=" + std::to_string(g.K) +
               ", K_prime=" + std::to_string(g.K_prime()) + ", align=" + std::to_string(g.align) + ")";
      });

  nb::class_<PySlid>(m, "SlidWeight", "A slid weight [rows, K_prime] and the geometry that produced it.")
      .def_ro("weight", &PySlid::weight, "2:4-compliant weight over K_prime columns, the input's dtype.")
      .def_ro("geometry", &PySlid::geometry);

  m.def(
      "slide",
      [](nb::handle w, const std::string& pattern, int align, const std::string& name) {
        const ArrayIn weight = array_in(w, "w", {}, 2);
        const Pattern p = parse_pattern(pattern);
        SlidWeight s = unwrap(LongCall().run([&] { return slide(weight.view, p, align, name); }));
        return PySlid{array_out(std::move(s.weight), weight.framework), s.geometry};
      },
      nb::arg("w"), nb::arg("pattern"), nb::arg("align") = 32, nb::arg("name") = "w",
      nb::sig("def slide(w: numpy.typing.ArrayLike, pattern: str, align: int = 32, name: str = 'w') -> SlidWeight"),
      R"(SlideSparse (docs/design.md 5): rewrites ``w`` [rows, K], compliant with ``pattern`` keep:2N
(keep <= 2N-2, e.g. "6:8"), as a 2:4 weight over overlapping windows, [rows, K_prime]. A group with
too many non-zeros raises nmkit.Error naming the row and group.)");

  m.def(
      "lift",
      [](nb::handle x, const SlideGeometry& geometry) {
        const ArrayIn in = array_in(x, "x", {}, 2);
        return array_out(unwrap(LongCall().run([&] { return lift(in.view, geometry, "x"); })), in.framework);
      },
      nb::arg("x"), nb::arg("geometry"),
      "Lifts activations x [M, K] to [M, K_prime] by the geometry's index map (values copied bit for bit).");

  m.def(
      "quantize",
      [](nb::handle x, const std::string& type, nb::handle lift, int align, const std::string& name) {
        const ArrayIn in = array_in(x, "x", kPrunable, 2);
        const QuantType t = parse_quant_type(type);
        const std::optional<SlideGeometry> geometry = lift_geometry(lift, in.view.cols(), align);
        Quantized q = unwrap(LongCall().run([&] {
          return geometry ? quantize_lift(in.view, *geometry, t, name) : quantize_tokens(in.view, t, name);
        }));
        return nb::make_tuple(array_out(std::move(q.codes), in.framework),
                              array_out(std::move(q.scales), in.framework));
      },
      nb::arg("x"), nb::arg("type") = "int8", nb::arg("lift") = nb::none(), nb::arg("align") = 32,
      nb::arg("name") = "x",
      nb::sig("def quantize(x: numpy.typing.ArrayLike, type: str = 'int8', lift: str | SlideGeometry | None = None, "
              "align: int = 32, name: str = 'x') -> "
              "tuple[numpy.typing.NDArray[typing.Any], numpy.typing.NDArray[typing.Any]]"),
      R"(Per-row dynamic quantization (docs/design.md 6) of x [M, K] to "int8" or "e4m3": returns
(codes [M, K], scales [M] float32) with x ~ codes * scales[:, None]. With ``lift`` (a pattern such
as "6:8", or a SlideGeometry) the codes are lifted to [M, K_prime] in the same pass (SlideSparse).
e4m3 codes come as uint8 bits in numpy (torch.float8_e4m3fn for torch). The same rules per output
row quantize a weight.)");
}

}  // namespace nmkit::python
