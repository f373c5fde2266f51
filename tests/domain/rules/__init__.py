"""The rules: diagnosis, plan, estimate, memory model, scale-up, presets, values."""
