"""The simulated providers, by the name used in ``sources.*.provider``."""

from __future__ import annotations

from receiver.sim.shapes.base import ErrorKind, QueryError, ResultLink, Shape
from receiver.sim.shapes.docextract import DocExtract
from receiver.sim.shapes.docling import Docling
from receiver.sim.shapes.docurift import DocuRift
from receiver.sim.shapes.knowhere import Knowhere
from receiver.sim.shapes.reducto import Reducto

SHAPES: dict[str, type[Shape]] = {
    shape.name: shape for shape in (Reducto, DocuRift, Knowhere, DocExtract, Docling)
}

__all__ = ["SHAPES", "ErrorKind", "QueryError", "ResultLink", "Shape"]
