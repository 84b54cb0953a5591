#!/usr/bin/env bash
# Regenerate the sample traces: DeepSeek-V3 MoE layer on 8 simulated Ascend A3 dies,
# 512 tokens per rank, 2048-column GEMM tiles (to keep every file under ~2 MB),
# sequential and tile schedules, balanced and zipf:1.2 routing, Chrome JSON (gzip) and Perfetto.
set -euo pipefail
cd "$(dirname "$0")"
for schedule in sequential tile; do
  for routing in balanced zipf:1.2; do
    name="${schedule}_${routing%%:*}"
    for ext in json.gz pftrace; do
      moetrace run --ranks 8 --tokens 512 --n-tile 2048 --schedule "$schedule" \
        --routing "$routing" --seed 0 -o "$name.$ext" --force > /dev/null
    done
  done
done
ls -l
