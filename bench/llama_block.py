"""One Llama-style transformer block for the end-to-end benchmark: RMSNorm,
q/k/v projections with grouped-query attention, RoPE, attention (passed in,
so every implementation runs inside the same block), output projection,
RMSNorm, SwiGLU MLP, two residual adds. Activations stay in FlashAttention's
(batch, seqlen, heads, head_dim) layout, which the projections produce
without a copy."""
import dataclasses

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Defaults: Llama-3-8B's block (hidden 4096, 32 query heads, 8 kv heads,
    head_dim 128, MLP 14336, RoPE base 500000)."""
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 14336
    rope_base: float = 500000.0
    norm_eps: float = 1e-5

    def matmul_params(self):
        """Weights that take part in a matrix product per token."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)  # q, o and k, v
        return attention + 3 * self.hidden * self.intermediate


def rope_tables(seqlen, head_dim, base, device, dtype):
    """cos and sin of the rotary angles, (1, seqlen, 1, head_dim), computed
    in fp32 and rounded once to the activation dtype."""
    inverse = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seqlen, device=device, dtype=torch.float32), inverse)
    angles = torch.cat((angles, angles), dim=-1)[None, :, None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, cos, sin):
    """Rotate-half RoPE (the Hugging Face Llama convention) on (b, s, h, d)."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = config
        linear = lambda inputs, outputs: nn.Linear(inputs, outputs, bias=False)  # noqa: E731
        self.attention_norm = nn.Parameter(torch.ones(c.hidden))
        self.q_proj = linear(c.hidden, c.heads * c.head_dim)
        self.k_proj = linear(c.hidden, c.kv_heads * c.head_dim)
        self.v_proj = linear(c.hidden, c.kv_heads * c.head_dim)
        self.o_proj = linear(c.heads * c.head_dim, c.hidden)
        self.mlp_norm = nn.Parameter(torch.ones(c.hidden))
        self.gate_proj = linear(c.hidden, c.intermediate)
        self.up_proj = linear(c.hidden, c.intermediate)
        self.down_proj = linear(c.intermediate, c.hidden)
        for module in (self.q_proj, self.k_proj, self.v_proj, self.o_proj, self.gate_proj, self.up_proj,
                       self.down_proj):
            nn.init.normal_(module.weight, std=0.02)  # Llama's initializer range

    def forward(self, x, attention, cos, sin):
        """x (batch, seqlen, hidden); attention(q, k, v) -> out, all in
        (batch, seqlen, heads, head_dim); cos/sin from rope_tables."""
        c, (batch, seqlen, _) = self.config, x.shape
        h = F.rms_norm(x, (c.hidden,), self.attention_norm, c.norm_eps)
        q = self.q_proj(h).view(batch, seqlen, c.heads, c.head_dim)
        k = self.k_proj(h).view(batch, seqlen, c.kv_heads, c.head_dim)
        v = self.v_proj(h).view(batch, seqlen, c.kv_heads, c.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        x = x + self.o_proj(attention(q, k, v).reshape(batch, seqlen, c.heads * c.head_dim))
        h = F.rms_norm(x, (c.hidden,), self.mlp_norm, c.norm_eps)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
