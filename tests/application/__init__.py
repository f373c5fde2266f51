"""The application layer: the application layer's use cases, parity of the CLI and the app, the
autopilot."""
