"""Node types with real capacities and hourly on-demand prices, and their allocatable.

Prices (USD per hour, on-demand) come from public price tables that autoscalers ship:

- GCE: the Cluster Autoscaler's GCE price model,
  ``kubernetes/autoscaler`` ``cluster-autoscaler/cloudprovider/gce/gce_price_model.go``
  (``instancePrices``).
- AWS (us-east-1): Karpenter's generated table,
  ``aws/karpenter-provider-aws`` ``pkg/providers/pricing/zz_generated.pricing_aws.go``.
- The 2019 thesis' GKE nodes (n1-standard-2: 2 vCPU, 7.5 GB) are priced with the thesis' own
  formula, EUR 0.0280 per core-hour + EUR 0.0038 per GB-hour on capacity (thesis §5.1.4).

Allocatable follows GKE's published reservation formula (kube-reserved CPU: 6 % of the first
core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % above; memory: 25 % of the first 4 GiB,
20 % of the next 4, 10 % of the next 8, 6 % of the next 112, 2 % above; plus a 100 MiB eviction
threshold). The same formula is used for the AWS types (EKS' AMI reserves in the same range).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tuner.model.quantity import GIB
from tuner.model.resources import Resources

MIB = 2**20

_CPU_STEPS = ((1000, 0.06), (1000, 0.01), (2000, 0.005), (10**9, 0.0025))
_MEMORY_STEPS = (
    (4 * GIB, 0.25),
    (4 * GIB, 0.20),
    (8 * GIB, 0.10),
    (112 * GIB, 0.06),
    (10**15, 0.02),
)
EVICTION_THRESHOLD = 100 * MIB


def _reserve(amount: int, steps: tuple[tuple[int, float], ...]) -> int:
    reserved = 0.0
    left = amount
    for size, share in steps:
        part = min(left, size)
        reserved += part * share
        left -= part
        if left <= 0:
            break
    return round(reserved)


@cache
def _allocatable(cpu: int, memory: int) -> Resources:
    return Resources(
        cpu - _reserve(cpu, _CPU_STEPS),
        memory - _reserve(memory, _MEMORY_STEPS) - EVICTION_THRESHOLD,
    )


@dataclass(frozen=True, slots=True)
class NodeType:
    """An instance type: capacity (what you pay for) and its price per hour."""

    name: str
    cpu: int
    """Millicores."""
    memory: int
    """Bytes."""
    price: float
    """Per hour, in ``currency``."""
    currency: str = "USD"
    max_pods: int = 110
    source: str = ""

    @property
    def capacity(self) -> Resources:
        """What the node has."""
        return Resources(self.cpu, self.memory)

    @property
    def allocatable(self) -> Resources:
        """What pods may use: capacity minus GKE's kube-reserved and the eviction threshold."""
        return _allocatable(self.cpu, self.memory)


CA_GCE = "cluster-autoscaler gce_price_model.go"
KARPENTER_AWS = "karpenter zz_generated.pricing_aws.go (us-east-1)"
THESIS = "thesis §5.1.3-5.1.4: 2 vCPU, 7.5 GB; EUR 0.0280/core-h + EUR 0.0038/GB-h"

NODE_TYPES: dict[str, NodeType] = {
    t.name: t
    for t in (
        NodeType(
            "n1-standard-2", 2000, int(7.5 * GIB), 2 * 0.0280 + 7.5 * 0.0038, "EUR", source=THESIS
        ),
        NodeType("e2-standard-2", 2000, 8 * GIB, 0.06701, source=CA_GCE),
        NodeType("e2-standard-4", 4000, 16 * GIB, 0.13402, source=CA_GCE),
        NodeType("e2-standard-8", 8000, 32 * GIB, 0.26805, source=CA_GCE),
        NodeType("e2-highmem-4", 4000, 32 * GIB, 0.18080, source=CA_GCE),
        NodeType("n2-standard-4", 4000, 16 * GIB, 0.1942, source=CA_GCE),
        NodeType("n2-standard-8", 8000, 32 * GIB, 0.3885, source=CA_GCE),
        NodeType("m5.large", 2000, 8 * GIB, 0.096, max_pods=29, source=KARPENTER_AWS),
        NodeType("m5.xlarge", 4000, 16 * GIB, 0.192, max_pods=58, source=KARPENTER_AWS),
        NodeType("m5.2xlarge", 8000, 32 * GIB, 0.384, max_pods=58, source=KARPENTER_AWS),
        NodeType("c5.xlarge", 4000, 8 * GIB, 0.170, max_pods=58, source=KARPENTER_AWS),
        NodeType("c5.2xlarge", 8000, 16 * GIB, 0.340, max_pods=58, source=KARPENTER_AWS),
        NodeType("r5.xlarge", 4000, 32 * GIB, 0.252, max_pods=58, source=KARPENTER_AWS),
    )
}
"""AWS max pods are the VPC CNI's ENI limits for the type (m5.large 29, xlarge/2xlarge 58)."""
