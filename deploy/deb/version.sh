#!/bin/sh
# Prints the Debian version of the package being built: the tag when HEAD
# is tagged vX.Y.Z, else the base version of internal/daemon.Version
# followed by ~git<commit date>.<hash> (which sorts before the release).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
if tag=$(git describe --tags --exact-match 2>/dev/null); then
	echo "${tag#v}"
	exit 0
fi
base=$(sed -n 's/^var Version = "\([0-9][0-9.]*\).*/\1/p' internal/daemon/daemon.go)
if rev=$(git rev-parse --short HEAD 2>/dev/null); then
	echo "${base:-0.0.0}~git$(git log -1 --format=%cd --date=format:%Y%m%d).$rev"
else
	echo "${base:-0.0.0}"
fi
