#include "nmkit/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>


namespace nmkit {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

bool ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The longest prefix of `text` that ends with "X\n" followed (in the text) by an ASCII letter or digit,
// X an ASCII character that is not whitespace; 0 when there is none. Every pre-tokenizer regex of
// docs/design.md 11.3 ends a piece at such a line break in the whole text as in the prefix (the
// piece that holds the '\n' cannot reach past it into the letter, and no whitespace before it can
// join it), so the prefix's pieces, and tokens, are the whole text's up to there.
size_t last_line_cut(const std::string& text) {
  for (size_t p = text.size(); p-- > 2;) {
    const char before = text[p - 2];
    if (text[p - 1] == '\n' && ascii_alnum(text[p]) && static_cast<unsigned char>(before) < 0x80 &&
        !ascii_space(before)) {
      return p;
    }
  }
  return 0;
}

}  // namespace

Result<TextFile> TextFile::open(const std::string& flag, const std::string& path) {
  TextFile file;
  file.flag_ = flag;
  file.path_ = path;
  if (path.empty()) return Error(flag + ": empty path");
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd_ < 0) return Error(flag + " " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd_, &st) != 0) return Error(flag + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return Error(flag + " " + path + ": " + kind_of(st.st_mode) + ", not a text file");
  }
  return file;
}

TextFile::TextFile(TextFile&& other) noexcept
    : flag_(std::move(other.flag_)),
      path_(std::move(other.path_)),
      text_(std::move(other.text_)),
      fd_(std::exchange(other.fd_, -1)),
      at_end_(other.at_end_),
      checked_(other.checked_) {}

TextFile::~TextFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status TextFile::check_utf8(size_t end) {
  if (end <= checked_) return ok_status();
  if (auto bad = first_invalid_utf8(std::string_view(text_).substr(checked_, end - checked_))) {
    const size_t at = checked_ + *bad;
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text_[at])));
    return Error(path_ + ": not UTF-8 text (invalid byte " + byte + " at offset " + std::to_string(at) + ")");
  }
  checked_ = end;
  return ok_status();
}

Status TextFile::read_at_least(size_t bytes) {
  constexpr size_t kBlock = size_t{1} << 20;
  if (bytes == SIZE_MAX) {  // the whole file: one allocation of its size, failing now if it cannot be had
    struct stat st {};
    if (::fstat(fd_, &st) == 0) text_.reserve(static_cast<size_t>(st.st_size) + kBlock);
  }
  while (!at_end_ && text_.size() < bytes) {
    const size_t old = text_.size();
    text_.resize(old + kBlock);
    const ssize_t got = ::read(fd_, text_.data() + old, kBlock);
    if (got < 0 && errno == EINTR) {
      text_.resize(old);
      continue;
    }
    if (got < 0) {
      const int err = errno;
      text_.resize(old);
      return Error(flag_ + " " + path_ + ": read failed: " + std::strerror(err));
    }
    text_.resize(old + static_cast<size_t>(got));
    at_end_ = got == 0;
    // A multi-byte character may straddle the end of what was read: check up to the last ASCII byte,
    // which never lies inside one (everything once the file is read).
    size_t end = text_.size();
    if (!at_end_) {
      while (end > checked_ && static_cast<unsigned char>(text_[end - 1]) >= 0x80) --end;
    }
    NMKIT_TRY(check_utf8(end));
  }
  return ok_status();
}

Result<TextTokens> tokenize_text(TextFile& file, const Tokenizer& tokenizer, size_t need) {
  TextTokens out;
  const auto encode = [&](size_t bytes) -> Status {
    auto ids = tokenizer.encode(std::string_view(file.text()).substr(0, bytes), tokenizer.add_bos(), false);
    if (!ids.ok()) return ids.error().with_context(file.path() + ": ");
    out.ids = std::move(*ids);
    out.tokenized_bytes = bytes;
    return ok_status();
  };
  if (need > 0 && tokenizer.model() == "gpt2") {
    // Bytes grow 2x a round, so at most twice the needed text is tokenized; 8 bytes a token is
    // above English prose's ~4.
    for (size_t bytes = std::max<size_t>(size_t{1} << 20, need * 8);; bytes *= 2) {
      NMKIT_TRY(file.read_at_least(bytes));
      if (file.at_end()) break;
      if (const size_t cut = last_line_cut(file.text()); cut > 0) {
        NMKIT_TRY(encode(cut));
        if (out.ids.size() >= need) {
          out.whole = false;
          return out;
        }
      }
    }
  }
  NMKIT_TRY(file.read_all());
  NMKIT_TRY(encode(file.text().size()));
  return out;
}

}  // namespace nmkit
