#!/usr/bin/env bash
# Builds what benches/gpu-check/run.sh carries to the GPU machine: the release `carver` and the
# GPU test binaries, stripped, in target/gpu-run.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=target/gpu-run
rm -rf $G && mkdir -p $G
cargo build --release -p carver-cli
cp target/release/carver $G/carver
cargo test --release --no-run -p carver-cli --test tune_cli -p carver-gpu --test gpu \
    --test repack_gpu --test kernels --test sm90_compile --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | while read -r exe; do
        name=$(basename "$exe" | sed 's/-[0-9a-f]*$//')
        cp "$exe" "$G/$name"
    done
strip $G/*
ls -la $G
du -sh $G
# The repository itself is close to the 64 MiB a device call carries: ship the binaries compressed.
tar -C target -cJf target/gpu-run.tar.xz gpu-run
ls -la target/gpu-run.tar.xz
