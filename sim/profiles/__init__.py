"""Real training runs as values: model profiles, GPU catalogue, fleet and network, plans.

* :mod:`.values`: the frozen, validated values (:class:`ModelProfile`,
  :class:`GPUCatalogue`, :class:`NetworkProfile`, :class:`Fleet`, :class:`Plan`,
  :class:`MeasuredRun`, :class:`Profiles`);
* :mod:`.formats`: dtsim's own JSON/TOML formats and :func:`load_profiles`
  (a profiles folder; the shipped one by default, :data:`DATA_DIR`);
* :mod:`.sailor`: readers of the Sailor artifact's formats (``profiles.json``,
  ``llm_info.json``, ``bandwidths.json``, a run's ``plan_config``).
"""

from .formats import (
    DATA_DIR,
    fleet_from_data,
    fleet_network,
    fleet_to_data,
    gpus_from_data,
    gpus_to_data,
    load_profiles,
    model_from_data,
    model_to_data,
    network_from_data,
    network_to_data,
    plan_from_data,
    plan_text,
    plan_to_data,
    read_fleet,
    read_gpus,
    read_model,
    read_network,
    read_plan,
    read_runs,
    with_fleet,
)
from .values import (
    Fleet,
    GPUCatalogue,
    GPUType,
    LayerSizes,
    LayerTimes,
    Link,
    MeasuredRun,
    ModelProfile,
    ModelShape,
    NetworkProfile,
    NodeKind,
    Plan,
    Profiles,
    ReplicaSpec,
    StageSpec,
)

__all__ = [
    "DATA_DIR", "load_profiles", "read_runs",
    "read_plan", "plan_from_data", "plan_to_data", "plan_text",
    "read_model", "model_from_data", "model_to_data",
    "read_gpus", "gpus_from_data", "gpus_to_data",
    "read_network", "network_from_data", "network_to_data",
    "read_fleet", "fleet_from_data", "fleet_to_data", "with_fleet", "fleet_network",
    "Fleet", "GPUCatalogue", "GPUType", "LayerSizes", "LayerTimes", "Link",
    "MeasuredRun", "ModelProfile", "ModelShape", "NetworkProfile", "NodeKind", "Plan", "Profiles", "ReplicaSpec",
    "StageSpec",
]
