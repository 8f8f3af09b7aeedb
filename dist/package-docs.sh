#!/bin/sh
# Generates what the packages ship besides the binary, into build/package/:
# man pages (man/*.1.gz), shell completions (completions/) and the Debian
# changelog (changelog.gz). GoReleaser runs it as a before-hook, with the
# release version as $1, so the pages name the version they document.
#
# It builds the edgeplat of the machine it runs on: the release binaries
# are cross-compiled and may not run here, and the pages and scripts are
# the same for every target.
set -eu
cd "$(dirname "$0")/.."

version=${1:-dev}
out=build/package
# Reproducible pages: dated by the last commit unless the build says otherwise.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

rm -rf "$out"
mkdir -p "$out/man" "$out/completions"
go build -trimpath -ldflags "-X github.com/edgeplat/edgeplat/core/buildinfo.Version=$version" -o "$out/edgeplat-host" .
"$out/edgeplat-host" man --dir "$out/man"
# Debian policy: man pages and changelogs compressed with gzip -9, and -n
# keeps the name and time out of the archive so rebuilds are identical.
gzip -9n "$out"/man/*.1
"$out/edgeplat-host" completion bash >"$out/completions/edgeplat.bash"
"$out/edgeplat-host" completion zsh >"$out/completions/_edgeplat"
"$out/edgeplat-host" completion fish >"$out/completions/edgeplat.fish"
gzip -9n -c dist/debian/changelog >"$out/changelog.gz"
rm "$out/edgeplat-host"
