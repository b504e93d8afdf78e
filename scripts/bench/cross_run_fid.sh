#!/usr/bin/env bash
# FID between target-only and every configuration of the runs PREFIX-seed{1,2,3} (docs/RESULTS.md):
#  - same seed: the two image sets share seeds, orders and noise (a coupling), so a small value
#    means the configuration makes nearly the same images as target-only;
#  - other seeds: independent image sets of the same size; target-only against target-only of
#    another seed is the level that sampling noise alone gives.
#   scripts/bench/cross_run_fid.sh runs/table3/cfg1   (reads runs/table3/cfg1-seed*/<config>-stats.npz)
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=$1
fid() { ./bin/marspec fid "$1" "$2" 2>/dev/null | awk '/^FID/{print $2}'; }
summary() { awk '{s+=$1; if(NR==1||$1<mn)mn=$1; if(NR==1||$1>mx)mx=$1} END{if(NR) printf "%.3f (%.3f–%.3f, %d)", s/NR, mn, mx, NR; else printf "–"}'; }
configs=$(cd "$prefix-seed1" && ls *-stats.npz | sed 's/-stats.npz$//')
printf '| configuration | FID to target-only, same seed | FID to target-only, other seeds |\n|---|---|---|\n'
for c in $configs; do
  same=() other=()
  for a in 1 2 3; do
    for b in 1 2 3; do
      [ -f "$prefix-seed$a/target-stats.npz" ] && [ -f "$prefix-seed$b/$c-stats.npz" ] || continue
      if [ "$a" = "$b" ]; then
        [ "$c" = target ] || same+=("$(fid "$prefix-seed$a/target-stats.npz" "$prefix-seed$b/$c-stats.npz")")
      elif [ "$c" != target ] || [ "$a" -lt "$b" ]; then
        other+=("$(fid "$prefix-seed$a/target-stats.npz" "$prefix-seed$b/$c-stats.npz")")
      fi
    done
  done
  printf '| %s | %s | %s |\n' "$c" "$( ((${#same[@]})) && printf '%s\n' "${same[@]}" | summary || echo –)" \
    "$( ((${#other[@]})) && printf '%s\n' "${other[@]}" | summary || echo –)"
done
