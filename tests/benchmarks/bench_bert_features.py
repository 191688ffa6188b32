"""BERT as a feature extractor vs fine-tuning (Devlin et al. 2019, §5.3, Table 7) at this course's scale.

Table 7 feeds frozen activations of BERT-base into a two-layer BiLSTM for CoNLL-2003 NER and compares layer
choices (embeddings, second-to-last hidden, last hidden, weighted sum of last four, concatenation of last four,
weighted sum of all twelve) with fine-tuning (96.4 dev F1; concatenating the last four: 96.1). Here, with the
4-layer BERT shipped in lmlib/pretrained/bert_imdb/ (so "the last four" are all layers) and a linear probe instead
of a BiLSTM (what the features say by themselves):

* token level: part-of-speech tags on UD English-EWT (17 UPOS tags). Each word is represented by the vector of its
  first word piece (Devlin et al. §5.3 do the same for NER). The probe trains on ``pos_train`` sentences of the
  train split and is tested on the first ``pos_test`` sentences of the test split; the fine-tuned row trains the
  whole BERT plus a linear token layer on the same sentences;
* sequence level: IMDb sentiment from the [CLS] vector or the mean over the real tokens of one layer (and from the
  pooled [CLS], tanh(h_L W_p + b_p)), 1,000 balanced training reviews and the same 1,000 test reviews as
  bench_bert_finetune.py, with the same truncation (the first and last 63 word pieces).

Every feature set is also measured on the same architecture with random weights, the baseline that shows how much
of a probe's accuracy comes from pretraining. Probes: multinomial logistic regression on standardised features,
full-batch Adam; deterministic given the features.

    LMLIB_DATA_DIR=... nice -n 10 .venv/bin/python tests/benchmarks/bench_bert_features.py
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from common import load, machine, mean_se, write_result

from lmlib.data import load_imdb, load_ud_pos
from lmlib.models.bert import Bert, BertConfig
from lmlib.recipes import bert as B
from lmlib.recipes.ulmfit import sample_balanced
from lmlib.runtime import eval_mode, seed_everything
from lmlib.training.callbacks import GradientClipping, LRSchedule
from lmlib.training.trainer import BatchResult, Trainer

SETTINGS = dict(pos_train=2000, pos_test=1000, pos_max_len=128, imdb_train=1000, imdb_test=1000, imdb_seed=0,
                imdb_max_len=B.FINETUNE_RECIPE["max_len"], probe=dict(steps=300, lr=0.05, weight_decay=1e-4),
                finetune_pos=dict(epochs=2, batch_size=16, lr=3e-4, warmup_frac=0.1), threads=1)


# -- token level: UD part of speech ---------------------------------------------------------------------------

def pos_inputs(tokenizer, sentences, max_len):
    """Per sentence: ``[CLS] pieces [SEP]``, the position of each word's first piece and its tag; words past
    ``max_len − 2`` pieces are dropped."""
    cls_id, sep_id, unk = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", tokenizer.unk_token))
    out = []
    for sentence in sentences:
        ids, firsts, tags = [cls_id], [], []
        for word, tag in sentence:
            pieces = tokenizer.encode(word) or [unk]
            if len(ids) + len(pieces) > max_len - 1:
                break
            firsts.append(len(ids))
            tags.append(tag)
            ids.extend(pieces)
        out.append((ids + [sep_id], firsts, tags))
    return out


def padded(rows, pad):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, :len(r)] = torch.tensor(r)
        mask[k, :len(r)] = 1
    return ids, mask


@torch.no_grad()
def word_states(model: Bert, encoded, pad, batch_size=64):
    """(num_layers + 1) tensors (words, d_model): h_0..h_L at every word's first piece."""
    layers = [[] for _ in range(model.config.num_layers + 1)]
    with eval_mode(model):
        for i in range(0, len(encoded), batch_size):
            chunk = encoded[i: i + batch_size]
            ids, mask = padded([c[0] for c in chunk], pad)
            out = model(ids, attention_mask=mask)
            rows = torch.tensor([k for k, c in enumerate(chunk) for _ in c[1]])
            cols = torch.tensor([p for c in chunk for p in c[1]])
            for layer, h in enumerate(out.hidden_states):
                layers[layer].append(h[rows, cols])
    return [torch.cat(x) for x in layers]


