#!/usr/bin/env bash
# Prints the links of a Markdown file (default: README.md), one a line,
# outside code (fenced blocks and `code spans` are skipped): inline links
# [text](target), reference definitions [label]: target, autolinks
# <http://...> and bare http(s) URLs.
#
#   deploy/deb/doc-links.sh [--local|--external] [FILE]
#     --local     relative links, as repository paths (anchors and query
#                 dropped, ./ removed; links to anchors only skipped)
#     --external  links with a scheme (http:, https:, mailto:, ...)
set -euo pipefail

mode=all
case ${1:-} in
--local | --external) mode=${1#--}; shift ;;
esac
file=${1:-README.md}
[ -f "$file" ] || { echo "doc-links: no file $file" >&2; exit 1; }

awk '
/^[ \t]*(```|~~~)/ { fence = !fence; next }
fence { next }
{
	line = $0
	gsub(/`[^`]*`/, "", line)            # code spans
	if (match(line, /^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/)) {   # reference definition
		d = substr(line, RSTART, RLENGTH); sub(/^[ \t]*\[[^]]+\]:[ \t]*/, "", d)
		gsub(/^<|>$/, "", d); print d; next
	}
	while (match(line, /\]\([^) \t]+/)) {  # inline link or image
		print substr(line, RSTART + 2, RLENGTH - 2)
		line = substr(line, RSTART + RLENGTH)
	}
	line = $0; gsub(/`[^`]*`/, "", line); gsub(/\]\([^)]*\)/, "", line)
	while (match(line, /https?:\/\/[^ \t<>()`"]+/)) {   # autolinks, bare URLs
		print substr(line, RSTART, RLENGTH)
		line = substr(line, RSTART + RLENGTH)
	}
}' "$file" | while IFS= read -r link; do
	case $link in
	[A-Za-z]*:*)
		[ "$mode" = local ] || printf '%s\n' "$link" ;;
	'#'*) ;;
	*)
		[ "$mode" = external ] && continue
		link=${link%%#*}; link=${link%%\?*}; link=${link#./}
		[ -n "$link" ] && printf '%s\n' "$link" ;;
	esac
done | awk '!seen[$0]++'
