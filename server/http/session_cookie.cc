#include "server/http/session_cookie.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/sha256.h"

namespace gantry::server::http {
namespace {

bool PlausibleSecret(absl::string_view value) {
  if (value.empty() || value.size() > 128) return false;
  for (char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

std::string SessionSecretFromCookies(absl::string_view cookie_header) {
  for (absl::string_view pair : absl::StrSplit(cookie_header, ';')) {
    pair = absl::StripAsciiWhitespace(pair);
    const size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(pair.substr(0, eq)) != kSessionCookieName) continue;
    absl::string_view value = absl::StripAsciiWhitespace(pair.substr(eq + 1));
    return PlausibleSecret(value) ? std::string(value) : std::string();
  }
  return "";
}

std::string SessionCookie(absl::string_view secret, absl::Duration max_age, bool secure) {
  return absl::StrCat(kSessionCookieName, "=", secret,
                      "; Path=/; HttpOnly; SameSite=Strict; Max-Age=",
                      absl::ToInt64Seconds(max_age), secure ? "; Secure" : "");
}

std::string ClearedSessionCookie(bool secure) {
  return absl::StrCat(kSessionCookieName, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                      secure ? "; Secure" : "");
}

std::string CsrfTokenFor(absl::string_view session_secret) {
  return HmacSha256Hex(session_secret, "gantry web csrf v1");
}

bool CsrfTokenMatches(absl::string_view session_secret, absl::string_view presented) {
  if (session_secret.empty() || presented.empty()) return false;
  return SecretsEqual(CsrfTokenFor(session_secret), presented);
}

}  // namespace gantry::server::http
