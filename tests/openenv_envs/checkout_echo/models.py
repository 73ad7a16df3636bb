"""The action and observation of the checkout_echo environment."""

from openenv.core.env_server import Action, Observation


class ShoutAction(Action):
    """Say something; the environment answers it in capitals."""

    message: str


class ShoutObservation(Observation):
    """What the environment answered."""

    echoed_message: str = ""
    message_length: int = 0
