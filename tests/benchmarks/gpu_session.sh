#!/usr/bin/env bash
# One GPU session, run from the repository root: re-pretrain every shipped checkpoint with lmlib.recipes.accelerated
# and measure transfer with tests/benchmarks/gpu_transfer.py, everything written under $OUT as it finishes.
#
# The data travels compressed in gpu-carry/ (listed in .git/info/exclude): IMDb's unsup.jsonl (xz -9), PTB, and
# labelled.json (gpu_transfer.py prepare: the test subset, the training samples and the dev split). Five chains run
# at once on the one GPU (each is launch-bound alone): BERT (MLM + NSP), BERT (MLM alone, the same tokens: the
# paper's objective against its ablation, at full size), ELMo, AWD-LSTM -> ULMFiT stage (b), and the transfer
# benchmark of the GPT already pretrained in the first session (tests/benchmarks/results/gpu_pretraining/gpt_imdb,
# no pretraining). Every training run has a time budget that fits its schedule to it (accelerated.device_loop),
# every evaluation stops starting new runs at EVAL_END seconds.
#
# The device tool brings back at most 8 files of at most 16 MiB from $OUT. So the work happens in $WORK and is
# packed into 6 tar files in $OUT (one per checkpoint folder, one for logs and
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
EVAL_END=${EVAL_END:-$([ "$QUICK" = 1 ] && echo 5000 || echo 520)}
D=${DATA:-/tmp/lmlib-gpu-data}
FINAL_OUT=$OUT
OUT=${WORK:-/tmp/lmlib-gpu-work}
mkdir -p "$OUT/logs" "$OUT/ckpt" "$OUT/results" "$D/imdb" "$FINAL_OUT"
pack() {  # 6 files for the 8 the device tool returns, each under 16 MiB, written whole (tar to a temporary name)
  for part in bert_imdb bert_mlm_imdb elmo_imdb awd_lstm_ptb ulmfit_imdb; do
    [ -d "$OUT/ckpt/$part" ] && tar -cf "$FINAL_OUT/.$part.tar" -C "$OUT/ckpt" "$part" && mv "$FINAL_OUT/.$part.tar" "$FINAL_OUT/$part.tar"
  done
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
# PYTHONPATH: gpu_transfer.py runs as a script from tests/benchmarks, and lmlib is not installed on the GPU machine
# (the second session lost every evaluation to "No module named 'lmlib'")
export LMLIB_DATA_DIR="$D" LMLIB_OFFLINE=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "data ready after $(( $(date +%s) - T0 )) s" | tee "$OUT/logs/session.log"
{ nvidia-smi || true; $PY -c "import torch; print(torch.__version__, torch.cuda.is_available())"; } >> "$OUT/logs/session.log" 2>&1

if [ "$QUICK" = 1 ]; then
  DEV=cpu; EVAL="--quick"
  GPT="--steps 4 --batch-size 8 --train-reviews 500"; BERT="$GPT"; ELMO="--steps 3 --batch-size 16 --train-reviews 500"
  AWD="--steps 3 --batch-size 8"; ULM="--steps 3 --batch-size 8 --train-reviews 200"
  GPT_CKPT="$OUT/ckpt/gpt_trial"   # a 4-step GPT made here, as the trial has no GPU checkpoint to read
else
  DEV=cuda; EVAL=""
  BERT="--deadline 250"; ELMO="--deadline 330"; AWD="--deadline 170"; ULM="--deadline 120"
  GPT_CKPT=tests/benchmarks/results/gpu_pretraining/gpt_imdb
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
chain_bert() { pretrain_then_transfer bert bert_imdb "$BERT"; }
chain_bert_mlm() {  # the ablation at full size; the scratch rows are chain_bert's (the same architecture)
  stamp "bert-mlm: pretraining"
  $ACC bert-mlm --out "$OUT/ckpt/bert_mlm_imdb" --device $DEV $BERT > "$OUT/logs/bert-mlm.log" 2>&1 || stamp "bert-mlm FAILED"
  stamp "bert-mlm: transfer"
  $EV bert --checkpoint "$OUT/ckpt/bert_mlm_imdb" --labelled "$D/labelled.json" --out "$OUT/results/bert_mlm.json" \
      --device $DEV --deadline "$(left)" --pretrained-only $EVAL >> "$OUT/logs/bert-mlm.log" 2>&1 || stamp "bert-mlm: transfer FAILED"
  stamp "bert-mlm: done"
}
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
chain_gpt() {  # fine-tuning only (its probes were measured on the CPU): GPT and scratch each at its dev-best rate
  if [ "$QUICK" = 1 ]; then
    $ACC gpt --out "$GPT_CKPT" --device $DEV --steps 4 --batch-size 8 --train-reviews 500 > "$OUT/logs/gpt.log" 2>&1
  fi
  stamp "gpt: transfer"
  $EV gpt --checkpoint "$GPT_CKPT" --labelled "$D/labelled.json" --out "$OUT/results/gpt.json" \
      --device $DEV --deadline "$(left)" --no-probes $EVAL >> "$OUT/logs/gpt.log" 2>&1 || stamp "gpt: transfer FAILED"
  stamp "gpt: done"
}

if [ "$DEV" = cuda ]; then
  ( while true; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader \
      | sed "s/^/[$(( $(date +%s) - T0 )) s] /" >> "$OUT/logs/gpu_use.log"; sleep 10; done ) &
  MONITOR=$!
fi
( while true; do sleep 45; pack; done ) &
PACKER=$!
pids=()
for chain in chain_bert chain_bert_mlm chain_elmo chain_ulmfit chain_gpt; do
  $chain &
  pids+=($!)
done
wait "${pids[@]}"
[ -n "${MONITOR:-}" ] && kill "$MONITOR" 2>/dev/null
kill "$PACKER" 2>/dev/null
stamp "all done"
ls -la "$OUT"/ckpt/* >> "$OUT/logs/session.log" 2>&1
pack
