"""pydantic's JSON schema without the ``title`` keywords it would add.

Tool parameter and output schemas are request bytes that every request
repeats, and pydantic's titles (a field's name capitalised, a model's or an
enum's class name) tell the model nothing the property names do not. Field
titles are never generated (``field_title_should_be_set``); a title on a
subschema is dropped as pydantic hands the subschema back (``generate_inner``);
class titles, which pydantic sets in private code with no hook to refuse them,
are dropped from the root and each ``$defs`` entry (``generate``). So no walk
over the finished schema has to guess which ``title`` keys are schema keywords
and which are data: a ``title`` inside
``enum``, ``const``, ``default`` or ``examples``, or inside a user's
``json_schema_extra`` value, is content and is kept. A ``title`` keyword the
user sets on a field or a model (``Field(title=...)``, ``json_schema_extra``,
``ConfigDict(title=...)``) is left out too, as it always has been here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

if TYPE_CHECKING:  # pydantic names these types for its hooks' signatures only
    from pydantic.json_schema import JsonSchemaMode
    from pydantic_core import CoreSchema, core_schema

    # pydantic's own alias for this lives in a private module.
    CoreSchemaOrField = (
        CoreSchema
        | core_schema.ModelField
        | core_schema.DataclassField
        | core_schema.TypedDictField
        | core_schema.ComputedField
    )

__all__ = ["UntitledSchema"]


class UntitledSchema(GenerateJsonSchema):
    """A :class:`GenerateJsonSchema` whose schemas carry no ``title`` keyword."""

    def field_title_should_be_set(self, schema: CoreSchemaOrField) -> bool:
        """Never derive a field's title from its name."""
        return False

    def generate_inner(self, schema: CoreSchemaOrField) -> JsonSchemaValue:
        """Every subschema passes here: drop a title the user's metadata put on it."""
        return _untitled(super().generate_inner(schema))

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        """The schema, with no title on the root or on any ``$defs`` entry.

        A referenced schema (a model, dataclass, TypedDict or enum: pydantic
        titles these with the class name, unconditionally) is stored as a
        definition before :meth:`generate_inner` returns its ``$ref``, so its
        title is dropped here, one level deep; everything below went through
        :meth:`generate_inner`.
        """
        json_schema = _untitled(super().generate(schema, mode))
        defs = json_schema.get("$defs")
        if isinstance(defs, dict):
            json_schema["$defs"] = {name: _untitled(d) for name, d in defs.items()}
        return json_schema


def _untitled(json_schema: JsonSchemaValue) -> JsonSchemaValue:
    """``json_schema`` without a string ``title`` keyword (a new dict: pydantic
    may share the one it returned)."""
    title: Any = json_schema.get("title")
    if not isinstance(title, str):
        return json_schema
    return {key: value for key, value in json_schema.items() if key != "title"}
