// Errors, arrays, long calls and names shared by the bindings (bindings.h).
#include <algorithm>
#include <memory>
#include <vector>

#include "bindings.h"

namespace nmkit::python {
namespace {

using Code = nb::dlpack::dtype_code;

std::string python_dtype_name(const nb::dlpack::dtype& d) {
  std::string base;
  switch (static_cast<Code>(d.code)) {
    case Code::Int: base = "int"; break;
    case Code::UInt: base = "uint"; break;
    case Code::Float: base = "float"; break;
    case Code::Bfloat: base = "bfloat"; break;
    case Code::Bool: return "bool";
    case Code::Complex: base = "complex"; break;
    default: return "dtype code " + std::to_string(d.code);
  }
  return base + std::to_string(d.bits);
}

// The dtype an nmkit dtype travels as (numpy has no bfloat16 or float8: their bits as uint).
nb::dlpack::dtype dlpack_dtype(DType dtype, Framework framework) {
  auto make = [](Code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (dtype) {
    case DType::F64: return make(Code::Float, 64);
    case DType::F32: return make(Code::Float, 32);
    case DType::F16: return make(Code::Float, 16);
    case DType::BF16: return framework == Framework::Torch ? make(Code::Bfloat, 16) : make(Code::UInt, 16);
    case DType::F8_E4M3:
    case DType::F8_E5M2:
    case DType::U8: return make(Code::UInt, 8);
    case DType::I64: return make(Code::Int, 64);
    case DType::I32: return make(Code::Int, 32);
    case DType::I16: return make(Code::Int, 16);
    case DType::I8: return make(Code::Int, 8);
    case DType::U64: return make(Code::UInt, 64);
    case DType::U32: return make(Code::UInt, 32);
    case DType::U16: return make(Code::UInt, 16);
    case DType::Bool: return make(Code::Bool, 8);
  }
  return make(Code::UInt, 8);
}

// torch's float8 dtypes are named by a view of the uint8 bits (DLPack float8 import varies by
// torch version; a view does not copy).
nb::object torch_float8(nb::object tensor, DType dtype) {
  if (dtype != DType::F8_E4M3 && dtype != DType::F8_E5M2) return tensor;
  nb::module_ torch = nb::module_::import_("torch");
  return tensor.attr("view")(torch.attr(dtype == DType::F8_E4M3 ? "float8_e4m3fn" : "float8_e5m2"));
}

template <class Array>
nb::object export_array(const TensorView& view, nb::handle owner, Framework framework) {
  std::vector<size_t> shape(view.shape.begin(), view.shape.end());
  Array array(const_cast<std::byte*>(view.data), shape.size(), shape.data(), owner, nullptr,
              dlpack_dtype(view.dtype, framework), nb::device::cpu::value);
  return torch_float8(array.cast(), framework == Framework::Torch ? view.dtype : DType::F32);
}

}  // namespace

void raise_argument(const std::string& message) { raise(Error(ErrorCode::InvalidArgument, message)); }

void bind_error_code(nb::module_& m) {
  if (nb::type<ErrorCode>().is_valid()) return;  // bound by the other module of the package
  nb::enum_<ErrorCode>(m, "ErrorCode", "What went wrong, for callers that branch on it (nmkit.Error.code).")
      .value("Unspecified", ErrorCode::Unspecified)
      .value("InvalidArgument", ErrorCode::InvalidArgument)
      .value("InvalidFile", ErrorCode::InvalidFile)
      .value("InvalidValue", ErrorCode::InvalidValue)
      .value("Unsupported", ErrorCode::Unsupported)
      .value("NotFound", ErrorCode::NotFound)
      .value("Io", ErrorCode::Io)
      .value("SameFile", ErrorCode::SameFile)
      .value("Limit", ErrorCode::Limit)
      .value("Cancelled", ErrorCode::Cancelled);
}

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ErrorException& e) {
      const Error& error = e.error;
      auto optional = [](const std::optional<std::string>& s) -> nb::object {
        return s ? nb::cast(*s) : nb::none();
      };
      nb::object exception = nb::module_::import_("nmkit._errors")
                                 .attr("_from_library")(error.code(), error.message(),
                                                        optional(error.file()), optional(error.tensor()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    }
  });
}

Framework framework_of(nb::handle object) {
  // torch is looked up only once something imported it: numpy users never load it.
  static PyObject* tensor_type = nullptr;
  if (tensor_type == nullptr) {
    PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
    if (torch == nullptr) return Framework::Numpy;
    tensor_type = PyObject_GetAttrString(torch, "Tensor");  // kept for the process's life
    if (tensor_type == nullptr) {
      PyErr_Clear();
      return Framework::Numpy;
    }
  }
  return PyObject_IsInstance(object.ptr(), tensor_type) == 1 ? Framework::Torch : Framework::Numpy;
}

