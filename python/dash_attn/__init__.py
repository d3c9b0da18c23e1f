"""dash_attn: attention for Hopper GPUs with a bitwise deterministic, fast backward."""

from .interface import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                        flash_attn_varlen_func, scaled_dot_product_attention)
from .integrations import register_transformers, register_transformers_lazily

__version__ = "0.1.0"
__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "flash_attn_varlen_func",
           "scaled_dot_product_attention", "register_transformers"]

# attn_implementation="dash_attn" without importing transformers here.
register_transformers_lazily()
