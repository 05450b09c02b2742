"""A Hugging Face Llama of about 1.1B parameters from a config (random weights, nothing downloaded), as a
user names it: --model scripts/gpu/llama_1b.py:llama_1b --input-shape 512 --input-dtype int64 --token-range 32000.
Word embeddings untied, as Llama's config has them by default."""
import transformers


def llama_1b():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=512, tie_word_embeddings=False, use_cache=False))


def gpt2_1b():
    """GPT-2's architecture at about 1.1B parameters (20 layers of width 2048), untied, no dropout: the
    Hugging Face model that torch 2.11's pipeline() can split (it cannot split the Llama above)."""
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=32000, n_positions=512, n_embd=2048, n_layer=20, n_head=16, tie_word_embeddings=False,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=None, eos_token_id=None))
