"""aiayn's decoding strategies, registered as a plugin registers one: the entry point
`aiayn-strategies` of group aiayn.blocks (pyproject.toml) names `register_strategies`. The values
they build are strategy.py's, imported when one is built (the registry loads in every process)."""

from typing import Any

from aiayn.builder.registry import RegistryBuilder, registry_of
from aiayn.schemas.strategies import BeamSearchSpec, GreedySpec, SamplingSpec


def register_strategies(registry: RegistryBuilder) -> None:
    """Beam search, greedy decoding and sampling (another is a file and a line here, or a plugin's registration)."""
    registry.add(BeamSearchSpec, slot="strategy", build=_beam, label=lambda spec: "beam search")
    registry.add(GreedySpec, slot="strategy", build=_greedy, label=lambda spec: "greedy")
    registry.add(SamplingSpec, slot="strategy", build=_sampling, label=lambda spec: "sampling")


def _beam(spec: BeamSearchSpec) -> Any:
    from aiayn.builder.decode.strategy import BeamSearch

    return BeamSearch()


def _greedy(spec: GreedySpec) -> Any:
    from aiayn.builder.decode.strategy import Greedy

    return Greedy()


def _sampling(spec: SamplingSpec) -> Any:
    from aiayn.builder.decode.sampling import Sampling
    from aiayn.builder.decode.strategy import Sampled

    registry = registry_of(spec)
    filters = tuple(registry.registration(f).build(f) for f in spec.filters)
    return Sampled(Sampling(spec.temperature, spec.top_k, spec.top_p, spec.epsilon, filters))
