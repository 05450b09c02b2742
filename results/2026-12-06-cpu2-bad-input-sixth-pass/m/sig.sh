# sig.sh SIGNAL DELAY CMD...: start CMD (its own session? no: as a child), signal its pid after DELAY s, report leftovers 5 s later
sig=$1; delay=$2; shift 2
mark=b6mark$$; td=/tmp/b6/work/tmp_$mark; mkdir -p $td
env B6MARK=$mark TMPDIR=$td OMP_NUM_THREADS=1 "$@" >/dev/null 2>$td.err & pid=$!
sleep $delay; kill -$sig $pid; wait $pid; rc=$?
sleep 5
left=$(grep -l "B6MARK=$mark" /proc/[0-9]*/environ 2>/dev/null | wc -l)
tmp=$(ls -A $td | wc -l)
echo "RC=$rc LEFT=$left TMP=$tmp $(ls -A $td | head -3 | tr '\n' ' ') ERR=$(tail -1 $td.err)"
for p in $(grep -l "B6MARK=$mark" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do kill -9 $p 2>/dev/null; done
