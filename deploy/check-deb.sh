#!/usr/bin/env bash
# Checks farro's Debian package:
#   1. control fields (dpkg-deb -I): name, version, architecture,
#      dependencies, maintainer, description;
#   2. the file list (dpkg-deb -c) against the list below, exactly, with
#      owners (root) and modes (0755 programs, 0644 the rest);
#   3. the maintainer scripts (dpkg-deb -e): conffiles, md5sums, shell
#      syntax, and a dry run of postinst/prerm/postrm with stub commands
#      (what they call, and that nothing ever removes the spool);
#   4. the contents: man pages render (without warnings, with their EXIT
#      STATUS, SIGNALS, ENVIRONMENT and FILES sections), completion scripts
#      load in bash, the programs run and report the package's version,
#      their --help names the installed paths; the documents: every file
#      README.md links to is in /usr/share/doc/farro/ (at its repository
#      path, possibly .gz), and README.md links to nothing outside the
#      repository;
#   5. lintian, when installed: no errors (warnings are printed);
#   6. with --chroot DIR (a Debian root, e.g. from debootstrap; needs root):
#      installs the package there with its dependencies (apt-get), checks
#      the files, the farro user, the spool's owner and mode, runs
#      farroctl as farro, then upgrades, removes and purges it (the spool
#      and the user stay).
#
# Usage: deploy/check-deb.sh [--fast] [--deb FILE] [--chroot DIR] [--keep]
#   --fast     build with DEB_FAST=1 (what `make test` runs: seconds, not minutes)
#   --deb F    check F instead of building one
#   --keep     leave the chroot's package installed (no purge)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '==> %s\n' "$*"; }
die() { printf 'check-deb: FAIL: %s\n' "$*" >&2; exit 1; }

fast= deb= chroot= keep=
while [ $# -gt 0 ]; do
	case $1 in
	--fast) fast=1 ;;
	--deb) deb=$2; shift ;;
	--chroot) chroot=$2; shift ;;
	--keep) keep=1 ;;
	*) die "unknown argument $1 (see the header of $0)" ;;
	esac
	shift
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/farro-check-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -z "$deb" ]; then
	say "building the package${fast:+ (DEB_FAST=1)}"
	deb=$(DEB_FAST=${fast:-0} "$repo/deploy/deb/build-deb.sh" "$tmp/out" | tail -n1)
fi
[ -f "$deb" ] || die "no package at $deb"
say "checking $deb"

# 1. Control fields.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = farro ] || die "Package is '$(field Package)'"
version=$(field Version)
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "bad Version '$version'"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || die "Architecture is '$(field Architecture)'"
depends=$(field Depends)
[[ $depends == *libc6* ]] || die "Depends lacks libc6: $depends"
[[ $depends == *"systemd | systemd-standalone-sysusers"* ]] || die "Depends lacks systemd-sysusers: $depends"
[[ $(field Maintainer) == *"<"*"@"*">" ]] || die "Maintainer '$(field Maintainer)' has no address"
[ -n "$(field Description)" ] || die "no Description"
say "control: farro $version, Depends: $depends"

