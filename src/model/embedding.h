// The token embedding, looked up row by row in the dtype its file stores it in (docs/design.md 14):
// a model holds no f32 copy of a [n_vocab, n_embd] table; each lookup converts the rows it reads
// (dequantized as GgufFile::dequantize would, bit for bit). A model built from f32 tensors alone
// (no stored bytes) holds them as given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nmkit/model.h"

namespace nmkit::model {

class Embedding {
 public:
  Embedding() = default;
  // Over the file's bytes: an Error when a row cannot be converted on its own (a block type whose
  // block does not divide n_embd) or any value is not finite (naming the element).
  static Result<Embedding> over(MappedTensor stored, const std::string& name);
  static Embedding of(Tensor f32);

  // out (n, n_embd) f32 = rows tokens[0..n) (ids already checked against n_vocab).
  void rows(const int32_t* tokens, int64_t n, float* out) const;
  // The whole table as f32 (for writers: one table-sized temporary).
  Tensor to_f32() const;
  // The stored view, when the table is read in place (the tied head may be packed from it).
  const std::optional<MappedTensor>& stored() const { return stored_; }
  // The table's bytes: f32, or the stored rows (which the mapping holds as they are read).
  size_t resident_bytes() const { return stored_ ? stored_->row_bytes * static_cast<size_t>(n_vocab_) : f32_.nbytes(); }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_embd() const { return n_embd_; }

 private:
  std::optional<MappedTensor> stored_;
  Tensor f32_;  // when not stored
  int64_t n_vocab_ = 0, n_embd_ = 0;
};

}  // namespace nmkit::model
