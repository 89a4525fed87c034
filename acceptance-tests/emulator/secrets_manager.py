"""Secrets Manager as AWS keeps deleted secrets: a name scheduled for deletion stays reserved.

moto keeps the secret through its recovery window but answers a CreateSecret of its name with
``ResourceExistsException`` and lets PutSecretValue add versions to it. AWS refuses both with
``InvalidRequestException`` until the secret is restored (RestoreSecret) or its window ends;
:func:`install` makes moto do the same, so a product that deletes and re-creates a secret under
one name meets here the error it would meet on AWS.
"""

from __future__ import annotations

from typing import Any

from moto.secretsmanager.exceptions import InvalidRequestException
from moto.secretsmanager.models import SecretsManagerBackend

CREATE_DELETED = (
    "You can't create this secret because a secret with this name is already scheduled for deletion."
)
UPDATE_DELETED = "You can't perform this operation on the secret because it was marked for deletion."


def _deleted(backend: SecretsManagerBackend, secret_id: str) -> bool:
    secret = backend.secrets.get(secret_id) if backend._is_valid_identifier(secret_id) else None
    return bool(secret is not None and getattr(secret, "is_deleted", lambda: False)())


def install() -> None:
    """Patches moto's Secrets Manager backend; call before serving."""
    create, put = SecretsManagerBackend.create_secret, SecretsManagerBackend.put_secret_value

    def create_secret(self: SecretsManagerBackend, name: str, *args: Any, **kwargs: Any) -> str:
        if _deleted(self, name):
            raise InvalidRequestException(CREATE_DELETED)
        return create(self, name, *args, **kwargs)

    def put_secret_value(self: SecretsManagerBackend, secret_id: str, *args: Any, **kwargs: Any) -> str:
        if _deleted(self, secret_id):
            raise InvalidRequestException(UPDATE_DELETED)
        return put(self, secret_id, *args, **kwargs)

    SecretsManagerBackend.create_secret = create_secret  # type: ignore[method-assign]
    SecretsManagerBackend.put_secret_value = put_secret_value  # type: ignore[method-assign]
