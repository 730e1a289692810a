"""Plot helpers shared by the chapters (style itself lives in :mod:`nqfbook.kit`)."""

from __future__ import annotations

import numpy as np

from nqf._checks import require_value


def structure_heatmap(ax, A, title: str, *, blocks: list[int] | None = None):
    r"""Show a structure matrix $A(x)$ as a diverging heat map (Fig. 1, data version).

    Entries are divided by $\max|A|$, so panels share one colour scale $[-1, 1]$.
    Zero entries are drawn white, so the sparsity pattern that carries the
    architecture (Sec. 3) is what the eye sees. ``blocks`` are the sizes of the
    parameter groups of one neuron, drawn as separating lines.
    """
    A = np.asarray(A)
    require_value("A", A.ndim == 2 and A.shape[0] == A.shape[1], "a square matrix", f"shape {A.shape}")
    vmax = float(np.max(np.abs(A))) or 1.0
    im = ax.imshow(np.ma.masked_where(A == 0, A / vmax), cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                   interpolation="nearest")
    ax.set_facecolor("white")
    if blocks:
        edges = np.cumsum(blocks)[:-1] - 0.5
        for e in edges:
            ax.axhline(e, color="0.6", linewidth=0.6)
            ax.axvline(e, color="0.6", linewidth=0.6)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    return im
