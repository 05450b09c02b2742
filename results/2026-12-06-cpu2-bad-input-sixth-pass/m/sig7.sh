# sig7.sh SIGNAL DELAY [SECOND_DELAY] -- CMD...: start CMD, send SIGNAL after DELAY s (and SIGINT again SECOND_DELAY s later),
# then 5 s after it ends: pipebench processes carrying our mark, files left in our TMPDIR, new /tmp/pipebench-* folders
sig=$1; delay=$2; shift 2; second=""; if [ "$1" != "--" ]; then second=$1; shift; fi; shift
mark=b6mark$$; td=/tmp/b6/work/tmp_$mark; mkdir -p $td
before=$(ls -d /tmp/pipebench-* 2>/dev/null | sort)
set -m  # job control: a background job of a non-interactive shell starts with SIGINT ignored (POSIX), which Python keeps
env B6MARK=$mark TMPDIR=$td OMP_NUM_THREADS=1 "$@" >$td.out 2>$td.err & pid=$!
sleep $delay; kill -$sig $pid
if [ -n "$second" ]; then sleep $second; kill -INT $pid; fi
wait $pid; rc=$?
sleep 5
left=$(grep -l "B6MARK=$mark" /proc/[0-9]*/environ 2>/dev/null | wc -l)
tmp=$(ls -A $td | wc -l)
new=$(comm -13 <(echo "$before") <(ls -d /tmp/pipebench-* 2>/dev/null | sort) | wc -l)
echo "RC=$rc LEFT=$left TMP=$tmp NEWTMP=$new $(ls -A $td | head -3 | tr '\n' ' ') ERRLINES=$(grep -c . $td.err) TB=$(grep -c Traceback $td.err) ERR=$(tail -1 $td.err)"
for p in $(grep -l "B6MARK=$mark" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do kill -9 $p 2>/dev/null; done