def feature_sets(states):
    """Table 7's choices for a model with L layers (h_0 = embeddings): each layer, the sum and concatenation of
    the last four (all layers when L <= 4)."""
    L = len(states) - 1
    last4 = states[max(1, L - 3):]
    sets = {"embeddings (h0)": states[0]}
    for layer in range(1, L + 1):
        sets[f"layer {layer}" + (" (last)" if layer == L else "")] = states[layer]
    sets[f"sum of last {len(last4)}"] = torch.stack(last4).sum(0)
    sets[f"concat of last {len(last4)}"] = torch.cat(last4, -1)
    return sets


def linear_probe(x_train, y_train, x_test, y_test, num_classes, steps, lr, weight_decay):
    """Accuracy of multinomial logistic regression on standardised features (full-batch Adam)."""
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(x_train.size(1), num_classes, generator=g) * 0.01).requires_grad_()
    b = torch.zeros(num_classes, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(x_train @ w + b, y_train).backward()
        opt.step()
    with torch.no_grad():
        return ((x_test @ w + b).argmax(-1) == y_test).float().mean().item()


class TokenTagger(torch.nn.Module):
    """Fine-tuning for tagging (Devlin et al. §5.3): a linear layer on the last hidden vector of each word's first
    piece; every weight trains."""

    def __init__(self, bert: Bert, num_tags: int):
        super().__init__()
        self.bert, self.head = bert, torch.nn.Linear(bert.config.d_model, num_tags)

    def forward(self, ids, mask, rows, cols):
        return self.head(self.bert(ids, attention_mask=mask).last_hidden_state[rows, cols])


def tagging_batches(encoded, tag_ids, batch_size, pad, seed):
    order = torch.randperm(len(encoded), generator=torch.Generator().manual_seed(seed)).tolist()
    batches = []
    for i in range(0, len(order), batch_size):
        chunk = [encoded[j] for j in order[i: i + batch_size]]
        ids, mask = padded([c[0] for c in chunk], pad)
        rows = torch.tensor([k for k, c in enumerate(chunk) for _ in c[1]])
        cols = torch.tensor([p for c in chunk for p in c[1]])
        y = torch.tensor([tag_ids[t] for c in chunk for t in c[2]])
        batches.append((ids, mask, rows, cols, y))
    return batches


def tagging_loss(model, batch):
    ids, mask, rows, cols, y = batch
    logits = model(ids, mask, rows, cols)
    return BatchResult(F.cross_entropy(logits, y), n=y.numel(), correct=int((logits.argmax(-1) == y).sum()))


def finetune_pos(encoded_train, encoded_test, tag_ids, pad, seed):
    r = SETTINGS["finetune_pos"]
    seed_everything(seed)
    bert, _ = B.classifier(pretrained=True)
    model = TokenTagger(bert.bert, len(tag_ids))
    per_epoch = math.ceil(len(encoded_train) / r["batch_size"])
    T = r["epochs"] * per_epoch
    warmup = max(1, int(r["warmup_frac"] * T))
    opt = torch.optim.AdamW(model.parameters(), lr=r["lr"], weight_decay=0.01)
    trainer = Trainer(model, opt, tagging_loss, [LRSchedule(lambda t: B.warmup_linear(t, T, warmup)),
                                                 GradientClipping(1.0)], device="cpu")
    trainer.fit(lambda epoch: tagging_batches(encoded_train, tag_ids, r["batch_size"], pad, seed + 1000 * epoch),
                epochs=r["epochs"])
    return trainer.evaluate(tagging_batches(encoded_test, tag_ids, 64, pad, 0)).accuracy


# -- sequence level: IMDb sentiment ---------------------------------------------------------------------------

@torch.no_grad()
def review_features(model: Bert, inputs, pad, batch_size=64):
    """Per layer: the [CLS] vector and the mean over real tokens; plus the pooled [CLS]."""
    cls = [[] for _ in range(model.config.num_layers + 1)]
    mean = [[] for _ in range(model.config.num_layers + 1)]
    pooled = []
    with eval_mode(model):
        for i in range(0, len(inputs), batch_size):
            ids, mask = padded(inputs[i: i + batch_size], pad)
            out = model(ids, attention_mask=mask)
            m = mask.unsqueeze(-1).float()
            for layer, h in enumerate(out.hidden_states):
                cls[layer].append(h[:, 0])
                mean[layer].append((h * m).sum(1) / m.sum(1))
            pooled.append(out.pooled)
    L = model.config.num_layers
    sets = {}
    for layer in range(L + 1):
        name = "embeddings (h0)" if layer == 0 else f"layer {layer}" + (" (last)" if layer == L else "")
        sets[f"[CLS], {name}"] = torch.cat(cls[layer])
        sets[f"mean, {name}"] = torch.cat(mean[layer])
    sets["pooled [CLS] (tanh pooler)"] = torch.cat(pooled)
    sets[f"mean, concat of last {min(4, L)}"] = torch.cat([torch.cat(mean[k]) for k in range(max(1, L - 3), L + 1)], -1)
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finetune-seeds", nargs="*", type=int, default=[0, 1])
    args = parser.parse_args()
    torch.set_num_threads(SETTINGS["threads"])
    start = time.perf_counter()
    sha = B.pretrain_report()["sha256"][f"{B.NAME}.safetensors"]
    pretrained, tokenizer = B.load_pretrained()
    pad = tokenizer.token_to_id("[PAD]")
    seed_everything(0)
    random_bert = Bert(BertConfig(**pretrained.config.__dict__)).eval()
    models = {"pretrained": pretrained, "random": random_bert}

    # POS
    train_sents = load_ud_pos("train")[: SETTINGS["pos_train"]]
    test_sents = load_ud_pos("test")[: SETTINGS["pos_test"]]
    enc_train = pos_inputs(tokenizer, train_sents, SETTINGS["pos_max_len"])
    enc_test = pos_inputs(tokenizer, test_sents, SETTINGS["pos_max_len"])
    tags = sorted({t for c in enc_train for t in c[2]} | {t for c in enc_test for t in c[2]})
    tag_ids = {t: i for i, t in enumerate(tags)}
    y_train = torch.tensor([tag_ids[t] for c in enc_train for t in c[2]])
    y_test = torch.tensor([tag_ids[t] for c in enc_test for t in c[2]])
    majority = (y_test == torch.bincount(y_train).argmax()).float().mean().item()
    pos_rows = []
    for init, model in models.items():
        s_train, s_test = feature_sets(word_states(model, enc_train, pad)), feature_sets(word_states(model, enc_test, pad))
        for name in s_train:
            acc = linear_probe(s_train[name], y_train, s_test[name], y_test, len(tags), **SETTINGS["probe"])
            pos_rows.append(dict(init=init, features=name, dims=s_train[name].size(1), accuracy=acc))
            print(f"POS {init:10s} {name:24s} {acc:.4f}", flush=True)
    ft = []
    for seed in args.finetune_seeds:
        ft.append(finetune_pos(enc_train, enc_test, tag_ids, pad, seed))
        print(f"POS fine-tuned seed {seed}: {ft[-1]:.4f}", flush=True)

    # IMDb sentiment
    train = load_imdb("train")
    texts, labels = sample_balanced(train.texts, train.labels, SETTINGS["imdb_train"], seed=SETTINGS["imdb_seed"])
    test = load_imdb("test")
    order = torch.randperm(len(test.texts), generator=torch.Generator().manual_seed(0))[: SETTINGS["imdb_test"]].tolist()
    test_texts, test_labels = [test.texts[i] for i in order], [test.labels[i] for i in order]
    x_train = B.encode_single(tokenizer, texts, SETTINGS["imdb_max_len"])
    x_test = B.encode_single(tokenizer, test_texts, SETTINGS["imdb_max_len"])
    sent_rows = []
    for init, model in models.items():
        f_train, f_test = review_features(model, x_train, pad), review_features(model, x_test, pad)
        for name in f_train:
            acc = linear_probe(f_train[name], torch.tensor(labels), f_test[name], torch.tensor(test_labels), 2,
                               **SETTINGS["probe"])
            sent_rows.append(dict(init=init, features=name, dims=f_train[name].size(1), accuracy=acc))
            print(f"IMDb {init:10s} {name:40s} {acc:.4f}", flush=True)

    n_words = int(y_test.numel())
    ft_mean, ft_se = mean_se(ft) if ft else (None, None)
    write_result("bert_features", dict(
        what="BERT features vs fine-tuning (Devlin et al. 2019, Table 7) with the shipped IMDb BERT: linear probes "
             "on frozen layers for UD English-EWT POS tags and IMDb sentiment, pretrained vs random weights",
        settings=SETTINGS, checkpoint_sha256=sha, machine=machine(), load=load(),
        pos=dict(tags=tags, test_words=n_words, majority_tag_accuracy=majority,
                 probe_se_note="binomial standard error of one accuracy a on n test words: sqrt(a(1-a)/n)",
                 rows=pos_rows, finetuned=dict(seeds=args.finetune_seeds, accuracy=ft, mean=ft_mean, se=ft_se)),
        imdb=dict(train_reviews=len(texts), test_reviews=len(test_texts), rows=sent_rows),
        seconds=round(time.perf_counter() - start, 1)))


if __name__ == "__main__":
    main()
