"""Sphinx extension: signatures of the API reference as a reader writes them.

jaxtyping annotations print in full in autodoc signatures,
``Float[jaxlib._jax.Array, 'p d'] | Float[ndarray, 'p d']``; this hook
(``autodoc-process-signature``) shortens them to ``Array['p d']`` (one entry per
distinct shape), writes ``jaxlib._jax.Array`` as ``Array`` and ``numpy.ndarray`` as
``ndarray``, and replaces function reprs used as defaults
(``<function relu at 0x7f...>``, which also change from build to build) by the
function's name; the field types napoleon writes from annotations
(``:vartype W: jax.jaxlib._jax.Array``) are shortened the same way. Integer and boolean arrays keep their dtype: ``IntArray['n']``,
``BoolArray['n']``.

The shortened names are the ones ``nitpick_ignore_regex`` in ``_config.yml`` already
ignores (``Array``, ``ndarray``, shape strings in quotes), so no cross-reference is lost.
"""

from __future__ import annotations

import re

_DTYPES = {"Float": "Array", "Real": "Array", "Shaped": "Array", "Num": "Array",
           "Int": "IntArray", "Bool": "BoolArray", "Complex": "ComplexArray"}
_ARRAY = re.compile(
    r"\b(?P<dtype>" + "|".join(_DTYPES) + r")\[\s*(?:~?(?:jaxlib\._jax|jax|jaxlib\.xla_extension|numpy|np|jax\.numpy)\.)?"
    r"(?:Array|ArrayImpl|ndarray|ArrayLike)\s*,\s*(?P<shape>'[^']*'|\"[^\"]*\")\s*\]"
)
_UNION = re.compile(r"(?P<a>\b\w*Array\['[^']*'\])(?:\s*\|\s*(?P=a))+")
_PJIT = re.compile(r"<PjitFunction of <function (?P<name>\w+)(?: at 0x[0-9a-f]+)?>>")
_FUNC = re.compile(r"<function (?P<name>[\w.<>]+?)(?:\.<locals>\.\w+)? at 0x[0-9a-f]+>")
_OBJ = re.compile(r"<(?P<name>[\w.]+) object at 0x[0-9a-f]+>")


def shorten(text: str | None) -> str | None:
    """One signature or return annotation, shortened (``None`` stays ``None``)."""
    if not text:
        return text
    text = _ARRAY.sub(lambda m: f"{_DTYPES[m.group('dtype')]}['{m.group('shape')[1:-1]}']", text)
    text = _UNION.sub(lambda m: m.group("a"), text)
    text = re.sub(r"\b(?:jax\.)?(?:jaxlib\._jax|jaxlib\.xla_extension|jax)\.Array\b", "Array", text)
    text = re.sub(r"\bequinox\._module\._better_abstract\.AbstractVar\[([^\[\]]+)\]", r"\1", text)
    text = re.sub(r"\bequinox\._module\._better_abstract\.(AbstractVar|AbstractClassVar)\b", "Any", text)
    text = re.sub(r"\bnumpy\.ndarray\b", "ndarray", text)
    text = _PJIT.sub(lambda m: f"jax.numpy.{m.group('name')}", text)  # jnp.tanh as a default
    text = _FUNC.sub(lambda m: m.group("name").split(".")[-1], text)
    text = _OBJ.sub(lambda m: m.group("name").split(".")[-1] + "()", text)
    return text


def _process_signature(app, what, name, obj, options, signature, return_annotation):
    return shorten(signature), shorten(return_annotation)


def field_comment(qualname: str) -> str | None:
    """The trailing comment of a NamedTuple or dataclass field in its class's source
    (``ts: Float[Array, " T"]  # save times`` -> ``"save times"``), or None."""
    import importlib
    import inspect

    parts = qualname.split(".")
    for i in range(len(parts) - 2, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:-1]:
                obj = getattr(obj, attr)
            source = inspect.getsource(obj)
        except (AttributeError, OSError, TypeError):
            return None
        m = re.search(rf"^\s+{re.escape(parts[-1])}\s*:[^\n#]*#:?\s*(?P<text>[^\n]+)$", source, re.M)
        if m:
            return m.group("text").strip()
        # the class's own "Attributes:" section (napoleon lists it as fields of the class; the member
        # entry autodoc also writes for a NamedTuple or dataclass field takes the same text)
        doc = inspect.getdoc(obj) or ""
        block = re.search(r"^Attributes:\s*\n(?P<body>(?:[ \t]+.*\n?|\s*\n)+)", doc, re.M)
        if block:
            lines = block.group("body").splitlines()
            for k, line in enumerate(lines):
                hit = re.match(rf"^(\s+)(?:\w+\s*,\s*)*{re.escape(parts[-1])}(?:\s*,\s*\w+)*(?:\s*\([^)]*\))?:\s*(?P<text>.*)$",
                               line)
                if hit:
                    text = [hit.group("text")]
                    indent = len(hit.group(1))
                    for more in lines[k + 1:]:
                        if more.strip() and len(more) - len(more.lstrip()) > indent:
                            text.append(more.strip())
                        else:
                            break
                    return " ".join(t for t in text if t)
        return None
    return None


def _process_docstring(app, what, name, obj, options, lines):
    # a field with no docstring of its own reads its trailing comment in the class source
    if what in ("attribute", "property") and not any(line.strip() for line in lines):
        text = field_comment(name)
        if text:
            # $...$ as the math role (this text skips the docstring's own dollar conversion)
            lines[:] = [re.sub(r"\$([^$]+)\$", lambda m: f":math:`{m.group(1)}`", text), ""]
    # the field types napoleon writes (":vartype W: jax.jaxlib._jax.Array"), after napoleon (500)
    lines[:] = [shorten(line) if ("type " in line or ":rtype:" in line) else line for line in lines]


def _shorten_type_options() -> None:
    """Attributes carry their annotation as a ``:type:`` option of the directive autodoc writes."""
    from sphinx.ext.autodoc import Documenter

    if getattr(Documenter.add_line, "_nqf_short", False):
        return
    original = Documenter.add_line

    def add_line(self, line: str, source: str, *lineno: int) -> None:
        if line.lstrip().startswith(":type:"):
            line = shorten(line)
        original(self, line, source, *lineno)

    add_line._nqf_short = True
    Documenter.add_line = add_line


def setup(app):
    _shorten_type_options()
    app.connect("autodoc-process-signature", _process_signature)
    app.connect("autodoc-process-docstring", _process_docstring, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
