// What a LlamaModel holds and streams, in bytes (docs/design.md 11.7): the weight bytes a token
// reads, the bytes the model holds once built, and the storage a model's forms take, computed from
// the parameters alone before anything is loaded (the memory preflight).
#include <optional>
#include <utility>

#include "model/family.h"
#include "model/llama_impl.h"
#include "nmkit/slide_geometry.h"

namespace nmkit {

using model::kLinearGroup;

size_t LlamaModel::weight_bytes_per_token() const {
  size_t bytes = impl_->head->bytes_streamed();
  for (const auto& block : impl_->blocks) {
    for (const auto& l : block.linears) bytes += l->bytes_streamed();
  }
  return bytes;
}

size_t LlamaModel::resident_bytes() const {
  const Impl& m = *impl_;
  // A weight read in place counts as held: its pages are resident once read (SparseLinear).
  const auto held = [](const SparseLinear& l) { return l.resident_bytes(); };
  // A tied head read in place shares the embedding's bytes: counted once.
  const bool shared = m.head_reads_embedding;
  size_t bytes = held(*m.head) + (shared ? 0 : m.token_embd.resident_bytes()) + m.output_norm.nbytes() +
                 m.output.nbytes();
  for (const auto& block : m.blocks) {
    for (const auto& l : block.linears) bytes += held(*l);
    for (const model::BlockVector& v : m.family->vectors) bytes += block.vector(v.gguf)->nbytes();
    for (const Tensor& t : block.dense) bytes += t.nbytes();
  }
  return bytes;
}

namespace model {
namespace {

size_t linear_storage_bytes(int64_t rows, int64_t K, DType weights, LinearFormat format,
                            const std::optional<Pattern>& pattern) {
  const double ds = weights == DType::F32 ? 4 : weights == DType::BF16 ? 2 : 1;
  const double scales = weights == DType::I8 ? 4.0 * static_cast<double>(rows) : 0.0;
  const double r = static_cast<double>(rows);
  double bytes = 0;
  switch (format) {
    case LinearFormat::Dense:
      bytes = r * static_cast<double>(K) * ds;
      break;
    case LinearFormat::Sparse24: {
      const int64_t K_pad = (K + 3) / 4 * 4;
      bytes = r * (static_cast<double>(K_pad / 2) * ds + static_cast<double>((K_pad + 7) / 8));
      break;
    }
    case LinearFormat::NM: {
      const int64_t groups = pattern->groups(K);
      bytes = r * (static_cast<double>(groups * pattern->keep) * ds + static_cast<double>((pattern->padded(K) + 7) / 8));
      break;
    }
    case LinearFormat::Slid: {
      auto g = SlideGeometry::make(*pattern, K);
      const int64_t Kp = g.ok() ? g->K_prime() : K;
      bytes = r * (static_cast<double>(Kp / 2) + static_cast<double>(Kp / 8));  // int8 values + 2-bit indices
      break;
    }
  }
  return static_cast<size_t>(bytes + scales);
}


// The storage bytes of a model with `params` whose block b's linear group g is stored as
// form(b, g) (format, pattern).
template <class Form>
size_t model_storage_bytes(const LlamaParams& p, DType w, const Form& form) {
  const int64_t d = p.n_embd;
  size_t bytes = linear_storage_bytes(p.n_vocab, d, w, LinearFormat::Dense, std::nullopt);
  if (!p.tied_output) bytes *= 2;
  size_t vectors = static_cast<size_t>(d);  // output_norm, then each block's norms and biases
  for (const BlockVector& v : family_of(p).vectors) vectors += static_cast<size_t>(p.n_layer * vector_size(v.size, p));
  bytes += 4 * vectors;
  for (int64_t b = 0; b < p.n_layer; ++b) {
    for (int i = 0; i < 7; ++i) {
      const auto [format, pattern] = form(b, kLinearGroup[i]);
      const Shape shape = linear_shape(p, i);
      bytes += linear_storage_bytes(shape[0], shape[1], w, format, pattern);
    }
  }
  return bytes;
}

}  // namespace
}  // namespace model

size_t LlamaModel::storage_bytes() const {
  return model::model_storage_bytes(impl_->params, impl_->options.weights, [this](int64_t b, int g) {
    const model::Block& block = impl_->blocks[static_cast<size_t>(b)];
    return std::pair(block.formats[static_cast<size_t>(g)], block.patterns[static_cast<size_t>(g)]);
  });
}

size_t LlamaModel::estimate_bytes(const LlamaParams& params, const ModelOptions& options) {
  size_t bytes = model::model_storage_bytes(params, options.weights, [&](int64_t, int) {
    return std::pair(options.format, options.pattern);
  });
  if (options.keep_dense_weights) {  // the f32 block linears beside their packed forms
    const int64_t d = params.n_embd, hd = params.head_dim();
    const int64_t per_block = d * hd * (2 * params.n_head + 2 * params.n_head_kv) + 3 * d * params.n_ff;
    bytes += static_cast<size_t>(params.n_layer * per_block) * 4;
  }
  return bytes;
}

}  // namespace nmkit
