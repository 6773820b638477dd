// nmkit._cuda: CudaSparseLinear (include/nmkit/cuda_linear.h) from Python, on torch CUDA tensors
// through DLPack without copying (docs/design.md sections 14 and 15). Its own extension module,
// built where NMKIT_CUDA is: it needs only the GPU path's part of the library, so a GPU machine
// without nmkit's Debian libraries builds it too (tests/cuda/gpu_check). python/nmkit/__init__.py
// re-exports it when it is there.
#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "../bindings.h"
#include "nmkit/cuda_linear.h"

namespace nmkit::python {
namespace {

struct PyCudaLinear {
  std::optional<CudaSparseLinear> layer;
  std::string format;
  int device = 0;
};

QuantType quant_type_of(const std::string& name) {
  if (name == "int8") return QuantType::Int8;
  if (name == "e4m3") return QuantType::E4M3;
  raise_argument("CudaSparseLinear: dtype must be int8 or e4m3, not " + name);
}

// x (a torch tensor's array, not on the CPU) checked: a 2-D C-contiguous f32 or bf16 tensor on the
// layer's CUDA device.
struct DeviceIn {
  DType dtype = DType::F32;
  int64_t M = 0;
};
DeviceIn device_in(const nb::ndarray<nb::ro>& a, const PyCudaLinear& self) {
  DeviceIn in;
  if (a.device_type() != nb::device::cuda::value) raise_argument("x: neither in CPU memory nor on a CUDA device");
  if (a.ndim() != 2) raise_argument("x: expected 2 dimensions, got " + std::to_string(a.ndim()));
  if (a.device_id() != self.device) {
    raise_argument("x: on cuda:" + std::to_string(a.device_id()) + ", the layer on cuda:" + std::to_string(self.device));
  }
  in.dtype = dtype_of(a.dtype(), "x");
  if (in.dtype != DType::F32 && in.dtype != DType::BF16) {
    raise(Error(ErrorCode::Unsupported, std::string("x: dtype ") + std::string(dtype_name(in.dtype)) +
                                            " on the GPU is not accepted (float32, bfloat16)"));
  }
  if (static_cast<int64_t>(a.shape(1)) != self.layer->K()) {
    raise(Error(ErrorCode::InvalidArgument, "x: " + std::to_string(a.shape(1)) + " columns, the layer takes " +
                                                std::to_string(self.layer->K())));
  }
  if (a.stride_ptr() != nullptr && ((a.shape(1) > 1 && a.stride(1) != 1) ||
                                    (a.shape(0) > 1 && a.stride(0) != static_cast<int64_t>(a.shape(1))))) {
    raise_argument("x: the tensor is not C-contiguous; pass x.contiguous()");
  }
  in.M = static_cast<int64_t>(a.shape(0));
  return in;
}

}  // namespace

void bind_cuda(nb::module_& m) {
  m.def("cuda_device_count", &cuda_device_count,
        "CUDA devices of compute capability 8.0 or more (0 without a GPU or a driver).");
  nb::class_<PyCudaLinear>(m, "CudaSparseLinear",
                           "Y = X W^T (+ bias) on an NVIDIA GPU: X quantized per token (INT8 or E4M3) and lifted for "
                           "a slid weight in one CUDA kernel, an 8-bit dense, 2:4 or slid GEMM (cuBLASLt, CUTLASS, "
                           "cuSPARSELt), one scale kernel (docs/design.md 14). INT8 equals nmkit.SparseLinear's "
                           "int8 bit for bit.")
      .def(
          "__init__",
          [](PyCudaLinear* self, nb::handle w, const std::string& format, std::optional<std::string> pattern,
             const std::string& dtype, const std::string& backend, nb::handle bias, int device, bool search) {
            const ArrayIn weight = array_in(w, "w", kFloatDTypes, 2);
            CudaLinearOptions options;
            options.type = quant_type_of(dtype);
            options.backend = unwrap(cuda_backend_from_name(backend));
            options.device = device;
            options.search = search;
            const Pattern slid_pattern = parse_pattern(pattern ? *pattern : "6:8");
            Result<CudaSparseLinear> layer = Error("unset");
            {
              nb::gil_scoped_release release;
              if (format == "dense") {
                layer = CudaSparseLinear::dense(weight.view, options);
              } else if (format == "sparse24") {
                auto packed = compress_sparse24(weight.view, "w");
                layer = packed.ok() ? CudaSparseLinear::sparse24(*packed, options) : Result<CudaSparseLinear>(packed.error());
              } else if (format == "slid") {
                auto slid = slide(weight.view, slid_pattern);
                layer = slid.ok() ? CudaSparseLinear::slid(slid->weight.view(), slid->geometry, options)
                                  : Result<CudaSparseLinear>(slid.error());
              } else {
                layer = Error(ErrorCode::InvalidArgument,
                              "CudaSparseLinear: format must be dense, sparse24 or slid, not " + format);
              }
            }
            if (!layer.ok()) raise(layer.error());
            if (!bias.is_none()) check(layer->set_bias(array_in(bias, "bias", kFloatDTypes, 1).view));
            new (self) PyCudaLinear{std::move(*layer), format, device};
          },
          nb::arg("w"), nb::arg("format") = "dense", nb::arg("pattern") = nb::none(), nb::arg("dtype") = "int8",
          nb::arg("backend") = "auto", nb::arg("bias") = nb::none(), nb::arg("device") = 0, nb::arg("search") = true,
          R"(Uploads the weight ``w`` [rows, K] (float32/float16/bfloat16, numpy or a torch CPU tensor).

format: "dense", "sparse24" (w 2:4-compliant) or "slid" (SlideSparse: w complies with ``pattern``
keep:2N, default "6:8", and runs on the 2:4 kernels with X lifted). dtype: "int8" or "e4m3"
(sm_89 and later). backend: "auto", "cutlass" or "cusparselt" (2:4 and slid; dense runs cuBLASLt).
``bias``: [rows], optional. ``search``: time the libraries' algorithms on each token count's first
call and keep the fastest.)")
      .def(
          "__call__",
          [](const PyCudaLinear& self, nb::handle x) -> nb::object {
            nb::object source = nb::borrow(x);
            const bool torch_in = framework_of(x) == Framework::Torch;
            // A tensor that requires grad refuses __dlpack__; its detached alias shares the memory.
            if (torch_in && nb::cast<bool>(source.attr("requires_grad"))) source = source.attr("detach")();
            // A CPU array (numpy or torch): through host memory, the result where x came from.
            nb::ndarray<nb::ro> array;
            if (torch_in && !nb::try_cast(source, array, false)) raise_argument("x: expected a torch tensor");
            if (!torch_in || array.device_type() == nb::device::cpu::value) {
              const ArrayIn in = array_in(source, "x", kFloatDTypes, 2);
              return array_out(unwrap(LongCall().run([&] { return self.layer->apply(in.view); })), in.framework);
            }
            const DeviceIn in = device_in(array, self);
            // Y from torch's allocator on x's device, and the work on torch's current stream there.
            nb::module_ torch = nb::module_::import_("torch");
            nb::object y = torch.attr("empty")(in.M, self.layer->rows(), nb::arg("dtype") = torch.attr("float32"),
                                               nb::arg("device") = source.attr("device"));
            const auto y_ptr = nb::cast<uintptr_t>(y.attr("data_ptr")());
            const auto stream =
                nb::cast<uintptr_t>(torch.attr("cuda").attr("current_stream")(source.attr("device")).attr("cuda_stream"));
            check(LongCall().run([&] {
              return self.layer->apply_device(array.data(), in.dtype, in.M, reinterpret_cast<float*>(y_ptr),
                                              reinterpret_cast<void*>(stream));
            }));
            return y;
          },
          nb::arg("x"),
          R"(Y [M, rows] float32 = x [M, K] W^T (+ bias). A torch CUDA tensor (float32 or bfloat16, C-contiguous, on
the layer's device) is read in place and Y is a new CUDA tensor from torch's allocator, computed on
torch's current stream; numpy or CPU torch in, the same out. A NaN or infinity in x raises
nmkit.Error naming row and column.)")
      .def_prop_ro("rows", [](const PyCudaLinear& l) { return l.layer->rows(); }, "Output features.")
      .def_prop_ro("K", [](const PyCudaLinear& l) { return l.layer->K(); }, "Input features (of the unslid weight).")
      .def_prop_ro("format", [](const PyCudaLinear& l) { return l.format; }, "dense, sparse24 or slid.")
      .def_prop_ro("dtype", [](const PyCudaLinear& l) { return std::string(quant_type_name(l.layer->quant_type())); },
                   "int8 or e4m3.")
      .def_prop_ro("backend", [](const PyCudaLinear& l) { return std::string(cuda_backend_name(l.layer->backend())); },
                   "cublaslt, cutlass or cusparselt, as chosen.")
      .def_prop_ro("kernel_name", [](const PyCudaLinear& l) { return l.layer->kernel_name(); },
                   "What runs, e.g. 'cuda cusparselt slid6:8 int8 sm_90'.")
      .def(
          "gemm_name", [](const PyCudaLinear& l, int64_t tokens) { return l.layer->gemm_name(tokens); }, nb::arg("m"),
          "The GEMM a call of m tokens ran: CUTLASS's tile or the library's algorithm (empty before the first such call).");
}

}  // namespace nmkit::python

NB_MODULE(_cuda, m) {
  m.doc() = "nmkit's GPU path (CudaSparseLinear), bound with nanobind.";
  nmkit::python::bind_error_code(m);
  nmkit::python::register_error_translator();
  nmkit::python::bind_cuda(m);
}
