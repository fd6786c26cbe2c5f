"""vipune-eval: retrieval evaluation of the vipune memory store on LongMemEval."""

__version__ = "0.1.0"
