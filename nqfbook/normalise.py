"""Normalisation of executed notebooks: the same inputs give byte-identical pages.

Bump :data:`NORMALISATION_VERSION` whenever :func:`normalise_executed` changes what it keeps:
it is part of the cache key, so every chapter is then re-executed and re-normalised.
"""

from __future__ import annotations

from typing import Optional

NORMALISATION_VERSION = 3
_VOLATILE_NB_KEYS = ("start_time", "end_time", "duration", "input_path", "output_path",
                     "environment_variables", "exception")
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _drop_stderr(nb) -> None:
    """Remove stderr streams (progress bars, warnings) from the published notebook and its download."""
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def hide_injected_parameters(nb) -> None:
    """Leave papermill's injected-parameters cell off the published page.

    It repeats the chapter's ``parameters`` cell (shown collapsed, tagged ``hide-input``) with the
    values of this run, machine-relative output paths included; the downloaded notebook keeps it.
    """
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [t for t in tags if t != "hide-cell"] + ["remove-cell"]


def normalise_executed(nb, source_ids: Optional[set] = None) -> None:
    """Make an executed notebook a function of its inputs only (byte-reproducible pages).

    Removes per-cell timing metadata (nbclient ``execution``, papermill start/end/duration), the
    notebook-level run times and machine paths papermill records, progress-bar widgets (random
    model ids, wall-clock rates) and stderr; merges consecutive stdout chunks (how a kernel splits
    its stream into messages depends on timing); gives cells that are not in the source notebook
    (papermill's injected-parameters cell, random ids otherwise) an id from their position.
    """
    for i, cell in enumerate(nb.cells):
        if "id" in cell and (source_ids is None or cell["id"] not in source_ids):
            tags = cell.get("metadata", {}).get("tags", [])
            if "injected-parameters" in tags:
                cell["id"] = "injected-parameters"
            elif source_ids is not None:
                cell["id"] = f"cell-{i}"
    pm = nb.metadata.get("papermill")
    if isinstance(pm, dict):
        for k in _VOLATILE_NB_KEYS:
            pm.pop(k, None)
    nb.metadata.pop("widgets", None)
    _drop_stderr(nb)
    for cell in nb.cells:
        md = cell.get("metadata", {})
        md.pop("execution", None)
        md.pop("papermill", None)
        if cell.get("cell_type") != "code":
            continue
        merged = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "display_data" and _WIDGET_MIME in o.get("data", {}):
                continue
            if (o.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                    and merged[-1].get("name") == o.get("name")):
                merged[-1]["text"] = merged[-1]["text"] + o["text"]
                continue
            merged.append(o)
        cell.outputs = merged
