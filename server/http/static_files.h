// StaticFiles: the web app's built files under one directory, resolved safely from URL paths.
#ifndef GANTRY_SERVER_HTTP_STATIC_FILES_H_
#define GANTRY_SERVER_HTTP_STATIC_FILES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::server::http {

// A file to send: its contents and MIME type.
struct StaticFile {
  std::string content;
  std::string content_type;
  bool immutable = false;  // under assets/ (names carry a content hash): cache for a year
};

// Thread-safe (immutable after Create). Serves regular files only, below the root's real path:
// a path with "..", a NUL, a backslash, a hidden segment (".x") or a symbolic link that leaves the
// root is NOT_FOUND, like a missing file. Paths without an extension are app routes and get
// index.html.
class StaticFiles {
 public:
  // INVALID_ARGUMENT (naming `flag`) when `root` is not a directory holding index.html.
  static absl::StatusOr<std::unique_ptr<StaticFiles>> Create(const std::string& root,
                                                             absl::string_view flag);

  // The file for a decoded URL path such as "/", "/models/x" or "/assets/app-1a2b.js". Files above
  // 32 MiB are NOT_FOUND.
  absl::StatusOr<StaticFile> Read(absl::string_view url_path) const;

  const std::string& root() const { return root_; }

 private:
  explicit StaticFiles(std::string root) : root_(std::move(root)) {}

  const std::string root_;  // realpath, no trailing slash
};

// The MIME type of a file name by its extension (application/octet-stream when unknown).
std::string ContentTypeFor(absl::string_view name);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_STATIC_FILES_H_
