"""Records to JSON and back by one mechanism: pydantic over the stdlib dataclasses.

A record is a dataclass that subclasses :class:`Record`; ``to_dict`` is :func:`dump` and
``from_dict`` is :func:`load`. The JSON is the fields in declaration order, nested records as
objects, tuples as lists, enums as their values, numbers exactly as held and as read (an ``int``
in a ``float`` field stays an ``int``, so a file read and written back keeps its bytes). Where a
file's JSON differs from that, the record says so declaratively:

- ``JSON_HEAD`` (a class variable): keys written first, such as ``schema_version`` and ``kind``;
  ignored when read (a reader that cares checks them before loading);
- ``Annotated[T, codec.OMIT_NONE]`` / ``codec.OMIT_EMPTY``: the key is left out when the value is
  ``None`` / falsy (so files written before the field existed stay byte for byte);
- ``codec.FROZEN_MAP``: a ``Mapping`` held as a read-only ``MappingProxyType``, written as an object;
- ``codec.written_as(fn)``: the value is written as ``fn(value)`` (a cut, a rounding);
- ``_json_out(self, data)`` / ``_json_in(cls, data)``: reshape the whole object, for the few
  records whose file form flattens or computes keys.

Keys a record does not know are ignored when read. A malformed input raises :class:`RecordError`
(a ``ValueError``) with one line naming the first bad field. pydantic is imported on first use,
so importing a record (or ``skillopt-ci --help``) does not load it; one adapter per class is
built once and cached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")
R = TypeVar("R", bound="Record")


class RecordError(ValueError):
    """A record could not be read from its JSON: the first bad field and what was wrong."""


def dump(obj: Any) -> dict[str, Any]:
    """``obj`` as plain JSON data (dicts, lists, strings, numbers, booleans, ``None``)."""
    return _adapter(type(obj)).dump_python(obj, mode="json")


def load(cls: type[T], data: Any) -> T:
    """A ``cls`` read from JSON data; :class:`RecordError` when it does not fit."""
    from pydantic_core import ValidationError

    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or cls.__name__
        raise RecordError(f"{cls.__name__}.{where}: {first['msg']}") from None


class Record:
    """The base of a dataclass record: ``to_dict``/``from_dict`` through :func:`dump`/:func:`load`."""

    JSON_HEAD: ClassVar[Mapping[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any] | None) -> R:
        """``None`` reads as ``{}`` (a record whose fields all have defaults)."""
        return load(cls, {} if data is None else data)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        schema = handler(source)
        if schema.get("type") != "dataclass":
            raise TypeError(f"{cls.__name__}: a codec.Record must be a dataclass")
        schema["schema"] = _keep_ints(schema["schema"], core_schema)
        head, out = dict(cls.JSON_HEAD), getattr(cls, "_json_out", None)
        if head or out:
            def serialize(value: Any, inner: Any) -> Any:
                data = inner(value)
                return {**head, **(out(value, data) if out else data)}

            schema["serialization"] = core_schema.wrap_serializer_function_ser_schema(serialize)
        read = getattr(cls, "_json_in", None)
        if read is not None:  # inside the dataclass schema, which later uses of the class refer to
            schema["schema"] = core_schema.no_info_before_validator_function(read, schema["schema"])
        return schema


def _keep_ints(node: Any, core_schema: Any) -> Any:
    """The class's own ``float`` fields read an ``int`` as it is (``0`` stays ``0``, as in the file),
    so a record read and written back keeps its bytes. A dataclass nested in a record is left to its
    own schema: make it a record too when it holds a ``float``."""
    if isinstance(node, list):
        return [_keep_ints(v, core_schema) for v in node]
    if not isinstance(node, dict) or node.get("type") == "dataclass":
        return node
    if node.get("type") == "float":
        return core_schema.union_schema([core_schema.int_schema(strict=True), node], mode="left_to_right")
    return {k: _keep_ints(v, core_schema) for k, v in node.items()}


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def written_as(fn: Callable[[Any], Any]) -> Any:
    """Field metadata: write the value as ``fn(value)``."""
    from pydantic import PlainSerializer

    return PlainSerializer(fn)


def __getattr__(name: str) -> Any:
    """The field markers, built on first use (the annotations naming them are evaluated only when
    an adapter is built, so pydantic is imported then and not before)."""
    if name not in _MARKERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _markers()[name]


_MARKERS = ("OMIT_NONE", "OMIT_EMPTY", "FROZEN_MAP")


class _FrozenMap:
    """A ``Mapping`` field read into a ``MappingProxyType`` and written as an object."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from types import MappingProxyType

        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            MappingProxyType, handler(source),
            serialization=core_schema.wrap_serializer_function_ser_schema(lambda v, inner: inner(dict(v))))


@cache
def _markers() -> dict[str, Any]:
    from pydantic import Field

    return {"OMIT_NONE": Field(exclude_if=lambda v: v is None),
            "OMIT_EMPTY": Field(exclude_if=lambda v: not v),
            "FROZEN_MAP": _FrozenMap()}
