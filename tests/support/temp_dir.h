// TempDir: a private temporary directory for one test, removed recursively on destruction.
#ifndef GANTRY_TESTS_SUPPORT_TEMP_DIR_H_
#define GANTRY_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

namespace gantry::testing {

// Created with mkdtemp under $TMPDIR (default /tmp) as gantry-test-XXXXXX; aborts when that fails.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_TEMP_DIR_H_
