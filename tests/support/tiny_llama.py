"""Write a tiny Llama model folder for vLLM's ``--load-format dummy``: a ``config.json`` and a tokenizer.

No weights: vLLM fills them with random values, so the text it writes is noise, but every step of a
real engine runs (tokenisation, scheduling, the KV cache, prefill and decode, the metrics). The
tokenizer is a byte-level BPE trained by the ``tokenizers`` library on the repository's own docs, so
nothing is downloaded. Run by the test tooling with the engine's Python (which has ``tokenizers``):
``python tests/support/tiny_llama.py OUT_DIR DOC.md...``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 4096
# Small enough to serve a few hundred tokens per second on two cores, a Llama in every other respect.
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 64,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
SPECIAL = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2: the config's bos and eos


def train(docs: list[Path]) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tokenizer.train([str(p) for p in docs], trainer)
    return tokenizer


def write(out: Path, docs: list[Path]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train(docs)
    tokenizer.save(str(out / "tokenizer.json"))  # type: ignore[attr-defined]
    config = dict(CONFIG, vocab_size=tokenizer.get_vocab_size())  # type: ignore[attr-defined]
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": CONFIG["max_position_embeddings"], "add_bos_token": False,
    }, indent=1))  # fmt: skip
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))


if __name__ == "__main__":
    write(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
