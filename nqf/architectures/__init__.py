r"""Modules built from interchangeable neurons, each with its closed-form structure matrix $A(x)$
(Sec. 3: Table 1, Table 3, App. B.2), and the registry from which the tables are views.
"""

from ._attention import multihead_attention as multihead_attention
from ._attention import qk_attention as qk_attention
from ._attention_rows import single_head_attention_logits as single_head_attention_logits
from ._attention_rows import tied_qk_attention as tied_qk_attention
from ._attention_rows import mha_slices as mha_slices
from ._attention_rows import mha_quartic_term as mha_quartic_term
from ._base import Architecture as Architecture
from ._modules import two_layer_mlp as two_layer_mlp
from ._modules import cnn as cnn
from ._modules import mixture_of_experts as mixture_of_experts
from ._modules import phase_retrieval as phase_retrieval
from ._modules import diagonal_linear_network as diagonal_linear_network
from ._quadratic_rows import psd_matrix_sensing as psd_matrix_sensing
from ._quadratic_rows import rectangular_matrix_sensing as rectangular_matrix_sensing
from ._quadratic_rows import matrix_completion as matrix_completion
from ._quadratic_rows import word_context_embedding as word_context_embedding
from ._quadratic_rows import quadratic_network as quadratic_network
from ._quadratic_rows import bilinear_sequence_regression as bilinear_sequence_regression
from ._quadratic_rows import linear_ssl_augmentation as linear_ssl_augmentation
from ._registry import table1_architectures as table1_architectures
from ._registry import to_nqf_weights as to_nqf_weights
from ._registry import TABLE3 as TABLE3
from ._registry import TABLE1 as TABLE1
from ._base import CustomArchitecture as CustomArchitecture
from ._fourier import FourierMLP as FourierMLP
from ._fourier import fourier_mlp as fourier_mlp
from ._fourier import fourier_features as fourier_features
from ._fourier import fourier_mlp_batch as fourier_mlp_batch
from ._fourier import raw_tanh_mlp as raw_tanh_mlp
from ._deep import DeepArchitecture as DeepArchitecture
from ._deep import deep_mlp as deep_mlp
from ._deep import deep_attention as deep_attention
from ._deep import deep_single_head_attention as deep_single_head_attention
from ._modules import gaussian_linear_part as gaussian_linear_part
from ._symmetric import output_nonlinearity_mlp as output_nonlinearity_mlp
from ._symmetric import symmetric_examples as symmetric_examples
from ._attention_rows import stack_query_key as stack_query_key
from ._base import custom_architecture as custom_architecture

__all__ = [
    "Architecture",
    "bilinear_sequence_regression",
    "cnn",
    "custom_architecture",
    "CustomArchitecture",
    "deep_attention",
    "deep_mlp",
    "deep_single_head_attention",
    "DeepArchitecture",
    "diagonal_linear_network",
    "fourier_features",
    "fourier_mlp",
    "fourier_mlp_batch",
    "FourierMLP",
    "gaussian_linear_part",
    "linear_ssl_augmentation",
    "matrix_completion",
    "mha_quartic_term",
    "mha_slices",
    "mixture_of_experts",
    "multihead_attention",
    "output_nonlinearity_mlp",
    "phase_retrieval",
    "psd_matrix_sensing",
    "qk_attention",
    "quadratic_network",
    "raw_tanh_mlp",
    "rectangular_matrix_sensing",
    "single_head_attention_logits",
    "stack_query_key",
    "symmetric_examples",
    "TABLE1",
    "table1_architectures",
    "TABLE3",
    "tied_qk_attention",
    "to_nqf_weights",
    "two_layer_mlp",
    "word_context_embedding",
]

# Importable as nqf.architectures.X by the rooms above and by the tests, but not the documented surface
# (not in __all__): the rest of the room is private.
from ._base import feedforward_structure as feedforward_structure
from ._modules import linear_expert as linear_expert
from ._registry import Table3Row as Table3Row
from ._registry import REGISTRY as REGISTRY
from ._symmetric import normalised_mlp as normalised_mlp
from ._symmetric import gated_mlp as gated_mlp
