// npy_writer: writes float32 arrays as NumPy .npy files (format version 1.0), for generated
// showers.
#ifndef GANTRY_CLIENTS_CLI_NPY_WRITER_H_
#define GANTRY_CLIENTS_CLI_NPY_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::cli {

// The .npy header for a little-endian float32 C-order array of `shape`: magic, version 1.0, header
// length, and the dict padded with spaces and a newline so the data starts at a multiple of 64
// bytes.
std::string NpyHeader(const std::vector<int64_t>& shape);

// Writes NpyHeader(shape) followed by `data` (packed little-endian float32, as GenerateChunk
// carries it). INVALID_ARGUMENT when data's size does not match the shape.
absl::Status WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape,
                             const std::string& data);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_NPY_WRITER_H_
