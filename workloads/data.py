"""A synthetic instruction data set whose `__getitem__` does real CPU work.

Each item is generated from its index (deterministic, no files): an instruction/response pair
in the dolly-15k style, rendered into a prompt template and tokenised by a small word-piece
tokeniser (regex split, vocabulary lookup, hashed 4-character pieces for unknown words).
`item_cost` adds that many extra tokenisation passes over the whole sample, standing in for a
heavier pipeline (augmentation, filtering, re-validation), so data loading can become the
bottleneck that `--num-workers` relieves. `item_ms` plants a cost known in advance instead: the
sample keeps re-tokenising until it has taken that many milliseconds of wall time in all, so a
batch costs `batch_size * item_ms` on any CPU (where generating it takes less).
"""

from __future__ import annotations

import random
import re
import time
import zlib

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

PAD, BOS, EOS, UNK = 0, 1, 2, 3
N_SPECIAL = 4
IGNORE = -100

_WORD_TEXT = (
    "the a an and or but if then because while when where which who what how why this that "
    "these those it its is are was were be been being have has had do does did can could will "
    "would should may might must shall model data train training loss gradient memory cpu gpu "
    "kernel thread cluster node job queue batch sequence token tokens layer layers attention "
    "network weight weights optimizer step steps time fast slow large small first second last "
    "next previous answer question explain describe summarize list compare write give show "
    "reason example examples result results value values number numbers text word words "
    "sentence paragraph document article story poem letter email report table chart city "
    "country river mountain ocean forest animal plant food water fire air earth light sound "
    "music art history science math physics chemistry biology language code program function "
    "file system process user people person child children family friend work school book "
    "world year day night morning evening week month good bad new old high low long short "
    "important different same other many few more most less least very also only just even "
    "still already always never often sometimes usually about over under between through "
    "during before after above below into onto from with without within across along"
)
_WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())

_TASKS = (
    "Summarize the following {noun} about {topic} in {n} sentences.",
    "Explain how {topic} works to a {audience}.",
    "Write a short {noun} about {topic} and {topic2}.",
    "List {n} facts about {topic}.",
    "Compare {topic} with {topic2} and give an example.",
    "Answer the question: why is {topic} important for {audience}?",
)
_NOUNS = ("article", "story", "report", "email", "poem", "paragraph", "letter")
_AUDIENCES = ("child", "student", "engineer", "manager", "scientist", "beginner")
_SYLLABLES = ("ka", "lo", "mi", "zor", "tha", "vin", "qu", "rel", "dan", "osh", "pri", "gu")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


class WordPieceTokenizer:
    """Known words map to their own id; other words split into hashed 4-character pieces."""

    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 16:
            raise ValueError(f"vocab_size must be >= 16, got {vocab_size}")
        self.vocab_size = vocab_size
        n_known = min(len(_WORDS), (vocab_size - N_SPECIAL) // 2)
        self.known = {w: N_SPECIAL + i for i, w in enumerate(_WORDS[:n_known])}
        self.piece_base = N_SPECIAL + n_known
        self.n_pieces = vocab_size - self.piece_base

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in _TOKEN_RE.findall(text.lower()):
            known = self.known.get(word)
            if known is not None:
                ids.append(known)
                continue
            for start in range(0, len(word), 4):
                piece = word[start : start + 4].encode()
                ids.append(self.piece_base + zlib.crc32(piece) % self.n_pieces)
        return ids


def _made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def make_sample(rng: random.Random, n_words: int) -> tuple[str, str]:
    """One instruction and a response of about `n_words` words."""
    topic, topic2 = _made_up_word(rng), rng.choice(_WORDS)
    instruction = rng.choice(_TASKS).format(
        noun=rng.choice(_NOUNS),
        topic=topic,
        topic2=topic2,
        n=rng.randint(2, 7),
        audience=rng.choice(_AUDIENCES),
    )
    words: list[str] = []
    while len(words) < n_words:
        sentence_len = rng.randint(6, 18)
        sentence = [
            _made_up_word(rng) if rng.random() < 0.15 else rng.choice(_WORDS)
            for _ in range(sentence_len)
        ]
        sentence[0] = sentence[0].capitalize()
        words.extend(sentence)
        words[-1] += rng.choice((".", ".", "!", "?", ","))
    return instruction, " ".join(words[:n_words])


PROMPT_TEMPLATE = "### Instruction:\n{instruction}\n\n### Response:\n"


class SyntheticInstructions(Dataset[dict[str, Tensor]]):
    """`length` tokenised instruction/response samples of exactly `seq_len` positions.

    Loss is computed on response tokens only (prompt and padding labels are -100).
    """

    def __init__(
        self,
        length: int,
        seq_len: int,
        vocab_size: int,
        seed: int = 0,
        item_cost: int = 0,
        item_ms: float = 0.0,
    ) -> None:
        self.length = length
        self.seq_len = seq_len
        self.seed = seed
        self.item_cost = item_cost
        self.item_ms = item_ms
        self.tokenizer = WordPieceTokenizer(vocab_size)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(index)
        start = time.perf_counter()
        rng = random.Random(self.seed * 1_000_003 + index)
        instruction, response = make_sample(rng, n_words=self.seq_len)
        prompt_text = PROMPT_TEMPLATE.format(instruction=instruction)
        prompt = [BOS, *self.tokenizer.encode(prompt_text)]
        answer = [*self.tokenizer.encode(response), EOS]
        for _ in range(self.item_cost):  # the heavier pipeline: full re-tokenisation passes
            again = self.tokenizer.encode(prompt_text + response)
            if len(again) != len(prompt) + len(answer) - 2:
                raise RuntimeError("tokeniser is not deterministic")
        if self.item_ms > 0:
            spend_until(start + self.item_ms / 1e3, self.tokenizer, response)
        ids = (prompt + answer)[: self.seq_len + 1]
        targets = ([IGNORE] * len(prompt) + answer)[: self.seq_len + 1]
        pad = self.seq_len + 1 - len(ids)
        ids += [PAD] * pad
        targets += [IGNORE] * pad
        return {
            "input_ids": torch.tensor(ids[:-1], dtype=torch.long),
            "labels": torch.tensor(targets[1:], dtype=torch.long),
        }


def spend_until(deadline: float, tokenizer: WordPieceTokenizer, text: str) -> None:
    """Real CPU work (tokenising slices of `text`, a few µs each) until `perf_counter()` reaches
    `deadline`: a planted cost that profilers see as the process computing, not sleeping."""
    piece = text[:200]
    while time.perf_counter() < deadline:
        tokenizer.encode(piece)


def make_loader(
    dataset: SyntheticInstructions,
    batch_size: int,
    num_workers: int,
    pin_memory: bool,
    sampler: Sampler[int] | None = None,
) -> DataLoader[dict[str, Tensor]]:
    """In-order batches (of this rank's shard when `sampler` says which items); `num_workers` > 0
    prepares them in worker processes ahead of time."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        sampler=sampler,
        drop_last=True,
        num_workers=num_workers,
        pin_memory=pin_memory,
        prefetch_factor=2 if num_workers > 0 else None,
    )
