"""The application layer: the service's use cases, parity of the CLI and the app, the autopilot."""
