#include "workers/agent/control_pipe.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace gantry::agent {

absl::Status WriteControlMessage(int fd, const gantry::v1::WorkerMessage& message) {
  std::string payload;
  if (!message.SerializeToString(&payload) || payload.size() > kMaxControlFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("control message of ", payload.size(), " bytes cannot be framed"));
  }
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame += payload;
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t w = ::write(fd, frame.data() + done, frame.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("control pipe write failed: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ControlPipeReader::ReadFully(char* buffer, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd_, buffer + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("control pipe read failed: ", std::strerror(errno)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

absl::StatusOr<std::optional<gantry::v1::WorkerMessage>> ControlPipeReader::Next() {
  char header[4];
  absl::StatusOr<size_t> got = ReadFully(header, 4);
  if (!got.ok()) return got.status();
  if (*got == 0) return std::optional<gantry::v1::WorkerMessage>();
  if (*got < 4) return absl::DataLossError("control pipe ended inside a frame header");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<unsigned char>(header[i])) << (8 * i);
  if (n > kMaxControlFrameBytes) {
    return absl::DataLossError(absl::StrCat("control frame of ", n, " bytes exceeds the limit of ",
                                            kMaxControlFrameBytes));
  }
  std::string payload(n, '\0');
  got = ReadFully(payload.data(), n);
  if (!got.ok()) return got.status();
  if (*got < n) return absl::DataLossError("control pipe ended inside a frame");
  gantry::v1::WorkerMessage message;
  if (!message.ParseFromString(payload)) {
    return absl::DataLossError("control frame is not a gantry.v1.WorkerMessage");
  }
  return std::optional<gantry::v1::WorkerMessage>(std::move(message));
}

}  // namespace gantry::agent