# 2. The file list: exactly these files, root-owned, with these modes.
expected=$(
	cat <<'EOF'
0755 ./usr/bin/agentd
0755 ./usr/bin/farroctl
0755 ./usr/bin/managerd
0755 ./usr/bin/watchdogd
0644 ./etc/farro/farro.env
0644 ./lib/systemd/system/agentd@.service
0644 ./lib/systemd/system/farro-pipeline.service
0644 ./lib/systemd/system/farro-pipeline.timer
0644 ./lib/systemd/system/farro.target
0644 ./lib/systemd/system/managerd.service
0644 ./lib/systemd/system/watchdogd.service
0644 ./usr/lib/sysusers.d/farro.conf
0644 ./usr/lib/tmpfiles.d/farro.conf
0644 ./usr/share/bash-completion/completions/agentd
0644 ./usr/share/bash-completion/completions/farroctl
0644 ./usr/share/bash-completion/completions/managerd
0644 ./usr/share/bash-completion/completions/watchdogd
0644 ./usr/share/doc/farro/README.md.gz
0644 ./usr/share/doc/farro/deploy/systemd/README.md.gz
0644 ./usr/share/doc/farro/docs/ARCHITECTURE.md.gz
0644 ./usr/share/doc/farro/docs/CRAWL.md.gz
0644 ./usr/share/doc/farro/docs/dashboard.png
0644 ./usr/share/doc/farro/docs/FARROCTL.md.gz
0644 ./usr/share/doc/farro/docs/PIPELINE.md.gz
0644 ./usr/share/doc/farro/docs/POSTGRES.md.gz
0644 ./usr/share/doc/farro/docs/RELIABILITY.md.gz
0644 ./usr/share/doc/farro/spool/README.md.gz
0644 ./usr/share/doc/farro/changelog.gz
0644 ./usr/share/doc/farro/copyright
0644 ./usr/share/doc/farro/examples/agentd-w1.env
0644 ./usr/share/doc/farro/examples/farro-textfile.service
0644 ./usr/share/doc/farro/examples/farro-textfile.timer
0644 ./usr/share/doc/farro/examples/managerd.env
0644 ./usr/share/doc/farro/examples/metrics-dropin.conf
0644 ./usr/share/doc/farro/examples/postgres-dropin.conf
0644 ./usr/share/doc/farro/examples/watchdogd.env
0644 ./usr/share/doc/farro/modules.txt
0644 ./usr/share/man/man1/agentd.1.gz
0644 ./usr/share/man/man1/farroctl.1.gz
0644 ./usr/share/man/man1/managerd.1.gz
0644 ./usr/share/man/man1/watchdogd.1.gz
0644 ./usr/share/zsh/vendor-completions/_agentd
0644 ./usr/share/zsh/vendor-completions/_farroctl
0644 ./usr/share/zsh/vendor-completions/_managerd
0644 ./usr/share/zsh/vendor-completions/_watchdogd
EOF
)
listing=$(dpkg-deb -c "$deb")
mode() { # ls-style permissions -> octal
	local p=$1 o=0 i v
	for i in 0 1 2; do
		v=0
		[ "${p:1+3*i:1}" = r ] && v=$((v + 4))
		[ "${p:2+3*i:1}" = w ] && v=$((v + 2))
		[ "${p:3+3*i:1}" = x ] && v=$((v + 1))
		o=$((o * 8 + v))
	done
	printf '%04o' "$o"
}
actual=$(printf '%s\n' "$listing" | while read -r perms owner _size _date _time path _rest; do
	[ "$owner" = root/root ] || echo "OWNER $owner $path"
	case $perms in
	d*) [ "$(mode "$perms")" = 0755 ] || echo "DIRMODE $perms $path" ;;
	-*) echo "$(mode "$perms") $path" ;;
	*) echo "TYPE $perms $path" ;;
	esac
done | LC_ALL=C sort)
if ! diff <(printf '%s\n' "$expected" | LC_ALL=C sort) <(printf '%s\n' "$actual") >"$tmp/list.diff"; then
	sed 's/^/    /' "$tmp/list.diff" >&2
	die "the file list differs from the expected one (< expected, > in the package)"
fi
say "file list: $(printf '%s\n' "$expected" | wc -l) files as expected, root-owned, modes right"

