"""The gated echo's server."""
