// WriteFileAtomically: a file that is either absent, its old content or its whole new content, also
// after a crash: written as PATH.tmp, fsynced, then moved to PATH.
#ifndef GANTRY_BASE_ATOMIC_FILE_H_
#define GANTRY_BASE_ATOMIC_FILE_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry {

// Whether an existing PATH is replaced (rename) or kept (link, then ALREADY_EXISTS).
enum class ExistingFile { kReplace, kKeep };

// Writes the concatenation of `pieces` to `path` through `path`.tmp (created with `mode`, a stale one from
// an interrupted run replaced, a symlink there not followed), fsync, then rename over `path`
// (kReplace) or link to it (kKeep: ALREADY_EXISTS if `path` exists, also when it appeared
// meanwhile). The .tmp file never outlives the call. Errors are UNAVAILABLE (ALREADY_EXISTS as
// said) and name the path: for files of this process, never for a path a tenant gave.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::initializer_list<absl::string_view> pieces,
                                 ExistingFile existing = ExistingFile::kReplace, int mode = 0644);

}  // namespace gantry

#endif  // GANTRY_BASE_ATOMIC_FILE_H_
