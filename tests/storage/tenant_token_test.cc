#include <gtest/gtest.h>

#include <set>

#include "storage/tenant_repository.h"
#include "storage/token_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using TenantTokenTest = StorageFixture;

TEST_F(TenantTokenTest, TenantsCreateGetListAndDuplicates) {
  TenantRepository tenants(*db_);
  auto admin = tenants.CreateTenant("root", true);
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_TRUE(admin->admin());
  EXPECT_GT(admin->created_at().seconds(), 1600000000);
  EXPECT_EQ(tenants.CreateTenant("root", false).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(tenants.GetTenant("nobody").status().code(), absl::StatusCode::kNotFound);
  auto got = tenants.GetTenant("root");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->admin());

  // alice, bob, root: pages of 2 by name.
  auto p1 = tenants.ListTenants(2, "");
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->items.size(), 2u);
  EXPECT_EQ(p1->items[0].name(), "alice");
  EXPECT_EQ(p1->items[1].name(), "bob");
  ASSERT_FALSE(p1->next_page_token.empty());
  auto p2 = tenants.ListTenants(2, p1->next_page_token);
  ASSERT_TRUE(p2.ok());
  ASSERT_EQ(p2->items.size(), 1u);
  EXPECT_EQ(p2->items[0].name(), "root");
  EXPECT_TRUE(p2->next_page_token.empty());
  EXPECT_EQ(tenants.ListTenants(2, "garbage!").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tenants.ListTenants(-1, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TenantTokenTest, TokensAuthenticateAndRevoke) {
  TokenRepository tokens(*db_);
  auto t = tokens.CreateToken("alice", "laptop");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->secret.rfind("gnt_", 0), 0u);
  EXPECT_EQ(t->secret.size(), 4u + 64u);
  EXPECT_EQ(t->token_id.rfind("tok-", 0), 0u);
  auto p = tokens.Authenticate(t->secret);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tenant, "alice");
  EXPECT_FALSE(p->admin);

  EXPECT_EQ(tokens.Authenticate("gnt_wrong").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(tokens.Authenticate("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(tokens.CreateToken("nobody", "x").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(tokens.RevokeToken(t->token_id).ok());
  EXPECT_TRUE(tokens.RevokeToken(t->token_id).ok());  // twice is fine
  EXPECT_EQ(tokens.Authenticate(t->secret).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(tokens.RevokeToken("tok-unknown").code(), absl::StatusCode::kNotFound);

  // Two tokens are different.
  auto a = tokens.CreateToken("alice", "");
  auto b = tokens.CreateToken("alice", "");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->secret, b->secret);
  EXPECT_NE(a->token_id, b->token_id);
}

TEST_F(TenantTokenTest, ClearSecretsNeverReachTheDatabase) {
  TokenRepository tokens(*db_);
  auto api = tokens.CreateToken("alice", "ci");
  auto join = tokens.CreateJoinToken("pool a");
  ASSERT_TRUE(api.ok() && join.ok());
  ASSERT_TRUE(tokens.ImportToken("bob", "bootstrap-secret-123", "file").ok());
  ASSERT_TRUE(tokens.ImportJoinToken("join-secret-456").ok());
  for (const std::string& secret : {api->secret, join->secret, std::string("bootstrap-secret-123"),
                                    std::string("join-secret-456")}) {
    // Scan every column of both tables as text.
    std::string api_rows = test_db_.Query("SELECT t::text FROM api_tokens t");
    std::string join_rows = test_db_.Query("SELECT t::text FROM join_tokens t");
    EXPECT_EQ(api_rows.find(secret), std::string::npos) << secret;
    EXPECT_EQ(join_rows.find(secret), std::string::npos) << secret;
    const std::string hash = TokenRepository::HashSecret(secret);
    EXPECT_EQ(hash.size(), 64u);
    EXPECT_NE((api_rows + join_rows).find(hash), std::string::npos) << "hash of " << secret;
  }
  // The hash is the standard SHA-256 (of "abc").
  EXPECT_EQ(TokenRepository::HashSecret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(TenantTokenTest, ImportIsIdempotentAndTenantBound) {
  TokenRepository tokens(*db_);
  auto first = tokens.ImportToken("alice", "s3cret", "bootstrap");
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = tokens.ImportToken("alice", "s3cret", "bootstrap");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*first, *again);
  EXPECT_EQ(test_db_.Query("SELECT count(*) FROM api_tokens"), "1\n");
  EXPECT_EQ(tokens.ImportToken("bob", "s3cret", "").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(tokens.ImportToken("nobody", "other", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tokens.ImportToken("alice", "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto p = tokens.Authenticate("s3cret");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tenant, "alice");
}

TEST_F(TenantTokenTest, JoinTokens) {
  TokenRepository tokens(*db_);
  auto j = tokens.CreateJoinToken("pool");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->secret.rfind("gjt_", 0), 0u);
  EXPECT_TRUE(tokens.IsValidJoinToken(j->secret).ok());
  EXPECT_EQ(tokens.IsValidJoinToken("nope").code(), absl::StatusCode::kUnauthenticated);
  // A join token is not an API token and vice versa.
  EXPECT_EQ(tokens.Authenticate(j->secret).status().code(), absl::StatusCode::kUnauthenticated);
  auto api = tokens.CreateToken("alice", "");
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(tokens.IsValidJoinToken(api->secret).code(), absl::StatusCode::kUnauthenticated);

  auto imported = tokens.ImportJoinToken("file-join");
  auto imported2 = tokens.ImportJoinToken("file-join");
  ASSERT_TRUE(imported.ok() && imported2.ok());
  EXPECT_EQ(*imported, *imported2);
  EXPECT_TRUE(tokens.IsValidJoinToken("file-join").ok());
  ASSERT_TRUE(tokens.RevokeToken(j->token_id).ok());
  EXPECT_EQ(tokens.IsValidJoinToken(j->secret).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(tokens.IsValidJoinToken("file-join").ok());
}

}  // namespace
}  // namespace gantry::storage
