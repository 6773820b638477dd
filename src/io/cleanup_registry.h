// Process-wide, lock-free lists of the temporaries being written and the input files mapped, read by
// signal handlers through remove_temporaries() and mapped_input_at() (include/nmkit/files.h).
#pragma once

#include <cstddef>

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

}  // namespace nmkit::io
