#include "clients/cli/npy_writer.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::cli {

std::string NpyHeader(const std::vector<int64_t>& shape) {
  std::string dict = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                                  absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  header.push_back(static_cast<char>(dict.size() & 0xFF));
  header.push_back(static_cast<char>((dict.size() >> 8) & 0xFF));
  return header + dict;
}

absl::Status WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape,
                             const std::string& data) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  if (static_cast<int64_t>(data.size()) != count * 4) {
    return absl::InvalidArgumentError(absl::StrCat("showers: ", data.size(), " bytes do not fill [",
                                                   absl::StrJoin(shape, ","), "] float32"));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  const std::string header = NpyHeader(shape);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("write error on ", path));
  return absl::OkStatus();
}

}  // namespace gantry::cli
