"""The explorer's limits, importable without torch (``interp --help`` stays light)."""

DEFAULT_MAX_TOKENS = 512  # tokens per text unless --max-tokens says otherwise; n_ctx is the hard limit
MAX_BODY = 256 * 1024  # bytes per request body: far above 512 tokens of text, far below anything that could hurt
