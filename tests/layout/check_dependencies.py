#!/usr/bin/env python3
"""Checks that every top-level folder includes only what docs/ARCHITECTURE.md allows it to.

Usage: check_dependencies.py [REPO_ROOT]   (default: the repository holding this script)

Every `#include` in a folder's C++ files is classified as one of the repository's folders (generated
stubs under `gantry/` and `grpc/health/` belong to proto/) or as an external library, and checked
against RULES. Prints each violation as `file:line: what` and exits 1 if there is any.
"""
import pathlib
import re
import sys

# Top-level folders of the repository whose headers other folders may include.
FOLDERS = {"proto", "base", "jobspec", "showers", "storage", "scheduler", "studies", "server", "workers",
           "clients", "tests"}

# External libraries whose use is restricted; anything else (the standard library, Abseil, OpenSSL,
# protobuf, POSIX) may be used everywhere.
EXTERNAL = {
    "libtorch": re.compile(r"^(torch|ATen|c10|caffe2)/"),
    "hdf5": re.compile(r"^(hdf5|H5[A-Za-z]*)\.h$"),
    "libpqxx": re.compile(r"^pqxx/"),
    "grpc": re.compile(r"^(grpcpp|grpc)/(?!health/v1/)"),
    "cairo": re.compile(r"^cairo(-[a-z]+)?\.h$|^cairo/"),
    "onnx": re.compile(r"^onnx/"),
    "httplib": re.compile(r"^httplib\.h$"),
    "microhttpd": re.compile(r"^microhttpd\.h$"),
    "eigen": re.compile(r"^(Eigen|unsupported/Eigen)/"),
    "nlopt": re.compile(r"^nlopt\.(h|hpp)$"),
}

# folder -> (repository folders it may include, restricted libraries it may use). A folder may
# always include itself. Sub-folders may narrow their parent's rule (longest prefix wins).
RULES = {
    # base/ uses proto/ only for the vendored google.rpc error model (google/rpc/*.proto).
    "base": ({"base", "proto"}, {"grpc"}),
    # base/http: the one HTTP listener (libmicrohttpd) every HTTP endpoint uses.
    "base/http": ({"base", "proto"}, {"grpc", "microhttpd"}),
    # jobspec: what a job spec means (presets, the model config and its bounds, the job plan),
    # shared by the server and the workers; pure C++ over the proto types.
    "jobspec": ({"proto", "base"}, set()),
    "showers": ({"base"}, {"hdf5"}),
    # showers/stream: generated chunks (gantry.v1.GenerateChunk) into shower files.
    "showers/stream": ({"base", "proto"}, set()),
    "storage": ({"proto", "base"}, {"libpqxx"}),
    "scheduler": ({"proto"}, set()),
    "server": ({"proto", "base", "jobspec", "showers", "storage", "scheduler", "studies"}, {"grpc"}),
    # studies: the pure search library (no gRPC, protobuf or storage); Eigen and NLopt.
    "studies": ({"base"}, {"eigen", "nlopt"}),
    # server/http: the HTTP API and web app routes (on base/http's listener).
    "server/http": ({"proto", "base", "jobspec", "showers", "storage", "scheduler", "studies",
                     "server"},
                    {"grpc"}),
    "workers": ({"proto", "base", "jobspec", "showers"}, {"grpc", "libtorch", "onnx"}),
    "workers/agent": ({"proto", "base", "jobspec", "showers"}, {"grpc"}),
    # workers/physics: torch-free validation; Eigen for the classifier two-sample test and the
    # Frechet distance.
    "workers/physics": ({"proto", "base", "jobspec", "showers"}, {"eigen"}),
    # workers/baseline: the no-network reference generators, pure C++ (the model and its checkpoint).
    "workers/baseline": ({"base", "jobspec", "showers"}, set()),
    "clients": ({"proto", "base", "jobspec", "showers"}, {"grpc"}),
    "clients/plots": ({"proto", "base"}, {"cairo"}),
}

