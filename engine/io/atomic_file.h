#pragma once
// Replacing a file all at once: readers see either the old contents or the complete new ones.

#include <cstddef>
#include <span>
#include <string>

#include "common/status.h"

namespace tandem::engine::io {

// Writes the concatenation of `pieces` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory. On error the temporary file is removed and `path` is
// untouched. REQUIRES: the parent directory exists. Not safe against two concurrent writers of the
// same path from one process (they share a temporary name).
Status WriteFileAtomically(const std::string& path, std::span<const std::span<const std::byte>> pieces);

}  // namespace tandem::engine::io
