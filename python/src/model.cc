// Whole models: nmkit.Model (load, tokenize, logits, generate, perplexity), nmkit.prune_model and
// nmkit.inspect (include/nmkit/model.h, generate.h, perplexity.h, prune_model.h, inspect.h).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <vector>

#include "bindings.h"

namespace nmkit::python {
namespace {

struct PyModel {
  std::string path;
  std::string description;  // "int8 2:4 sparse24"
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

struct PruneModelReport {
  PruneMetrics total;
  std::vector<LinearReport> linears;
  CalibTimes seconds;
  std::string calib_text;
  int64_t calib_text_tokens = 0;
};

// Token ids from Python (any sequence of ints).
std::vector<int32_t> token_ids(const std::vector<int64_t>& ids, const LlamaModel& model) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= model.params().n_vocab) {
      raise(Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                                  std::to_string(model.params().n_vocab - 1) + ")"));
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

DType output_dtype(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  raise_argument("dtype: unknown dtype '" + name + "' (expected f32, f16 or bf16)");
}

nb::str utf8_replacing(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<PerplexityResult>(m, "PerplexityResult", "Perplexity by llama.cpp's protocol (docs/design.md 11.4).")
      .def_ro("perplexity", &PerplexityResult::perplexity)
      .def_ro("nll_sum", &PerplexityResult::nll_sum, "Sum of -log p(next token), float64.")
      .def_ro("predictions", &PerplexityResult::predictions)
      .def_ro("chunks", &PerplexityResult::chunks)
      .def_ro("tokens", &PerplexityResult::tokens, "Tokens run through the model: chunks * ctx.")
      .def_ro("seconds", &PerplexityResult::seconds)
      .def("__repr__", [](const PerplexityResult& r) {
        return "PerplexityResult(perplexity=" + std::to_string(r.perplexity) + ", chunks=" + std::to_string(r.chunks) +
               ")";
      });

  nb::class_<PyModel>(m, "Model",
                      "A llama model on nmkit's kernels (GGUF file or Hugging Face folder), with its tokenizer.")
      .def_static(
          "load",
          [](const std::filesystem::path& path, const std::string& weights, std::optional<std::string> pattern,
             const std::string& format, const std::string& method, nb::object progress) {
            ModelOptions options;
            options.weights = unwrap(parse_weight_dtype(weights));
            options.format = unwrap(parse_linear_format(format));
            options.method = unwrap(parse_prune_method(method));
            if (pattern) options.pattern = parse_pattern(*pattern);
            LongCall call(progress);
            options.on_block = call.progress("load");
            auto loaded = call.run([&]() -> Result<PyModel> {
              auto source = ModelSource::open(path.string());
              if (!source.ok()) return source.error();
              auto tokenizer = load_tokenizer(*source);
              if (!tokenizer.ok()) return tokenizer.error();
              auto model = LlamaModel::build(source->params(), source->tensors(), options);
              if (!model.ok()) return model.error().with_context(path.string() + ": ");
              return PyModel{path.string(), weight_form_name(model->options()),  // a packed file's own form
                             std::make_unique<LlamaModel>(std::move(*model)),
                             std::make_unique<Tokenizer>(std::move(*tokenizer))};
            });
            return unwrap(std::move(loaded));
          },
          nb::arg("path"), nb::arg("weights") = "f32", nb::arg("pattern") = nb::none(), nb::arg("format") = "dense",
          nb::arg("method") = "magnitude", nb::arg("progress") = nb::none(),
          R"(Loads a llama model: a GGUF file or a Hugging Face folder (config.json, safetensors,
tokenizer.json). weights: "f32", "bf16" or "int8" (every linear and the head). ``pattern`` prunes
the attention and MLP linears on load with ``method`` (magnitude) and packs them as ``format``:
"dense" (masked), "sparse24", "nm" or "slid". progress(stage, done, total) is called per block;
Ctrl-C stops the load.)")
      .def_prop_ro("path", [](const PyModel& s) { return s.path; })
      .def_prop_ro("description", [](const PyModel& s) { return s.description; },
                   "The weight form: \"f32 dense\", \"int8 2:4 sparse24\", ...")
      .def_prop_ro("n_vocab", [](const PyModel& s) { return s.model->params().n_vocab; })
      .def_prop_ro("n_layer", [](const PyModel& s) { return s.model->params().n_layer; })
      .def_prop_ro("n_ctx", [](const PyModel& s) { return s.model->params().n_ctx_train; }, "Training context length.")
      .def_prop_ro("weight_bytes_per_token", [](const PyModel& s) { return s.model->weight_bytes_per_token(); },
                   "Bytes of packed weights one decode step streams.")
      .def_prop_ro("storage_bytes", [](const PyModel& s) { return s.model->storage_bytes(); },
                   "Bytes of the weights in their storage formats.")
      .def(
          "kernel_name", [](const PyModel& s, int64_t tokens) { return s.model->linear_kernel_name(tokens); },
          nb::arg("m") = 1, "The kernel a block linear runs for m tokens.")
      .def(
          "tokenize",
          [](const PyModel& s, const std::string& text, bool add_special, bool parse_special) {
            auto ids = unwrap(s.tokenizer->encode(text, add_special, parse_special));
            return std::vector<int64_t>(ids.begin(), ids.end());
          },
          nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false,
          R"(Token ids of ``text`` (llama.cpp's for the same vocabulary). add_special: BOS/EOS as the
model's tokenizer adds them; parse_special: control tokens written in the text become their ids.)")
      .def(
          "detokenize",
          [](const PyModel& s, const std::vector<int64_t>& ids) {
            return utf8_replacing(s.tokenizer->decode(token_ids(ids, *s.model)));
          },
          nb::arg("ids"), "The text of token ids (bytes that are not UTF-8 become U+FFFD).")
      .def(
          "logits",
          [](const PyModel& s, const std::vector<int64_t>& ids) {
            const std::vector<int32_t> tokens = token_ids(ids, *s.model);
            const auto n = static_cast<int64_t>(tokens.size());
            if (n < 1) raise_argument("logits: no tokens");
            Tensor logits = Tensor::empty(DType::F32, {n, s.model->params().n_vocab});
            check(LongCall().run([&] {
              LlamaSession session(*s.model, n);
              return s.model->forward(session, tokens.data(), n, logits.as<float>(), 0);
            }));
            return array_out(std::move(logits), Framework::Numpy);
          },
          nb::arg("ids"), "Logits [n, n_vocab] float32 of every position of ``ids``, run from an empty cache.")
      .def(
          "generate",
          [](const PyModel& s, const std::string& prompt, int64_t n, float temperature, int32_t top_k, float top_p,
             uint64_t seed, bool chat, nb::object progress) {
            GenerateOptions options;
            options.max_tokens = n;
            options.sampling = SamplerParams{temperature, top_k, top_p, seed};
            LongCall call(progress);
            int64_t produced = 0;
            options.on_piece = [&](std::string_view) { call.notify("generate", ++produced, n); };
            auto result = call.run([&]() -> Result<GenerateResult> {
              auto ids = prompt_tokens(*s.tokenizer, prompt, chat, s.model->params().n_ctx_train);
              if (!ids.ok()) return ids.error();
              return generate(*s.model, *s.tokenizer, *ids, options);
            });
            return utf8_replacing(unwrap(std::move(result)).text);
          },
          nb::arg("prompt"), nb::arg("n") = 32, nb::arg("temperature") = 0.0f, nb::arg("top_k") = 0,
          nb::arg("top_p") = 1.0f, nb::arg("seed") = 0, nb::arg("chat") = false, nb::arg("progress") = nb::none(),
          R"(The text generated after ``prompt`` (not repeating it): at most ``n`` tokens, until an
end-of-generation token. Greedy by default; temperature/top_k/top_p sample with ``seed``
(reproducible). chat: the prompt as one user turn of the model's chat template.)")
      .def(
          "perplexity",
          [](const PyModel& s, const std::string& text, int64_t ctx, int64_t chunks, nb::object progress) {
            PerplexityOptions options;
            options.ctx = ctx;
            options.max_chunks = chunks;
            options.add_bos = s.tokenizer->add_bos();
            options.bos = s.tokenizer->bos();
            LongCall call(progress);
            options.on_chunk = [&call](int64_t c, int64_t n, double) { call.notify("perplexity", c + 1, n); };
            auto result = call.run([&]() -> Result<PerplexityResult> {
              auto tokens = s.tokenizer->encode(text, s.tokenizer->add_bos(), false);
              if (!tokens.ok()) return tokens.error();
              return perplexity(*s.model, *tokens, options);
            });
            return unwrap(std::move(result));
          },
          nb::arg("text"), nb::arg("ctx") = 512, nb::arg("chunks") = 0, nb::arg("progress") = nb::none(),
          R"(Perplexity of ``text`` by llama.cpp's protocol, as `nmkit eval` computes it: chunks of
``ctx`` tokens (at most ``chunks``; 0: all), each from an empty cache, the second half of each
scored. A text of fewer than 2 * ctx tokens raises nmkit.Error.)")
      .def("__repr__", [](const PyModel& s) { return "Model(" + s.path + ", " + s.description + ")"; });

  nb::class_<LinearReport>(m, "LinearReport", "One pruned linear of prune_model.")
      .def_ro("name", &LinearReport::name, "GGUF name: blk.B.attn_q.weight.")
      .def_ro("block", &LinearReport::block)
      .def_prop_ro("metrics", [](const LinearReport& l) { return metrics_from(l.sums); },
                   "PruneMetrics of the mask over the original weight.")
      .def_ro("weight_relative_error", &LinearReport::weight_relative_error,
              "||W - W_pruned||_F / ||W||_F, with SparseGPT's updates.")
      .def_ro("output_error", &LinearReport::output_error,
              "||XW^T - XW_pruned^T||_F / ||XW^T||_F on the calibration inputs (None without them).")
      .def_ro("swaps", &LinearReport::swaps, "In-group swaps applied (swaps=True).")
      .def_ro("seconds", &LinearReport::seconds);

  nb::class_<PruneModelReport>(m, "PruneModelReport", "What prune_model did, linear by linear.")
      .def_ro("total", &PruneModelReport::total, "PruneMetrics over every pruned linear.")
      .def_ro("linears", &PruneModelReport::linears)
      .def_prop_ro("seconds", [](const PruneModelReport& r) { return r.seconds.total; })
      .def_ro("calib_text", &PruneModelReport::calib_text)
      .def_ro("calib_text_tokens", &PruneModelReport::calib_text_tokens);

  m.def(
      "prune_model",
      [](const std::filesystem::path& src, const std::filesystem::path& out, const std::string& pattern,
         const std::string& method, std::optional<std::filesystem::path> calib, int64_t calib_seqs, int64_t calib_len,
         int refit, const std::string& dtype, nb::object progress, bool permute, bool swaps, double dense_targets) {
        CalibTextOptions options;
        options.permute = permute;
        options.swaps = swaps;
        options.dense_targets = dense_targets;
        options.pattern = parse_pattern(pattern);
        options.method = unwrap(parse_calib_method(method));
        if (calib) options.text_path = calib->string();
        options.n_seq = calib_seqs;
        options.seq_len = calib_len;
        options.refit_steps = refit;
        const DType written = output_dtype(dtype);
        std::vector<FileRole> inputs;
        if (calib) inputs.push_back({"calib", calib->string()});
        // Before the work: out is no file src reads (nor calib), and its location takes the model.
        check(check_pruned_model_output(src.string(), out.string(), written, inputs, {}, "out"));
        LongCall call(progress);
        options.on_block = call.progress("prune");
        const CalibRun run = unwrap(call.run([&] {
          return prune_model_to(src.string(), out.string(), options, written,
                                [&call](size_t i, size_t n, const std::string&) {
                                  call.notify("write", static_cast<int64_t>(i) + 1, static_cast<int64_t>(n));
                                });
        }));
        const CalibReport& report = run.report;
        PruneSums total;
        for (const LinearReport& l : report.linears) total += l.sums;
        return PruneModelReport{metrics_from(total), report.linears, report.seconds, run.text_path, run.text_tokens};
      },
      nb::arg("src"), nb::arg("out"), nb::arg("pattern"), nb::arg("method") = "sparsegpt",
      nb::arg("calib") = nb::none(), nb::arg("calib_seqs") = 64, nb::arg("calib_len") = 256, nb::arg("refit") = 0,
      nb::arg("dtype") = "f32", nb::arg("progress") = nb::none(), nb::arg("permute") = false,
      nb::arg("swaps") = false, nb::arg("dense_targets") = 0.0,
      R"(Prunes every attention and MLP linear of the model ``src`` (GGUF file or Hugging Face folder)
to ``pattern`` with ``method`` ("magnitude", "wanda", "sparsegpt" or "admm", calibrated block by block on
the UTF-8 text file ``calib``: calib_seqs sequences of calib_len tokens) and writes ``out`` by its
form: OUT.gguf (GGUF source), a folder (Hugging Face layout), or OUT.safetensors (Hugging Face
source), tensors in ``dtype`` (f32, f16, bf16) — exactly as `nmkit prune MODEL` does.
progress(stage, done, total) is called per block ("prune") and per tensor written ("write").
permute: reorder each block's feed-forward and value channels first so that the masks of down and
output projections keep more (the model computes the same function; `nmkit prune --permute`).
swaps: after each linear's mask, trade kept and pruned weights within a group while the output
error on the calibration inputs falls (`nmkit prune --swaps`).
dense_targets: before each mask, move the linear this fraction (0 to 1) of the way to the weight
that gives the dense model's outputs from the pruned model's inputs (`nmkit prune --dense-targets`).
Atomic: on any error or Ctrl-C nothing is written.)");

  m.def(
      "pack_model",
      [](const std::filesystem::path& src, const std::filesystem::path& out, const std::string& weights,
         std::optional<std::string> pattern, const std::string& format, nb::object progress) {
        ModelOptions options;
        options.weights = unwrap(parse_weight_dtype(weights));
        options.format = unwrap(parse_linear_format(format));
        if (pattern) options.pattern = parse_pattern(*pattern);
        LongCall call(progress);
        options.on_block = call.progress("load");
        check(call.run([&]() -> Status {
          auto source = ModelSource::open(src.string());
          if (!source.ok()) return source.error();
          NMKIT_TRY(check_packed_model_output(out.string(), options.weights, *source, "out"));
          auto model = LlamaModel::build(source->params(), source->tensors(), options);
          if (!model.ok()) return model.error().with_context(src.string() + ": ");
          ModelWriteOptions write;
          write.on_tensor = [&call](size_t i, size_t n, const OutputTensor&) {
            call.notify("write", static_cast<int64_t>(i) + 1, static_cast<int64_t>(n));
          };
          return write_packed_model(out.string(), *model, *source, write);
        }));
      },
      nb::arg("src"), nb::arg("out"), nb::arg("weights") = "int8", nb::arg("pattern") = nb::none(),
      nb::arg("format") = "dense", nb::arg("progress") = nb::none(),
      R"(Builds the model ``src`` (GGUF file or Hugging Face folder) in a weight form, as Model.load
does (``weights``, ``pattern`` pruned on load by magnitude, ``format``), and writes it to
``out`` (OUT.gguf) as a packed model file: Model.load and every nmkit command then map it and run its
linears where they lie, converting nothing (docs/design.md 11.9), in that form only. Exactly what
`nmkit pack` writes. progress(stage, done, total) per block ("load") and tensor ("write"). Atomic:
on any error or Ctrl-C nothing is written.)");

  m.def(
      "_inspect_json",
      [](const std::filesystem::path& path) {
        auto rows = LongCall().run([&] { return inspect_path(path.string()); });
        return inspect_json(path.string(), unwrap(std::move(rows)), -1);
      },
      nb::arg("path"), "inspect_json's text for nmkit.inspect.");
}

}  // namespace nmkit::python
