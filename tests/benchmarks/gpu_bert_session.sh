#!/usr/bin/env bash
# The second GPU session's last four minutes: BERT with MLM + NSP and BERT with MLM alone, side by side on one
# GPU with the same time budget (so about the same tokens), written straight into $OUT (3 files each + 2 logs:
# within the 8 files the device tool returns). The first call of that session (gpu_session.sh) lost both BERT
# runs to a fork deadlock in the packing, since fixed (accelerated._pack_part).
#
#   OUT=/some/dir bash tests/benchmarks/gpu_bert_session.sh            # on the GPU machine
#   OUT=/tmp/trial QUICK=1 bash tests/benchmarks/gpu_bert_session.sh   # a CPU trial, a minute
set -u
: "${OUT:?set OUT to the folder for the results}"
PY=${PY:-python3}
D=${DATA:-/tmp/lmlib-gpu-data}
mkdir -p "$D/imdb" "$OUT"
[ -f "$D/imdb/unsup.jsonl" ] || $PY -c "
import lzma, shutil
with lzma.open('gpu-carry/unsup.jsonl.xz') as src, open('$D/imdb/unsup.jsonl', 'wb') as dst:
    shutil.copyfileobj(src, dst)"
export LMLIB_DATA_DIR="$D" LMLIB_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ "${QUICK:-0}" = 1 ]; then
  RUN="--device cpu --steps 3 --batch-size 8 --train-reviews 1200"
else
  RUN="--device cuda --deadline ${DEADLINE:-150}"
fi
$PY -m lmlib.recipes.accelerated bert --out "$OUT/bert_imdb" $RUN > "$OUT/bert.log" 2>&1 &
$PY -m lmlib.recipes.accelerated bert-mlm --out "$OUT/bert_mlm_imdb" $RUN > "$OUT/bert_mlm.log" 2>&1 &
wait
