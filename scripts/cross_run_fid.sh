#!/usr/bin/env bash
# FID between configurations of *different* seeds (independent image sets of the same size), the
# two-sample check of docs/RESULTS.md: if speculative decoding is lossless, target-only seed a
# against spec seed b is as close as target-only seed a against target-only seed b.
#   scripts/cross_run_fid.sh runs/table3/cfg1   (uses runs/table3/cfg1-seed{1,2,3}/*-stats.npz)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$1
configs=$(cd "$prefix-seed1" && ls *-stats.npz | sed 's/-stats.npz$//')
printf '| target-only seed a vs | pairs (a,b) | FID mean | min | max |\n|---|---|---|---|---|\n'
for c in $configs; do
  vals=()
  for a in 1 2 3; do
    for b in 1 2 3; do
      [ "$a" = "$b" ] && continue
      [ -f "$prefix-seed$a/target-stats.npz" ] && [ -f "$prefix-seed$b/$c-stats.npz" ] || continue
      vals+=("$(./bin/marspec fid "$prefix-seed$a/target-stats.npz" "$prefix-seed$b/$c-stats.npz" 2>/dev/null | awk '/^FID/{print $2}')")
    done
  done
  [ ${#vals[@]} -gt 0 ] || continue
  printf '%s\n' "${vals[@]}" | awk -v c="$c" '{s+=$1; if(NR==1||$1<mn)mn=$1; if(NR==1||$1>mx)mx=$1} END{printf "| %s seed b | %d | %.3f | %.3f | %.3f |\n", c, NR, s/NR, mn, mx}'
done
