#!/usr/bin/env bash
# The Python package on the GPU machine: install the wheel built here (target/wheels), run a
# tuning through `python -m carver` (its workers restart through the same interpreter), then the
# decorator bench's parts a and c on the held-out Python shapes. Results under $OUT/py.
set -o pipefail
P=$OUT/py
mkdir -p $P
python3 -m pip install --quiet --no-index --no-deps --break-system-packages target/wheels/carver-*.whl 2>&1 | tail -2
python3 -c "import carver, sys; print('carver', carver.__version__ if hasattr(carver, '__version__') else '', sys.version.split()[0])" | tee $P/log.txt
timeout 300 python3 -m carver --cache-dir /tmp/carver-py-cache tune --m 2048 --n 2048 --k 2048 --topk 4 2>&1 | tee -a $P/log.txt
echo "python -m carver tune rc=${PIPESTATUS[0]}" | tee -a $P/log.txt
timeout 420 python3 benches/python/decorator_bench.py --shapes eval/python-holdout-shapes.json \
    --parts a,c --out $P > $P/bench.txt 2>&1
echo "decorator_bench rc=$?" | tee -a $P/log.txt
tail -25 $P/bench.txt
