#include "workers/gan/checkpoint_envelope.h"

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"

namespace gantry::gan {
namespace {

// The next line of `rest` without its '\n' (all of `rest` when there is none), as std::getline
// reads it; `rest` moves past the line and its '\n'.
absl::string_view NextLine(absl::string_view& rest) {
  const size_t end = rest.find('\n');
  const absl::string_view line = rest.substr(0, end);
  rest.remove_prefix(end == absl::string_view::npos ? rest.size() : end + 1);
  return line;
}

}  // namespace

CheckpointKind CheckpointKindOfPayload(absl::string_view payload) {
  return absl::StartsWith(payload, kBaselinePayloadMagic) ? CheckpointKind::kBaseline
                                                          : CheckpointKind::kNetworks;
}

absl::StatusOr<CheckpointKind> PeekCheckpointKind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  // The header is three short lines (at most 256 bytes), then the payload's magic.
  std::string head(256 + sizeof(kBaselinePayloadMagic), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  absl::string_view rest = head;
  if (NextLine(rest) != kCheckpointMagic) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a gantry checkpoint"));
  }
  NextLine(rest);  // sha256
  NextLine(rest);  // bytes
  return CheckpointKindOfPayload(rest);
}

absl::StatusOr<absl::string_view> ParseCheckpointEnvelope(absl::string_view file_bytes,
                                                          absl::string_view name) {
  absl::string_view rest = file_bytes;
  const absl::string_view magic = NextLine(rest);
  if (magic != kCheckpointMagic) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a gantry checkpoint"));
  }
  const absl::string_view sha_line = NextLine(rest);
  const absl::string_view bytes_line = NextLine(rest);
  uint64_t size = 0;
  if (!absl::StartsWith(sha_line, "sha256 ") || sha_line.size() != 7 + 64 ||
      !absl::StartsWith(bytes_line, "bytes ") || !absl::SimpleAtoi(bytes_line.substr(6), &size)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", name, ": damaged header"));
  }
  const absl::string_view payload = rest;
  if (payload.size() != size) {
    return absl::DataLossError(absl::StrCat("checkpoint ", name, " is truncated or padded: ",
                                            payload.size(), " payload bytes, header says ", size));
  }
  if (gantry::Sha256Hex(payload) != sha_line.substr(7)) {
    return absl::DataLossError(absl::StrCat("checkpoint ", name, ": sha256 mismatch (corrupted)"));
  }
  return payload;
}

}  // namespace gantry::gan
