"""The repository itself: the layers' import rules, the package, the README against CI."""
