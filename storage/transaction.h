// Transaction: one open database transaction handed to Database::Transact callbacks
// (storage-internal).
#ifndef GANTRY_STORAGE_TRANSACTION_H_
#define GANTRY_STORAGE_TRANSACTION_H_

#include <pqxx/pqxx>
#include <string>
#include <utility>

namespace gantry::storage {

// Not thread-safe; lives only inside one Database::Transact call. Statements are prepared on the
// connection the first time a name is used (libpqxx keeps the definition per connection).
class Transaction {
 public:
  explicit Transaction(pqxx::work& work) : work_(work) {}

  // Executes the prepared statement `name` (SQL text `sql`, parameters $1..$n) with `args`.
  // Throws pqxx exceptions; Database::Transact maps them to a Status.
  template <typename... Args>
  pqxx::result Exec(const std::string& name, const std::string& sql, Args&&... args) {
    work_.conn().prepare(name, sql);
    return work_.exec_prepared(name, std::forward<Args>(args)...);
  }

  pqxx::work& work() { return work_; }

 private:
  pqxx::work& work_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_TRANSACTION_H_
