#include "tests/e2e/netns_hosts.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gantry::testing {
namespace {

constexpr char kPrefix[] = "gnt";  // every name this class creates starts with gnt<pid>

// The absolute path of an iproute2/nftables tool; empty when it is not installed.
std::string Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string Comm(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// True when `pid` is a live process running the same program as this one (a concurrent run).
bool LiveRun(pid_t pid) {
  if (pid == getpid()) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  return Comm(pid) == Comm(getpid());
}

CommandResult RunTool(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  return ChildProcess::Run(argv, {}, scratch_dir, 30);
}

// "[::ffff:10.0.0.1]:80" and "10.0.0.1:80" both as "10.0.0.1:80".
std::string PlainAddress(std::string a) {
  if (absl::StartsWith(a, "[::ffff:")) {
    a.erase(0, 8);
    const size_t close = a.find(']');
    if (close != std::string::npos) a.erase(close, 1);
  }
  return a;
}

}  // namespace

NetnsHosts::NetnsHosts(std::string scratch_dir, std::string tag)
    : scratch_dir_(std::move(scratch_dir)), tag_(std::move(tag)) {}

NetnsHosts::~NetnsHosts() {
  std::vector<std::string> removed;
  RemoveRun(tag_, scratch_dir_, &removed);
}

absl::StatusOr<std::unique_ptr<NetnsHosts>> NetnsHosts::Create(const std::string& subnet_prefix,
                                                               int count,
                                                               const std::string& scratch_dir) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "network namespaces need root: run the test as root (CI does)");
  }
  for (const char* tool : {"ip", "ss", "nft"}) {
    if (Tool(tool).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          tool, " is not installed: deploy/local/deps.sh installs iproute2 and nftables"));
    }
  }
  SweepDeadRuns(scratch_dir);
  // A live run (or anything else) holding the subnet would make routes ambiguous.
  CommandResult addresses = RunTool({Tool("ip"), "-o", "-4", "addr", "show"}, scratch_dir);
  if (addresses.exit_code != 0) {
    return absl::InternalError(absl::StrCat("ip addr show failed: ", addresses.err));
  }
  for (absl::string_view line : absl::StrSplit(addresses.out, '\n')) {
    if (absl::StrContains(line, absl::StrCat(" ", subnet_prefix))) {
      return absl::FailedPreconditionError(
          absl::StrCat("the subnet ", subnet_prefix, "0/24 is in use here (", line,
                       "): stop the run that holds it or delete that interface"));
    }
  }
  // No live run holds the subnet, so a process still listening on it in the root namespace (the
  // server of a killed run) is a leftover: its socket stays bound after the address went away, and
  // would take the port, and the connections, of this run's server.
  CommandResult listeners = RunTool({Tool("ss"), "-Htlnp"}, scratch_dir);
  const std::regex owner("pid=([0-9]+)");
  for (absl::string_view line : absl::StrSplit(listeners.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() < 4 || !absl::StartsWith(PlainAddress(fields[3]), subnet_prefix)) continue;
    const std::string text(line);
    for (std::sregex_iterator m(text.begin(), text.end(), owner), end; m != end; ++m) {
      kill(static_cast<pid_t>(std::atol((*m)[1].str().c_str())), SIGKILL);
    }
  }
  std::unique_ptr<NetnsHosts> hosts(new NetnsHosts(scratch_dir, absl::StrCat(kPrefix, getpid())));
  absl::Status built = hosts->Build(subnet_prefix, count);
  if (!built.ok()) return built;  // the destructor removes what was made
  return hosts;
}

absl::Status NetnsHosts::Build(const std::string& subnet_prefix, int count) {
  bridge_ = tag_ + "br";
  bridge_address_ = subnet_prefix + "1";
  const std::string ip = Tool("ip");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {ip, "link", "add", bridge_, "type", "bridge"},
           {ip, "addr", "add", bridge_address_ + "/24", "dev", bridge_},
           {ip, "link", "set", bridge_, "up"}}) {
    if (absl::Status s = Run(args); !s.ok()) return s;
  }
  for (int i = 0; i < count; ++i) {
    Host host{absl::StrCat(tag_, "-h", i + 1), absl::StrCat(tag_, "h", i + 1),
              absl::StrCat(subnet_prefix, 11 + i)};
    hosts_.push_back(host);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {ip, "netns", "add", host.netns},
             {ip, "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns",
              host.netns},
             {ip, "link", "set", host.veth, "master", bridge_, "up"},
             {ip, "-n", host.netns, "addr", "add", host.address + "/24", "dev", "eth0"},
             {ip, "-n", host.netns, "link", "set", "eth0", "up"},
             {ip, "-n", host.netns, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Run(args); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status NetnsHosts::Run(const std::vector<std::string>& args) const {
  CommandResult r = RunTool(args, scratch_dir_);
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("`", absl::StrJoin(args, " "), "` exited ", r.exit_code, ": ", r.err, r.out));
}

std::vector<std::string> NetnsHosts::InHost(int i, const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {Tool("ip"), "netns", "exec", host(i).netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

absl::StatusOr<std::vector<NetnsHosts::Connection>> NetnsHosts::Established(int i) const {
  const std::vector<std::string> ss = {Tool("ss"), "-tnH", "state", "established"};
  CommandResult r = RunTool(i < 0 ? ss : InHost(i, ss), scratch_dir_);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("ss exited ", r.exit_code, ": ", r.err));
  }
  // With a state filter ss prints: Recv-Q Send-Q Local:Port Peer:Port [Process].
  std::vector<Connection> connections;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() < 4) continue;
    connections.push_back({PlainAddress(fields[2]), PlainAddress(fields[3])});
  }
  return connections;
}

