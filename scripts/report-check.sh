#!/bin/sh
# make report-check: render the HTML report of the checked-in sample run
# (loadgen/report/testdata/sample.json), open it in headless Chromium with
# networking off, and check that every chart was drawn by ECharts with all
# its data points: each chart section carries data-points (what the report
# gave it) and, once ECharts has finished drawing, data-rendered (the points
# ECharts holds). Also writes a screenshot. Chromium is installed from
# Debian's packages if missing.
set -eu

GO=${GO:-go}
OUT=${REPORT_CHECK_OUT:-perf/out/report-check}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
html=$OUT/report.html
dom=$OUT/report.dom.html
png=$OUT/report.png

echo "== rendering the sample report to $html"
SHOAL_REPORT_HTML=$html $GO test -count=1 -run '^TestHTMLSelfContained$' ./loadgen/report/ >/dev/null

if ! command -v chromium >/dev/null 2>&1; then
	echo "== installing chromium from Debian's packages"
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

# Networking off: a fresh network namespace when we may make one (nothing
# but a down loopback), else every request sent to a proxy that is not
# there, loopback included.
offline=""
if unshare -n true 2>/dev/null; then
	offline="unshare -n"
	how="unshare -n (no network at all)"
else
	how="proxy to 127.0.0.1:9 for every host"
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chrome() {
	$offline chromium --headless --disable-gpu --no-sandbox --no-first-run \
		--disable-dev-shm-usage --disable-extensions --disable-background-networking \
		--proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' \
		--user-data-dir="$profile" --virtual-time-budget=10000 "$@" 2>>"$OUT/chromium.log"
}

echo "== opening it in headless Chromium, networking off: $how"
: >"$OUT/chromium.log"
chrome --dump-dom "file://$html" >"$dom"
chrome --window-size=1280,3400 --screenshot="$png" "file://$html" >/dev/null

fail=0
if grep -q 'data-script-error=' "$dom"; then
	echo "FAIL a script error: $(grep -o 'data-script-error="[^"]*"' "$dom")"
	fail=1
fi
want=$(grep -o 'data-chart="[a-z_]*"' "$html" | wc -l)
got=0
for sec in $(grep -o '<section[^>]*data-chart="[^"]*"[^>]*>' "$dom" | tr ' ' '|'); do
	id=$(echo "$sec" | sed -n 's/.*data-chart="\([a-z_]*\)".*/\1/p')
	points=$(echo "$sec" | sed -n 's/.*data-points="\([0-9]*\)".*/\1/p')
	rendered=$(echo "$sec" | sed -n 's/.*data-rendered="\([0-9]*\)".*/\1/p')
	got=$((got + 1))
	if [ -z "$rendered" ]; then
		echo "FAIL chart $id: not drawn (no data-rendered)"
		fail=1
	elif [ "$rendered" -eq 0 ] || [ "$rendered" != "$points" ]; then
		echo "FAIL chart $id: drawn with $rendered points, the report gave it $points"
		fail=1
	else
		echo "ok   chart $id: drawn with $rendered points"
	fi
done
if [ "$want" -eq 0 ] || [ "$got" -ne "$want" ]; then
	echo "FAIL $got chart sections in the browser's DOM, $want in the page"
	fail=1
fi
if [ ! -s "$png" ]; then
	echo "FAIL no screenshot"
	fail=1
fi
if [ "$fail" -ne 0 ]; then
	echo "report-check: FAIL (page $html, DOM $dom, chromium log $OUT/chromium.log)"
	exit 1
fi
echo "report-check: ok, $got charts drawn offline; screenshot $png"
