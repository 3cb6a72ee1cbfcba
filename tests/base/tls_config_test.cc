// LoadTlsConfig and the credentials built from it: certificates come from deploy/local/certs.sh,
// run at test time into a temporary directory.
#include "base/tls_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

namespace gantry {
namespace {

class TlsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = dir_.File("pki");
    other_ = dir_.File("other");
    for (const std::string& d : {pki_, other_}) {
      const std::string cmd =
          std::string(GANTRY_SOURCE_DIR) + "/deploy/local/certs.sh " + d + " w1 >/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
  }

  // The message of LoadTlsConfig's error (of code `code`), or "<ok>".
  static std::string ErrorOf(const TlsFiles& files,
                             absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    absl::StatusOr<TlsConfig> tls = LoadTlsConfig(files);
    if (tls.ok()) return "<ok>";
    EXPECT_EQ(tls.status().code(), code) << tls.status();
    return std::string(tls.status().message());
  }

  gantry::testing::TempDir dir_;
  std::string pki_, other_;
};

TEST_F(TlsConfigTest, NothingGivenIsPlaintext) {
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig({});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->trusts_ca());
  EXPECT_FALSE(tls->has_identity());
}

TEST_F(TlsConfigTest, LoadsACaAndAMatchingCertificateAndKey) {
  TlsFiles files;
  files.ca_cert = pki_ + "/ca.pem";
  files.cert = pki_ + "/worker-w1.pem";
  files.key = pki_ + "/worker-w1.key";
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(files);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->trusts_ca());
  EXPECT_TRUE(tls->has_identity());
  EXPECT_NE(tls->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(ChannelCredentialsFor(*tls), nullptr);
  EXPECT_NE(ServerCredentialsFor(*tls, tls->ca_pem), nullptr);
}

TEST_F(TlsConfigTest, RefusesBadFilesNamingTheFlag) {
  TlsFiles files;
  files.ca_cert = dir_.File("missing.pem");
  EXPECT_EQ(ErrorOf(files), "--ca-cert: cannot read " + files.ca_cert);

  std::ofstream(dir_.File("junk.pem")) << "not a certificate\n";
  files.ca_cert = dir_.File("junk.pem");
  EXPECT_NE(ErrorOf(files).find("--ca-cert: "), std::string::npos);
  EXPECT_NE(ErrorOf(files).find("holds no PEM certificate"), std::string::npos);

  std::ofstream(dir_.File("empty.pem")).flush();
  files.ca_cert = dir_.File("empty.pem");
  EXPECT_NE(ErrorOf(files).find("is empty or larger than 1 MiB"), std::string::npos);

  files = {};
  files.cert = pki_ + "/worker-w1.pem";
  EXPECT_EQ(ErrorOf(files), "--tls-cert and --tls-key must be given together");

  // A key that is not the certificate's (same name, another CA's issue).
  files.key = other_ + "/worker-w1.key";
  EXPECT_NE(ErrorOf(files).find("is not the key of the certificate"), std::string::npos);

  // A certificate where the key should be: first refused for its mode (a key is a secret file),
  // then, made private, for its content.
  files.key = pki_ + "/worker-w1.pem";
  constexpr absl::StatusCode kNotPrivate = absl::StatusCode::kFailedPrecondition;
  EXPECT_NE(ErrorOf(files, kNotPrivate).find("--tls-key " + files.key + " has mode 0644"),
            std::string::npos);
  std::filesystem::copy_file(files.key, dir_.File("cert-as-key.pem"));
  files.key = dir_.File("cert-as-key.pem");
  ASSERT_EQ(chmod(files.key.c_str(), 0600), 0);
  EXPECT_NE(ErrorOf(files).find("holds no unencrypted PEM private key"), std::string::npos);
  // A key others may read is refused naming the flag and what to change.
  std::filesystem::copy_file(pki_ + "/worker-w1.key", dir_.File("shared.key"));
  files.key = dir_.File("shared.key");
  ASSERT_EQ(chmod(files.key.c_str(), 0644), 0);
  EXPECT_NE(ErrorOf(files, kNotPrivate).find("chmod 600"), std::string::npos);
  ASSERT_EQ(chmod(files.key.c_str(), 0600), 0);
  EXPECT_EQ(ErrorOf(files), "<ok>") << "the same key, private";

  // Custom flag names (gantry-server --tls-client-ca).
  files = {};
  files.ca_cert = dir_.File("missing.pem");
  files.ca_cert_flag = "--tls-client-ca";
  EXPECT_EQ(ErrorOf(files).rfind("--tls-client-ca: ", 0), 0u);
}

TEST_F(TlsConfigTest, CertsScriptKeepsKeysPrivate) {
  for (const std::string& key : {"/ca.key", "/server.key", "/worker-w1.key"}) {
    const std::string cmd = "test \"$(stat -c %a " + pki_ + key + ")\" = 600";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << key;
  }
}

}  // namespace
}  // namespace gantry
