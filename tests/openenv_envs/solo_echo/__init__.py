"""An echo environment whose server holds one session (OpenEnv layout, openenv-twin's server)."""