# 3. Maintainer scripts and control files.
ctl=$tmp/control
dpkg-deb -e "$deb" "$ctl"
[ "$(cat "$ctl/conffiles")" = /etc/farro/farro.env ] || die "conffiles: $(cat "$ctl/conffiles")"
for s in postinst prerm postrm; do
	[ -x "$ctl/$s" ] || die "$s missing or not executable"
	[ "$(head -n1 "$ctl/$s")" = "#!/bin/sh" ] || die "$s does not start with #!/bin/sh"
	grep -q '^set -e$' "$ctl/$s" || die "$s lacks set -e"
	sh -n "$ctl/$s" || die "$s: syntax error"
	if command -v dash >/dev/null 2>&1; then dash -n "$ctl/$s" || die "$s: dash syntax error"; fi
	if grep -nE 'rm -r[f]* +[^ ]*(/var/spool/farro|\$spool)' "$ctl/$s"; then
		die "$s removes the spool"
	fi
done
[ ! -e "$ctl/preinst" ] || die "unexpected preinst"
data=$tmp/data
dpkg-deb -x "$deb" "$data"
(cd "$data" && md5sum --quiet -c "$ctl/md5sums") || die "md5sums do not match the contents"
[ "$(wc -l <"$ctl/md5sums")" -eq "$(printf '%s\n' "$expected" | wc -l)" ] || die "md5sums does not list every file"

# Dry runs with stubs: every command a script may run is recorded, none
# acts. /run/systemd/system may not exist here: the systemctl branches are
# covered by the chroot check and by reading.
stubs=$tmp/stubs
mkdir -p "$stubs"
for c in systemd-sysusers systemd-tmpfiles systemctl deb-systemd-invoke getent groupadd useradd install rm rmdir; do
	printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$c" "$tmp" >"$stubs/$c"
	chmod 0755 "$stubs/$c"
done
syspath=/usr/bin:/bin
run_script() { # run_script NAME ARGS... -> calls in $tmp/calls
	: >"$tmp/calls"
	PATH=$stubs:$syspath /bin/sh "$ctl/$1" "${@:2}" || die "$* failed"
}
run_script postinst configure ""
grep -qx 'systemd-sysusers farro.conf' "$tmp/calls" || die "postinst configure does not run systemd-sysusers farro.conf: $(cat "$tmp/calls")"
grep -qx 'systemd-tmpfiles --create farro.conf' "$tmp/calls" || die "postinst configure does not run systemd-tmpfiles --create farro.conf"
run_script postinst configure 0.0.1
run_script postinst abort-upgrade 0.0.1
if PATH=$stubs:$syspath /bin/sh "$ctl/postinst" bogus 2>/dev/null; then die "postinst accepts an unknown action"; fi
# Without systemd-sysusers and systemd-tmpfiles (a PATH of stubs and awk
# only): the useradd and install fallbacks.
rm "$stubs/systemd-sysusers" "$stubs/systemd-tmpfiles"
printf '#!/bin/sh\necho "getent $*" >>"%s/calls"\nexit 2\n' "$tmp" >"$stubs/getent"
ln -s "$(command -v awk)" "$stubs/awk"
syspath=/nonexistent
run_script postinst configure ""
syspath=/usr/bin:/bin
grep -q '^useradd --system --gid farro --home-dir /var/spool/farro ' "$tmp/calls" || die "postinst has no useradd fallback: $(cat "$tmp/calls")"
grep -q '^install -d -m 0750 -o farro -g farro /var/spool/farro' "$tmp/calls" || die "postinst has no spool fallback"
for args in "remove" "upgrade 0.0.2"; do run_script prerm $args; done
for args in "remove" "purge" "upgrade 0.0.2"; do
	run_script postrm $args
	if grep -E '^rm .*(/var/spool|/var/lib)' "$tmp/calls"; then die "postrm $args removes the spool"; fi
done
say "maintainer scripts: syntax, conffiles, md5sums, dry runs (sysusers, tmpfiles, fallbacks) fine"

