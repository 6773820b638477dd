// Test driver for tests/model/independent_forward.py and family_forward.py: loads a model, runs it on the given
// tokens and writes the logits of every position (raw little-endian f32, [n, n_vocab]) so that the
// Python side can compare them with its own numpy forward pass. Also prints the kernel of the block
// linears, so the test knows which weight form ran.
//
// Usage: nmkit_model_logits MODEL TOKENS_CSV OUT [--weights f32|bf16|int8] [--pattern P]
//          [--format dense|sparse24|nm|slid] [--mode full|decode|blocks] [--save OUT.gguf]
//          [--save-hf DIR]
//   MODEL: a GGUF file or Hugging Face folder (ModelSource).
//   full:   one batched prefill of all tokens.
//   decode: a prefill of the first half, then one token at a time against the KV cache.
//   blocks: embed, run_block on 2 sequences (the tokens twice), head: the calibration path.
//   --save: the model's weights (pruned on load) written as an F32 GGUF (write_model_gguf).
//   --save-hf: the same as an F32 Hugging Face folder (write_model_hf).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/model_write.h"

namespace {

using namespace nmkit;

int fail(const std::string& message) {
  std::fprintf(stderr, "nmkit_model_logits: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return fail("usage: MODEL TOKENS_CSV OUT [options]");
  const std::string path = argv[1], out_path = argv[3];
  std::vector<int32_t> tokens;
  {
    std::stringstream ss(argv[2]);
    std::string item;
    while (std::getline(ss, item, ',')) tokens.push_back(static_cast<int32_t>(std::stol(item)));
  }
  ModelOptions options;
  std::string mode = "full", save, save_hf;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--weights") {
      auto w = parse_weight_dtype(value);
      if (!w.ok()) return fail(w.error().message());
      options.weights = *w;
    } else if (flag == "--pattern") {
      auto p = Pattern::parse(value);
      if (!p.ok()) return fail(p.error().message());
      options.pattern = *p;
    } else if (flag == "--format") {
      auto f = parse_linear_format(value);
      if (!f.ok()) return fail(f.error().message());
      options.format = *f;
    } else if (flag == "--save") {
      save = value;
      options.keep_dense_weights = true;
    } else if (flag == "--save-hf") {
      save_hf = value;
      options.keep_dense_weights = true;
    } else if (flag == "--mode") {
      mode = value;
    } else {
      return fail("unknown flag " + flag);
    }
  }
  auto source = ModelSource::open(path);
  if (!source.ok()) return fail(source.error().message());
  const LlamaParams* params = &source->params();
  auto model = LlamaModel::build(*params, source->tensors(), options);
  if (!model.ok()) return fail(model.error().message());
  std::printf("kernel %s\n", model->linear_kernel_name(1).c_str());
  if (!save.empty()) {
    Status st = write_model_gguf(save, *model, *source, DType::F32);
    if (!st.ok()) return fail(st.error().message());
  }
  if (!save_hf.empty()) {
    Status st = write_model_hf(save_hf, *model, *source, DType::F32);
    if (!st.ok()) return fail(st.error().message());
  }

  const int64_t n = static_cast<int64_t>(tokens.size()), V = params->n_vocab, d = params->n_embd;
  std::vector<float> logits(static_cast<size_t>(n * V));
  if (mode == "full" || mode == "decode") {
    LlamaSession session(*model, n);
    const int64_t prefill = mode == "full" ? n : n / 2;
    Status st = model->forward(session, tokens.data(), prefill, logits.data(), 0);
    for (int64_t i = prefill; st.ok() && i < n; ++i) {
      st = model->forward(session, tokens.data() + i, 1, logits.data() + i * V, 0);
    }
    if (!st.ok()) return fail(st.error().message());
  } else if (mode == "blocks") {
    // Two sequences: the tokens, then the tokens again; both must give the same logits.
    std::vector<float> hidden(static_cast<size_t>(2 * n * d));
    Status st = model->embed(tokens.data(), n, hidden.data());
    if (st.ok()) st = model->embed(tokens.data(), n, hidden.data() + n * d);
    int64_t hooked = 0;
    LinearHook hook = [&hooked](const LinearInput& in) -> Status {
      hooked += static_cast<int64_t>(in.names.size());
      return ok_status();
    };
    for (int64_t b = 0; st.ok() && b < params->n_layer; ++b) st = model->run_block(b, hidden.data(), 2, n, hook);
    std::vector<float> both(static_cast<size_t>(2 * n * V));
    if (st.ok()) st = model->head(hidden.data(), 2 * n, both.data());
    if (!st.ok()) return fail(st.error().message());
    if (hooked != 7 * params->n_layer) return fail("hook saw " + std::to_string(hooked) + " linears");
    if (std::memcmp(both.data(), both.data() + n * V, static_cast<size_t>(n * V) * sizeof(float)) != 0) {
      return fail("the second sequence's logits differ from the first's");
    }
    std::memcpy(logits.data(), both.data(), static_cast<size_t>(n * V) * sizeof(float));
  } else {
    return fail("unknown mode " + mode);
  }
  std::ofstream out(out_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  return out.good() ? 0 : fail("cannot write " + out_path);
}
