// Files nmkit writes: an output is never an input, it appears under its name only when complete, and
// no temporary outlives the process that wrote it (docs/design.md section 10.12: bad input leaves no
// partial output).
//
// Every output is produced as "NAME.tmp.XXXXXX" in the folder of the file it replaces, fsynced, and
// renamed onto NAME by commit(). The writer holds an flock on its temporary while it lives. A
// temporary is removed when the PendingFile is destroyed without commit, when the process gets
// SIGINT, SIGTERM or SIGHUP (if the program installs handlers that call remove_temporaries(), as the
// nmkit CLI does), and otherwise (SIGKILL, power loss) by the next write to the same NAME: a temporary of
// NAME that nobody holds locked and that is older than that write is stale and removed.
//
// Thread safety: PendingFile objects are independent (one per thread is fine); the registries behind
// remove_temporaries() and mapped_input_at() are lock-free and may be read from a signal handler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/status.h"

namespace nmkit {

// A path and how the user named it, for messages: {"-o", "out.safetensors"}, {"input", "in.safetensors"}.
struct FileRole {
  std::string label;
  std::string path;
};

// Refuses an output that is the same file as any input or as another output. Existing files are
// compared by device and inode (so "./in", "/abs/in", hard links and symlinks to an input are all
// caught); files that do not exist yet by their canonical absolute path. The Error reads
// "-o 'PATH': same file as the input 'IN'" (or "... as -o 'OUT'").
Status check_distinct_files(const std::vector<FileRole>& outputs, const std::vector<FileRole>& inputs);

// The file a write to `path` replaces: `path` itself, or the final target of a symlink chain, so an
// output given as a symlink is written through to its target and the link stays a link. A dangling
// link is an Error (nothing to write through to).
Result<std::string> resolve_output_path(const std::string& path);

// An output being written under a temporary name. Move-only; the destructor removes the temporary
// unless commit() succeeded.
class PendingFile {
 public:
  // Creates the temporary next to the (resolved) target. With size > 0 the file's blocks are
  // reserved (a full disk is an Error now, not a SIGBUS later) and mapped for writing at data().
  // Refuses a target that is a folder. Removes stale temporaries of the same target first.
  static Result<PendingFile> create(const std::string& path, uint64_t size = 0);

  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&&) = delete;
  PendingFile(const PendingFile&) = delete;
  ~PendingFile();

  const std::string& path() const { return path_; }            // as given
  const std::string& target() const { return target_; }        // what commit() replaces
  std::byte* data() { return data_; }                           // the mapping (size > 0)
  // Appends bytes with write(2) (files created with size 0).
  Status append(std::string_view bytes);
  // Unmaps, fsyncs and closes: the bytes are durable under the temporary name. commit() calls it.
  Status finish();
  // Renames the temporary onto the target and syncs the folder.
  Status commit();

 private:
  PendingFile() = default;
  Error failure(const std::string& what, int err) const;
  void unmap();

  std::string path_;
  std::string target_;
  std::string temp_;
  int fd_ = -1;
  int slot_ = -1;  // in the signal-cleanup registry
  bool finished_ = false;
  bool committed_ = false;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// A complete text file (a report) made pending: write it, then commit() it with the other outputs.
Result<PendingFile> prepare_text_file(const std::string& path, std::string_view content);

// An output folder (a Hugging Face model) being built as "DIR.tmp.XXXXXX" beside DIR: created with
// the permissions of a plain mkdir, flock-ed while it lives, registered for signal cleanup (its
// files, then the folder, are removed by remove_temporaries()), and removed by the destructor
// unless commit() moved it onto DIR. A temporary folder of DIR that nobody holds locked and that is
// over 2 s older than this write was left by a killed writer and is removed by create().
class PendingFolder {
 public:
  // `target` is the folder to replace, as the caller resolved it (no trailing '/').
  static Result<PendingFolder> create(const std::string& target);

  PendingFolder(PendingFolder&& other) noexcept;
  PendingFolder& operator=(PendingFolder&&) = delete;
  PendingFolder(const PendingFolder&) = delete;
  ~PendingFolder();

  const std::string& path() const { return path_; }  // the temporary folder

  // Syncs the folder and moves it onto the target: renamed when the target is absent; when the
  // target exists (also when another writer created it after this one started),
  // `may_replace(target)` decides, and on success the two are exchanged
  // (renameat2(RENAME_EXCHANGE)) and the old folder removed. The last writer to commit wins, and
  // the target is at every instant either absent, the old folder or a complete new one.
  Status commit(const std::function<Status(const std::string& target)>& may_replace);

 private:
  PendingFolder() = default;

  std::string target_;
  std::string path_;
  int fd_ = -1;
  int slot_ = -1;  // in the signal-cleanup registry
};

// Async-signal-safe: unlinks every temporary file of this process not yet committed, and empties and
// removes every temporary folder (PendingFolder). For SIGINT/SIGTERM/SIGHUP/SIGBUS handlers; the
// library installs no handler itself.
void remove_temporaries() noexcept;

// Async-signal-safe: the path of the input file whose read-only mapping contains `address`, or
// nullptr. A SIGBUS at such an address means the file shrank while it was being read.
const char* mapped_input_at(const void* address) noexcept;

}  // namespace nmkit
