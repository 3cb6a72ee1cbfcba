#include "server/secret_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gantry::server {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag,
                                           absl::string_view what, size_t min_chars) {
  const auto unreadable = [&](absl::string_view why) {
    return absl::NotFoundError(absl::StrCat("cannot read ", flag, " ", path, " (", why,
                                            "): it must be a readable file holding ", what));
  };
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return unreadable("a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable("no such file or no permission");
  std::string content;
  content.resize(kMaxSecretFileBytes + 1);
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) return unreadable("read error");
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > kMaxSecretFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is larger than ",
                                                   kMaxSecretFileBytes / 1024,
                                                   " KiB: it must hold only ", what));
  }
  std::string secret(absl::StripAsciiWhitespace(content));
  if (secret.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, " is empty: write ", what, " into it"));
  }
  if (secret.size() < min_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": ", what, " in it is shorter than ", min_chars, " characters"));
  }
  return secret;
}

}  // namespace gantry::server
