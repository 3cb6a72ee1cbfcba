// Page: one page of a keyset-paginated listing.
#ifndef GANTRY_STORAGE_PAGE_H_
#define GANTRY_STORAGE_PAGE_H_

#include <string>
#include <vector>

namespace gantry::storage {

// page_size given to List calls: 0 means the default (50), the maximum is 1000, negative is
// INVALID_ARGUMENT. A page token is opaque; a malformed one is INVALID_ARGUMENT.
inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 1000;

template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // empty on the last page
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_PAGE_H_
