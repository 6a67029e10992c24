#!/bin/bash
# usage: crates/bench/scripts/profile-under-load.sh SCENARIO SECONDS: perf record -g on the sluice server while the lab loads it
cd "$(dirname "$0")/../../.."
S=$1; T=${2:-8}
mkdir -p target/h3lab
out=$PWD/target/h3lab/prof-$S
rm -rf $out
${BIN:-target/release/sluice} bench run $S --targets sluice --runs 20 --run-secs 1 --out $out > $out.log 2>&1 &
B=$!
PID=
for i in $(seq 300); do PID=$(pgrep -f "serve --config $out/work/$S-sluice" | head -1); [ -n "$PID" ] && break; sleep 0.1; done
sleep 6
perf record -F 1999 -g -p $PID -o $out.data -- sleep $T 2>/dev/null
wait $B
perf report -i $out.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^$" | grep "%" | head -60 > $out.top
perf report -i $out.data --no-children --sort dso --stdio 2>/dev/null | grep "%" | head -15 > $out.dso
cat $out.dso; cat $out.top
