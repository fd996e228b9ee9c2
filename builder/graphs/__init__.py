"""aiayn's graphs, one file each, registered as a plugin registers a graph: the entry point
`aiayn-graphs` of group aiayn.blocks (pyproject.toml) names `register_graphs`. Nothing imports
this package: the rest of aiayn asks the registered value (builder/graph.py's `graph_of`)."""

from aiayn.builder.graphs.decoder_only import DecoderOnlyGraph
from aiayn.builder.graphs.encoder_decoder import EncoderDecoderGraph
from aiayn.builder.graphs.encoder_only import EncoderOnlyGraph
from aiayn.builder.registry import RegistryBuilder
from aiayn.schemas.graph import DecoderOnlySpec, EncoderDecoderSpec, EncoderOnlySpec


def register_graphs(registry: RegistryBuilder) -> None:
    """aiayn's three graphs (another is a file and a line here, or a plugin's registration)."""
    registry.add(EncoderDecoderSpec, slot="graph", build=EncoderDecoderGraph, label=lambda s: "encoder-decoder")
    registry.add(DecoderOnlySpec, slot="graph", build=DecoderOnlyGraph, label=lambda s: "decoder-only")
    registry.add(EncoderOnlySpec, slot="graph", build=EncoderOnlyGraph, label=lambda s: "encoder-only")