DType dtype_of(const nb::dlpack::dtype& d, const char* what) {
  if (d.lanes == 1) {
    switch (static_cast<Code>(d.code)) {
      case Code::Float:
        if (d.bits == 64) return DType::F64;
        if (d.bits == 32) return DType::F32;
        if (d.bits == 16) return DType::F16;
        break;
      case Code::Bfloat:
        if (d.bits == 16) return DType::BF16;
        break;
      case Code::Int:
        if (d.bits == 64) return DType::I64;
        if (d.bits == 32) return DType::I32;
        if (d.bits == 16) return DType::I16;
        if (d.bits == 8) return DType::I8;
        break;
      case Code::UInt:
        if (d.bits == 64) return DType::U64;
        if (d.bits == 32) return DType::U32;
        if (d.bits == 16) return DType::U16;
        if (d.bits == 8) return DType::U8;
        break;
      case Code::Bool:
        if (d.bits == 8) return DType::Bool;
        break;
      case Code::Float8_E4M3FN: return DType::F8_E4M3;
      case Code::Float8_E5M2: return DType::F8_E5M2;
      default: break;
    }
  }
  raise(Error(ErrorCode::Unsupported,
              std::string(what) + ": dtype " + python_dtype_name(d) + " is not one nmkit stores"));
}

ArrayIn array_in(nb::handle object, const char* what, std::initializer_list<DType> accepted, int ndim) {
  ArrayIn in;
  in.framework = framework_of(object);
  nb::object source = nb::borrow(object);
  // A tensor that requires grad refuses __dlpack__; its detached alias shares the memory.
  if (in.framework == Framework::Torch && nb::cast<bool>(source.attr("requires_grad"))) {
    source = source.attr("detach")();
  }
  if (!nb::try_cast(source, in.array, false)) {
    raise(Error(ErrorCode::InvalidArgument, std::string(what) + ": expected a numpy array or a torch tensor, got " +
                                                nb::cast<std::string>(nb::type_name(object.type()))));
  }
  const nb::ndarray<nb::ro>& a = in.array;
  if (a.device_type() != nb::device::cpu::value) {
    raise_argument(std::string(what) + ": the array is not in CPU memory (nmkit's Python API runs on the CPU)");
  }
  Shape shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  if (ndim >= 0 && static_cast<int>(a.ndim()) != ndim) {
    raise_argument(std::string(what) + ": expected " + std::to_string(ndim) + " dimensions, got shape " +
                   shape_str(shape));
  }
  const DType dtype = dtype_of(a.dtype(), what);
  if (accepted.size() > 0 && std::find(accepted.begin(), accepted.end(), dtype) == accepted.end()) {
    std::string names;
    for (DType d : accepted) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
    raise(Error(ErrorCode::Unsupported,
                std::string(what) + ": dtype " + python_dtype_name(a.dtype()) + " is not accepted (" + names + ")"));
  }
  // C order: strides (in elements) as the shape implies; a dimension of size 1 may have any stride.
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride_ptr() != nullptr && a.stride(i) != expected) {
      raise_argument(std::string(what) + ": the array is not C-contiguous (shape " + shape_str(shape) +
                     "); pass numpy.ascontiguousarray(x) or x.contiguous()");
    }
    expected *= static_cast<int64_t>(a.shape(i));
  }
  in.view = TensorView{dtype, std::move(shape), static_cast<const std::byte*>(a.data())};
  return in;
}

nb::object array_out(Tensor tensor, Framework framework) {
  auto* owned = new Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const TensorView view = owned->view();
  if (framework == Framework::Torch) return export_array<nb::ndarray<nb::pytorch>>(view, owner, framework);
  return export_array<nb::ndarray<nb::numpy>>(view, owner, framework);
}

nb::object array_view(const TensorView& view, nb::handle owner, Framework framework, bool read_only) {
  if (framework == Framework::Torch) return export_array<nb::ndarray<nb::pytorch>>(view, owner, framework);
  if (read_only) return export_array<nb::ndarray<nb::numpy, nb::ro>>(view, owner, framework);
  return export_array<nb::ndarray<nb::numpy>>(view, owner, framework);
}

void LongCall::notify(const char* stage, int64_t done, int64_t total) {
  nb::gil_scoped_acquire gil;
  try {
    if (!progress_.is_none()) progress_(stage, done, total);
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  } catch (nb::python_error& e) {
    stopped_.emplace(std::move(e));
    throw Stopped{};
  }
}

Pattern parse_pattern(const std::string& text) {
  auto pattern = Pattern::parse(text);
  if (!pattern.ok()) raise(Error(ErrorCode::InvalidArgument, "pattern: " + pattern.error().message()));
  return *pattern;
}

}  // namespace nmkit::python
