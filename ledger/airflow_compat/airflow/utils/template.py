"""`airflow.utils.template`: `literal(value)`, a templated field's value that is not rendered."""

from ledger.sdk.templates import LiteralValue, literal

__all__ = ["LiteralValue", "literal"]
