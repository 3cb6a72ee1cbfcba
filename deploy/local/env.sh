# Shared settings for deploy/local scripts. Source it; do not run it.
# Everything a script needs to know about where things live is decided here, once.
GANTRY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export GANTRY_ROOT
export GANTRY_BUILD_DIR="${GANTRY_BUILD_DIR:-$GANTRY_ROOT/build}"
export GANTRY_BUILD_TYPE="${GANTRY_BUILD_TYPE:-Release}"
export GANTRY_VAR="${GANTRY_VAR:-$GANTRY_ROOT/var}"
# The private PostgreSQL: data directory, unix socket directory, and the unprivileged OS user that owns
# them (initdb refuses to run as root).
export GANTRY_PG_DIR="${GANTRY_PG_DIR:-$GANTRY_VAR/pg}"
export GANTRY_PG_USER="${GANTRY_PG_USER:-postgres}"
export GANTRY_PG_BIN="${GANTRY_PG_BIN:-/usr/lib/postgresql/15/bin}"
export GANTRY_PG_DB="${GANTRY_PG_DB:-gantry}"
# Debian packages the build, the tests and the demo need. One list, used by deps.sh.
GANTRY_APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libpqxx-dev postgresql-15 libgoogle-glog-dev libgtest-dev libgmock-dev
  libbenchmark-dev libssl-dev openssl libcairo2-dev fonts-dejavu-core
  libtorch-dev libgloo-dev libhdf5-dev zlib1g-dev libopenblas0-pthread
  python3 python3-torch python3-h5py python3-grpcio python3-numpy python3-protobuf
  python3-venv python3-pip python3-setuptools python3-wheel mypy-protobuf
  libonnx-dev python3-onnx nodejs libcli11-dev
  clang-14 libclang-rt-14-dev llvm-14
  iproute2 nftables iptables podman runc catatonit mmdebstrap prometheus netavark aardvark-dns libcpp-httplib-dev libmicrohttpd-dev
  libeigen3-dev libnlopt-dev libnlopt-cxx-dev
  slurm-wlm slurmctld slurmd slurm-client munge
  chromium python3-pil
)
# kubectl for the Kubernetes manifests (kubectl kustomize in ctest kubernetes.*): Debian's
# kubernetes-client (kubectl 1.20, kustomize v2.0.3 inside). deps.sh installs it only when no kubectl
# is on PATH: another package that owns /usr/bin/kubectl (Google's Cloud SDK) makes its install fail.
GANTRY_APT_KUBECTL=kubernetes-client
# ccache: paths under the checkout are hashed relative to it, so a clone anywhere (CI clones afresh)
# reuses the objects an earlier build of the same sources left in the cache. The sanitizer build's line
# tables then name the directory of the build that filled the cache; nothing reads them but a debugger.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$GANTRY_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
# The precompiled headers (cmake/precompiled_headers.cmake): ccache caches a translation unit that
# uses one only with these sloppiness settings (the header is made in the same build, so its times
# are new).
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
# ccache evicts per sixteenth of its size, least recently used first. At the default 5 GB (312 MB a
# sixteenth) each precompiled header stored (360-690 MB, about 100 MB compressed; four per build,
# remade whenever a proto changes) pushes a sixteenth over, and the entries a new clone needs go first.
# 20 GB holds a full build and its sanitizer twin several times over.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
# The compiler launcher build.sh and sanitize.sh configure: ccache with the settings above on its
# command line (through env), so every compile of that build directory keys its entries the same
# way, a `cmake --build` or `ninja` run by hand included. Settings taken from the environment
# instead reached only the compiles the scripts started, and a hand-run build filled the cache with
# entries a clone cannot find (CI then recompiled hundreds of units). Empty without ccache.
gantry_ccache_launcher() {
  command -v ccache >/dev/null || return 0
  printf '%s' "env;CCACHE_BASEDIR=$CCACHE_BASEDIR;CCACHE_NOHASHDIR=$CCACHE_NOHASHDIR;" \
    "CCACHE_SLOPPINESS=$CCACHE_SLOPPINESS;CCACHE_MAXSIZE=$CCACHE_MAXSIZE;ccache"
}
# Parallelism of the build (2 cores here).
export GANTRY_JOBS="${GANTRY_JOBS:-$(nproc)}"
