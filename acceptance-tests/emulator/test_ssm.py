"""Parameter Store's tiers: what AWS refuses, the emulator refuses (``ssm_tiers``)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from harness import client, error_code

SMALL = "x" * 100
LARGE = "x" * 5000  # over Standard's 4 KB, under Advanced's 8 KB


@pytest.fixture
def ssm(endpoint: str) -> Any:
    return client(endpoint, "ssm")


def _tier(ssm: Any, name: str) -> str:
    (found,) = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [name]}])["Parameters"]
    return found["Tier"]


def test_a_standard_parameter_holds_4_kb_and_an_advanced_one_never_goes_back(ssm: Any) -> None:
    with pytest.raises(ClientError) as refused:
        ssm.put_parameter(Name="/t/big", Value=LARGE, Type="String", Tier="Standard")
    assert error_code(refused) == "ValidationException"
    assert "4096" in str(refused.value)
    with pytest.raises(ClientError) as refused:
        ssm.put_parameter(Name="/t/big", Value=LARGE, Type="String")  # the default tier is Standard
    assert error_code(refused) == "ValidationException"

    assert ssm.put_parameter(Name="/t/big", Value=LARGE, Type="String", Tier="Advanced")["Tier"] == "Advanced"
    with pytest.raises(ClientError) as refused:
        ssm.put_parameter(Name="/t/big", Value=SMALL, Type="String", Tier="Standard", Overwrite=True)
    assert error_code(refused) == "ValidationException"
    assert "can't downgrade" in str(refused.value)
    assert ssm.get_parameter(Name="/t/big")["Parameter"]["Value"] == LARGE

    # Without a tier an existing parameter keeps its own.
    ssm.put_parameter(Name="/t/big", Value=SMALL, Type="String", Overwrite=True)
    assert _tier(ssm, "/t/big") == "Advanced"


def test_intelligent_tiering_chooses_standard_until_a_value_needs_advanced_then_stays(ssm: Any) -> None:
    put = {"Name": "/t/auto", "Type": "String", "Tier": "Intelligent-Tiering", "Overwrite": True}
    assert ssm.put_parameter(Value=SMALL, **put)["Tier"] == "Standard"
    assert ssm.put_parameter(Value=LARGE, **put)["Tier"] == "Advanced"
    assert ssm.put_parameter(Value=SMALL, **put)["Tier"] == "Advanced"
    assert _tier(ssm, "/t/auto") == "Advanced"
    assert ssm.get_parameter(Name="/t/auto")["Parameter"]["Value"] == SMALL
