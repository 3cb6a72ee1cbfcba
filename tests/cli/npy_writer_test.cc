// Tests of npy_writer: the .npy header layout and the written file.
#include "clients/cli/npy_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace gantry::cli {
namespace {

TEST(NpyWriterTest, HeaderIsAlignedVersion1) {
  const std::string header = NpyHeader({2, 25, 25, 25});
  ASSERT_GE(header.size(), 10u);
  EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(header.size() % 64, 0u);
  const size_t dict_length =
      static_cast<unsigned char>(header[8]) | (static_cast<unsigned char>(header[9]) << 8);
  EXPECT_EQ(dict_length + 10, header.size());
  EXPECT_EQ(header.back(), '\n');
  EXPECT_THAT(header, ::testing::HasSubstr(
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 25, 25, 25), }"));
  EXPECT_THAT(NpyHeader({7}), ::testing::HasSubstr("'shape': (7,), }"));
}

TEST(NpyWriterTest, WritesHeaderThenData) {
  char pattern[] = "/tmp/gantry-npy-XXXXXX";
  int fd = mkstemp(pattern);
  ASSERT_GE(fd, 0);
  close(fd);
  const float values[] = {1.5f, 0.0f, 2.25f, 3.0f, 4.0f, 5.0f};
  std::string data(reinterpret_cast<const char*>(values), sizeof(values));
  ASSERT_TRUE(WriteNpyFloat32(pattern, {1, 2, 3}, data).ok());
  std::ifstream in(pattern, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string file = buffer.str();
  const std::string header = NpyHeader({1, 2, 3});
  ASSERT_EQ(file.size(), header.size() + sizeof(values));
  EXPECT_EQ(file.substr(0, header.size()), header);
  float first;
  std::memcpy(&first, file.data() + header.size(), 4);
  EXPECT_EQ(first, 1.5f);
  EXPECT_FALSE(WriteNpyFloat32(pattern, {2, 2, 3}, data).ok());  // 6 floats cannot fill 12
  std::remove(pattern);
}

}  // namespace
}  // namespace gantry::cli
