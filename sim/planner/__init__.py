"""``dtsim plan``: the best training plans for a model on a fleet (see :mod:`.search`)."""

from .search import (
    LAYOUTS,
    OBJECTIVES,
    Candidate,
    PlanModel,
    PlanRequest,
    SearchResult,
    fleet_types,
    search_plans,
)

__all__ = ["LAYOUTS", "OBJECTIVES", "Candidate", "PlanModel", "PlanRequest", "SearchResult",
           "fleet_types", "search_plans"]
