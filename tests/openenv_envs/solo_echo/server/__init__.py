"""The solo echo's server."""
