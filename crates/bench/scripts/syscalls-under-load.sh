#!/bin/bash
# usage: crates/bench/scripts/syscalls-under-load.sh LABEL SCENARIO SECONDS  (env passes through, e.g. SLUICE_QUIC_GSO=off)
# Runs SCENARIO against sluice for a long run; once the measured run is under way, counts the
# server's system calls with perf's syscall tracepoints (no ptrace stop) for SECONDS, with the
# bytes it read (/proc/PID/io rchar: the file, so bytes / 10 MiB = downloads for download-h3)
# and its CPU ticks (/proc/PID/stat). A measuring aid, not a test: it waits 6 s for the check
# and the warm-up to pass.
cd "$(dirname "$0")/../../.."
L=$1; S=$2; T=${3:-5}
mkdir -p target/h3lab
out=$PWD/target/h3lab/sys-$L-$S
rm -rf $out
${BIN:-target/release/sluice} bench run $S --targets sluice --runs 20 --run-secs 1 --out $out > $out.log 2>&1 &
B=$!
PID=
for i in $(seq 300); do PID=$(pgrep -f "serve --config $out/work/$S-sluice" | head -1); [ -n "$PID" ] && break; sleep 0.1; done
# the check and the warm-up (a fifth of the run time at most) come first
sleep 6
w0=$(awk '/^rchar/{print $2}' /proc/$PID/io); c0=$(awk '{print $14+$15}' /proc/$PID/stat)
perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_futex -p $PID -o $out.perfstat -- sleep $T
w1=$(awk '/^rchar/{print $2}' /proc/$PID/io); c1=$(awk '{print $14+$15}' /proc/$PID/stat)
wait $B
echo "$L $S bytes_read=$((w1-w0)) cpu_ticks=$((c1-c0))"
cat $out.perfstat | grep -v "^#" | awk -F, 'NF>2{print "  "$3": "$1}'
