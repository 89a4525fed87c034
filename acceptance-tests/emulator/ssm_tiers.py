"""Parameter Store's tiers as AWS enforces them.

moto stores whatever ``Tier`` a PutParameter names and checks no size against it. AWS (Systems
Manager user guide, "Managing parameter tiers"):

- a Standard parameter holds at most 4 KB, an Advanced one 8 KB;
- a Standard parameter can become Advanced, but an Advanced one can never go back: a put with
  ``Tier=Standard`` on it is refused (delete the parameter and create it again instead);
- ``Intelligent-Tiering`` picks Standard unless the request needs Advanced (a value over 4 KB),
  and keeps an Advanced parameter Advanced.

A put without a tier keeps moto's behaviour (a new parameter is Standard, an existing one keeps
its tier). :func:`install` makes moto refuse and choose as above, so a product that writes a
parameter shrinking from Advanced to Standard size meets here the error it would meet on AWS.
"""

from __future__ import annotations

from typing import Any

from moto.ssm.exceptions import ValidationException
from moto.ssm.models import SimpleSystemManagerBackend

STANDARD = "Standard"
ADVANCED = "Advanced"
INTELLIGENT = "Intelligent-Tiering"
STANDARD_MAX_BYTES = 4096

DOWNGRADE = (
    "This parameter uses the advanced-parameter tier. You can't downgrade a parameter from the "
    "advanced-parameter tier to the standard-parameter tier. If necessary, you can delete the "
    "advanced parameter and recreate it as a standard parameter."
)
TOO_LARGE = (
    "Standard tier parameters support a maximum parameter value of 4096 characters. To create a "
    "larger parameter value, upgrade the parameter to use the advanced-parameter tier."
)


def tier_of_put(requested: str | None, value: str | None, current: str | None) -> str | None:
    """The tier a PutParameter leaves the parameter in, or a ValidationException; ``current`` is
    the parameter's tier before the put (None when it does not exist yet)."""
    large = value is not None and len(value.encode()) > STANDARD_MAX_BYTES
    if requested == INTELLIGENT:
        return ADVANCED if large or current == ADVANCED else STANDARD
    if requested == STANDARD or (requested is None and current in (None, STANDARD)):
        if current == ADVANCED:
            raise ValidationException(DOWNGRADE)
        if large:
            raise ValidationException(TOO_LARGE)
    return requested


def install() -> None:
    """Patches moto's Parameter Store backend; call before serving."""
    put = SimpleSystemManagerBackend.put_parameter

    def put_parameter(self: SimpleSystemManagerBackend, name: str, *args: Any, **kwargs: Any) -> Any:
        versions = self._parameters[name] if name in self._parameters else []
        current = versions[-1].tier if versions else None
        value = kwargs.get("value", args[1] if len(args) > 1 else None)
        kwargs["tier"] = tier_of_put(kwargs.get("tier"), value, current)
        return put(self, name, *args, **kwargs)

    SimpleSystemManagerBackend.put_parameter = put_parameter  # type: ignore[method-assign]
