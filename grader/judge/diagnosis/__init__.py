"""`diagnosis` names a known mistake when an exercise fails, by comparing behaviours in a fixed scenario.

Each exercise has a scenario (`scenarios`): fixed inputs (seeded) and the calls a test would make, at several
shapes (batches of one and more, T_q != T_k, head_dim != sqrt(dim)) and once in float64, so that no two known
mistakes coincide. The scenario runs once on the submission (in the worker) and, in this trusted process, on
the reference and on every known-wrong implementation of the catalogue, `solutions/mistakes/<exercise>.py`
(`catalogue`). Each run (`observe`) yields facets: outputs, structure (parameters and buffers), exceptions,
op-count growth. A mistake is diagnosed (`compare`) when the submission agrees with it on every facet: within a
tolerance (derived from how far the float32 reference lands from its float64 golden) where the mistake differs
from the reference, and with the same kind of error at the same call where it raises. Where no one mistake
agrees, two made at once may (`two_at_once`): the few pairs whose evidence shows are built from both mistakes'
edits (`combination`), observed, and named where the submission agrees with the pair on every facet. Where no
catalogue is installed (the student release) there is simply no diagnosis.
"""

from grader.judge.diagnosis.catalogue import (
    REFERENCE,
    Library,
    Mistake,
    catalogue,
    combination,
    load_variant,
    mistakes_folder,
)
from grader.judge.diagnosis.compare import (
    SEPARATION,
    KnownFacets,
    ObservedMistake,
    diagnose,
    distance,
    known_facets,
    match,
    message,
    named,
    pair,
    tolerance,
    two_at_once,
)
from grader.judge.diagnosis.observe import Deferred, Facets, FacetValue, Implementation, Raised, ScenarioRun
from grader.judge.diagnosis.scenarios import SCENARIOS, run_scenario

__all__ = [
    "REFERENCE",
    "SCENARIOS",
    "SEPARATION",
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
    "combination",
    "diagnose",
    "distance",
    "known_facets",
    "load_variant",
    "match",
    "message",
    "mistakes_folder",
    "named",
    "pair",
    "run_scenario",
    "tolerance",
    "two_at_once",
]
