#!/usr/bin/env bash
# The profile-guided build's CMake wiring (CMakeLists.txt, LOCKSCOPE_PGO), checked in
# scratch configurations of this tree without building them: `make pgo` builds it for
# real and checks the result (check_profile_guided.sh); this catches a broken switch in
# every `make test` at the cost of three configure runs.
#   check_pgo_configuration.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

configure() {  # configure NAME -D...
  local name=$1; shift
  cmake -S "$source_dir" -B "$work/$name" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=g++ -DLOCKSCOPE_BUILD_TESTS=OFF -DLOCKSCOPE_BUILD_BENCH=OFF "$@" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name: configure failed"; }
}
# The compile line of one analyzer object and the link line of the command, from build.ninja.
compile_line() { grep -A4 "^build [^:]*lockscope_ingest.dir/src/capture/capture.cpp.o:" "$1/build.ninja" | grep -m1 FLAGS; }
link_line() { grep -A6 "^build cli/lockscope:" "$1/build.ninja" | grep -m1 LINK_FLAGS || true; }

mkdir -p "$work/profile"
configure untrained -DLOCKSCOPE_PGO=use "-DLOCKSCOPE_PGO_DIR=$work/profile"
line=$(compile_line "$work/untrained") || fail "untrained: no compile line for capture.cpp"
[[ $line != *-fprofile-use* && $line != *-flto* ]] || fail "untrained: an untrained profile must give an ordinary build: $line"

touch "$work/profile/trained"
configure use -DLOCKSCOPE_PGO=use "-DLOCKSCOPE_PGO_DIR=$work/profile"
line=$(compile_line "$work/use")
for flag in -fprofile-use -fprofile-partial-training -flto=auto -ffat-lto-objects "-fprofile-dir=$work/profile"; do
  [[ $line == *"$flag"* ]] || fail "use: the analyzer is compiled without $flag: $line"
done
[[ $(link_line "$work/use") == *-flto=auto* ]] || fail "use: the lockscope command is not linked with -flto"

configure generate -DLOCKSCOPE_PGO=generate "-DLOCKSCOPE_PGO_DIR=$work/data"
line=$(compile_line "$work/generate")
[[ $line == *-fprofile-generate* && $line == *"-fprofile-dir=$work/data"* ]] || fail "generate: not instrumented: $line"

configure sanitized -DLOCKSCOPE_PGO=use "-DLOCKSCOPE_PGO_DIR=$work/profile" -DLOCKSCOPE_SANITIZE=address
[[ $(compile_line "$work/sanitized") != *-fprofile-use* ]] || fail "sanitized builds must not be profile-guided"

grep -q "^build cli/lockscope:" "$work/use/build.ninja" || fail "no lockscope link rule found (the checks above read nothing)"
echo "profile-guided configuration: untrained, use, generate and sanitized as expected"
