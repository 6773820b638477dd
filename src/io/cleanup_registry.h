// Process-wide, lock-free lists of the temporaries being written and the input files mapped, read by
// signal handlers through remove_temporaries() and mapped_input_at() (include/nmkit/files.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace nmkit::io {

// Each returns a slot (or -1 when the fixed table is full or the path too long: the file then works
// as before, only a signal cannot clean it up) to be released with the matching unregister call.
int register_temporary(const char* path) noexcept;
void unregister_temporary(int slot) noexcept;
// A temporary folder (PendingFolder): remove_temporaries() unlinks its entries, then the folder.
int register_temporary_folder(const char* path) noexcept;
void unregister_temporary_folder(int slot) noexcept;
int register_mapping(const void* begin, size_t size, const char* path) noexcept;
void unregister_mapping(int slot) noexcept;

// Makes a new temporary (a file or, with `folder`, a folder) named `prefix` + 6 random characters
// of [A-Za-z0-9]: each name is registered for removal on a fatal signal before `create(name)` makes
// it, so a signal at any instant finds the temporary (docs/design.md 10.12). `create` returns >= 0 (a
// descriptor, or 0) or -1 with errno; EEXIST tries another name, 101 names at most. Returns create's
// result with `path` and `slot` set, or -1 with errno and nothing registered. (A signal while a name
// that turned out to exist is registered would remove another writer's temporary: it needs a
// 1-in-62^6 collision in that microsecond.)
int create_registered(const std::string& prefix, bool folder, const std::function<int(const char*)>& create,
                      std::string& path, int& slot);

}  // namespace nmkit::io
