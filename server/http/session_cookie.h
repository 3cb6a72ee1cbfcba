// The browser session's cookie and CSRF token: parsing the Cookie header, building Set-Cookie
// values, and the CSRF token derived from the session secret.
#ifndef GANTRY_SERVER_HTTP_SESSION_COOKIE_H_
#define GANTRY_SERVER_HTTP_SESSION_COOKIE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gantry::server::http {

inline constexpr absl::string_view kSessionCookieName = "gantry_session";
inline constexpr absl::string_view kCsrfHeader = "X-CSRF-Token";

// The value of the first `gantry_session` cookie in a Cookie header; empty when there is none or
// it is not a plausible session secret (longer than 128 bytes, or not [A-Za-z0-9_]).
std::string SessionSecretFromCookies(absl::string_view cookie_header);

// `gantry_session=SECRET; Path=/; HttpOnly; SameSite=Strict; Max-Age=N` (+ `; Secure` over TLS).
std::string SessionCookie(absl::string_view secret, absl::Duration max_age, bool secure);
// The same cookie emptied, with Max-Age=0 (logout).
std::string ClearedSessionCookie(bool secure);

// The session's CSRF token: HMAC-SHA256 of a fixed label keyed by the session secret, so nothing
// more is stored and a page that cannot read the cookie cannot compute it.
std::string CsrfTokenFor(absl::string_view session_secret);

// Whether `presented` is the CSRF token of the session (constant-time comparison).
bool CsrfTokenMatches(absl::string_view session_secret, absl::string_view presented);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_SESSION_COOKIE_H_
