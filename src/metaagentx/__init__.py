"""metaagentx: train one language model to design and execute multi-agent systems (MetaAgent-X)."""

__version__ = "0.1.0"
