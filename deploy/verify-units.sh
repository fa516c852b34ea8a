#!/usr/bin/env bash
# Checks farro's systemd deployment files without a running systemd (CI,
# containers):
#   1. systemd-analyze verify on every unit, with ExecStart= pointed at
#      freshly built binaries (verify refuses a unit whose binary is missing);
#      any message about our units fails the check, even when
#      systemd-analyze exits 0 (it does so for unknown keys, bad values, ...);
#   2. systemd-sysusers and systemd-tmpfiles applied to a scratch root (as
#      root only: tmpfiles must chown), checking that /var/spool/farro comes
#      out as farro:farro 0750;
#   3. systemd-analyze security --offline: exposure scores, for information.
# Installs the systemd package when systemd-analyze is missing (Debian/Ubuntu).
#
# Usage: deploy/verify-units.sh        (from anywhere inside the repository)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
units_src=$repo/deploy/systemd
units=(agentd@.service managerd.service watchdogd.service farro.target farro-pipeline.service farro-pipeline.timer)
binaries=(agentd managerd watchdogd farroctl)

say() { printf '==> %s\n' "$*"; }
die() { printf 'verify-units: FAIL: %s\n' "$*" >&2; exit 1; }

if ! command -v systemd-analyze >/dev/null 2>&1; then
	say "systemd-analyze not found: installing the systemd package"
	command -v apt-get >/dev/null 2>&1 || die "no systemd-analyze and no apt-get to install it"
	sudo=
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to install systemd"
		sudo=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
say "$(systemd-analyze --version | head -n1)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/farro-verify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "building ${binaries[*]} into $tmp/bin"
(cd "$repo" && go build -o "$tmp/bin/" ./cmd/...)
for b in "${binaries[@]}"; do
	[ -x "$tmp/bin/$b" ] || die "go build ./cmd/... did not produce $b"
done

# The units, with /usr/bin/<daemon> rewritten to the binaries just built.
mkdir -p "$tmp/units"
for u in "${units[@]}"; do
	[ -f "$units_src/$u" ] || die "missing $units_src/$u"
	sed "s#^ExecStart=/usr/bin/#ExecStart=$tmp/bin/#" "$units_src/$u" >"$tmp/units/$u"
done
grep -h '^ExecStart=' "$tmp"/units/*.service | sed 's/^/    /'
# The pipeline's report goes to the journal: it must be JSON log lines.
grep -Eq '^ExecStart=/usr/bin/farroctl pipeline run --log-json( |$)' "$units_src/farro-pipeline.service" ||
	die "farro-pipeline.service must run farroctl pipeline run --log-json (JSON log lines in the journal)"

# The template is checked as written (systemd instantiates it as
# agentd@i.service) and as the instance an operator would enable.
targets=("${units[@]/#/$tmp/units/}" "$tmp/units/agentd@w1.service")
say "systemd-analyze verify ${units[*]} agentd@w1.service"
rc=0
out=$(cd "$tmp/units" && systemd-analyze verify --man=no "${targets[@]}" 2>&1) || rc=$?
[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
# systemd-analyze may print unrelated noise about the host's own units in a
# container; only lines naming our units or files count.
ours=$(printf '%s\n' "$out" | grep -E "$tmp|agentd|managerd|watchdogd|farro" || true)
if [ "$rc" -ne 0 ] || [ -n "$ours" ]; then
	die "systemd-analyze verify reported problems with farro's units (exit $rc)"
fi
say "verify: no problems reported"

if [ "$(id -u)" -eq 0 ]; then
	say "sysusers.d + tmpfiles.d on a scratch root"
	root=$tmp/root
	mkdir -p "$root/etc"
	systemd-sysusers --root="$root" "$repo/deploy/sysusers.d/farro.conf" >"$tmp/log" 2>&1 ||
		{ cat "$tmp/log" >&2; die "systemd-sysusers failed"; }
	systemd-tmpfiles --root="$root" --create "$repo/deploy/tmpfiles.d/farro.conf" >>"$tmp/log" 2>&1 ||
		{ cat "$tmp/log" >&2; die "systemd-tmpfiles failed"; }
	sed 's/^/    /' "$tmp/log"
	spool=$root/var/spool/farro
	[ -d "$spool" ] || die "tmpfiles did not create /var/spool/farro"
	uid=$(awk -F: '$1 == "farro" { print $3 }' "$root/etc/passwd")
	gid=$(awk -F: '$1 == "farro" { print $3 }' "$root/etc/group")
	{ [ -n "$uid" ] && [ -n "$gid" ]; } || die "sysusers did not create the farro user and group"
	got=$(stat -c '%u:%g %a' "$spool")
	[ "$got" = "$uid:$gid 750" ] || die "/var/spool/farro is $got, want $uid:$gid 750"
	printf '    /var/spool/farro: farro:farro 0750\n'
else
	say "not root: skipping the sysusers/tmpfiles check (tmpfiles must chown)"
fi

say "systemd-analyze security --offline (exposure, information only)"
for u in managerd.service watchdogd.service agentd@w1.service farro-pipeline.service; do
	(cd "$tmp/units" && systemd-analyze security --offline=yes --no-pager "$tmp/units/$u" 2>&1) |
		grep -F 'Overall exposure' | sed 's/^/    /' || true
done

say "deploy units OK"
