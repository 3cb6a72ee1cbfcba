// TerminalSafeBuffer: a stream buffer that passes what is written through EscapeControlText
// (base/safe_text.h) to another one, keeping newlines and tabs. The CLI's human-readable output
// goes through it, so text that other tenants or workers wrote (descriptions, names, tags,
// messages) cannot move the cursor, set the terminal's title or hide text, wherever a command
// prints it.
#ifndef GANTRY_CLIENTS_CLI_TERMINAL_SAFE_BUFFER_H_
#define GANTRY_CLIENTS_CLI_TERMINAL_SAFE_BUFFER_H_

#include <streambuf>
#include <string>

namespace gantry::cli {

class TerminalSafeBuffer : public std::streambuf {
 public:
  // `target` is not owned and must outlive this buffer.
  explicit TerminalSafeBuffer(std::streambuf* target) : target_(target) {}
  TerminalSafeBuffer(const TerminalSafeBuffer&) = delete;
  TerminalSafeBuffer& operator=(const TerminalSafeBuffer&) = delete;
  // Writes what is pending, an unfinished UTF-8 sequence at the end escaped byte by byte.
  ~TerminalSafeBuffer() override;

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  // Writes what is pending but an unfinished UTF-8 sequence at its end, then flushes the target.
  int sync() override;

 private:
  // Escapes and writes the pending text: all of it when `all`, else up to an unfinished UTF-8
  // sequence at its end (its rest may come in the next write).
  void Drain(bool all);

  std::streambuf* target_;
  std::string pending_;  // written to this buffer, not yet to the target (up to a line)
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_TERMINAL_SAFE_BUFFER_H_
