"""Hugging Face models from configs (random weights, nothing downloaded) for the broad fidelity run
(scripts/gpu/fidelity_broad_h200.sh): an encoder classifier, an encoder-decoder and three decoders whose
families no earlier fidelity run measured. As a user names one:
--models scripts/gpu/broad_models.py:qwen3_0_6b --input-shape 256 (token ids below each model's vocabulary)."""
import transformers


def bert_base_classifier():
    """BERT-base (12 layers of width 768) classifying sequences into 2 labels."""
    return transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=2))


def t5_small():
    """T5-small's shape (6 + 6 layers of width 512, vocabulary 32128): labels with decoder inputs shifted."""
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128, use_cache=False))


def qwen3_0_6b():
    """Qwen3-0.6B's shape: 28 layers of width 1024, GQA 16/8 heads of 128, vocabulary 151936, tied."""
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, tie_word_embeddings=True,
        use_cache=False))


def mistral_small():
    """Mistral's architecture (RoPE, GQA, sliding window) at 12 layers of width 1024, vocabulary 32000."""
    return transformers.MistralForCausalLM(transformers.MistralConfig(
        vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=12, num_attention_heads=16,
        num_key_value_heads=4, max_position_embeddings=4096, sliding_window=4096, use_cache=False))


def pythia_410m():
    """Pythia-410M's shape (GPT-NeoX: 24 layers of width 1024, 16 heads, parallel residual, vocabulary 50304)."""
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=50304, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
        max_position_embeddings=2048, rotary_pct=0.25, use_parallel_residual=True, tie_word_embeddings=False,
        hidden_dropout=0.0, attention_dropout=0.0, use_cache=False))
