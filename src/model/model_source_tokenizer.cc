// load_tokenizer (include/nmkit/model_source.h): the tokenizer a model source carries.
#include "nmkit/model_source.h"

namespace nmkit {

Result<Tokenizer> load_tokenizer(const ModelSource& source) {
  if (const GgufFile* gguf = source.gguf()) {
    if (gguf->find_key("tokenizer.ggml.model") == nullptr) {
      return Error(ErrorCode::NotFound, "the model has no tokenizer (no tokenizer.ggml.* keys)").with_file(source.path());
    }
    return Tokenizer::from_gguf(*gguf);
  }
  if (source.tokenizer_json().empty()) {
    return Error(ErrorCode::NotFound, "no tokenizer.json in the model folder").with_file(source.path());
  }
  return Tokenizer::from_hf_json(source.tokenizer_json());
}

}  // namespace nmkit
