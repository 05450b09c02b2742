# Sourced by the GPU scripts here, from the repository root: makes the checkout importable as `pipebench`
# with the machine's own python3 (nothing downloaded: --no-deps) and sets what every run needs.
python3 -c "import pipebench" 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

# timed NAME COMMAND...: runs it, its output in $out/NAME.log, its wall time and exit status on stdout
# and in $out/times.txt, then the log's last lines ($out: the caller's output folder).
timed() {
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%-34s rc=%s %4d.%01d s   %s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) "$*" | tee -a "$out/times.txt"
  tail -n 4 "$out/$name.log" | cut -c1-240
}