# 4. Contents.
for p in agentd managerd watchdogd farroctl; do
	out=$("$data/usr/bin/$p" --version) || die "$p --version failed"
	[[ $out == *"$version"* ]] || die "$p --version says '$out', not $version"
	# The packaged default spool is the units' one, not ./spool.
	out=$(env -u FARRO_SPOOL "$data/usr/bin/$p" --help 2>&1) || true
	[[ $out == *'(default: "/var/spool/farro")'* ]] || die "$p --help does not give /var/spool/farro as the default spool"
	[[ $out == *'/usr/share/doc/farro/'* ]] || die "$p --help does not name the installed documents (/usr/share/doc/farro/)"
	if [ "$p" = farroctl ]; then
		[[ $out == *'/etc/farro/farro.env'* ]] || die "farroctl --help does not name /etc/farro/farro.env"
	fi
	gzip -t "$data/usr/share/man/man1/$p.1.gz" || die "$p.1.gz is not gzip"
	zcat "$data/usr/share/man/man1/$p.1.gz" >"$tmp/$p.1"
	grep -q "^\.TH ${p^^} 1" "$tmp/$p.1" || die "$p.1.gz: no .TH header for section 1"
	for sec in 'EXIT STATUS' SIGNALS ENVIRONMENT FILES; do
		grep -qx "\.SH $sec" "$tmp/$p.1" || die "$p.1.gz: no $sec section"
	done
	grep -q '/usr/share/doc/farro/README\.md\.gz' "$tmp/$p.1" || die "$p.1.gz does not name /usr/share/doc/farro/README.md.gz"
	if command -v man >/dev/null 2>&1; then
		warn=$(MANWIDTH=80 man --warnings -l "$data/usr/share/man/man1/$p.1.gz" 2>&1 >/dev/null) || die "man $p failed"
		[ -z "$warn" ] || die "man $p: $warn"
	fi
	bash --norc -c "source '$data/usr/share/bash-completion/completions/$p' && complete -p $p" >/dev/null ||
		die "the bash completion of $p does not load"
	if command -v zsh >/dev/null 2>&1; then
		zsh -n "$data/usr/share/zsh/vendor-completions/_$p" || die "the zsh completion of $p has a syntax error"
	fi
done
# The shipped default must not point agentd at a handler that does not exist
# (agentd would refuse to start): FARRO_EXEC is documented, left commented out.
! grep -q '^FARRO_EXEC=' "$data/etc/farro/farro.env" || die "farro.env sets FARRO_EXEC by default"
grep -q '^#FARRO_EXEC=' "$data/etc/farro/farro.env" || die "farro.env does not document FARRO_EXEC"
grep -q '^RestartPreventExitStatus=.*\b151\b' "$data/lib/systemd/system/agentd@.service" || die "agentd@.service restarts on exit 151 (handler unusable)"
for u in agentd@ managerd watchdogd; do
	grep -q '^RestartPreventExitStatus=.*\b152\b' "$data/lib/systemd/system/$u.service" || die "$u.service restarts on exit 152 (configuration error)"
done
grep -q '^u *farro ' "$data/usr/lib/sysusers.d/farro.conf" || die "sysusers.d entry has no farro user"
grep -q '^d */var/spool/farro *0750 *farro *farro' "$data/usr/lib/tmpfiles.d/farro.conf" || die "tmpfiles.d entry does not make the spool"
say "contents: programs run ($version), man pages, completions, config fine"

# The documents README.md links to, and no link out of the repository.
doc=$data/usr/share/doc/farro
[ -f "$doc/README.md.gz" ] || die "no /usr/share/doc/farro/README.md.gz"
zcat "$doc/README.md.gz" >"$tmp/README.md"
cmp -s "$tmp/README.md" "$repo/README.md" || die "the packaged README.md is not the repository's"
links=$("$repo/deploy/deb/doc-links.sh" --local "$tmp/README.md") || die "cannot read README.md's links"
[ -n "$links" ] || die "README.md has no relative links (the parser is broken?)"
missing=
for l in $links; do
	[ -f "$doc/$l" ] || [ -f "$doc/$l.gz" ] || missing="$missing $l"
done
[ -z "$missing" ] || die "README.md links to files the package lacks under /usr/share/doc/farro/:$missing"
external=$("$repo/deploy/deb/doc-links.sh" --external "$tmp/README.md" |
	grep -Ev '^https://github\.com/farro-dev/farro([/#].*)?$' || true)
