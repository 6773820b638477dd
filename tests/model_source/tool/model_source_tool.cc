// Test driver for tests/model_source/hf_equivalence.py:
//   model_source_tool dump MODEL OUT.gguf
//     opens MODEL (a GGUF file or a Hugging Face folder) with ModelSource and writes, with
//     write_gguf, its hyper-parameters as nmkit.* keys and every tensor_names() tensor as F32 from
//     load_f32 (GGUF names, in that order), so the python side can compare two sources.
//   model_source_tool check MODEL
//     prints "ok" or the one-line error (exit 1).
#include <cstdio>
#include <string>
#include <vector>

#include "nmkit/gguf.h"
#include "nmkit/model_source.h"

namespace {

using namespace nmkit;

int fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

int dump(const std::string& path, const std::string& out) {
  auto source = ModelSource::open(path);
  if (!source.ok()) return fail(source.error().message());
  const LlamaParams& p = source->params();
  std::vector<GgufKeyValue> kvs = {
      {"nmkit.kind", GgufValue::of_string(source->kind() == ModelSource::Kind::Gguf ? "gguf" : "hf")},
      {"nmkit.architecture", GgufValue::of_string(source->architecture())},
      {"nmkit.n_vocab", GgufValue::of_uint64(static_cast<uint64_t>(p.n_vocab))},
      {"nmkit.n_embd", GgufValue::of_uint64(static_cast<uint64_t>(p.n_embd))},
      {"nmkit.n_layer", GgufValue::of_uint64(static_cast<uint64_t>(p.n_layer))},
      {"nmkit.n_head", GgufValue::of_uint64(static_cast<uint64_t>(p.n_head))},
      {"nmkit.n_head_kv", GgufValue::of_uint64(static_cast<uint64_t>(p.n_head_kv))},
      {"nmkit.n_ff", GgufValue::of_uint64(static_cast<uint64_t>(p.n_ff))},
      {"nmkit.n_ctx_train", GgufValue::of_uint64(static_cast<uint64_t>(p.n_ctx_train))},
      {"nmkit.rms_eps", GgufValue::of_float32(p.rms_eps)},
      {"nmkit.rope_base", GgufValue::of_float32(p.rope_base)},
      {"nmkit.tied_output", GgufValue::of_bool(p.tied_output)},
  };
  std::vector<OutputTensor> tensors;
  for (const std::string& name : source->tensor_names()) {
    auto t = source->load_f32(name);
    if (!t.ok()) return fail(t.error().message());
    tensors.push_back(OutputTensor::owning(name, std::move(*t)));
  }
  const Status status = write_gguf(out, kvs, tensors);
  if (!status.ok()) return fail(status.error().message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "dump") return dump(args[1], args[2]);
  if (args.size() == 2 && args[0] == "check") {
    auto source = ModelSource::open(args[1]);
    if (!source.ok()) return fail(source.error().message());
    std::printf("ok\n");
    return 0;
  }
  return fail("usage: model_source_tool dump MODEL OUT.gguf | model_source_tool check MODEL");
}
