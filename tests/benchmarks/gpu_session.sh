#!/usr/bin/env bash
# One GPU session, run from the repository root: re-pretrain every shipped checkpoint with lmlib.recipes.accelerated
# and measure transfer with tests/benchmarks/gpu_transfer.py, everything written under $OUT as it finishes.
#
# The data travels compressed in gpu-carry/ (listed in .git/info/exclude): IMDb's unsup.jsonl (xz -9), PTB, and
# labelled.json (gpu_transfer.py prepare: the test subset, the training samples and the dev split). Five chains run
# at once on the one GPU (each is launch-bound alone): GPT, BERT, ELMo, AWD-LSTM -> ULMFiT stage (b), and a small
# BERT ablation (MLM + NSP against MLM alone at equal tokens). Every training run has a time budget that fits its
# schedule to it (accelerated.device_loop), every evaluation stops starting new runs at EVAL_END seconds.
#
# The device tool brings back at most 8 files of at most 16 MiB from $OUT. So the work happens in $WORK and is
# packed into 7 tar files in $OUT (one per checkpoint folder, one for the ablation's two, one for logs and
# results) every 45 s and at the end: a run cut off by the call's limit still returns what it had. (The first
# session wrote its files straight into $OUT and got back 8 of 25: no logs and no results.)
#
#   OUT=/some/dir bash tests/benchmarks/gpu_session.sh            # on the GPU machine
#   OUT=/tmp/trial QUICK=1 bash tests/benchmarks/gpu_session.sh   # a trial of every step on the CPU, minutes
set -u
: "${OUT:?set OUT to the folder for the results}"
QUICK=${QUICK:-0}
PY=${PY:-python3}
T0=$(date +%s)
EVAL_END=${EVAL_END:-$([ "$QUICK" = 1 ] && echo 5000 || echo 430)}
D=${DATA:-/tmp/lmlib-gpu-data}
FINAL_OUT=$OUT
OUT=${WORK:-/tmp/lmlib-gpu-work}
mkdir -p "$OUT/logs" "$OUT/ckpt" "$OUT/results" "$D/imdb" "$FINAL_OUT"
pack() {  # 7 files for the 8 the device tool returns, each under 16 MiB, written whole (tar to a temporary name)
  for part in gpt_imdb bert_imdb elmo_imdb awd_lstm_ptb ulmfit_imdb; do
    [ -d "$OUT/ckpt/$part" ] && tar -cf "$FINAL_OUT/.$part.tar" -C "$OUT/ckpt" "$part" && mv "$FINAL_OUT/.$part.tar" "$FINAL_OUT/$part.tar"
  done
  ls -d "$OUT"/ckpt/ablation_* >/dev/null 2>&1 && tar -cf "$FINAL_OUT/.ablation.tar" -C "$OUT/ckpt" $(cd "$OUT/ckpt" && ls -d ablation_*) \
    && mv "$FINAL_OUT/.ablation.tar" "$FINAL_OUT/ablation.tar"
  tar -cf "$FINAL_OUT/.logs_results.tar" -C "$OUT" logs results && mv "$FINAL_OUT/.logs_results.tar" "$FINAL_OUT/logs_results.tar"
}
# Python's lzma and tarfile, so the machine needs no xz command
$PY - "$D" <<'UNPACK'
import lzma, shutil, sys, tarfile
from pathlib import Path
d = Path(sys.argv[1])
for packed, plain in (("gpu-carry/unsup.jsonl.xz", d / "imdb/unsup.jsonl"), ("gpu-carry/labelled.json.xz", d / "labelled.json")):
    if not plain.is_file():
        with lzma.open(packed) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
if not (d / "ptb").is_dir():
    with tarfile.open("gpu-carry/ptb.tar.xz") as tar:
        tar.extractall(d)
UNPACK
export LMLIB_DATA_DIR="$D" LMLIB_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
echo "data ready after $(( $(date +%s) - T0 )) s" | tee "$OUT/logs/session.log"
{ nvidia-smi || true; $PY -c "import torch; print(torch.__version__, torch.cuda.is_available())"; } >> "$OUT/logs/session.log" 2>&1

if [ "$QUICK" = 1 ]; then
  DEV=cpu; EVAL="--quick"
  GPT="--steps 4 --batch-size 8 --train-reviews 500"; BERT="$GPT"; ELMO="--steps 3 --batch-size 16 --train-reviews 500"
  AWD="--steps 3 --batch-size 8"; ULM="--steps 3 --batch-size 8 --train-reviews 200"; ABL="--steps 3 --batch-size 8 --train-reviews 300"
