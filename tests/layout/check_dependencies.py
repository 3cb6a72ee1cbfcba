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
            if what == "folder" and name != own and name not in folders:
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
