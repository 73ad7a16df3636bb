"""Loop-free blocking helpers shared by both twins (docker-py and subprocess steps)."""
