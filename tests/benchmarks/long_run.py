"""What the long offline training scripts (train_nnlm.py, train_zaremba_small.py) share: one command line,
a JSON report rewritten after every epoch so an interrupted run leaves its numbers behind, and resuming
from the last finished epoch with the same next step."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from result_file import write_result

from lmlib.training.trainer import Callback, Trainer

RESULTS = Path(__file__).resolve().parents[2] / "lmlib" / "results"


def command_line(description: str, name: str, epochs: int | None, epochs_help: str) -> argparse.Namespace:
    """The options every long run takes; results go to results/<name>.json, checkpoints to data/<name>.ckpt."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=epochs, help=epochs_help)
    ap.add_argument("--max-batches", type=int, default=None, help="stop after this many training batches (timing probe)")
    ap.add_argument("--out", type=Path, default=RESULTS / f"{name}.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", type=Path, default=Path("data") / f"{name}.ckpt",
                    help="resumable checkpoint written after every epoch (data/ is git-ignored)")
    ap.add_argument("--resume", action="store_true", help="continue from --checkpoint and the JSON at --out")
    return ap.parse_args()


class EpochReport(Callback):
    """Appends ``row(trainer, logs)`` to ``result["epochs"]`` after every epoch and rewrites ``out``."""

    def __init__(self, result: dict, out: Path, row: Callable[[Trainer, dict], dict]):
        self.result, self.out, self.row = result, out, row

    def write(self) -> None:
        write_result(self.out, self.result)

    def on_epoch_end(self, trainer: Trainer, logs: dict) -> None:
        self.result["epochs"].append(self.row(trainer, logs))
        print(json.dumps(self.result["epochs"][-1]), flush=True)
        self.write()

    def resume(self, trainer: Trainer, checkpoint: Path) -> None:
        """Load the checkpoint and keep the JSON's rows of the epochs it contains."""
        trainer.load_checkpoint(checkpoint)
        self.result["epochs"] = json.loads(self.out.read_text())["epochs"][: trainer.epoch]
        print(f"resumed after epoch {trainer.epoch} (step {trainer.step})", flush=True)

    def finish(self, test_ppl: float, test_seconds: float, epochs: int, probe: bool, **extra) -> None:
        # Training time is the sum of the epochs (each includes its validation pass), so a resumed run counts the same.
        seconds = sum(e["seconds"] for e in self.result["epochs"]) + test_seconds
        self.result.update(test_ppl=test_ppl, valid_ppl=self.result["epochs"][-1]["valid_ppl"], seconds=seconds,
                           **extra, finished=not probe and len(self.result["epochs"]) == epochs)
        self.write()
