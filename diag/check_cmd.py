"""`diag check`: placeholder until the recipe linter lands."""
