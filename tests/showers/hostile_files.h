// HostileFiles: small HDF5 files written with the HDF5 C API that lie about their sizes, refer to
// other files or are damaged, for the tests of the inspection bounds (showers/) and of uploads to
// a real server (tests/server).
#ifndef GANTRY_TESTS_SHOWERS_HOSTILE_FILES_H_
#define GANTRY_TESTS_SHOWERS_HOSTILE_FILES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::testing {

// One hostile file on disk and what inspecting it must answer.
struct HostileFile {
  std::string name;   // a file name a client could send, e.g. "huge_chunked.h5"
  std::string path;   // where it was written
  std::string about;  // what the file does
  // The status code of InspectShowerFile (the server answers INVALID_ARGUMENT for all of them).
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  std::string fragment;  // a part of the message saying what is wrong
  // The reader opens the file and refuses its first read (chunks are checked when first read).
  bool refused_when_read = false;
};

// Writes every hostile file into `dir` (an existing directory). Not thread-safe (HDF5 calls).
std::vector<HostileFile> WriteHostileFiles(const std::string& dir);

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SHOWERS_HOSTILE_FILES_H_
