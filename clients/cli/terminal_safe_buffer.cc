#include "clients/cli/terminal_safe_buffer.h"

#include <cstring>

#include "absl/strings/string_view.h"
#include "base/safe_text.h"

namespace gantry::cli {
namespace {

constexpr size_t kMaxPending = 4096;

// The length of `text` without an unfinished UTF-8 sequence at its end (a lead byte followed by
// fewer continuation bytes than it announces).
size_t WithoutUnfinishedSequence(const std::string& text) {
  const size_t size = text.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(text[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t length = 1;
    if (byte >= 0xC0 && byte <= 0xDF) length = 2;
    if (byte >= 0xE0 && byte <= 0xEF) length = 3;
    if (byte >= 0xF0 && byte <= 0xF7) length = 4;
    return back < length ? size - back : size;
  }
  return size;
}

}  // namespace

TerminalSafeBuffer::~TerminalSafeBuffer() {
  Drain(true);
  target_->pubsync();
}

TerminalSafeBuffer::int_type TerminalSafeBuffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  pending_.push_back(ch);
  if (ch == '\n' || pending_.size() >= kMaxPending) Drain(false);
  return c;
}

std::streamsize TerminalSafeBuffer::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  if (std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr || pending_.size() >= kMaxPending) {
    Drain(false);
  }
  return n;
}

int TerminalSafeBuffer::sync() {
  Drain(false);
  return target_->pubsync();
}

void TerminalSafeBuffer::Drain(bool all) {
  const size_t length = all ? pending_.size() : WithoutUnfinishedSequence(pending_);
  if (length == 0) return;
  const std::string safe =
      EscapeControlText(absl::string_view(pending_.data(), length), LineBreaks::kKeep);
  target_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
  pending_.erase(0, length);
}

}  // namespace gantry::cli
