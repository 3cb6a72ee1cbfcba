// PlotDirectory: the folder `gantry models plots` writes its files into.
#ifndef GANTRY_CLIENTS_CLI_PLOT_DIRECTORY_H_
#define GANTRY_CLIENTS_CLI_PLOT_DIRECTORY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::cli {

// The folder is created (with its parents) when missing. An existing folder that holds anything is
// refused unless `overwrite` is set; then files of the same names are replaced and every other file
// is left alone. Files are written inside the opened folder only: a name must be a plain file name
// ([a-z0-9_.], not starting with '.'), and a symbolic link in the folder is never followed. Not
// thread-safe.
class PlotDirectory {
 public:
  // Checks `path` without creating anything: INVALID_ARGUMENT when it exists and is not a folder,
  // FAILED_PRECONDITION when it is a non-empty folder and `overwrite` is false.
  static absl::Status Check(const std::string& path, bool overwrite);
  // Checks, then creates and opens the folder.
  static absl::StatusOr<std::unique_ptr<PlotDirectory>> Open(const std::string& path,
                                                             bool overwrite);
  ~PlotDirectory();
  PlotDirectory(const PlotDirectory&) = delete;
  PlotDirectory& operator=(const PlotDirectory&) = delete;

  // Writes `bytes` as `file_name` in the folder (replacing a regular file of that name).
  absl::Status Write(const std::string& file_name, const std::string& bytes);

  const std::string& path() const { return path_; }

 private:
  PlotDirectory(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_PLOT_DIRECTORY_H_
