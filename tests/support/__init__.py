"""Helpers shared by the test folders and by `bench/`: builders, the fake trainer, checkers."""
