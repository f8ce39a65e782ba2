"""The layout advisor (`lakesort advise`): which sort would serve the owners' probes best, predicted from a
sample before anything is rewritten.

    sample      a bounded, seeded sample of a table, stratified over its partitions
    candidates  the layouts compared: the table as it is, the spec's sort, linear and curves on the probes'
                columns
    simulate    a candidate laid out from the sample as the compaction would (scaled), the probes planned
                on it
    result      the ranked candidates, the recommendation and its spec snippet (the `Advice` contract)
    history     the advice kept in `lakesort.advice` for the report (`last_advice`)
    render      the text `lakesort advise` prints
    run         `advise(table, spec=...)`: all of it, logged and timed

May import: layout.read, layout.metrics (its store helpers), layout.spec, layout.expr, layout.curves and the
ground floor. Never compaction, maintenance or report (the report imports this package).
"""

from __future__ import annotations

from layout.advise.history import last_advice, record_advice
from layout.advise.result import Advice, CandidateAdvice, Recommendation
from layout.advise.run import advise

__all__ = ["Advice", "CandidateAdvice", "Recommendation", "advise", "last_advice", "record_advice"]