# Subsystem folders of a top-level folder, each with the sibling subsystems it may include (always
# itself), in layers: nothing includes a layer above its own. The files directly in the top-level
# folder (the process that assembles the subsystems) may include every subsystem and no subsystem
# includes them; a sub-folder missing here is a violation until it is given its place.
SUBSYSTEMS = {
    "server": {
        # platform: what every part shares: the Backend (storage, auth, caches), tenant quotas and
        # budgets, worker credentials and channels, metrics families, the request log, the watchdogs.
        "platform": set(),
        # requests: pure checks of API messages (bounds, names, specs); no storage calls.
        "requests": {"platform"},
        # coordinator: workers, jobs and studies from admission to completion: worker sessions,
        # placement, the job lifecycle, model registration, generation routes, the study driver.
        "coordinator": {"platform", "requests"},
        # pools: worker pools: provisioners (command, Slurm), the autoscaler, cost estimates.
        "pools": {"platform", "requests", "coordinator"},
        # gateway: generation and export proxied to the workers that serve models, and model pinning.
        "gateway": {"platform", "requests", "coordinator"},
        # api: the gRPC services, thin: they check a request and hand it to a subsystem.
        "api": {"platform", "requests", "coordinator", "pools", "gateway"},
        # http: the HTTP API and web app routes, calling the gRPC services in process.
        "http": {"platform", "requests"},
    },
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCE_SUFFIXES = {".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".in"}


def classify(header):
    """('folder', name) for a repository header, ('library', name) for a restricted one, or None."""
    if (header.startswith("gantry/") or header.startswith("grpc/health/v1/")
            or header.startswith("google/rpc/")):
        return ("folder", "proto")
    first = header.split("/", 1)[0]
    if "/" in header and first in FOLDERS:
        return ("folder", first)
    for library, pattern in EXTERNAL.items():
        if pattern.search(header):
            return ("library", library)
    return None


def rule_for(relative):
    """The rule of the longest RULES key that is a prefix of the file's folder, with its key."""
    parts = relative.parts
    for length in range(len(parts) - 1, 0, -1):
        key = "/".join(parts[:length])
        if key in RULES:
            return key, RULES[key]
    return None, None


def subsystem_violation(relative, header):
    """Why a file of a subsystem folder may not include `header` of its own top-level folder, or None."""
    top = relative.parts[0]
    layers = SUBSYSTEMS.get(top)
    if layers is None or len(relative.parts) < 3:
        return None  # no subsystems, or a file of the assembling process
    own = relative.parts[1]
    if own not in layers:
        return f"{top}/{own}/ is not a subsystem of {top}/ (add it to SUBSYSTEMS)"
    parts = header.split("/")
    if len(parts) < 3:
        return f"{top}/{own}/ may not include {header} (the folder above it)"
    other = parts[1]
    if other != own and other not in layers[own]:
        return f"{top}/{own}/ may not include {top}/{other}/ ({header})"
    return None


def check(root):
    violations = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or relative.parts[0] not in FOLDERS:
            continue
        if path.suffix not in SOURCE_SUFFIXES:
            continue
        if relative.parts[0] == "proto":
            violations.append(f"{relative}: proto/ holds only the API (.proto files), no C++")
            continue
        key, rule = rule_for(relative)
        if rule is None:
            continue  # tests/ may use everything
        folders, libraries = rule
        own = key.split("/", 1)[0]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            kind = classify(match.group(1))
            if kind is None:
                continue
            what, name = kind
            if what == "folder" and name == own:
                why = subsystem_violation(relative, match.group(1))
                if why:
                    violations.append(f"{relative}:{number}: {why}")
            elif what == "folder" and name not in folders:
                violations.append(f"{relative}:{number}: {key}/ may not include {name}/ "
                                  f"({match.group(1)})")
            elif what == "library" and name not in libraries:
                violations.append(f"{relative}:{number}: {key}/ may not use {name} "
                                  f"({match.group(1)})")
    return violations


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    violations = check(root.resolve())
    for violation in violations:
        print(violation)
    if violations:
        print(f"{len(violations)} dependency violation(s); the allowed dependencies are the table "
              "in docs/ARCHITECTURE.md")
        return 1
    print("dependencies: every folder includes only what it may")
    return 0


if __name__ == "__main__":
    sys.exit(main())