absl::Status NetnsHosts::Cut(int i) {
  const std::string nft = Tool("nft");
  const std::string table = host(i).veth;
  for (const std::string& command : std::vector<std::string>{
           absl::StrCat("add table netdev ", table),
           absl::StrCat("add chain netdev ", table, " in { type filter hook ingress device ",
                        host(i).veth, " priority -500 ; policy drop ; }"),
           absl::StrCat("add chain netdev ", table, " out { type filter hook egress device ",
                        host(i).veth, " priority -500 ; policy drop ; }")}) {
    if (absl::Status s = Run({nft, command}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NetnsHosts::Restore(int i) {
  return Run({Tool("nft"), "delete", "table", "netdev", host(i).veth});
}

std::vector<std::string> NetnsHosts::SweepDeadRuns(const std::string& scratch_dir) {
  // Every name of ours: links (bridges, veths), namespaces and netdev tables.
  std::set<std::string> names;
  const std::string ip = Tool("ip");
  for (absl::string_view line : absl::StrSplit(RunTool({ip, "-o", "link", "show"}, scratch_dir).out,
                                               '\n', absl::SkipEmpty())) {
    // "7: NAME@if2: <...>" or "7: NAME: <...>"
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() < 2) continue;
    names.insert(std::string(absl::StripAsciiWhitespace(parts[1].substr(0, parts[1].find('@')))));
  }
  for (absl::string_view line :
       absl::StrSplit(RunTool({ip, "netns", "list"}, scratch_dir).out, '\n', absl::SkipEmpty())) {
    names.insert(std::string(line.substr(0, line.find(' '))));
  }
  for (absl::string_view line :
       absl::StrSplit(RunTool({Tool("nft"), "list", "tables", "netdev"}, scratch_dir).out, '\n',
                      absl::SkipEmpty())) {
    names.insert(std::string(line.substr(line.rfind(' ') + 1)));
  }
  const std::regex ours(std::string("^") + kPrefix + "([0-9]+)");
  std::set<std::string> dead;
  for (const std::string& name : names) {
    std::smatch m;
    if (!std::regex_search(name, m, ours)) continue;
    if (!LiveRun(static_cast<pid_t>(std::atol(m[1].str().c_str())))) dead.insert(m[0].str());
  }
  std::vector<std::string> removed;
  for (const std::string& tag : dead) RemoveRun(tag, scratch_dir, &removed);
  return removed;
}

void NetnsHosts::RemoveRun(const std::string& tag, const std::string& scratch_dir,
                           std::vector<std::string>* removed) {
  const std::string ip = Tool("ip"), nft = Tool("nft");
  auto ours = [&tag](absl::string_view name) {
    // gnt123h1 belongs to gnt123, not to gnt12.
    return absl::StartsWith(name, tag) && name.size() > tag.size() &&
           !absl::ascii_isdigit(name[tag.size()]);
  };
  // Namespaces: kill what runs inside (daemons, ranks), then delete them.
  for (absl::string_view line :
       absl::StrSplit(RunTool({ip, "netns", "list"}, scratch_dir).out, '\n', absl::SkipEmpty())) {
    const std::string netns(line.substr(0, line.find(' ')));
    if (!ours(netns)) continue;
    for (absl::string_view pid : absl::StrSplit(
             RunTool({ip, "netns", "pids", netns}, scratch_dir).out, '\n', absl::SkipEmpty())) {
      kill(static_cast<pid_t>(std::atol(std::string(pid).c_str())), SIGKILL);
    }
    RunTool({ip, "netns", "del", netns}, scratch_dir);
    removed->push_back(netns);
  }
  for (absl::string_view line : absl::StrSplit(
           RunTool({nft, "list", "tables", "netdev"}, scratch_dir).out, '\n', absl::SkipEmpty())) {
    const std::string table(line.substr(line.rfind(' ') + 1));
    if (!ours(table)) continue;
    RunTool({nft, "delete", "table", "netdev", table}, scratch_dir);
    removed->push_back("nft " + table);
  }
  // Veths first (a namespace's deletion removes its pair only once its last process is gone),
  // then the bridge.
  std::vector<std::string> links;
  for (absl::string_view line : absl::StrSplit(RunTool({ip, "-o", "link", "show"}, scratch_dir).out,
                                               '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() < 2) continue;
    std::string name(absl::StripAsciiWhitespace(parts[1].substr(0, parts[1].find('@'))));
    if (ours(name)) links.push_back(name);
  }
  std::stable_partition(links.begin(), links.end(),
                        [](const std::string& l) { return !absl::EndsWith(l, "br"); });
  for (const std::string& link : links) {
    RunTool({ip, "link", "del", link}, scratch_dir);
    removed->push_back(link);
  }
}

}  // namespace gantry::testing
