// Where a model is written and what is checked before the long work (include/nmkit/model_write.h;
// issue 24, items 1 and 7; docs/design.md 10.12, 11.1).
#include "nmkit/model_write.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>

#include "core/system_memory.h"  // decimal_bytes
#include "nmkit/files.h"

namespace nmkit {
namespace {

namespace fs = std::filesystem;

bool is_folder(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The folder a file output lands in, or the one an output folder is made in.
std::string parent_folder(const std::string& path) {
  const fs::path parent = fs::path(without_trailing_slashes(path)).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

Result<ModelOutput> parse_model_output(const std::string& output, DType dtype, const ModelSource& source,
                                       const std::string& label) {
  ModelOutput out;
  out.path = output;
  out.label = label;
  out.dtype = dtype;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) {
    return Error(ErrorCode::InvalidArgument,
                 "a model is written as F32, F16 or BF16, not " + std::string(dtype_name(dtype)));
  }
  const std::string takes = label + " takes OUT.gguf or a folder DIR/ (a Hugging Face model)";
  if (output.empty()) return Error(ErrorCode::InvalidArgument, label + ": empty path; " + takes);
  const std::string last = fs::path(without_trailing_slashes(output)).filename().string();
  if (output.ends_with(".gguf")) {
    out.kind = ModelOutput::Kind::Gguf;
  } else if (output.ends_with(".safetensors")) {
    if (source.gguf() != nullptr) {
      return Error(ErrorCode::InvalidArgument,
                   label + " " + output + ": a GGUF model is written as safetensors inside a Hugging Face folder "
                   "(config.json, model.safetensors, tokenizer.json): give a folder, DIR/");
    }
    out.kind = ModelOutput::Kind::HfWeights;
  } else if (output.back() == '/' || is_folder(output) || last.find('.') == std::string::npos) {
    out.kind = ModelOutput::Kind::HfFolder;
  } else {
    return Error(ErrorCode::InvalidArgument,
                 label + " " + output + ": not a .gguf file or a folder; " + takes +
                     (source.gguf() == nullptr ? ", or OUT.safetensors (the weights alone)" : "") +
                     "; a folder name with a '.' needs a trailing '/'");
  }
  return out;
}

Status check_model_output(const ModelOutput& output, const ModelSource& source,
                          const std::vector<FileRole>& other_inputs, const std::vector<FileRole>& other_outputs) {
  std::vector<FileRole> inputs{{"input", source.path()}};
  for (const std::string& file : source.input_files()) {
    if (file != source.path()) inputs.push_back({"input's file", file});
  }
  inputs.insert(inputs.end(), other_inputs.begin(), other_inputs.end());
  std::vector<FileRole> outputs{{output.label, output.path}};
  outputs.insert(outputs.end(), other_outputs.begin(), other_outputs.end());
  NMKIT_TRY(check_distinct_files(outputs, inputs));

  if (output.kind == ModelOutput::Kind::HfFolder) {
    const std::string dir = without_trailing_slashes(output.path);
    // Replacing the folder removes what it holds: no input may be in it.
    std::error_code ec;
    const fs::path canonical_dir = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    for (const FileRole& input : inputs) {
      const fs::path file = fs::weakly_canonical(fs::absolute(input.path, ec), ec);
      const auto [mismatch, rest] = std::mismatch(canonical_dir.begin(), canonical_dir.end(), file.begin(), file.end());
      if (mismatch == canonical_dir.end() && rest != file.end()) {
        return Error(ErrorCode::SameFile, output.label + " " + output.path + ": holds the " + input.label + " " +
                                              input.path + ", which replacing the folder would delete");
      }
    }
    if (Status st = check_hf_output_folder(dir); !st.ok()) return st.error().with_context(output.label + " ");
    auto probe = PendingFolder::create(dir);
    if (!probe.ok()) return probe.error().with_context(output.label + " ");
  } else {
    auto probe = PendingFile::create(output.path);
    if (!probe.ok()) return probe.error().with_context(output.label + " ");
  }

  const uint64_t needed = model_file_bytes(source.params(), output.dtype);
  struct statvfs fs_stat {};
  if (::statvfs(parent_folder(output.path).c_str(), &fs_stat) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs_stat.f_bavail) * fs_stat.f_frsize;
    if (needed > free_bytes) {
      return Error(ErrorCode::Io, output.label + " " + output.path + ": needs " + decimal_bytes(needed) + " for the " +
                                      std::string(dtype_name(output.dtype)) + " tensors, its file system has " +
                                      decimal_bytes(free_bytes) + " free");
    }
  }
  return ok_status();
}

Status write_model_output(const ModelOutput& output, const TensorsToWrite& tensors, const ModelSource& source,
                          const std::function<void(size_t i, size_t n, const OutputTensor&)>& on_tensor) {
  ModelWriteOptions options;
  options.dtype = output.dtype;
  options.on_tensor = on_tensor;
  switch (output.kind) {
    case ModelOutput::Kind::Gguf: return write_model_gguf(output.path, tensors, source, options);
    case ModelOutput::Kind::HfFolder: return write_model_hf(output.path, tensors, source, options);
    case ModelOutput::Kind::HfWeights: return write_model_hf_weights(output.path, tensors, options);
  }
  return Error(output.label + " " + output.path + ": unknown output kind");
}

}  // namespace nmkit
