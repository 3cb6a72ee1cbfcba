// BuildInfo: the gantry version and the git commit this binary was built from (recorded in model
// lineage and worker registrations). Only build_info.cc (generated at configure time) carries the
// commit, so a new commit recompiles one file, not the project.
#ifndef GANTRY_BASE_BUILD_INFO_H_
#define GANTRY_BASE_BUILD_INFO_H_

#include <string>

namespace gantry {

// e.g. "0.1.0".
const char* GantryVersion();
// Short git commit, or "unknown" outside a git checkout.
const char* GantryGitCommit();
// "0.1.0 (6238015df88d)".
std::string GantryVersionString();
// What `--version` prints for `program`, two lines:
//   gantry-server 0.1.0 (6238015df88d)
//   build: Release, GCC 12.2.0, C++ 201703, gRPC 1.51.1, protobuf 3.21.12
std::string GantryVersionText(const std::string& program);

}  // namespace gantry

#endif  // GANTRY_BASE_BUILD_INFO_H_
