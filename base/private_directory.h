// MakePrivateDirectory: a directory only this process's user may enter (0700), for the server's
// data and the worker daemon's cache: created 0700 (missing parents too), tightened to 0700 when it
// is ours and others may use it.
#ifndef GANTRY_BASE_PRIVATE_DIRECTORY_H_
#define GANTRY_BASE_PRIVATE_DIRECTORY_H_

#include <string>

#include "absl/status/statusor.h"

namespace gantry {

// Makes `path` a private directory. Returns a line for the log ("" when there is nothing to say):
// what was tightened ("tightened <path> from 0755 to 0700"), or, for a directory of another user
// (a volume mounted for the process, e.g. root's with a group that includes it), that it stays as
// it is ("<path> is owned by uid 0 with mode 2775; ..."): what gantry writes in it is private
// anyway (it runs with umask 077). FAILED_PRECONDITION when `path` exists and is not a directory,
// UNAVAILABLE when it cannot be created or changed; both name the path and the cause.
absl::StatusOr<std::string> MakePrivateDirectory(const std::string& path);

// Sets this process's umask to 077, so every file and directory it creates (and the processes it
// starts create) are its user's alone unless created with an explicit mode.
void UsePrivateUmask();

}  // namespace gantry

#endif  // GANTRY_BASE_PRIVATE_DIRECTORY_H_
