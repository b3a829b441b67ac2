"""The explorer's limits, importable without torch (``interp --help`` stays light)."""

DEFAULT_MAX_TOKENS = 512  # tokens per text unless --max-tokens says otherwise; n_ctx is the hard limit
MAX_BODY = 256 * 1024  # bytes per request body: far above 512 tokens of text, far below anything that could hurt
# tokens a head's token x token pattern may have: the answer grows with the square of the length (two
# lenses and their word rows: about 20 MB of JSON at 512 tokens, 200 MB at 1,960), so a --max-tokens
# above it bounds the run, the layer view and the ablation, and the head view refuses longer texts
PATTERN_MAX_TOKENS = 512
