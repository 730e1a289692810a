r"""Modules built from interchangeable neurons, each with its closed-form structure matrix $A(x)$
(Sec. 3: Table 1, Table 3, App. B.2-B.4, Sec. 7), and the registry of which the tables are views.
"""

from ._attention import multihead_attention as multihead_attention
from ._attention import qk_attention as qk_attention
from ._attention_rows import mha_quartic_term as mha_quartic_term
from ._attention_rows import mha_slices as mha_slices
from ._attention_rows import single_head_attention_logits as single_head_attention_logits
from ._attention_rows import stack_query_key as stack_query_key
from ._attention_rows import tied_qk_attention as tied_qk_attention
from ._base import Architecture as Architecture
from ._deep import deep_attention as deep_attention
from ._deep import deep_mlp as deep_mlp
from ._deep import deep_single_head_attention as deep_single_head_attention
from ._fourier import fourier_features as fourier_features
from ._fourier import fourier_mlp as fourier_mlp
from ._fourier import raw_tanh_mlp as raw_tanh_mlp
from ._modules import cnn as cnn
from ._modules import diagonal_linear_network as diagonal_linear_network
from ._modules import gaussian_linear_part as gaussian_linear_part
from ._modules import two_layer_mlp as two_layer_mlp
from ._registry import REGISTRY as REGISTRY
from ._registry import TABLE1 as TABLE1
from ._registry import to_nqf_weights as to_nqf_weights
from ._symmetric import output_nonlinearity_mlp as output_nonlinearity_mlp
from ._symmetric import symmetric_examples as symmetric_examples

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
