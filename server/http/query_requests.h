// Query strings of the HTTP API's GET routes turned into gantry.v1 requests: parameters take the
// lowerCamelCase JSON names of the request fields (docs/API.md "HTTP API" has the syntax).
#ifndef GANTRY_SERVER_HTTP_QUERY_REQUESTS_H_
#define GANTRY_SERVER_HTTP_QUERY_REQUESTS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/training.pb.h"

namespace gantry::server::http {

// Decoded query parameters, in order, repeated names kept (HttpRequest::params).
using QueryParams = std::multimap<std::string, std::string>;

// name, tags=k:v (repeated), metricFilters=NAME<V | NAME<=V | NAME>V | NAME>=V (repeated),
// orderBy, includeArchived, dataset, modelPreset, particle (enum name), pageSize, pageToken, q (as
// nameContains), owner, alias. INVALID_ARGUMENT naming the parameter for an unknown one, a
// malformed value or a parameter given twice (except the repeated ones).
absl::StatusOr<gantry::v1::ListModelsRequest> ListModelsRequestFrom(const QueryParams& params);

// state (repeated JobState names), pageSize, pageToken.
absl::StatusOr<gantry::v1::ListJobsRequest> ListJobsRequestFrom(const QueryParams& params);

// rank (-1 = all, the default), tail.
absl::StatusOr<gantry::v1::GetJobLogsRequest> GetJobLogsRequestFrom(const QueryParams& params,
                                                                    const std::string& job_id);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_QUERY_REQUESTS_H_
