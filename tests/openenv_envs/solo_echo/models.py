"""The solo echo's action and observation."""

from openenv.server import Action, Observation


class SoloAction(Action):
    message: str


class SoloObservation(Observation):
    echoed_message: str
    server_pid: int = 0
