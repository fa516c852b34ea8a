#!/usr/bin/env bash
# Builds farro's Debian package with dpkg-deb (no debhelper, no nfpm: the
# tree is small and explicit). Run from anywhere in the repository:
#
#   deploy/deb/build-deb.sh [OUTDIR]        (default OUTDIR: dist/)
#
# Environment: DEB_VERSION (default: deploy/deb/version.sh), DEB_MAINTAINER,
# GO (default go), DEB_FAST=1 (for CI checks of the package's contents:
# plain go build flags, so the build cache of the tests serves, and fast
# gzip compression instead of xz; the files and scripts are the same).
# Prints the path of the .deb on its last line.
#
# The package (see deploy/check-deb.sh for the checks):
#   /usr/bin/{agentd,managerd,watchdogd,farroctl}
#   /lib/systemd/system/{agentd@.service,managerd.service,watchdogd.service,farro.target,
#                        farro-pipeline.service,farro-pipeline.timer}
#   /usr/lib/sysusers.d/farro.conf, /usr/lib/tmpfiles.d/farro.conf
#   /etc/farro/farro.env (conffile)
#   /usr/share/man/man1/*.1.gz (generated from the CLI definitions)
#   /usr/share/bash-completion/completions/*, /usr/share/zsh/vendor-completions/_*
#   /usr/share/doc/farro/ (copyright, changelog, examples, and the documents in
#     the repository's layout, gzip-compressed: README.md.gz, docs/*.md.gz and
#     every other file README.md links to, so that its links still resolve)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/deploy/deb
out=${1:-$repo/dist}
GO=${GO:-go}
version=${DEB_VERSION:-$("$here/version.sh")}
maintainer=${DEB_MAINTAINER:-farro developers <farro-dev@users.noreply.github.com>}
arch=$(dpkg --print-architecture)
programs=(agentd managerd watchdogd farroctl)
say() { printf '==> %s\n' "$*" >&2; }

case $version in
[0-9]*) ;;
*) echo "build-deb: version '$version' must start with a digit" >&2; exit 1 ;;
esac

