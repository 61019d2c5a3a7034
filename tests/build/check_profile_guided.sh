#!/usr/bin/env bash
# `make pgo` ends with this check (CMakeLists.txt, LOCKSCOPE_PGO): it fails when the
# profile scripts/pgo-train filed does not reach the objects that were compiled, which
# would otherwise only make the build silently ordinary.
#   check_profile_guided.sh BUILD_DIR PROFILE_DIR LOCKSCOPE
set -euo pipefail
build=$(cd "$1" && pwd); profile=$2; lockscope=$3  # GCC names profiles by absolute path
[[ -f $profile/trained ]] || { echo "no trained profile in $profile"; exit 1; }
# GCC names an object's profile after the object's path, '/' as '#'.
objects=0; found=0; missing=()
while IFS= read -r object; do
  objects=$((objects + 1))
  name=${object%.o}.gcda
  name=${name//\//#}
  if [[ -f $profile/$name ]]; then found=$((found + 1)); else missing+=("$object"); fi
done < <(find "$build" -name '*.o' \( -path '*lockscope_resp.dir*' -o -path '*lockscope_ingest.dir*' \
             -o -path '*lockscope_locks.dir*' -o -path '*/cli/CMakeFiles/lockscope.dir/*' \) | sort)
echo "$found of $objects objects of the libraries and the command have a profile"
(( objects > 20 )) || { echo "too few objects found under $build"; exit 1; }
# The analyzer's own objects must every one have a profile: the training runs them all.
for object in "${missing[@]}"; do
  case $object in
    *lockscope_ingest.dir*|*lockscope_locks.dir*) echo "no profile for $object"; exit 1 ;;
  esac
done
# And the command says how it was compiled (-frecord-gcc-switches): with the profile and LTO.
switches=$(readelf -p .GCC.command.line "$lockscope")
grep -q -- '-fprofile-use' <<<"$switches" || { echo "$lockscope was not compiled with -fprofile-use"; exit 1; }
grep -q -- '-flto' <<<"$switches" || { echo "$lockscope was not compiled with -flto"; exit 1; }
echo "profile-guided, link-time optimized"
