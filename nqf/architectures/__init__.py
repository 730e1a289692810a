r"""Modules built from interchangeable neurons, each with its closed-form structure matrix $A(x)$
(Sec. 3: Table 1, Table 3, App. B.2-B.4, Sec. 7), and the registry of which the tables are views.
"""

from ._attention import multihead_attention, qk_attention
from ._attention_rows import (
    mha_quartic_term, mha_slices, single_head_attention_logits, stack_query_key, tied_qk_attention,
)
from ._base import Architecture
from ._deep import deep_attention, deep_mlp, deep_single_head_attention
from ._fourier import fourier_features, fourier_mlp, raw_tanh_mlp
from ._modules import cnn, diagonal_linear_network, gaussian_linear_part, two_layer_mlp
from ._registry import REGISTRY, TABLE1, to_nqf_weights
from ._symmetric import output_nonlinearity_mlp, symmetric_examples

__all__ = [
    # every row of Tables 1 and 3 is built by ``REGISTRY[i].build`` (its constructor: ``build.func``)
    "Architecture", "REGISTRY", "TABLE1", "to_nqf_weights",
    "two_layer_mlp", "cnn", "diagonal_linear_network", "gaussian_linear_part",
    # attention (Props. 2-4, Eq. 73)
    "multihead_attention", "qk_attention", "single_head_attention_logits", "tied_qk_attention", "stack_query_key",
    "mha_slices", "mha_quartic_term",
    # coupled neurons, deep modules (Def. 2), the Fourier MLP (Sec. 7)
    "output_nonlinearity_mlp", "symmetric_examples", "deep_mlp", "deep_attention",
    "deep_single_head_attention", "fourier_features", "fourier_mlp", "raw_tanh_mlp",
]
