"""Service Quotas for EC2's vCPU quotas, which moto does not serve (it knows only VPC's).

GetServiceQuota and GetAWSDefaultServiceQuota answer the vCPU quotas EC2 counts running
instances against, per instance class and market, for each account and region. Every account
starts with the quotas of a research account that has asked for its GPUs (the values below);
``POST /_emulator/quotas`` sets an account's values in a region (tests set a low quota to see a
plan warn). A reset restores the starting values.
"""

from __future__ import annotations

from typing import Any

from moto.servicequotas.exceptions import NoSuchResource
from moto.servicequotas.models import ServiceQuotasBackend, servicequotas_backends
from moto.servicequotas.responses import ServiceQuotasResponse

SERVICE_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"
# code: (name, starting vCPUs)
EC2_VCPU_QUOTAS: dict[str, tuple[str, float]] = {
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 4608.0),
    "L-DB2E81BA": ("Running On-Demand G and VT instances", 1536.0),
    "L-417A185B": ("Running On-Demand P instances", 1536.0),
    "L-34B43A08": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", 4608.0),
    "L-3819A6DF": ("All G and VT Spot Instance Requests", 1536.0),
    "L-7212CCBC": ("All P Spot Instance Requests", 1536.0),
    "L-2C3B7624": ("Running On-Demand Trn instances", 512.0),
    "L-6B0D517C": ("All Trn Spot Instance Requests", 512.0),
    "L-1945791B": ("Running On-Demand Inf instances", 384.0),
    "L-B5D1601B": ("All Inf Spot Instance Requests", 384.0),
    "L-6E869C2A": ("Running On-Demand DL instances", 96.0),
    "L-85EED4F7": ("All DL Spot Instance Requests", 96.0),
    "L-74FC7D96": ("Running On-Demand F instances", 128.0),
    "L-88CF9481": ("All F Spot Instance Requests", 128.0),
    "L-7295265B": ("Running On-Demand X instances", 512.0),
    "L-E3A00192": ("All X Spot Instance Requests", 512.0),
    "L-F7808C92": ("Running On-Demand HPC instances", 1536.0),
    "L-43DA4232": ("Running On-Demand High Memory instances", 448.0),
}


def _quota(backend: ServiceQuotasBackend, code: str, value: float) -> dict[str, Any]:
    name, _ = EC2_VCPU_QUOTAS[code]
    return {
        "ServiceCode": "ec2", "ServiceName": SERVICE_NAME, "QuotaCode": code, "QuotaName": name,
        "QuotaArn": f"arn:aws:servicequotas:{backend.region_name}:{backend.account_id}:ec2/{code}",
        "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False,
    }


def _applied(backend: ServiceQuotasBackend) -> dict[str, float]:
    return backend.__dict__.setdefault("ec2_vcpu_quotas", {})


def set_quotas(account: str, region: str, quotas: dict[str, Any]) -> dict[str, float]:
    """Sets an account's EC2 vCPU quotas in a region; raises ValueError naming a bad entry."""
    for code, value in quotas.items():
        if code not in EC2_VCPU_QUOTAS:
            raise ValueError(f"unknown EC2 quota {code!r}; known: {', '.join(sorted(EC2_VCPU_QUOTAS))}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"quota {code} must be a non-negative number of vCPUs")
    applied = _applied(servicequotas_backends[account][region])
    applied.update({code: float(value) for code, value in quotas.items()})
    return dict(applied)


def install() -> None:
    """Patches moto's Service Quotas backend and handler; call before serving."""
    get_quota = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "ec2":
            return get_quota(self, service_code, quota_code)
        if quota_code not in EC2_VCPU_QUOTAS:
            raise NoSuchResource
        return _quota(self, quota_code, _applied(self).get(quota_code, EC2_VCPU_QUOTAS[quota_code][1]))

    def get_aws_default_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "ec2" or quota_code not in EC2_VCPU_QUOTAS:
            raise NoSuchResource
        return _quota(self, quota_code, EC2_VCPU_QUOTAS[quota_code][1])

    def respond_default(self: ServiceQuotasResponse) -> str:
        import json

        params = json.loads(self.body)
        quota = self.backend.get_aws_default_service_quota(str(params.get("ServiceCode")), str(params.get("QuotaCode")))
        return json.dumps({"Quota": quota})

    ServiceQuotasBackend.get_service_quota = get_service_quota  # type: ignore[method-assign]
    ServiceQuotasBackend.get_aws_default_service_quota = get_aws_default_service_quota  # type: ignore[attr-defined]
    ServiceQuotasResponse.get_aws_default_service_quota = respond_default  # type: ignore[attr-defined]
