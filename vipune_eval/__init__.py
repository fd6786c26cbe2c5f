"""vipune-eval: retrieval evaluation of the vipune memory store on LongMemEval."""

__version__ = "0.1.0"
__all__ = ["Haystack"]


def __getattr__(name: str) -> object:
    # ``vipune_eval.Haystack``, the object a plugin retriever receives, loaded on first use only:
    # the other commands never import plugins (nor are their code versions tied to it).
    if name == "Haystack":
        import importlib

        return importlib.import_module(f"{__name__}.stages.search.plugin").Haystack
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
