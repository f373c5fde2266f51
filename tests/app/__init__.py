"""The Textual app: Pilot tests and SVG snapshots (`__snapshots__/<test module>/`)."""
