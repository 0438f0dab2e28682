"""`diagnosis` names a known mistake when an exercise fails, by comparing behaviours in a fixed scenario.

Each exercise has a scenario (`scenarios`): fixed inputs (seeded) and the calls a test would make. The
scenario runs once on the submission (in the worker) and, in this trusted process, on the reference
and on every known-wrong implementation of the catalogue, `solutions/mistakes/<exercise>/<name>.py`
(`catalogue`). Each run (`observe`) yields facets: outputs, structure (parameters and buffers),
exceptions, op-count growth. A mistake is diagnosed (`compare`) when the submission agrees with it on
every facet where it differs from the reference, within a tolerance derived from how far the float32
reference lands from its float64 golden. Where no catalogue is installed (the student release) there
is simply no diagnosis.
"""

from grader.judge.diagnosis.catalogue import (
    REFERENCE,
    Library,
    Mistake,
    catalogue,
    load_variant,
    mistakes_folder,
)
from grader.judge.diagnosis.compare import (
    KnownFacets,
    ObservedMistake,
    diagnose,
    distance,
    known_facets,
    match,
    message,
    tolerance,
)
from grader.judge.diagnosis.observe import Deferred, Facets, FacetValue, Implementation, Raised, ScenarioRun
from grader.judge.diagnosis.scenarios import SCENARIOS, run_scenario

__all__ = [
    "REFERENCE",
    "SCENARIOS",
    "Deferred",
    "FacetValue",
    "Facets",
    "Implementation",
    "KnownFacets",
    "Library",
    "Mistake",
    "ObservedMistake",
    "Raised",
    "ScenarioRun",
    "catalogue",
    "diagnose",
    "distance",
    "known_facets",
    "load_variant",
    "match",
    "message",
    "mistakes_folder",
    "run_scenario",
    "tolerance",
]