stage=$(mktemp -d "${TMPDIR:-/tmp}/farro-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/farro_${version}_$arch
mkdir -p "$root/DEBIAN"

say "building ${programs[*]} $version ($arch)"
# cgo on (glibc resolver, and a dynamically linked binary as Debian
# expects); PIE; symbol tables stripped; paths trimmed (reproducible).
# DEB_FAST keeps the flags of a plain go build (see above).
export CGO_ENABLED=1
# Without urfave/cli's unused Markdown and man page writers, as make
# builds (Makefile: GOFLAGS).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=urfave_cli_no_docs"
# The package's binaries default to its spool, and farroctl reads the
# units' environment file for FARRO_SPOOL (internal/daemon: DefaultSpool,
# EnvFile): the operator's shell and the daemons agree on one place.
ldflags="-s -w -X github.com/farro-dev/farro/internal/daemon.Version=$version"
ldflags="$ldflags -X github.com/farro-dev/farro/internal/daemon.DefaultSpool=/var/spool/farro"
ldflags="$ldflags -X github.com/farro-dev/farro/internal/daemon.EnvFile=/etc/farro/farro.env"
# --help and the man pages name the installed documents (daemon.DocPath).
ldflags="$ldflags -X github.com/farro-dev/farro/internal/daemon.DocDir=/usr/share/doc/farro"
buildflags=(-trimpath -buildmode=pie)
compress=(-Zxz)
if [ "${DEB_FAST:-}" = 1 ]; then
	buildflags=()
	compress=(-Zgzip -z1)
else
	ldflags="$ldflags -extldflags=-Wl,-z,relro,-z,now"
fi
(cd "$repo" && "$GO" build "${buildflags[@]}" -ldflags "$ldflags" -o "$root/usr/bin/" \
	"${programs[@]/#/./cmd/}")
chmod 0755 "$root"/usr/bin/*

inst() { # inst MODE SRC DST
	install -D -m "$1" "$2" "$root/$3"
}
for u in agentd@.service managerd.service watchdogd.service farro.target farro-pipeline.service farro-pipeline.timer; do
	inst 0644 "$repo/deploy/systemd/$u" "lib/systemd/system/$u"
done
inst 0644 "$repo/deploy/sysusers.d/farro.conf" usr/lib/sysusers.d/farro.conf
inst 0644 "$repo/deploy/tmpfiles.d/farro.conf" usr/lib/tmpfiles.d/farro.conf
inst 0644 "$repo/deploy/env/farro.env" etc/farro/farro.env

say "man pages and shell completion, from the CLI definitions"
mkdir -p "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions"
for p in "${programs[@]}"; do
	"$root/usr/bin/$p" man | gzip -9n >"$root/usr/share/man/man1/$p.1.gz"
	"$root/usr/bin/$p" completion bash >"$root/usr/share/bash-completion/completions/$p"
	"$root/usr/bin/$p" completion zsh >"$root/usr/share/zsh/vendor-completions/_$p"
done
chmod 0644 "$root"/usr/share/man/man1/* "$root"/usr/share/bash-completion/completions/* "$root"/usr/share/zsh/vendor-completions/*

doc=usr/share/doc/farro
inst 0644 "$here/copyright" "$doc/copyright"
# The documents: README.md, every docs/*.md and every file README.md links
# to (deploy/deb/doc-links.sh), at their repository paths, each compressed
# (gzip -9n: Debian policy wants it beyond 4 KiB; all of them, so that
# their installed names are predictable: daemon.DocPath), images excepted.
docs=$({
	echo README.md
	(cd "$repo" && ls docs/*.md)
	(cd "$repo" && "$here/doc-links.sh" --local README.md)
} | awk '!seen[$0]++')
for f in $docs; do
	[ -f "$repo/$f" ] || { echo "build-deb: README.md links to $f, which is not a file" >&2; exit 1; }
	install -d "$root/$doc/$(dirname "$f")"
	case $f in
	*.png) # already compressed: installed as it is, so that README.md's image shows
		install -m 0644 "$repo/$f" "$root/$doc/$f"
		continue ;;
	esac
	gzip -9n <"$repo/$f" >"$root/$doc/$f.gz"
	chmod 0644 "$root/$doc/$f.gz"
done
for f in managerd.env watchdogd.env agentd-w1.env; do
	inst 0644 "$repo/deploy/env/$f" "$doc/examples/$f"
done
inst 0644 "$repo/deploy/systemd/metrics-dropin.conf" "$doc/examples/metrics-dropin.conf"
inst 0644 "$repo/deploy/systemd/postgres-dropin.conf" "$doc/examples/postgres-dropin.conf"
inst 0644 "$here/farro-textfile.service" "$doc/examples/farro-textfile.service"
inst 0644 "$here/farro-textfile.timer" "$doc/examples/farro-textfile.timer"
# The Go modules compiled in, for their licences.
for p in "${programs[@]}"; do
	"$GO" version -m "$root/usr/bin/$p" | awk '$1 == "dep" || $1 == "=>" { print $2, $3 }'
done | sort -u >"$root/$doc/modules.txt"
chmod 0644 "$root/$doc/modules.txt"
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(cd "$repo" && git log -1 --format=%ct 2>/dev/null || date +%s)}")
{
	printf 'farro (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Built from the farro repository (%s); see its git history.\n\n' \
		"$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	printf ' -- %s  %s\n' "$maintainer" "$date"
} | gzip -9n >"$root/$doc/changelog.gz"

# Dependencies of the binaries (libc), as dpkg-shlibdeps computes them.
shlibs="libc6"
if command -v dpkg-shlibdeps >/dev/null 2>&1; then
	mkdir -p "$stage/src/debian"
	printf 'Source: farro\n\nPackage: farro\nArchitecture: any\n' >"$stage/src/debian/control"
	shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O "${programs[@]/#/$root/usr/bin/}" 2>/dev/null |
		sed -n 's/^shlibs:Depends=//p')
else
	say "dpkg-shlibdeps not found (package dpkg-dev): Depends: libc6 without a version"
fi

install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$root/DEBIAN/"
echo /etc/farro/farro.env >"$root/DEBIAN/conffiles"
{
	echo "Package: farro"
	echo "Version: $version"
	echo "Architecture: $arch"
	echo "Maintainer: $maintainer"
	echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
	echo "Depends: $shlibs, systemd | systemd-standalone-sysusers | systemd-sysusers"
	echo "Recommends: jq"
	echo "Section: admin"
	echo "Priority: optional"
	echo "Homepage: https://github.com/farro-dev/farro"
	printf 'Description: %s\n' "$(cat "$here/description")"
} >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's#^\./##' | LC_ALL=C sort |
	xargs md5sum) >"$root/DEBIAN/md5sums"

# Reproducible mtimes.
find "$root" -exec touch -h -d "$date" {} +

mkdir -p "$out"
deb=$out/farro_${version}_$arch.deb
dpkg-deb --root-owner-group "${compress[@]}" --build "$root" "$deb" >/dev/null
say "built $deb"
echo "$deb"
