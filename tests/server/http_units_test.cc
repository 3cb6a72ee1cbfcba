// Unit tests of server/http's pure parts: the JSON printer against protobuf's own JSON mapping,
// query strings to requests, the session cookie and CSRF token, and the status mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/training.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/http/http_errors.h"
#include "server/http/json_printer.h"
#include "server/http/query_requests.h"
#include "server/http/session_cookie.h"

namespace gantry::server::http {
namespace {

namespace v1 = ::gantry::v1;

v1::ModelVersion RichModel() {
  v1::ModelVersion m;
  m.set_name("calo \"quoted\"\n\xc3\xa9");
  m.set_version(3);
  m.set_owner("physics");
  m.set_visibility(v1::VISIBILITY_PUBLIC);
  m.set_status(v1::MODEL_STATUS_READY);
  (*m.mutable_tags())["campaign"] = "2025";
  (*m.mutable_tags())["k"] = "";
  m.add_aliases("prod");
  m.mutable_lineage()->set_job_id("job-1");
  (*m.mutable_lineage()->mutable_hyper_parameters())["lr"] = "0.001";
  (*m.mutable_metrics())["fom"] = 0.1;
  (*m.mutable_metrics())["tiny"] = 1e-300;
  (*m.mutable_metrics())["third"] = 1.0 / 3;
  (*m.mutable_metrics())["nan"] = std::numeric_limits<double>::quiet_NaN();
  (*m.mutable_metrics())["inf"] = -std::numeric_limits<double>::infinity();
  v1::Histogram* h = m.add_histograms();
  h->set_name("longitudinal_profile");
  h->add_edges(0);
  h->add_edges(0.5);
  h->add_reference(12345.678);
  h->add_generated(-0.0);
  m.set_checkpoint_size_bytes(int64_t{1} << 40);
  m.mutable_created_at()->set_seconds(1700000000);
  m.mutable_created_at()->set_nanos(120000000);
  m.mutable_bf16()->set_state(v1::Bf16Check::STATE_AVAILABLE);
  v1::ValidationPoint* p = m.add_validation_curve();
  p->set_step(100);
  p->mutable_time()->set_seconds(1700000001);
  return m;
}

TEST(JsonPrinterTest, ParsesBackEqualAndAgreesWithProtobufsMapping) {
  const v1::ModelVersion m = RichModel();
  const std::string json = ProtoToJson(m);
  v1::ModelVersion back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok()) << json;
  // NaN != NaN: compare the rest, then the specials by their printing.
  v1::ModelVersion a = m, b = back;
  a.mutable_metrics()->erase("nan");
  b.mutable_metrics()->erase("nan");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b)) << json;
  EXPECT_TRUE(std::isnan(back.metrics().at("nan")));
  EXPECT_TRUE(absl::StrContains(json, "\"checkpointSizeBytes\":\"1099511627776\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"visibility\":\"VISIBILITY_PUBLIC\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"createdAt\":\"2023-11-14T22:13:20.120Z\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"nan\":\"NaN\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"description\":\"\"")) << json;  // always printed
  EXPECT_FALSE(absl::StrContains(json, "\"readiness\"")) << json;        // unset message

  // The same message printed by protobuf parses into the same message as ours.
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string reference;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(a, &reference, options).ok());
  v1::ModelVersion from_reference, from_ours;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(reference, &from_reference).ok());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ProtoToJson(a), &from_ours).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(from_reference, from_ours));

  v1::JobEvent event;
  event.set_sequence(7);
  event.mutable_progress()->set_step(20);
  (*event.mutable_progress()->mutable_losses())["d_loss"] = 0.05;
  EXPECT_TRUE(absl::StrContains(ProtoToJson(event), "\"progress\":{\"epoch\":0"))
      << ProtoToJson(event);
  EXPECT_FALSE(absl::StrContains(ProtoToJson(event), "stateChange"));  // unset oneof member
}

TEST(QueryRequestsTest, ModelListQueriesMapToListModelsFields) {
  QueryParams params = {{"name", "calo"},
                        {"tags", "campaign:2025"},
                        {"tags", "beam:e:1"},
                        {"metricFilters", "mre_sampling_fraction<0.05"},
                        {"metricFilters", "fom>=0.1"},
                        {"orderBy", "metric:fom"},
                        {"includeArchived", "true"},
                        {"particle", "PARTICLE_PHOTON"},
                        {"pageSize", "20"},
                        {"pageToken", "abc"},
                        {"q", "cal"}};
  absl::StatusOr<ModelListQuery> q = ModelListQueryFrom(params);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->request.name(), "calo");
  EXPECT_EQ(q->request.tags().at("beam"), "e:1");
  ASSERT_EQ(q->request.metric_filters_size(), 2);
  EXPECT_EQ(q->request.metric_filters(0).max(), 0.05);
  EXPECT_FALSE(q->request.metric_filters(0).has_min());
  EXPECT_EQ(q->request.metric_filters(1).min(), 0.1);
  EXPECT_TRUE(q->request.include_archived());
  EXPECT_EQ(q->request.particle(), v1::PARTICLE_PHOTON);
  EXPECT_EQ(q->request.page().page_size(), 20);
  EXPECT_EQ(q->name_contains, "cal");

  for (const QueryParams& bad :
       {QueryParams{{"nope", "1"}}, QueryParams{{"name", "a"}, {"name", "b"}},
        QueryParams{{"tags", "novalue"}}, QueryParams{{"tags", "a:1"}, {"tags", "a:2"}},
        QueryParams{{"metricFilters", "fom=1"}}, QueryParams{{"metricFilters", "<1"}},
        QueryParams{{"pageSize", "ten"}}, QueryParams{{"includeArchived", "maybe"}},
        QueryParams{{"particle", "quark"}}, QueryParams{{"q", std::string(2000, 'x')}}}) {
    absl::StatusOr<ModelListQuery> refused = ModelListQueryFrom(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.begin()->first << "=" << bad.begin()->second.substr(0, 20);
  }
  absl::StatusOr<v1::ListJobsRequest> jobs =
      ListJobsRequestFrom({{"state", "running"}, {"state", "JOB_STATE_QUEUED"}});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->states_size(), 2);
  EXPECT_FALSE(ListJobsRequestFrom({{"state", "sleeping"}}).ok());
  EXPECT_EQ(GetJobLogsRequestFrom({}, "job-1")->rank(), -1);
}

TEST(SessionCookieTest, CookiesAreParsedStrictlyAndCsrfTokensBindToTheSession) {
  EXPECT_EQ(SessionSecretFromCookies("a=1; gantry_session=gws_abc; b=2"), "gws_abc");
  EXPECT_EQ(SessionSecretFromCookies("gantry_session=gws_a\"b"), "");
  EXPECT_EQ(SessionSecretFromCookies("xgantry_session=gws_abc"), "");
  EXPECT_EQ(SessionSecretFromCookies(""), "");
  const std::string cookie = SessionCookie("gws_abc", absl::Hours(1), true);
  EXPECT_EQ(cookie,
            "gantry_session=gws_abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600; Secure");
  EXPECT_TRUE(CsrfTokenMatches("gws_abc", CsrfTokenFor("gws_abc")));
  EXPECT_FALSE(CsrfTokenMatches("gws_abd", CsrfTokenFor("gws_abc")));
  EXPECT_FALSE(CsrfTokenMatches("gws_abc", ""));
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kAborted), 409);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(ErrorJson(absl::NotFoundError("no \"x\"")),
            "{\"code\":5,\"status\":\"NOT_FOUND\",\"message\":\"no \\\"x\\\"\"}");
}

}  // namespace
}  // namespace gantry::server::http
