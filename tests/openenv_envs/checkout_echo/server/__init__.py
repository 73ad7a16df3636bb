"""The server of the checkout_echo environment."""
