"""A Pythia-1B-shaped decoder (GPT-NeoX, 16 layers of width 2048, 8 heads, FFN 8192, vocabulary 50304) from
a config: random weights, nothing downloaded. As a user names it:
--model scripts/gpu/pythia_1b.py:pythia_1b --input-shape 1024 --input-dtype int64 --token-range 50304."""
import transformers


def pythia_1b():
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=8, intermediate_size=8192,
        max_position_embeddings=2048, rotary_pct=0.25, use_parallel_residual=True, tie_word_embeddings=False,
        hidden_dropout=0.0, attention_dropout=0.0, use_cache=False))
