#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer and AddressSanitizer, then runs each for SECONDS (default 60).
#
#   Tests/Fuzz/run-fuzz.sh [SECONDS] [TARGET...]      TARGET: preferences-reader, argument-parser (default: both)
#
# Each target is the module's own source files compiled together with a small entry file, so internal
# APIs are reachable without changing the package. Everything built or found goes to .build-fuzz/
# (git-ignored): binaries, the growing corpus, and crash artifacts. The seed corpora in
# Tests/Fuzz/corpus/<target>/ are read, never written. Exits 1 when a target found a crash or a broken
# property, after printing where the input was saved; 2 when a target does not build.
#
# Environment: SWIFTC (default: swiftc on PATH), FUZZ_BUILD_DIR (default: <repo>/.build-fuzz),
# FUZZ_SCRATCH is set for the preferences target (a directory for its scratch domain file).
set -euo pipefail

seconds=${1:-60}
shift || true
case "$seconds" in '' | *[!0-9]*) echo "run-fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 64 ;; esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(preferences-reader argument-parser)

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${FUZZ_BUILD_DIR:-$repo/.build-fuzz}
swiftc=${SWIFTC:-swiftc}
mkdir -p "$out"

# The package's settings (Package.swift), plus the sanitizers. -O: the properties are checked with
# fatalError and preconditions, which -O keeps; it runs several times faster than -Onone.
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6 -use-ld=lld
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault)

sources_of() {
    case "$1" in
    preferences-reader)
        find "$repo/Sources/Preferences" -name '*.swift' | sort
        echo "$here/PreferencesReader/FuzzPreferencesReader.swift"
        ;;
    argument-parser)
        echo "$repo/Sources/SecureStoreCommands/ArgumentSpecs.swift"
        echo "$repo/Sources/SecureStoreCommands/ArgumentParser.swift"
        echo "$here/ArgumentParser/FuzzArgumentParser.swift"
        ;;
    *) echo "run-fuzz.sh: unknown target '$1' (preferences-reader, argument-parser)" >&2; return 64 ;;
    esac
}

# The product's internal core module, built once as a static library the targets link (its declarations are
# `package`: every module of the build gets the same -package-name).
core_sources=$(find "$repo/Sources/SecureStoreCore" -name '*.swift' | sort)
build_core() {
    local library=$out/libSecureStoreCore.a
    # shellcheck disable=SC2086
    if [ -f "$library" ] && [ -z "$(find $core_sources "$0" -newer "$library" 2>/dev/null)" ]; then return 0; fi
    echo "run-fuzz.sh: building the core module" >&2
    # shellcheck disable=SC2086
    (cd "$out" && timeout 900 "$swiftc" "${flags[@]}" -package-name SecureStore -module-name SecureStoreCore \
        -emit-module -emit-module-path "$out/SecureStoreCore.swiftmodule" -emit-library -static \
        $core_sources -o "$library") || { echo "run-fuzz.sh: the core module does not build" >&2; return 2; }
}

build() {
    local target=$1 binary=$out/fuzz-$1 sources
    sources=$(sources_of "$target") || exit 64
    # Rebuild only when a source, this script or the compiler is newer than the binary.
    if [ -x "$binary" ] && [ -z "$(find $sources "$out/libSecureStoreCore.a" "$0" "$(command -v "$swiftc")" -newer "$binary" 2>/dev/null)" ]; then
        return 0
    fi
    echo "run-fuzz.sh: building $target" >&2
    local module
    module=$(echo "$target" | tr -d '-')
    # shellcheck disable=SC2086
    if ! (cd "$out" && timeout 900 "$swiftc" "${flags[@]}" -package-name SecureStore -module-name "Fuzz$module" \
            -I "$out" -L "$out" -lSecureStoreCore $sources -o "$binary.new"); then
        echo "run-fuzz.sh: $target does not build with -sanitize=fuzzer" >&2
        return 2
    fi
    mv "$binary.new" "$binary"
}

status=0
build_core || exit $?
for target in "${targets[@]}"; do
    build "$target" || exit $?
done
for target in "${targets[@]}"; do
    corpus=$out/corpus/$target
    artifacts=$out/artifacts/$target/
    log=$out/$target.log
    scratch=$out/scratch/$target
    mkdir -p "$corpus" "$artifacts" "$scratch"
    args=(-max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts")
    [ -f "$here/$target.dict" ] && args+=(-dict="$here/$target.dict")
    echo "run-fuzz.sh: fuzzing $target for ${seconds}s (log: $log)" >&2
    before=$(find "$artifacts" -type f | wc -l)
    set +e
    # The first corpus directory receives new inputs; the seeds are only read.
    # SWIFT_BACKTRACE=enable=no: the Swift runtime's backtracer trips AddressSanitizer; libFuzzer reports instead.
    SWIFT_BACKTRACE=enable=no FUZZ_SCRATCH=$scratch timeout $((seconds + 120)) "$out/fuzz-$target" "${args[@]}" \
        "$corpus" "$here/corpus/$target" >"$log" 2>&1
    rc=$?
    set -e
    rm -rf "$scratch"/securestore-fuzz-* 2>/dev/null || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | sed "s/^/  $target: /" >&2 || true
    if [ $rc -ne 0 ] || [ "$(find "$artifacts" -type f | wc -l)" -ne "$before" ]; then
        status=1
        echo "run-fuzz.sh: $target FAILED (exit $rc); the reason is in $log:" >&2
        grep -E 'Fatal error|ERROR: AddressSanitizer|ERROR: libFuzzer|SUMMARY' "$log" | head -5 | sed 's/^/  /' >&2 || true
        grep -E 'Test unit written to' "$log" | sed 's/^/  /' >&2 || true
        echo "  replay: $out/fuzz-$target <file>; keep it as a regression test (Docs/fuzzing.md)" >&2
    fi
done
exit $status
