// NetnsHosts: test hosts made of Linux network namespaces on a bridge this process creates
// (iproute2): each host has its own namespace, a veth into the bridge and an address of one /24
// (the bridge holds .1 in the root namespace, hosts .11, .12, ...). It runs commands inside a host,
// lists a host's established TCP connections (ss), and cuts a host's link into a silent black hole
// (an nftables netdev table dropping every frame on its veth, both ways: no RST, no FIN, no carrier
// loss). The destructor kills what still runs in the namespaces and removes namespaces, veths,
// nftables tables and the bridge. Names carry this process's pid, so a killed run never collides
// with the next, and Create removes the leftovers of runs whose process is gone. Needs root.
#ifndef GANTRY_TESTS_E2E_NETNS_HOSTS_H_
#define GANTRY_TESTS_E2E_NETNS_HOSTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/support/child_process.h"

namespace gantry::testing {

class NetnsHosts {
 public:
  struct Host {
    std::string netns;    // the namespace's name (ip netns)
    std::string veth;     // the root-namespace end of its link, a port of the bridge
    std::string address;  // its IPv4 address on the bridge
  };
  // One established TCP connection as ss reports it, "ADDRESS:PORT" on each side.
  struct Connection {
    std::string local;
    std::string peer;
  };

  // Creates the bridge (`subnet_prefix` + "1", e.g. "10.213.0.1") and `count` hosts; commands'
  // output goes through files in `scratch_dir`. Removes leftovers of dead earlier runs first (and
  // kills processes still listening on the subnet in the root namespace, such as a killed run's
  // server), and fails with what to do when an interface holds an address of the subnet.
  static absl::StatusOr<std::unique_ptr<NetnsHosts>> Create(const std::string& subnet_prefix,
                                                            int count,
                                                            const std::string& scratch_dir);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  const std::string& bridge() const { return bridge_; }
  const std::string& bridge_address() const { return bridge_address_; }
  int size() const { return static_cast<int>(hosts_.size()); }
  const Host& host(int i) const { return hosts_.at(i); }

  // argv run inside host i (`ip netns exec NETNS argv...`; ip execs it, so the pid is argv's).
  std::vector<std::string> InHost(int i, const std::vector<std::string>& argv) const;
  // Established TCP connections inside host i, or in the root namespace when i < 0.
  absl::StatusOr<std::vector<Connection>> Established(int i) const;
  // Drops every frame to and from host i on its veth (a silent black hole); Restore undoes it.
  absl::Status Cut(int i);
  absl::Status Restore(int i);

  // Removes namespaces, links and nftables tables named by this class for processes that no longer
  // run; returns their names.
  static std::vector<std::string> SweepDeadRuns(const std::string& scratch_dir);

 private:
  NetnsHosts(std::string scratch_dir, std::string tag);
  absl::Status Build(const std::string& subnet_prefix, int count);
  absl::Status Run(const std::vector<std::string>& args) const;
  static void RemoveRun(const std::string& tag, const std::string& scratch_dir,
                        std::vector<std::string>* removed);

  std::string scratch_dir_;
  std::string tag_;  // "gnt<pid>": the prefix of every name this run creates
  std::string bridge_;
  std::string bridge_address_;
  std::vector<Host> hosts_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_E2E_NETNS_HOSTS_H_
