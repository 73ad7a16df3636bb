# GENERATED from tests/_async/__init__.py by scripts/run_unasync.py -- DO NOT EDIT.
