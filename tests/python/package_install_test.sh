#!/usr/bin/env bash
# The gantry-client wheel installs offline into a fresh virtual environment (Debian's python3 with
# --system-site-packages, pip --no-index: no PyPI), and from that environment: the package and its
# generated stubs import from the venv (not the source tree), every stub has its .pyi, the package
# is marked typed, gantry_export is included (torch optional), and the client's unit tests pass.
# Usage: package_install_test.sh PYTHON3 WHEEL UNIT_TESTS_DIR
set -euo pipefail
python3="$1"
wheel="$2"
unit_tests="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
"$python3" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-build-isolation --no-index --disable-pip-version-check --quiet \
  "$wheel"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import ast, importlib.util, os, pathlib, sys
import gantry_client
from gantry_client.v1 import training_pb2, training_pb2_grpc
venv = pathlib.Path(sys.argv[1]).resolve()
package = pathlib.Path(gantry_client.__file__).resolve().parent
assert venv in package.parents, f"gantry_client imported from {package}, not the venv"
assert (package / "py.typed").is_file(), "py.typed missing"
stubs = sorted((package / "v1").glob("*_pb2*.py"))
assert len(stubs) == 16, [s.name for s in stubs]  # 8 protos x (messages, stubs)
for folder in ("v1", "rpc"):
    for module in (package / folder).glob("*_pb2*.py"):
        hints = module.with_suffix(".pyi")
        assert hints.is_file(), f"{hints.name} missing"
        ast.parse(hints.read_text(), str(hints))
assert "class TrainingServiceStub" in (package / "v1" / "training_pb2_grpc.pyi").read_text()
assert "class JobSpec(_message.Message)" in (package / "v1" / "training_pb2.pyi").read_text()
assert training_pb2.Job.__module__ == "gantry_client.v1.training_pb2"
assert gantry_client.__version__, "no version"
spec = importlib.util.find_spec("gantry_export")
assert spec is not None and venv in pathlib.Path(spec.origin).resolve().parents, spec
print("installed", gantry_client.__version__, "from", package)
PY
"$work/venv/bin/python" -m unittest discover -s "$unit_tests" 2>&1
# pip sees gantry-client installed with its requirements satisfied by Debian's packages (other
# system packages may have unrelated complaints).
"$work/venv/bin/pip" show --disable-pip-version-check gantry-client | grep '^Name: gantry-client' >/dev/null
if "$work/venv/bin/pip" check --disable-pip-version-check 2>&1 | grep -i '^gantry-client'; then
  echo "pip check: gantry-client's requirements are not satisfied" >&2
  exit 1
fi
echo "package_install_test: OK"
