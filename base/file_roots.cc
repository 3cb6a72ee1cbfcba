#include "base/file_roots.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gantry {
namespace {

// realpath(3) into a string; errno tells why it failed.
bool RealPath(const std::string& path, std::string* out) {
  std::unique_ptr<char, decltype(&free)> resolved(realpath(path.c_str(), nullptr), &free);
  if (resolved == nullptr) return false;
  *out = resolved.get();
  return true;
}

}  // namespace

std::string NormalizePathLexically(absl::string_view path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string joined = absl::StrJoin(parts, "/");
  if (absolute) return absl::StrCat("/", joined);
  return joined.empty() ? "." : joined;
}

bool PathIsUnder(absl::string_view path, absl::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  if (!absl::StartsWith(path, dir)) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

absl::StatusOr<FileRoots> FileRoots::Parse(absl::string_view list, absl::string_view flag) {
  FileRoots out;
  for (absl::string_view entry : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty() || entry[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", entry, "\" is not an absolute directory"));
    }
    std::string root = NormalizePathLexically(entry);
    if (root == "/") {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"/\" would allow every file; name the data directories"));
    }
    out.roots_.push_back(std::move(root));
  }
  return out;
}

std::string FileRoots::Describe() const {
  return roots_.empty() ? "none" : absl::StrJoin(roots_, ", ");
}

absl::StatusOr<std::string> FileRoots::CheckLexical(absl::string_view path) const {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", path, "\" must be an absolute path: file:///dir/file.h5"));
  }
  const std::string normal = NormalizePathLexically(path);
  for (const std::string& root : roots_) {
    if (PathIsUnder(normal, root) && normal != root) return normal;
  }
  if (roots_.empty()) {
    return absl::InvalidArgumentError(
        "file:// datasets are not enabled on this service; upload the file (gantry datasets "
        "upload) or ask the operator to allow a data directory");
  }
  return absl::InvalidArgumentError(absl::StrCat("\"", path,
                                                 "\" is not under a directory allowed for file:// "
                                                 "datasets (allowed: ",
                                                 Describe(), ")"));
}

absl::StatusOr<std::string> FileRoots::Resolve(const std::string& path,
                                               const std::vector<std::string>& denied,
                                               const FileRoots* owner) const {
  // The lexical check first, so a path outside every root is refused without touching the file
  // system (no existence oracle for files elsewhere).
  absl::StatusOr<std::string> lexical = CheckLexical(path);
  if (!lexical.ok()) return absl::PermissionDeniedError(lexical.status().message());
  std::string resolved;
  if (!RealPath(*lexical, &resolved)) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(path, " cannot be resolved: ", std::strerror(error)));
  }
  for (const std::string& dir : denied) {
    std::string real_dir;
    if (!RealPath(dir, &real_dir)) real_dir = NormalizePathLexically(dir);
    if (PathIsUnder(resolved, real_dir)) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " resolves into the worker's own data; it cannot be a dataset"));
    }
  }
  if (!ContainsResolved(resolved)) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " resolves outside the directories this worker allows for file:// (",
                     Describe(), "); a symbolic link may point elsewhere"));
  }
  if (owner != nullptr && !owner->ContainsResolved(resolved)) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " resolves outside the directories the job's owner may read (",
                     owner->Describe(), "); a symbolic link may point elsewhere"));
  }
  return resolved;
}

bool FileRoots::ContainsResolved(const std::string& resolved) const {
  for (const std::string& root : roots_) {
    std::string real_root;
    if (!RealPath(root, &real_root)) continue;  // a root missing on this machine allows nothing
    if (PathIsUnder(resolved, real_root) && resolved != real_root) return true;
  }
  return false;
}

FileRoots FileRoots::Merged(const FileRoots& other) const {
  FileRoots out = *this;
  for (const std::string& root : other.roots_) {
    if (std::find(out.roots_.begin(), out.roots_.end(), root) == out.roots_.end()) {
      out.roots_.push_back(root);
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, FileRoots>> ParseTenantFileRoots(absl::string_view list,
                                                                      absl::string_view flag) {
  std::map<std::string, FileRoots> out;
  for (absl::string_view entry : absl::StrSplit(list, ';', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const absl::string_view tenant =
        absl::StripAsciiWhitespace(parts.size() == 2 ? parts[0] : absl::string_view());
    if (parts.size() != 2 || tenant.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", absl::StripAsciiWhitespace(entry),
                       "\" is not tenant=/dir[,/dir...] (tenants separated by ';')"));
    }
    if (out.count(std::string(tenant)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": tenant \"", tenant, "\" is named twice"));
    }
    absl::StatusOr<FileRoots> roots = FileRoots::Parse(parts[1], flag);
    if (!roots.ok()) return roots.status();
    if (roots->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": tenant \"", tenant, "\" has no directory"));
    }
    out.emplace(std::string(tenant), *std::move(roots));
  }
  return out;
}

}  // namespace gantry