else
  DEV=cuda; EVAL=""
  GPT="--deadline 215"; BERT="--deadline 225"; ELMO="--deadline 200"; AWD="--deadline 110"; ULM="--deadline 95"
  ABL="--steps 920"   # 30M tokens each
fi
ACC="$PY -m lmlib.recipes.accelerated"
EV="$PY tests/benchmarks/gpu_transfer.py"
left() { echo $(( EVAL_END - ($(date +%s) - T0) )); }
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" >> "$OUT/logs/session.log"; }

pretrain_then_transfer() {  # MODEL FOLDER "PRETRAIN OPTIONS": one checkpoint, then its transfer benchmark
  local model=$1 folder=$2 options=$3
  stamp "$model: pretraining"
  $ACC "$model" --out "$OUT/ckpt/$folder" --device $DEV $options > "$OUT/logs/$model.log" 2>&1 || stamp "$model: pretraining FAILED"
  stamp "$model: transfer"
  $EV "$model" --checkpoint "$OUT/ckpt/$folder" --labelled "$D/labelled.json" --out "$OUT/results/$model.json" \
      --device $DEV --deadline "$(left)" $EVAL >> "$OUT/logs/$model.log" 2>&1 || stamp "$model: transfer FAILED"
  stamp "$model: done"
}
chain_gpt() { pretrain_then_transfer gpt gpt_imdb "$GPT"; }
chain_bert() { pretrain_then_transfer bert bert_imdb "$BERT"; }
chain_elmo() { pretrain_then_transfer elmo elmo_imdb "$ELMO"; }
chain_ulmfit() {
  stamp "awd-lstm: pretraining"
  $ACC awd-lstm --out "$OUT/ckpt/awd_lstm_ptb" --device $DEV $AWD > "$OUT/logs/ulmfit.log" 2>&1 || stamp "awd-lstm FAILED"
  stamp "ulmfit-imdb: stage (b)"
  $ACC ulmfit-imdb --out "$OUT/ckpt/ulmfit_imdb" --stage-a "$OUT/ckpt/awd_lstm_ptb" --device $DEV $ULM \
      >> "$OUT/logs/ulmfit.log" 2>&1 || stamp "ulmfit-imdb FAILED"
  stamp "ulmfit: transfer"
  $EV ulmfit --checkpoint "$OUT/ckpt/ulmfit_imdb" --labelled "$D/labelled.json" --out "$OUT/results/ulmfit.json" \
      --device $DEV --deadline "$(left)" $EVAL >> "$OUT/logs/ulmfit.log" 2>&1 || stamp "ulmfit: transfer FAILED"
  stamp "ulmfit: done"
}
chain_ablation() {
  for m in bert bert-mlm; do
    stamp "ablation $m: pretraining"
    $ACC $m --out "$OUT/ckpt/ablation_$m" --device $DEV $ABL >> "$OUT/logs/ablation.log" 2>&1 || stamp "ablation $m FAILED"
  done
  for m in bert bert-mlm; do
    $EV bert --checkpoint "$OUT/ckpt/ablation_$m" --labelled "$D/labelled.json" --out "$OUT/results/ablation_$m.json" \
        --device $DEV --deadline "$(left)" --no-probes --pretrained-only --sizes 1000 --rate 5e-4 $EVAL \
        >> "$OUT/logs/ablation.log" 2>&1 || stamp "ablation $m: transfer FAILED"
  done
  stamp "ablation: done"
}

if [ "$DEV" = cuda ]; then
  ( while true; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader \
      | sed "s/^/[$(( $(date +%s) - T0 )) s] /" >> "$OUT/logs/gpu_use.log"; sleep 10; done ) &
  MONITOR=$!
fi
( while true; do sleep 45; pack; done ) &
PACKER=$!
pids=()
for chain in chain_gpt chain_bert chain_elmo chain_ulmfit chain_ablation; do
  $chain &
  pids+=($!)
done
wait "${pids[@]}"
[ -n "${MONITOR:-}" ] && kill "$MONITOR" 2>/dev/null
kill "$PACKER" 2>/dev/null
stamp "all done"
ls -la "$OUT"/ckpt/* >> "$OUT/logs/session.log" 2>&1
pack
