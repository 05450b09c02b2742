# Sourced by the GPU scripts here, from the repository root: makes the checkout importable as `pipebench`
# with the machine's own python3 (nothing downloaded: --no-deps) and sets what every run needs.
python3 -c "import pipebench" 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
