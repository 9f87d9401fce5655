"""spanroberta: SpanBERT objectives (span masking + span boundary objective) on the RoBERTa recipe."""

__version__ = "0.1.0"
