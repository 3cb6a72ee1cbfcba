// FileRoots: the directories an operator allows `file://` dataset references to point into.
//
// The server checks a reference lexically against its roots when a job is submitted (it cannot see
// the workers' file systems); a worker resolves the path with realpath on its own file system and
// opens it only when the resolved file lies under one of its roots and outside the directories it
// denies (its dataset cache and scratch), so a symlink or a `..` cannot lead out of a root.
#ifndef GANTRY_BASE_FILE_ROOTS_H_
#define GANTRY_BASE_FILE_ROOTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

// Immutable after Parse; thread-compatible.
class FileRoots {
 public:
  // No root: every path is refused.
  FileRoots() = default;

  // A comma-separated list of absolute directories ("/data/calo,/eos/shared"); empty entries are
  // ignored, "/" is refused (it would allow everything). Roots are normalised lexically (".",
  // "..", repeated and trailing slashes). INVALID_ARGUMENT naming `flag` for a bad entry.
  static absl::StatusOr<FileRoots> Parse(absl::string_view list, absl::string_view flag);

  bool empty() const { return roots_.empty(); }
  const std::vector<std::string>& roots() const { return roots_; }
  // "/data/calo, /eos/shared" or "none", for messages.
  std::string Describe() const;

  // The path normalised lexically, when it is absolute and lies under a root; INVALID_ARGUMENT
  // (saying which roots are allowed) otherwise. No file system access.
  absl::StatusOr<std::string> CheckLexical(absl::string_view path) const;

  // The path resolved with realpath(3) (symlinks followed), when the resolved file lies under one
  // of the roots (resolved too), under one of `owner`'s when given (the directories the job's
  // owner may read), and under none of `denied`: NOT_FOUND when it does not exist,
  // PERMISSION_DENIED when it resolves outside the roots, outside the owner's or into a denied
  // directory.
  absl::StatusOr<std::string> Resolve(const std::string& path,
                                      const std::vector<std::string>& denied,
                                      const FileRoots* owner = nullptr) const;

  // True when `resolved` (a realpath) lies strictly under one of the roots, each resolved with
  // realpath on this machine (a root missing here allows nothing).
  bool ContainsResolved(const std::string& resolved) const;

  // This one's roots, then the other's that are not already among them.
  FileRoots Merged(const FileRoots& other) const;

 private:
  std::vector<std::string> roots_;  // lexically normal, absolute, no trailing slash
};

// Roots per tenant: "alice=/data/alice,/data/shared;bob=/data/bob" (tenants separated by ';', each
// tenant's roots as FileRoots::Parse takes them). INVALID_ARGUMENT naming `flag` for an entry
// without '=', an empty or repeated tenant, or a bad root. Empty: no tenant has roots of its own.
absl::StatusOr<std::map<std::string, FileRoots>> ParseTenantFileRoots(absl::string_view list,
                                                                      absl::string_view flag);

// "/a/./b//c/../d/" -> "/a/b/d"; a relative path stays relative. ".." above "/" stays at "/".
std::string NormalizePathLexically(absl::string_view path);

// True when `path` equals `dir` or lies below it (both lexically normal).
bool PathIsUnder(absl::string_view path, absl::string_view dir);

}  // namespace gantry

#endif  // GANTRY_BASE_FILE_ROOTS_H_
