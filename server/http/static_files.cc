#include "server/http/static_files.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gantry::server::http {
namespace {

constexpr int64_t kMaxFileBytes = int64_t{32} << 20;

absl::Status NotFound() { return absl::NotFoundError("no such file"); }

std::string RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return "";
  return buffer;
}

}  // namespace

std::string ContentTypeFor(absl::string_view name) {
  const size_t dot = name.rfind('.');
  const std::string ext =
      dot == absl::string_view::npos ? "" : absl::AsciiStrToLower(name.substr(dot + 1));
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "json" || ext == "map") return "application/json";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "woff2") return "font/woff2";
  if (ext == "woff") return "font/woff";
  if (ext == "txt") return "text/plain; charset=utf-8";
  if (ext == "wasm") return "application/wasm";
  return "application/octet-stream";
}

absl::StatusOr<std::unique_ptr<StaticFiles>> StaticFiles::Create(const std::string& root,
                                                                 absl::string_view flag) {
  const std::string real = RealPath(root);
  struct stat st;
  if (real.empty() || stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", root, " is not a directory; give the built web app's folder"));
  }
  if (stat((real + "/index.html").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": ", root, " has no index.html; build the web app (deploy/local/build.sh)"));
  }
  return std::unique_ptr<StaticFiles>(new StaticFiles(real == "/" ? "" : real));
}

absl::StatusOr<StaticFile> StaticFiles::Read(absl::string_view url_path) const {
  if (url_path.empty() || url_path[0] != '/' || url_path.size() > 1024) return NotFound();
  std::vector<std::string> segments;
  for (absl::string_view segment : absl::StrSplit(url_path.substr(1), '/', absl::SkipEmpty())) {
    if (segment[0] == '.') return NotFound();  // "..", "." and hidden files
    for (char c : segment) {
      if (c == '\0' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return NotFound();
    }
    segments.emplace_back(segment);
  }
  // App routes ("/", "/models/x") have no extension in their last segment: the app's index.html.
  const bool app_route = segments.empty() || segments.back().find('.') == std::string::npos;
  const std::string relative = app_route ? "index.html" : absl::StrJoin(segments, "/");
  const std::string real = RealPath(absl::StrCat(root_, "/", relative));
  if (real.empty() || !absl::StartsWith(real, root_ + "/")) return NotFound();
  const int fd = open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NotFound();
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxFileBytes) {
    close(fd);
    return NotFound();
  }
  StaticFile file;
  file.content.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < file.content.size()) {
    const ssize_t n = read(fd, file.content.data() + done, file.content.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (done != file.content.size()) return absl::UnavailableError("the file changed while read");
  file.content_type = ContentTypeFor(relative);
  file.immutable = !app_route && segments.size() > 1 && segments.front() == "assets";
  return file;
}

}  // namespace gantry::server::http
