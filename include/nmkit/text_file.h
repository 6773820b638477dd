// A UTF-8 text given to a command (`eval --text`, `--calib`, prune_model's calibration text), read as
// far as the command needs (issue 24, items 2 and 7; docs/design.md 11.3 and 11.4). A failed
// allocation is std::bad_alloc (the CLI names what it was doing: tools/nmkit/memory.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

class TextFile {
 public:
  // Opens PATH for FLAG. Only a regular file is read: a folder, FIFO, socket or device (/dev/zero,
  // /dev/urandom) is an Error naming it, never an endless read.
  static Result<TextFile> open(const std::string& flag, const std::string& path);
  TextFile(TextFile&& other) noexcept;
  TextFile& operator=(TextFile&&) = delete;
  ~TextFile();

  // Reads until text() holds at least `bytes` bytes or the whole file. The bytes are checked as they
  // come: the first one that does not begin a valid UTF-8 sequence ends the read with an Error
  // naming the file and its offset (a binary file fails within its first bytes, not after GBs).
  Status read_at_least(size_t bytes);
  Status read_all() { return read_at_least(SIZE_MAX); }
  bool at_end() const { return at_end_; }
  const std::string& text() const { return text_; }
  const std::string& path() const { return path_; }

 private:
  TextFile() = default;
  Status check_utf8(size_t end);

  std::string flag_, path_, text_;
  int fd_ = -1;
  bool at_end_ = false;
  size_t checked_ = 0;  // text_[0, checked_) is valid UTF-8
};

// Tokens of the whole text, or, with need > 0 and a byte-level BPE ("gpt2") vocabulary, of a prefix
// that ends at a line break and holds at least `need` tokens: the same first `need` tokens as the
// whole text's (docs/design.md 11.4), without reading or tokenizing the rest. `tokenized_bytes`
// says how much of the file that was.
struct TextTokens {
  std::vector<int32_t> ids;
  size_t tokenized_bytes = 0;
  bool whole = true;
};
Result<TextTokens> tokenize_text(TextFile& file, const Tokenizer& tokenizer, size_t need);

}  // namespace nmkit
