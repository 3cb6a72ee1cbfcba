#include "base/private_directory.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gantry {
namespace {

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

absl::Status Unavailable(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

// Creates `path` and its missing parents with mode 0700.
absl::Status CreateWithParents(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Unavailable("cannot create the directory", prefix);
    }
    if (slash == std::string::npos) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<std::string> MakePrivateDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("no directory given");
  struct stat st {};
  bool created = false;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Unavailable("cannot inspect", path);
    if (absl::Status made = CreateWithParents(path); !made.ok()) return made;
    created = true;
    if (::stat(path.c_str(), &st) != 0) return Unavailable("cannot inspect", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  if ((st.st_mode & 077) == 0) return std::string();
  if (st.st_uid != ::geteuid()) {
    return absl::StrCat(path, " is owned by uid ", st.st_uid, " with mode ", Mode(st.st_mode),
                        "; left as it is (not this process's, uid ", ::geteuid(),
                        "): what gantry writes in it is private");
  }
  // Ours: close it to others (set-group-id and sticky bits go too: nobody else writes here).
  if (::chmod(path.c_str(), 0700) != 0) return Unavailable("cannot make private", path);
  if (created) return std::string();  // a parent's default ACL or an odd umask: not news
  return absl::StrCat("tightened ", path, " from ", Mode(st.st_mode), " to 0700");
}

void UsePrivateUmask() { ::umask(077); }

}  // namespace gantry
