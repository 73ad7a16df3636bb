"""Sans-IO core shared by both twins: frames, models, URL rules, errors, codecs.

Nothing in this package touches a socket, a process or a clock.
"""
