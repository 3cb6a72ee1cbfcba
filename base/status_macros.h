// Status propagation macros (Abseil 20220623 has none). Shared by every module; depends only on
// Abseil.
#ifndef GANTRY_BASE_STATUS_MACROS_H_
#define GANTRY_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GANTRY_CONCAT_INNER_(a, b) a##b
#define GANTRY_CONCAT_(a, b) GANTRY_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status gantry_status_ = (expr);          \
    if (!gantry_status_.ok()) return gantry_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` declares x from an OK StatusOr, or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(GANTRY_CONCAT_(gantry_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // GANTRY_BASE_STATUS_MACROS_H_
