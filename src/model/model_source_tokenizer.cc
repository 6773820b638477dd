// load_tokenizer (include/nmkit/model_source.h): the tokenizer a model source carries.
#include "nmkit/model_source.h"

namespace nmkit {

Status check_vocabulary(const ModelSource& source, const Tokenizer& tokenizer) {
  if (tokenizer.n_vocab() <= source.params().n_vocab) return ok_status();
  return Error(ErrorCode::InvalidFile, "the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                                           " tokens, but the model's vocabulary only " +
                                           std::to_string(source.params().n_vocab) + " (token_embd rows)")
      .with_file(source.path());
}

Result<Tokenizer> load_tokenizer(const ModelSource& source) {
  Result<Tokenizer> tokenizer = Error("");
  if (const GgufFile* gguf = source.gguf()) {
    if (gguf->find_key("tokenizer.ggml.model") == nullptr) {
      return Error(ErrorCode::NotFound, "the model has no tokenizer (no tokenizer.ggml.* keys)").with_file(source.path());
    }
    tokenizer = Tokenizer::from_gguf(*gguf);
  } else if (source.tokenizer_json().empty()) {
    return Error(ErrorCode::NotFound, "no tokenizer.json in the model folder").with_file(source.path());
  } else {
    tokenizer = Tokenizer::from_hf_json(source.tokenizer_json());
  }
  if (tokenizer.ok()) NMKIT_TRY(check_vocabulary(source, *tokenizer));
  return tokenizer;
}

}  // namespace nmkit