[ -z "$external" ] || die "README.md links outside the repository: $(echo $external)"
for f in "$doc"/docs/*.md.gz; do gzip -t "$f" || die "$f is not gzip"; done
say "documents: the $(echo $links | wc -w) files README.md links to are in /usr/share/doc/farro/; no external links"

# 5. lintian.
if command -v lintian >/dev/null 2>&1; then
	say "lintian"
	lintian --tag-display-limit 0 "$deb" >"$tmp/lintian" 2>&1 || true
	sed 's/^/    /' "$tmp/lintian"
	if grep -q '^E: ' "$tmp/lintian"; then die "lintian reports errors"; fi
else
	say "lintian not installed: skipped (apt-get install lintian)"
fi

# 6. Install into a Debian root.
if [ -n "$chroot" ]; then
	[ "$(id -u)" -eq 0 ] || die "--chroot needs root"
	[ -x "$chroot/usr/bin/apt-get" ] || die "$chroot is not a Debian root (no apt-get)"
	say "installing into the chroot $chroot"
	inroot() { chroot "$chroot" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
	mounted=
	if ! mountpoint -q "$chroot/proc"; then mount -t proc proc "$chroot/proc" && mounted=1; fi
	cleanup() {
		[ -z "$mounted" ] || umount "$chroot/proc" || true
		rm -rf "$tmp"
	}
	trap cleanup EXIT
	cp "$deb" "$chroot/tmp/farro.deb"
	[ -s "$chroot/etc/resolv.conf" ] || cp /etc/resolv.conf "$chroot/etc/resolv.conf"
	inroot apt-get update -qq >/dev/null
	inroot apt-get install -y -qq /tmp/farro.deb >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; die "apt-get install failed"; }
	for f in $(printf '%s\n' "$expected" | cut -d' ' -f2 | sed 's#^\.##'); do
		[ -f "$chroot$f" ] || die "not installed: $f"
	done
	inroot getent passwd farro | grep -q ':/var/spool/farro:/usr/sbin/nologin$' || die "no farro system user: $(inroot getent passwd farro)"
	st=$(inroot stat -c '%U:%G %a' /var/spool/farro) || die "no spool"
	[ "$st" = "farro:farro 750" ] || die "spool is $st, want farro:farro 750"
	inroot dpkg-query -W -f '${Conffiles}\n' farro | grep -q /etc/farro/farro.env || die "farro.env is not a registered conffile"
	inroot setpriv --reuid=farro --regid=farro --clear-groups sh -c 'echo "{}" | farroctl submit --kind noop >/dev/null &&
		farroctl stats --json' >"$tmp/stats" || die "farroctl as farro failed"
	grep -q '"queued":1' "$tmp/stats" || die "farroctl stats after a submit: $(cat "$tmp/stats")"
	inroot man -w farroctl >/dev/null 2>&1 || inroot test -f /usr/share/man/man1/farroctl.1.gz || die "no man page"
	say "chroot: files, user, spool (farro:farro 0750), conffile, farroctl as farro: fine"
	inroot dpkg -i /tmp/farro.deb >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; die "reinstall (upgrade path) failed"; }
	say "chroot: reinstall over itself (postinst configure <old-version>) fine"
	if [ -z "$keep" ]; then
		inroot dpkg --purge farro >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; die "purge failed"; }
		[ ! -e "$chroot/usr/bin/farroctl" ] || die "farroctl left after purge"
		[ ! -e "$chroot/etc/farro/farro.env" ] || die "farro.env left after purge"
		[ -d "$chroot/var/spool/farro/incoming" ] || die "purge removed the spool"
		inroot getent passwd farro >/dev/null || die "purge removed the farro user"
		say "chroot: purge removes the package and its conffile, keeps the spool and the user"
	fi
fi

say "check-deb passed"
