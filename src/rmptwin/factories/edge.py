"""The experiment's edge-stripe plan (RMP seed 4.4; ``rmp.edge_stripes``), for the factories,
the analysis and the emulated network's group lists: None when the experiment has none."""

from __future__ import annotations

from rmptwin.errors import UserError
from rmptwin.rmp import striping
from rmptwin.rmp.edge_stripes import EdgePlan, plan_edges
from rmptwin.spec import LoadedExperiment


def msgs_per_symbol(loaded: LoadedExperiment) -> float:
    """The busiest symbol's expected message rate: each source spreads its rate evenly over
    the symbols of the stripes it serves (``ticker_workload``)."""
    w = loaded.experiment.workload
    hosts = loaded.topology.hosts_with_role("source")
    if w.sources is not None:
        hosts = [h for h in hosts if h.name in set(w.sources)]
    per = [0.0] * w.symbols
    for h in hosts:
        mine = striping.symbols_on(striping.host_stripes(getattr(h, "stripes", None), w.stripes), w.symbols, w.stripes)
        for i in mine:
            per[i] += w.rate_per_source / len(mine)
    return max(per) if per else 0.0


def edge_plan(loaded: LoadedExperiment) -> EdgePlan | None:
    w = loaded.experiment.workload
    if w.edge_stripes is None:
        return None
    try:
        return plan_edges(symbols=w.symbols, stripes=w.stripes, msgs_per_symbol=msgs_per_symbol(loaded),
                          message_bytes=w.message_bytes, line_kbps=w.edge_stripes.line_kbps)
    except ValueError as e:
        raise UserError(f"{loaded.path}: workload.edge_stripes: {e}") from None


def all_stripes(loaded: LoadedExperiment) -> int:
    """How many stripe numbers the run uses: the core stripes and, after them, the edge ones."""
    plan = edge_plan(loaded)
    w = loaded.experiment.workload
    return w.stripes + (len(plan.ids()) if plan is not None else 0)
