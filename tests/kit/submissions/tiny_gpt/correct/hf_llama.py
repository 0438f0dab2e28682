"""Hugging Face's LlamaForCausalLM written small: LlamaRMSNorm, rotate_half RoPE with cos and sin of cat(freqs,
freqs), q_proj/k_proj/v_proj/o_proj and repeat_kv, LlamaMLP (down_proj(silu(gate_proj(x)) * up_proj(x))),
scaled_dot_product_attention with a boolean mask, the legacy past_key_values (a tuple of (k, v) per layer), and
_init_weights' N(0, initializer_range = 0.02) for every Linear and the Embedding."""

import torch
import torch.nn.functional as F
from torch import nn


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        freqs = position_ids[:, None].float() * self.inv_freq[None, :]  # (T, dim // 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_heads, self.num_key_value_heads = num_heads, num_key_value_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, past_key_value):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        past = 0
        if past_key_value is not None:
            past = past_key_value[0].shape[-2]
            key_states = torch.cat([past_key_value[0], key_states], dim=-2)
            value_states = torch.cat([past_key_value[1], value_states], dim=-2)
        present = (key_states, value_states)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        causal_mask = torch.ones(q_len, past + q_len, dtype=torch.bool, device=hidden_states.device).tril(past)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, attn_mask=causal_mask)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), present


class LlamaMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads):
        super().__init__()
        self.self_attn = LlamaAttention(hidden_size, num_heads, num_key_value_heads)
        self.mlp = LlamaMLP(hidden_size, 8 * hidden_size // 3)
        self.input_layernorm = LlamaRMSNorm(hidden_size)
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size)

    def forward(self, hidden_states, position_embeddings, past_key_value):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, position_embeddings, past_key_value)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)  # the MLP's input norm, despite its name
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states, present


class TinyGPT(nn.Module):
    def __init__(self, vocab, dim=64, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=128, initializer_range=0.02):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.initializer_range = initializer_range
        self.tok_embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LlamaDecoderLayer(dim, n_heads, n_kv_heads) for _ in range(n_layers))
        self.norm = LlamaRMSNorm(dim)
        self.rotary_emb = LlamaRotaryEmbedding(dim // n_heads)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        std = self.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)

    def forward(self, idx, past_key_values=None):
        past_seen_tokens = 0 if past_key_values is None else past_key_values[0][0].shape[-2]
        if past_seen_tokens + idx.shape[1] > self.max_seq_len:
            raise ValueError("longer than max_seq_len")
        hidden_states = self.tok_embed(idx)
        position_ids = torch.arange(past_seen_tokens, past_seen_tokens + idx.shape[1], device=idx.device)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        next_cache = ()
        for i, decoder_layer in enumerate(self.layers):
            hidden_states, present = decoder_layer(
                hidden_states, position_embeddings, None if past_key_values is None else past_key_values[i])
            next_cache += (present,)
        return self.head(self.norm(hidden_states)), next_cache


@torch.no_grad()
def generate(model, idx, max_new_tokens):
    logits, past_key_values = model(idx)
    for _ in range(max_new_tokens):
        next_tokens = logits[:, -1, :].argmax(dim=-1)
        idx = torch.cat([idx, next_tokens[:, None]], dim=-1)
        logits, past_key_values = model(next_tokens[:, None], past_key_values)
    return idx
