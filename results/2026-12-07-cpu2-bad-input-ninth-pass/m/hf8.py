"""Tiny Hugging Face models built offline from configs (no download)."""
import torch
def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64)).eval()
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, vocab_size=128, max_position_embeddings=64))
def bert_cls():
    from transformers import BertConfig, BertForSequenceClassification
    return BertForSequenceClassification(BertConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=128, max_position_embeddings=64, num_labels=3))
